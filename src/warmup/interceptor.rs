//! The warm-up bucket as a tonic [`Interceptor`].

use std::fmt;

use tonic::service::Interceptor;
use tonic::{Code, Request, Status};

use super::{Rejected, WarmUp};
use crate::Shared;
use crate::middleware::{Admission, IntoShared, Limiter, NoWait, offered};
use crate::respond::GrpcResponder;
use crate::signal::Arrival;

/// A tonic [`Interceptor`] that takes one permit from a warm-up bucket `B` per call and refuses
/// calls beyond the limit with `RESOURCE_EXHAUSTED` (or another code) and
/// `grpc-retry-pushback-ms`.
///
/// Interceptors run before the handler and never see the response, which is all a rate
/// limiter needs; they are applied per service, with `YourServer::with_interceptor`. The load
/// shedder needs to see each request complete, so it has no interceptor: use
/// [`ShedLayer::grpc`](crate::shed::ShedLayer::grpc) as a tower layer instead. Clones share the
/// limiter.
///
/// A call no admit layer outside has seen counts as offered to the bucket
/// ([`Limiter::count_offered`]); behind a `ShedLayer` in `Server::layer`, the shedder counts it.
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
pub struct WarmUpInterceptor<B: 'static = WarmUp> {
    limiter: Shared<B>,
    responder: GrpcResponder,
}

impl<B: Limiter<Permit = (), Refusal = Rejected>> WarmUpInterceptor<B> {
    /// An interceptor applying `limiter` (a warm-up bucket, an `Arc` of one or a `&'static`
    /// one), refusing with `RESOURCE_EXHAUSTED`.
    pub fn new(limiter: impl IntoShared<B>) -> Self {
        WarmUpInterceptor {
            limiter: limiter.into_shared(),
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
}

impl<B: Limiter<Permit = (), Refusal = Rejected, Wait = NoWait<(), Rejected>>> Interceptor
    for WarmUpInterceptor<B>
{
    /// Counts the call as offered if no admit layer outside has seen it, and takes a permit.
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        offered::count_if_first(|| B::count_offered(&self.limiter));
        match B::admit(&self.limiter, Arrival::new()) {
            Admission::Enter(()) => Ok(request),
            Admission::Refuse(rejected) => Err(self.responder.status(rejected)),
            Admission::Wait(never) => match never {},
        }
    }
}

impl<B: 'static> Clone for WarmUpInterceptor<B> {
    fn clone(&self) -> Self {
        WarmUpInterceptor {
            limiter: self.limiter.clone(),
            responder: self.responder,
        }
    }
}

impl<B: fmt::Debug + 'static> fmt::Debug for WarmUpInterceptor<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUpInterceptor")
            .field("limiter", &self.limiter)
            .field("code", &self.responder.code())
            .finish()
    }
}
