//! Instant queries against Prometheus' HTTP API, with every failure typed.
//!
//! [`PrometheusClient::query`] sends one form-encoded `POST <base>/api/v1/query` and reads the
//! answer with [`parse_response`], a pure function: an instant vector with exactly one sample,
//! or a scalar, with a finite value, is an [`Answer`]; anything else is a [`QueryErrorKind`]
//! whose [`code`](QueryErrorKind::code) is the gRPC code KEDA sees.
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
//! assert_eq!(error.code(), tonic::Code::FailedPrecondition);
//! # Ok::<(), QueryErrorKind>(())
//! ```

mod client;
mod error;
mod response;

pub use client::{BearerToken, ClientOptions, MAX_BODY_BYTES, PrometheusClient, tls_config};
pub use error::{QueryError, QueryErrorKind};
pub use response::{Answer, MAX_NOTES, Sample, parse_response};
