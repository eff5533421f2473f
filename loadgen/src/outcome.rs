//! What became of one request.

use http::StatusCode;

/// What became of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with a 2xx status, and the body read, within the deadline.
    Ok,
    /// Refused: `503 Service Unavailable` or `429 Too Many Requests`, as admit answers a
    /// refusal.
    Refused(Refusal),
    /// Answered with any other status.
    Status(StatusCode),
    /// No whole answer within the deadline.
    TimedOut,
    /// The transport failed before a whole answer arrived.
    Lost(Lost),
    /// Not sent: the cap on requests in flight was reached.
    Dropped,
}

/// A `503` or `429` answer, with the headers a client retries by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `503` or `429`.
    pub status: StatusCode,
    /// The `Retry-After` value, if present and visible ASCII.
    pub retry_after: Option<String>,
    /// The `admit-refusal` value (admit's reason, such as `overload`), if present and visible
    /// ASCII.
    pub reason: Option<String>,
}

impl Refusal {
    /// `Retry-After` as a whole number of seconds, if it is one (it may also be an HTTP
    /// date, which this does not read).
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after.as_deref()?.trim().parse().ok()
    }
}

/// How the transport failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lost {
    /// The connection was refused (nothing listens on the port).
    ConnectionRefused,
    /// The connection was reset (or the pipe broken).
    Reset,
    /// The server closed the connection before a whole answer.
    Closed,
    /// Any other transport error.
    Other,
}
