//! `grpc.health.v1.Health` with `Check` only.
//!
//! Kubernetes' gRPC probes and KEDA call `Check`. `Watch` is a stream any caller could hold
//! open, without a limit and past a graceful shutdown: it answers `UNIMPLEMENTED`, which the
//! health protocol lets a client take as "poll `Check` instead".

use tonic::{Request, Response, Status};
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthReporter, HealthService};

/// The health service of `reporter`'s statuses, answering `Check` alone.
pub(super) fn check_only(reporter: &HealthReporter) -> HealthServer<CheckOnly> {
    HealthServer::new(CheckOnly(HealthService::from_health_reporter(
        reporter.clone(),
    )))
}

/// `Check` as tonic-health answers it; `Watch` refused.
#[derive(Debug)]
pub(super) struct CheckOnly(HealthService);

#[tonic::async_trait]
impl Health for CheckOnly {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.0.check(request).await
    }

    type WatchStream = tokio_stream::Empty<Result<HealthCheckResponse, Status>>;

    async fn watch(
        &self,
        _request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented(
            "grpc.health.v1.Health/Watch is not served: call Check",
        ))
    }
}
