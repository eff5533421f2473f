//! How the tower layers answer the requests they refuse.
//!
//! The [guide](crate::guide::recipes) puts them in axum, tonic and tower stacks.
//!
//! [`ShedLayer`](crate::shed::ShedLayer) and [`WarmUpLayer`](crate::warmup::WarmUpLayer) decide in
//! `call` whether a request may reach the inner service. When one refuses, a [`Respond`]
//! implementation turns the refusal (an [`Overloaded`] or a [`Rejected`], both carrying a retry
//! hint) into what the service returns. Three come with the crate:
//!
//! | responder | service error | a refusal becomes | for |
//! |---|---|---|---|
//! | [`BoxErrorResponder`] (default) | [`BoxError`] | `Err` of the zero-sized [`Refused`], whichever layer refused | any tower stack; axum with `HandleErrorLayer` |
//! | [`HttpResponder`] (`http` feature) | unchanged | an empty response, 503 (or 429) with `Retry-After` and [`admit-refusal`](REFUSAL_HEADER) | axum, hyper, tower-http stacks |
//! | [`GrpcResponder`] (`tonic` feature) | unchanged | a gRPC status response, `RESOURCE_EXHAUSTED` (or `UNAVAILABLE`) with `grpc-retry-pushback-ms` and [`admit-refusal`](REFUSAL_HEADER) | tonic servers |
//!
//! Implement [`Respond`] yourself for anything else, for example a JSON error body.
//!
//! # Which one
//!
//! A boxed error is tower's convention (tower's own `Overloaded` is one zero-sized type too)
//! and works everywhere, but it carries neither the reason nor a retry hint (boxing a value
//! that carries them would allocate on every refusal) and it needs a handler:
//! axum answers an error that reaches it by closing the connection, so put a
//! `HandleErrorLayer` above the layer, and tonic resets the stream for an error it does not
//! recognise. [`HttpResponder`] and [`GrpcResponder`] answer the client themselves, keep the
//! inner service's error type, and include the reason ([`REFUSAL_HEADER`]) and the retry hint.
//! A [`Respond`] of your own receives the whole refusal.
//!
//! [`Overloaded`]: crate::shed::Overloaded
//! [`Rejected`]: crate::warmup::Rejected

#[cfg(feature = "tonic")]
mod grpc;
#[cfg(feature = "http")]
mod http;

use std::error::Error;
use std::time::Duration;

#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
pub use self::grpc::GrpcResponder;
#[cfg(feature = "tonic")]
pub(crate) use self::grpc::status;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::http::HttpResponder;
#[cfg(all(feature = "http", feature = "tokio"))]
pub(crate) use self::http::close_connection;

/// An admit refusal: the one error [`BoxErrorResponder`] returns, boxed, for a request any
/// admit layer refused, and the mark of one elsewhere.
///
/// It is zero-sized, so boxing it allocates nothing: refusing stays cheap exactly when the
/// service is overloaded. Test for it with `error.is::<Refused>()`. [`HttpResponder`] and
/// [`GrpcResponder`] insert it into the extensions of the responses they build, every refusal
/// ([`Overloaded`](crate::shed::Overloaded), [`Rejected`](crate::warmup::Rejected), the
/// drain's [`Draining`](crate::drain::Draining)) reports it as its [`source`](Error::source), and so do the gRPC statuses
/// made from one, so [`is_refusal`] recognises any admit refusal. The go-zero classifiers ([`GoZeroHttp`], [`GoZeroGrpc`])
/// count such responses as failures, so an admit limiter placed inside a [`ShedLayer`] cannot
/// teach the shedder a false capacity with its instant refusals. Custom classifiers can check
/// for it too.
///
/// [`GoZeroHttp`]: crate::middleware::classify::GoZeroHttp
/// [`GoZeroGrpc`]: crate::middleware::classify::GoZeroGrpc
/// [`ShedLayer`]: crate::shed::ShedLayer
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused by an admit limiter")
    }
}

impl Error for Refused {}

/// Whether `error`, or any error in its [`source`](Error::source) chain, is an admit refusal
/// (see [`Refused`]): the boxed errors of [`BoxErrorResponder`] and the sources of the gRPC
/// statuses admit builds.
///
/// # Example
///
/// ```
/// use admit::respond::{BoxError, Refused, is_refusal};
///
/// let refused: BoxError = Box::new(Refused);
/// assert!(is_refusal(&*refused));
/// let other: BoxError = "broken pipe".into();
/// assert!(!is_refusal(&*other));
/// ```
pub fn is_refusal(error: &(dyn Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if error.is::<Refused>() {
            return true;
        }
        current = error.source();
    }
    false
}

/// The response header (HTTP) or metadata key (gRPC) that names why admit refused a request:
/// its [`Refusal::reason`], such as `queue-delay`. An answer that carries it was refused before
/// the service ran any of the request: nothing was processed, so a caller may send it again to
/// another replica (after the retry hint) without doing the work twice.
pub const REFUSAL_HEADER: &str = "admit-refusal";

/// tower's boxed error type: what [`BoxErrorResponder`] services return.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// A limiter's refusal of one request, as the layers hand it to a [`Respond`]er.
///
/// Implemented by [`Overloaded`](crate::shed::Overloaded) (the shedder),
/// [`Rejected`](crate::warmup::Rejected) (the warm-up buckets) and
/// [`Draining`](crate::drain::Draining) (the drain); write a responder generic over
/// `Refusal` to serve every layer.
pub trait Refusal: Copy + Error + Send + Sync + 'static {
    /// How long the client should wait before trying again.
    fn retry_after(&self) -> Duration;

    /// Why the request was refused, as a short token that is a valid HTTP header value:
    /// `rate-limit` for the warm-up buckets, and for the shedder its
    /// [`Cause`](crate::signal::Cause)'s (`cpu`, `cool-off`, `queue`,
    /// `queue-delay`, `runtime-lag`, or `signal` for any added signal). [`HttpResponder`] and
    /// [`GrpcResponder`] send it as [`REFUSAL_HEADER`] (or leave it out if it is not a valid
    /// header value).
    fn reason(&self) -> &'static str;

    /// Whether the answer should also close the HTTP/1 connection the request came on, so
    /// that the client's next request opens a connection to another replica: true for the
    /// drain's refusals of HTTP/1 requests ([`Draining`](crate::drain::Draining)), false by
    /// default. [`HttpResponder`] then adds `Connection: close`; a responder of your own should
    /// too.
    fn closes_connection(&self) -> bool {
        false
    }

    /// The refused request's class, if the limiter knows it: the shedder's refusals
    /// ([`Overloaded::class`](crate::shed::Overloaded::class)). [`HttpResponder`] and
    /// [`GrpcResponder`] send it as [`CRITICALITY_HEADER`](crate::criticality::CRITICALITY_HEADER)
    /// beside the reason. `None` by default.
    fn criticality(&self) -> Option<crate::criticality::Criticality> {
        None
    }

    /// The [`Retry-After`](https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3) value for this
    /// refusal: the retry hint in whole seconds, rounded up, at least 1, and `u64::MAX` for a
    /// hint that rounds past it ([`Duration::MAX`]).
    fn retry_after_secs(&self) -> u64 {
        let hint = self.retry_after();
        let secs = hint
            .as_secs()
            .saturating_add(u64::from(hint.subsec_nanos() > 0));
        secs.max(1)
    }

    /// The retry hint in whole milliseconds, rounded up and capped at `i32::MAX`: the value of
    /// gRPC's `grpc-retry-pushback-ms`, a signed 32-bit count.
    fn retry_after_millis(&self) -> i32 {
        let hint = self.retry_after();
        // At most `Duration::MAX` in ms plus one: far inside `u128`.
        let millis = hint.as_millis() + u128::from(!hint.subsec_nanos().is_multiple_of(1_000_000));
        i32::try_from(millis).unwrap_or(i32::MAX)
    }
}

/// Turns a layer's refusal into what its service returns, and the inner service's errors into
/// the service's error type.
///
/// `F` is the [`Refusal`], `T` the inner service's response and
/// `E` its error.
///
/// # Example
///
/// A responder that answers refusals with a JSON body:
///
/// ```
/// use admit::respond::{Refusal, Respond};
///
/// use admit::warmup::{WarmUp, WarmUpLayer};
///
/// #[derive(Clone, Debug)]
/// struct JsonRefusal;
///
/// impl<F: Refusal, E> Respond<F, http::Response<String>, E> for JsonRefusal {
///     type Error = E;
///
///     fn respond(&self, refusal: F) -> Result<http::Response<String>, E> {
///         let body = format!(
///             r#"{{"error":"busy","reason":"{}","retry_after_s":{}}}"#,
///             refusal.reason(),
///             refusal.retry_after_secs()
///         );
///         Ok(http::Response::builder()
///             .status(503)
///             .header("content-type", "application/json")
///             .body(body)
///             .expect("a valid response"))
///     }
///
///     fn inner_error(error: E) -> E {
///         error
///     }
/// }
///
/// let layer = WarmUpLayer::new(WarmUp::builder(100.0).build()?).respond_with(JsonRefusal);
/// # let _ = layer;
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub trait Respond<F, T, E> {
    /// The layered service's error type.
    type Error;

    /// What the service returns for a refused request.
    fn respond(&self, refusal: F) -> Result<T, Self::Error>;

    /// Converts an error of the inner service (from `poll_ready` or its response future).
    fn inner_error(error: E) -> Self::Error;
}

/// Refusals become errors, tower style: the service's error is a [`BoxError`], and a refusal
/// is the boxed zero-sized [`Refused`] (boxing it allocates nothing), whichever limiter refused.
/// Inner errors are boxed with `Into<BoxError>`.
///
/// Test for a refusal with `error.is::<Refused>()`, or with [`is_refusal`], which also finds one
/// in an error's source chain. The boxed error carries neither the reason nor a retry hint; use
/// [`HttpResponder`] or [`GrpcResponder`] to send them.
///
/// With axum, answer the error in a `HandleErrorLayer` placed above the layer:
///
/// ```
/// use std::sync::Arc;
/// use axum::{Router, error_handling::HandleErrorLayer, http::StatusCode, routing::get};
/// use admit::respond::{BoxError, Refused};
/// use admit::shed::{ShedLayer, Shedder};
/// use tower::ServiceBuilder;
///
/// async fn refused(error: BoxError) -> StatusCode {
///     if error.is::<Refused>() {
///         StatusCode::SERVICE_UNAVAILABLE
///     } else {
///         StatusCode::INTERNAL_SERVER_ERROR
///     }
/// }
///
/// let shedder = Arc::new(Shedder::builder().build()?);
/// let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(
///     ServiceBuilder::new()
///         .layer(HandleErrorLayer::new(refused))
///         .layer(ShedLayer::new(shedder)),
/// );
/// # let _ = app;
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoxErrorResponder;

impl<F: Refusal, T, E: Into<BoxError>> Respond<F, T, E> for BoxErrorResponder {
    type Error = BoxError;

    fn respond(&self, _refusal: F) -> Result<T, BoxError> {
        Err(Box::new(Refused))
    }

    fn inner_error(error: E) -> BoxError {
        error.into()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Refusal;

    /// A refusal with a given retry hint.
    #[derive(Clone, Copy, Debug)]
    struct Hint(Duration);

    impl std::fmt::Display for Hint {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "retry in {:?}", self.0)
        }
    }

    impl std::error::Error for Hint {}

    impl Refusal for Hint {
        fn retry_after(&self) -> Duration {
            self.0
        }

        fn reason(&self) -> &'static str {
            "test"
        }
    }

    fn hint(nanos: u64) -> Hint {
        Hint(Duration::from_nanos(nanos))
    }

    #[test]
    fn retry_after_rounds_up_to_at_least_one_second() {
        assert_eq!(hint(0).retry_after_secs(), 1);
        assert_eq!(hint(1).retry_after_secs(), 1);
        assert_eq!(hint(999_999_999).retry_after_secs(), 1);
        assert_eq!(hint(1_000_000_000).retry_after_secs(), 1);
        assert_eq!(hint(1_000_000_001).retry_after_secs(), 2);
        assert_eq!(hint(1_999_999_999).retry_after_secs(), 2);
        assert_eq!(hint(2_000_000_000).retry_after_secs(), 2);
        assert_eq!(hint(u64::MAX).retry_after_secs(), 18_446_744_074);
    }

    #[test]
    fn retry_after_saturates_at_the_largest_durations() {
        let secs = |secs, nanos| Hint(Duration::new(secs, nanos)).retry_after_secs();
        assert_eq!(Hint(Duration::MAX).retry_after_secs(), u64::MAX);
        assert_eq!(secs(u64::MAX, 1), u64::MAX);
        assert_eq!(secs(u64::MAX, 0), u64::MAX);
        assert_eq!(secs(u64::MAX - 1, 1), u64::MAX);
        assert_eq!(secs(u64::MAX - 1, 0), u64::MAX - 1);
    }

    #[test]
    fn pushback_rounds_up_to_whole_milliseconds_within_i32() {
        assert_eq!(hint(0).retry_after_millis(), 0);
        assert_eq!(hint(1).retry_after_millis(), 1);
        assert_eq!(hint(999_999).retry_after_millis(), 1);
        assert_eq!(hint(1_000_000).retry_after_millis(), 1);
        assert_eq!(hint(1_000_001).retry_after_millis(), 2);
        assert_eq!(hint(1_500_000).retry_after_millis(), 2);
        // The last value that fits, and the first that does not.
        assert_eq!(hint(2_147_483_647_000_000).retry_after_millis(), i32::MAX);
        assert_eq!(hint(2_147_483_646_000_001).retry_after_millis(), i32::MAX);
        assert_eq!(
            hint(2_147_483_646_000_000).retry_after_millis(),
            i32::MAX - 1
        );
        assert_eq!(hint(2_147_483_647_000_001).retry_after_millis(), i32::MAX);
        assert_eq!(hint(u64::MAX).retry_after_millis(), i32::MAX);
        assert_eq!(Hint(Duration::MAX).retry_after_millis(), i32::MAX);
    }
}
