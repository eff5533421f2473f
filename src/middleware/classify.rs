//! Deciding whether a request a layer admitted passed or failed.
//!
//! Only passes teach the shedder what the service can carry: their count is its throughput and
//! their latency its response time. A request that failed because the service was struggling
//! (a timeout, a 503 from a layer further in) must not count as proof of capacity. A
//! [`Classify`] looks at the inner service's result and decides; a request whose response
//! future is dropped before it completes (the client went away, a timeout outside the layer)
//! always counts as failed.
//!
//! | classifier | fails | use for |
//! |---|---|---|
//! | [`ErrorsPass`] (default) | nothing | go-zero's rule for gRPC errors: only the outcome a timeout causes fails |
//! | [`ErrorsFail`] | `Err` | services whose errors mean "could not serve" |
//! | [`GoZeroHttp`] (`http` feature) | `503` responses and `Err` | HTTP, as go-zero's REST shedding handler |
//! | [`GoZeroGrpc`] (`http` feature) | `DEADLINE_EXCEEDED` responses | gRPC, as go-zero's zRPC shedding interceptor |
//!
//! Any `Fn(Result<&T, &E>) -> Outcome` closure is a classifier too.
//!
//! The go-zero classifiers also read how long a response's work waited for a CPU, from its
//! [`CpuWait`] extension, so that the shedder learns the latency without processor sharing.
//!
//! # Example
//!
//! ```
//! use std::convert::Infallible;
//! use admit::middleware::Outcome;
//! use admit::shed::{ShedLayer, Shedder};
//!
//! // Every 5xx fails, not only 503.
//! let classify = |result: Result<&http::Response<String>, &Infallible>| match result {
//!     Ok(response) if response.status().is_server_error() => Outcome::Fail,
//!     _ => Outcome::Pass,
//! };
//! let layer = ShedLayer::new(Shedder::builder().build()?).classify(classify);
//! # let _ = layer;
//! # Ok::<(), admit::ConfigError>(())
//! ```

use crate::signal::cpu::CpuWait;

/// Whether an admitted request passed or failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The request succeeded: it counts towards the service's throughput and latency.
    Pass,
    /// The request failed: it only leaves the in-flight count.
    Fail,
}

/// Decides from the inner service's result whether an admitted request passed or failed.
///
/// `T` is the inner service's response and `E` its error. See the [module docs](self) for the
/// classifiers provided.
pub trait Classify<T, E> {
    /// The outcome of a request that produced `result`.
    fn classify(&self, result: Result<&T, &E>) -> Outcome;

    /// How long the request's work waited for a CPU, as its result reports it (see
    /// [`CpuWait`]): a passing request teaches the shedder its latency less this wait. The
    /// default reads none; the go-zero classifiers read a response's `CpuWait` extension.
    #[inline]
    fn cpu_wait(&self, result: Result<&T, &E>) -> CpuWait {
        let _ = result;
        CpuWait::NONE
    }
}

impl<F, T, E> Classify<T, E> for F
where
    F: Fn(Result<&T, &E>) -> Outcome,
{
    fn classify(&self, result: Result<&T, &E>) -> Outcome {
        self(result)
    }
}

/// Every completed request passes, errors included: go-zero's rule for gRPC, where only a
/// timeout fails. Here a timeout outside the layer drops the response future, which counts as
/// a failure anyway. The default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorsPass;

impl<T, E> Classify<T, E> for ErrorsPass {
    fn classify(&self, _result: Result<&T, &E>) -> Outcome {
        Outcome::Pass
    }
}

/// `Ok` passes, `Err` fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorsFail;

impl<T, E> Classify<T, E> for ErrorsFail {
    fn classify(&self, result: Result<&T, &E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Pass,
            Err(_) => Outcome::Fail,
        }
    }
}

/// go-zero's REST rule: a `503 Service Unavailable` response fails (go-zero's timeout handler
/// answers 503, so timeouts fail), any other response passes. An `Err` (no response at all)
/// fails too, and so does a refusal by another admit layer further in (a response marked
/// [`Refused`](crate::respond::Refused), such as a warm-up bucket's 503 or 429).
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GoZeroHttp;

#[cfg(feature = "http")]
impl<B, E> Classify<http::Response<B>, E> for GoZeroHttp {
    fn classify(&self, result: Result<&http::Response<B>, &E>) -> Outcome {
        match result {
            Ok(response)
                if response.status() != http::StatusCode::SERVICE_UNAVAILABLE
                    && !refused_by_admit(response) =>
            {
                Outcome::Pass
            }
            _ => Outcome::Fail,
        }
    }

    fn cpu_wait(&self, result: Result<&http::Response<B>, &E>) -> CpuWait {
        reported_cpu_wait(result)
    }
}

/// go-zero's zRPC rule: a response whose `grpc-status` header is `DEADLINE_EXCEEDED` (4) fails;
/// any other response, and any `Err`, passes. Beyond go-zero, a refusal by an admit limiter
/// further in fails too: a response marked [`Refused`](crate::respond::Refused) or, with the
/// `tonic` feature, one carrying a `tonic::Status` made from an admit refusal, such as a
/// [`WarmUpInterceptor`](crate::warmup::WarmUpInterceptor)'s. tonic's `Server::layer` puts a
/// process-wide [`ShedLayer`](crate::shed::ShedLayer) outside every service's interceptors, and
/// without this their instant refusals would count as fast successful calls.
///
/// Only the response head is inspected: a handler's error (tonic sends it in the head, as a
/// trailers-only response) is seen, a status sent in the trailers after a streamed body is not.
/// A deadline enforced outside the layer (tonic's `grpc-timeout` handling) drops the response
/// future, which counts as a failure as well.
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GoZeroGrpc;

#[cfg(feature = "http")]
impl<B, E> Classify<http::Response<B>, E> for GoZeroGrpc {
    fn classify(&self, result: Result<&http::Response<B>, &E>) -> Outcome {
        /// `DEADLINE_EXCEEDED`'s code.
        const DEADLINE_EXCEEDED: &[u8] = b"4";
        match result {
            Ok(response)
                if refused_by_admit(response)
                    || response
                        .headers()
                        .get("grpc-status")
                        .is_some_and(|status| status.as_bytes() == DEADLINE_EXCEEDED) =>
            {
                Outcome::Fail
            }
            _ => Outcome::Pass,
        }
    }

    fn cpu_wait(&self, result: Result<&http::Response<B>, &E>) -> CpuWait {
        reported_cpu_wait(result)
    }
}

/// The [`CpuWait`] extension of a response, or none.
#[cfg(feature = "http")]
fn reported_cpu_wait<B, E>(result: Result<&http::Response<B>, &E>) -> CpuWait {
    result
        .ok()
        .and_then(|response| response.extensions().get::<CpuWait>().copied())
        .unwrap_or(CpuWait::NONE)
}

/// Whether `response` is an admit layer's or interceptor's refusal.
#[cfg(feature = "http")]
fn refused_by_admit<B>(response: &http::Response<B>) -> bool {
    let extensions = response.extensions();
    if extensions.get::<crate::respond::Refused>().is_some() {
        return true;
    }
    #[cfg(feature = "tonic")]
    if extensions
        .get::<tonic::Status>()
        .and_then(std::error::Error::source)
        .is_some_and(crate::respond::is_refusal)
    {
        return true;
    }
    false
}
