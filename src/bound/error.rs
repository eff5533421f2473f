//! Why the bound refused a request.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::criticality::Criticality;
use crate::respond::Refusal;

/// Why a request did not enter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Why {
    /// The queue was full, none of its waiters of a lower class: every place was taken, or it
    /// held as many requests as the bound serves within the wait allowed.
    Full,
    /// It waited and a request of a higher class took its place.
    PushedOut,
    /// It waited as long as the queue allows.
    Timeout,
    /// Its deadline could no longer be met.
    Deadline,
}

impl Why {
    /// The refusal's reason token ([`Refusal::reason`]).
    const fn as_str(&self) -> &'static str {
        match self {
            Why::Full => "bound-full",
            Why::PushedOut => "bound-pushed-out",
            Why::Timeout => "bound-timeout",
            Why::Deadline => "deadline",
        }
    }
}

/// A [`Bound`](super::Bound) refused a request: it could not enter, and could not wait.
///
/// Answer it with HTTP 503 (and `Retry-After`) or gRPC `RESOURCE_EXHAUSTED`, as the layers'
/// `.http()` and `.grpc()` do. It is `Copy` and allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy {
    why: Why,
    class: Criticality,
    retry_after: Duration,
}

impl Busy {
    pub(crate) fn new(why: Why, class: Criticality, retry_after: Duration) -> Self {
        Busy {
            why,
            class,
            retry_after,
        }
    }

    /// Why the request did not enter.
    pub fn why(&self) -> Why {
        self.why
    }

    /// The refused request's class.
    pub fn class(&self) -> Criticality {
        self.class
    }
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.why {
            Why::Full => f.write_str("the service is busy and its queue is full"),
            Why::PushedOut => f.write_str("a more important request took this one's place"),
            Why::Timeout => f.write_str("the request waited too long for the service"),
            Why::Deadline => f.write_str("the request's deadline could not be met"),
        }
    }
}

impl Error for Busy {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        crate::error::refusal_source()
    }
}

impl Refusal for Busy {
    fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// `bound-full`, `bound-pushed-out`, `bound-timeout` or `deadline`.
    fn reason(&self) -> &'static str {
        self.why.as_str()
    }

    fn criticality(&self) -> Option<Criticality> {
        Some(self.class)
    }
}
