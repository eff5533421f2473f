//! The warm-up bucket as a tonic [`Interceptor`].

use std::fmt;
use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Code, Request, Status};

use super::WarmUp;
use crate::clock::{Clock, MonotonicClock};
use crate::respond::GrpcResponder;

/// A tonic [`Interceptor`] that takes one permit from a [`WarmUp`] limiter per call and refuses
/// calls beyond the limit with `RESOURCE_EXHAUSTED` (or another code) and
/// `grpc-retry-pushback-ms`.
///
/// Interceptors run before the handler and never see the response, which is all a rate
/// limiter needs; they are applied per service, with `YourServer::with_interceptor`. The load
/// shedder needs to see each request complete, so it has no interceptor: use
/// [`ShedLayer::grpc`](crate::shed::ShedLayer::grpc) as a tower layer instead. Clones share the
/// limiter.
///
/// # Example
///
/// ```
/// use admit::warmup::{WarmUp, WarmUpInterceptor};
/// use tonic_health::pb::health_server::HealthServer;
/// use tonic_health::server::{HealthService, health_reporter};
///
/// let limiter = WarmUp::builder(1000.0).build()?;
/// let (reporter, _) = health_reporter();
/// let health = HealthService::from_health_reporter(reporter);
/// let service = HealthServer::with_interceptor(health, WarmUpInterceptor::new(limiter));
/// let _router = tonic::transport::Server::builder().add_service(service);
/// // ….serve(address).await?
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct WarmUpInterceptor<C = MonotonicClock> {
    limiter: Arc<WarmUp<C>>,
    responder: GrpcResponder,
}

impl<C: Clock> WarmUpInterceptor<C> {
    /// An interceptor applying `limiter` (a [`WarmUp`] or an `Arc` of one), refusing with
    /// `RESOURCE_EXHAUSTED`.
    pub fn new(limiter: impl Into<Arc<WarmUp<C>>>) -> Self {
        WarmUpInterceptor {
            limiter: limiter.into(),
            responder: GrpcResponder::resource_exhausted(),
        }
    }

    /// Refuse with `code` instead (for example `UNAVAILABLE`, which clients' retry policies
    /// usually list).
    pub fn code(self, code: Code) -> Self {
        WarmUpInterceptor {
            limiter: self.limiter,
            responder: GrpcResponder::new(code),
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<WarmUp<C>> {
        &self.limiter
    }
}

impl<C: Clock> Interceptor for WarmUpInterceptor<C> {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        match self.limiter.try_acquire() {
            Ok(()) => Ok(request),
            Err(rejected) => Err(self.responder.status(rejected)),
        }
    }
}

impl<C> Clone for WarmUpInterceptor<C> {
    fn clone(&self) -> Self {
        WarmUpInterceptor {
            limiter: self.limiter.clone(),
            responder: self.responder,
        }
    }
}

impl<C> fmt::Debug for WarmUpInterceptor<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUpInterceptor")
            .field("limiter", &self.limiter)
            .field("code", &self.responder.code())
            .finish()
    }
}
