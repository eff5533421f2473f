//! An open-loop HTTP/1 load generator, for admit's overload demo and its harnesses.
//!
//! - [`Trace`]: the offered rate over time, in constant segments and linear ramps, with
//!   shorthands for a [step](Trace::step) and a [spike](Trace::spike);
//! - [`Arrivals`]: a non-homogeneous Poisson process over a trace, from a seed;
//! - [`Driver`]: sends each [`Arrival`] as a request built by the caller, with a deadline and
//!   a cap on requests in flight, through a [`Transport`] ([`HttpClient`] for HTTP/1), and
//!   classifies each [`Outcome`], trying failed requests again as a [`Retry`] says (with a
//!   [`Backoff`] and a [`Budget`]) if given one;
//! - [`Tally`] and [`Report`]: counts by outcome and latencies of OK answers (an
//!   `hdrhistogram`), per second and in total, serialisable with serde.
//!
//! ```no_run
//! use std::time::Duration;
//! use admit_loadgen::{Driver, HttpClient, Trace};
//! use bytes::Bytes;
//! use http_body_util::Empty;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let s = Duration::from_secs;
//! // 200/s, a 5 s spike to 2000/s, 200/s again.
//! let trace = Trace::spike(200.0, 10.0, s(20), s(5), s(20))?;
//! let report = Driver::new(Duration::from_millis(500))
//!     .run(
//!         &HttpClient::new(),
//!         trace.duration(),
//!         trace.arrivals(1),
//!         |_| http::Request::get("http://127.0.0.1:8080/").body(Empty::<Bytes>::new()).unwrap(),
//!         |second, t| println!("{second} ok {} refused {} lost {}", t.ok, t.refused, t.failed()),
//!     )
//!     .await;
//! println!("{}", serde_json::to_string(&report.total)?);
//! # Ok(())
//! # }
//! ```

mod arrivals;
mod driver;
mod http;
mod outcome;
mod retry;
mod tally;
mod trace;

pub use crate::arrivals::{Arrival, Arrivals};
pub use crate::driver::{Driver, in_flight_cap};
pub use crate::http::{HttpClient, REFUSAL_HEADER, Transport, classify, classify_status};
pub use crate::outcome::{Lost, Outcome, Refusal};
pub use crate::retry::{Backoff, Budget, Retry, RetryError};
pub use crate::tally::{LostCounts, Report, Tally};
pub use crate::trace::{Segment, Trace, TraceBuilder, TraceError};
