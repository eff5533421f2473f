//! The typed failures of one instant query, and the gRPC code each one maps to.

use std::fmt;

/// What went wrong with one query.
///
/// [`code`](Self::code) is the gRPC code KEDA sees; [`as_str`](Self::as_str) is a short label
/// for metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryErrorKind {
    /// Prometheus rejected the query or its parameters (HTTP 400, `bad_data`).
    BadQuery {
        /// Prometheus' `error` text.
        message: String,
    },
    /// The query failed while Prometheus evaluated it (HTTP 422, `execution`).
    Execution {
        /// Prometheus' `error` text.
        message: String,
    },
    /// The query returned no series (`"result": []`).
    Empty,
    /// The query returned more than one series.
    MultipleSeries {
        /// How many series came back.
        count: usize,
        /// The label sets of the first few series, each rendered `{a="b", c="d"}`.
        labels: Vec<String>,
    },
    /// The result is neither an instant vector of plain samples nor a scalar: a `matrix`, a
    /// `string`, or a native-histogram sample (`histogram`).
    WrongType {
        /// Prometheus' `resultType`, or `histogram` for a histogram sample.
        result_type: String,
    },
    /// The value is `NaN`, `+Inf` or `-Inf`.
    NotFinite {
        /// The value's text as Prometheus sent it.
        raw: String,
    },
    /// Prometheus gave up (HTTP 503, `timeout` or `canceled`), or the client's own deadline
    /// elapsed.
    Timeout {
        /// Prometheus' `error` text, or which deadline elapsed.
        message: String,
    },
    /// No answer could be had: the URL is unusable, the connection or TLS handshake failed, or
    /// the connection broke.
    Unreachable {
        /// The cause, with its chain of sources.
        message: String,
    },
    /// The bearer token could not be had when the query was sent: its file could not be read
    /// or is empty, or the token is not a valid header value. No request was sent.
    Credentials {
        /// What was wrong, with the file's path.
        message: String,
    },
    /// An answer came that is not a Prometheus query answer: a non-JSON body, an unexpected
    /// status, a malformed envelope, or a body over the size cap.
    BadResponse {
        /// The HTTP status of the answer.
        status: u16,
        /// What was wrong, with the start of the body where it helps.
        message: String,
    },
}

impl QueryErrorKind {
    /// The gRPC code KEDA must see for this failure.
    pub fn code(&self) -> tonic::Code {
        match self {
            Self::BadQuery { .. } => tonic::Code::InvalidArgument,
            Self::Execution { .. }
            | Self::Empty
            | Self::MultipleSeries { .. }
            | Self::WrongType { .. }
            | Self::NotFinite { .. } => tonic::Code::FailedPrecondition,
            Self::Timeout { .. } => tonic::Code::DeadlineExceeded,
            Self::Unreachable { .. } | Self::Credentials { .. } | Self::BadResponse { .. } => {
                tonic::Code::Unavailable
            }
        }
    }

    /// A short snake_case label for metrics, e.g. `bad_query`, `empty`, `not_finite`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::BadQuery { .. } => "bad_query",
            Self::Execution { .. } => "execution",
            Self::Empty => "empty",
            Self::MultipleSeries { .. } => "multiple_series",
            Self::WrongType { .. } => "wrong_type",
            Self::NotFinite { .. } => "not_finite",
            Self::Timeout { .. } => "timeout",
            Self::Unreachable { .. } => "unreachable",
            Self::Credentials { .. } => "credentials",
            Self::BadResponse { .. } => "bad_response",
        }
    }
}

impl fmt::Display for QueryErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadQuery { message } => write!(f, "Prometheus rejected the query: {message}"),
            Self::Execution { message } => write!(f, "the query failed in Prometheus: {message}"),
            Self::Empty => f.write_str("the query returned no series"),
            Self::MultipleSeries { count, labels } => {
                write!(f, "the query returned {count} series, expected one: ")?;
                f.write_str(&labels.join(", "))?;
                if *count > labels.len() {
                    f.write_str(", …")?;
                }
                Ok(())
            }
            Self::WrongType { result_type } => write!(
                f,
                "the query returned a {result_type}, expected an instant vector or a scalar"
            ),
            Self::NotFinite { raw } => write!(f, "the query returned {raw}, not a finite number"),
            Self::Timeout { message } => write!(f, "the query timed out: {message}"),
            Self::Unreachable { message } => write!(f, "Prometheus is unreachable: {message}"),
            Self::Credentials { message } => write!(f, "no usable bearer token: {message}"),
            Self::BadResponse { status, message } => {
                write!(
                    f,
                    "unexpected answer from Prometheus (HTTP {status}): {message}"
                )
            }
        }
    }
}

/// A failed query: the PromQL text and what went wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryError {
    /// The PromQL text as sent.
    pub query: String,
    /// What went wrong.
    pub kind: QueryErrorKind,
}

impl QueryError {
    /// The gRPC code KEDA must see: [`QueryErrorKind::code`].
    pub fn code(&self) -> tonic::Code {
        self.kind.code()
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug-quoted: a query may span lines or carry `#` comments.
        write!(f, "query {:?}: {}", self.query, self.kind)
    }
}

impl std::error::Error for QueryError {}
