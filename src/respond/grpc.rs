//! Refusals answered as gRPC statuses.

use std::error::Error;
use std::sync::Arc;

use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use super::{REFUSAL_HEADER, Refusal, Refused, Respond};
use crate::criticality::CRITICALITY_HEADER;

/// The trailer that tells gRPC clients when to retry (gRPC proposal A6): signed 32-bit
/// milliseconds; a negative value means "do not retry".
pub(crate) const RETRY_PUSHBACK: &str = "grpc-retry-pushback-ms";

/// Refusals become a gRPC status response: `RESOURCE_EXHAUSTED` by default (or `UNAVAILABLE`),
/// with the retry hint in `grpc-retry-pushback-ms` and the [reason](Refusal::reason) in
/// [`admit-refusal`](REFUSAL_HEADER) metadata. The service keeps the inner service's error
/// type, so tonic sends the status instead of resetting the stream.
///
/// Which code: `RESOURCE_EXHAUSTED` is gRPC's "server temporarily out of resources", what
/// tonic's own load shedding and go-zero answer, and it does not page anyone as "server down".
/// `UNAVAILABLE` is the code gRPC clients' retry policies usually list, so choose it if your
/// clients should retry automatically (they honour the pushback).
///
/// Building the response allocates; the admitted path allocates nothing.
///
/// # Example
///
/// ```
/// use admit::respond::GrpcResponder;
/// use admit::shed::{ShedLayer, Shedder};
///
/// let shedder = Shedder::builder().build()?;
/// // `grpc()` answers RESOURCE_EXHAUSTED; this answers UNAVAILABLE instead.
/// let layer = ShedLayer::new(shedder).grpc().respond_with(GrpcResponder::unavailable());
/// # let _ = layer;
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcResponder {
    code: Code,
}

impl GrpcResponder {
    /// Refusals are answered with `code`.
    pub const fn new(code: Code) -> Self {
        GrpcResponder { code }
    }

    /// `RESOURCE_EXHAUSTED` (the default).
    pub const fn resource_exhausted() -> Self {
        GrpcResponder::new(Code::ResourceExhausted)
    }

    /// `UNAVAILABLE`.
    pub const fn unavailable() -> Self {
        GrpcResponder::new(Code::Unavailable)
    }

    /// The code refusals are answered with.
    pub(crate) const fn code(&self) -> Code {
        self.code
    }

    /// The status for `refusal`: this responder's code, the refusal's message, the retry hint
    /// as `grpc-retry-pushback-ms`, the reason as `admit-refusal` and, where known, the
    /// request's class as `admit-criticality`.
    ///
    /// The status's [`source`](Error::source) is [`Refused`], which
    /// [`is_refusal`](super::is_refusal) and the go-zero classifiers recognise.
    pub fn status<F: Refusal>(&self, refusal: F) -> Status {
        let mut status = status(
            self.code,
            refusal.to_string(),
            Some((refusal.retry_after_millis(), refusal.reason())),
            Arc::new(Refused),
        );
        if let Some(class) = refusal.criticality() {
            status.metadata_mut().insert(
                CRITICALITY_HEADER,
                MetadataValue::from_static(class.as_str()),
            );
        }
        status
    }
}

impl Default for GrpcResponder {
    fn default() -> Self {
        GrpcResponder::resource_exhausted()
    }
}

impl<F: Refusal, B: Default, E> Respond<F, http::Response<B>, E> for GrpcResponder {
    type Error = E;

    fn respond(&self, refusal: F) -> Result<http::Response<B>, E> {
        let mut response = self.status(refusal).into_http();
        response.extensions_mut().insert(Refused);
        Ok(response)
    }

    fn inner_error(error: E) -> E {
        error
    }
}

/// `RESOURCE_EXHAUSTED` for a boxed refusal, which knows neither its reason nor a retry hint:
/// no pushback, no `admit-refusal`.
impl From<Refused> for Status {
    fn from(refused: Refused) -> Status {
        status(
            Code::ResourceExhausted,
            refused.to_string(),
            None,
            Arc::new(refused),
        )
    }
}

/// A status with `code`, `message`, when known the retry pushback in milliseconds and the
/// refusal's reason, and `source`, the refusal's boxed error.
pub(crate) fn status(
    code: Code,
    message: impl Into<String>,
    refusal: Option<(i32, &'static str)>,
    source: Arc<dyn Error + Send + Sync>,
) -> Status {
    let mut metadata = MetadataMap::new();
    if let Some((pushback_ms, reason)) = refusal {
        metadata.insert(RETRY_PUSHBACK, MetadataValue::from(pushback_ms));
        // A custom `Refusal` whose reason is not valid metadata goes without.
        if let Ok(reason) = MetadataValue::try_from(reason) {
            metadata.insert(REFUSAL_HEADER, reason);
        }
    }
    let mut status = Status::with_metadata(code, message, metadata);
    status.set_source(source);
    status
}

#[cfg(test)]
mod tests {
    use tonic::{Code, Status};

    use super::{GrpcResponder, REFUSAL_HEADER, RETRY_PUSHBACK};
    use crate::criticality::Criticality;
    use crate::shed::Overloaded;
    use crate::signal::Cause;
    use crate::warmup::AcquireError;

    fn pushback(status: &Status) -> Option<&str> {
        status
            .metadata()
            .get(RETRY_PUSHBACK)
            .map(|value| value.to_str().unwrap())
    }

    fn reason(status: &Status) -> Option<&str> {
        status
            .metadata()
            .get(REFUSAL_HEADER)
            .map(|value| value.to_str().unwrap())
    }

    #[test]
    fn refusals_become_statuses_with_pushback() {
        use std::error::Error;
        let overloaded = Overloaded::new(Cause::CoolOff, Criticality::Critical, 1_500_000);
        let status = Status::from(overloaded);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(pushback(&status), Some("2"));
        assert_eq!(reason(&status), Some("cool-off"));
        assert_eq!(status.message(), overloaded.to_string());
        let class = |status: &Status| {
            status
                .metadata()
                .get("admit-criticality")
                .map(|value| value.to_str().unwrap().to_owned())
        };
        assert_eq!(class(&status).as_deref(), Some("critical"));

        let status = GrpcResponder::unavailable().status(overloaded);
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(pushback(&status), Some("2"));

        let never = Status::from(AcquireError::ExceedsCapacity {
            requested: 5,
            capacity: 3,
        });
        assert_eq!(pushback(&never), Some("-1"), "do not retry");
        assert_eq!(reason(&never), Some("rate-limit"));
        assert_eq!(class(&never), None, "a bucket does not know the class");
        let boxed = Status::from(crate::respond::Refused);
        assert_eq!(boxed.code(), Code::ResourceExhausted);
        assert_eq!(pushback(&boxed), None);
        assert_eq!(
            reason(&boxed),
            None,
            "a boxed refusal does not know its reason"
        );
        for status in [&status, &never, &boxed] {
            assert!(crate::respond::is_refusal(status.source().unwrap()));
        }
    }

    #[test]
    fn the_response_is_trailers_only() {
        let overloaded = Overloaded::new(Cause::Cpu, Criticality::Sheddable, 100_000_000);
        let response: http::Response<()> =
            super::Respond::<_, _, ()>::respond(&GrpcResponder::default(), overloaded).unwrap();
        assert_eq!(response.status(), 200);
        let headers = response.headers();
        assert_eq!(headers["grpc-status"], "8");
        assert_eq!(headers[RETRY_PUSHBACK], "100");
        assert_eq!(headers[REFUSAL_HEADER], "cpu");
        assert_eq!(headers["content-type"], "application/grpc");
    }
}
