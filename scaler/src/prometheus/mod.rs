//! Instant queries against Prometheus' HTTP API, with every failure typed.
//!
//! [`PrometheusClient::query`] sends one form-encoded `POST <base>/api/v1/query` and reads the
//! answer with [`parse_response`], a pure function: an instant vector with exactly one sample,
//! or a scalar, with a finite value, is an [`Answer`]; anything else is a [`QueryErrorKind`].
//! Nothing here knows gRPC: the service maps each failure to the code KEDA sees.
//!
//! A hostile or broken Prometheus (or a proxy in front of it) costs a bounded amount:
//!
//! - [`timeout`](ClientOptions::timeout) bounds the wait for a slot and the exchange together:
//!   past it, [`Timeout`](QueryErrorKind::Timeout).
//! - [`max_in_flight`](ClientOptions::max_in_flight) queries at once per client and its
//!   clones: a query waits for a slot within its timeout, then fails with
//!   [`Timeout`](QueryErrorKind::Timeout), unsent.
//! - [`max_body_bytes`](ClientOptions::max_body_bytes) of body, checked against
//!   `Content-Length` and while reading: past it, [`BadResponse`](QueryErrorKind::BadResponse)
//!   naming the cap, read no further.
//! - [`MAX_TOKEN_FILE_BYTES`] of bearer token file: past it,
//!   [`Credentials`](QueryErrorKind::Credentials), unsent.
//! - A bearer token goes only to `https://` URLs unless
//!   [`allow_token_over_http`](ClientOptions::allow_token_over_http): otherwise
//!   [`Credentials`](QueryErrorKind::Credentials), unsent.
//!
//! Reading an answer holds only what it returns, however many series the body lists: the
//! sample, the label sets of the first three series, the first [`MAX_NOTES`] warnings and
//! infos. Every text from outside (Prometheus' messages and notes, label sets, values, body
//! quotes, the URL, the query in [`QueryError`]'s `Display`) reaches a message as an
//! [`excerpt`](crate::excerpt::excerpt).
//!
//! ```
//! use admit_scaler::prometheus::{QueryErrorKind, parse_response};
//!
//! let body = br#"{"status":"success","data":{"resultType":"vector",
//!     "result":[{"metric":{"job":"api"},"value":[1700000000.5,"42.25"]}]},
//!     "warnings":["partial answer"]}"#;
//! let answer = parse_response(200, body)?;
//! assert_eq!(answer.sample.value, 42.25);
//! assert_eq!(answer.sample.timestamp, 1700000000.5);
//! assert_eq!(answer.sample.labels, [("job".to_owned(), "api".to_owned())]);
//! assert_eq!(answer.warnings, ["partial answer"]);
//!
//! let nan = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}"#;
//! let error = parse_response(200, nan).unwrap_err();
//! assert_eq!(error, QueryErrorKind::NotFinite { raw: "NaN".into() });
//! assert_eq!(error.as_str(), "not_finite");
//! # Ok::<(), QueryErrorKind>(())
//! ```

mod client;
mod error;
mod response;

pub use client::{
    BearerToken, ClientOptions, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_IN_FLIGHT,
    MAX_TOKEN_FILE_BYTES, PrometheusClient, tls_config,
};
pub use error::{QueryError, QueryErrorKind};
pub use response::{Answer, MAX_NOTES, Sample, parse_response};
