//! A tonic gRPC server behind a warm-up bucket and a load shedder, driven by its own client.
//!
//! No `.proto` and no `protoc`: the server hosts the standard gRPC health service from
//! `tonic-health`, and the program calls its `Check` method over a real HTTP/2 connection on
//! 127.0.0.1. Two limiters guard it:
//!
//! - a process-wide [`Shedder`], applied to every service with `Server::builder().layer(..)`:
//!   go-zero's zRPC shedding, refusing with `RESOURCE_EXHAUSTED` and `grpc-retry-pushback-ms`
//!   while the CPU is hot and too many calls are in flight;
//! - a [`WarmUp`] bucket as a [`WarmUpInterceptor`] on the health service: a cold start admits
//!   `30 / 3 = 10` calls per second and refuses the rest with `RESOURCE_EXHAUSTED` and a
//!   `grpc-retry-pushback-ms` telling the client when a call would pass.
//!
//! The client fires a quick series of checks, prints which pass and which are refused (with
//! the pushback), waits as long as the last refusal asked and calls again, which passes.
//!
//! ```text
//! cargo run --example tonic --features tonic
//! ```
//!
//! It runs for about a second.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::shed::{ShedLayer, Shedder};
use admit::warmup::{WarmUp, WarmUpInterceptor};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthReporter, HealthService};

type BoxError = Box<dyn Error + Send + Sync>;

/// The full rate once warm, in calls per second; `FULL_RATE / COLD_FACTOR` while cold.
const FULL_RATE: f64 = 30.0;
const COLD_FACTOR: u32 = 3;
const WARM_UP_PERIOD: Duration = Duration::from_secs(10);
/// Calls the client makes back to back: more than the cold bucket admits in a second.
const CALLS: usize = 14;

/// The metadata key of the retry hint (gRPC proposal A6).
const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// The pushback a refusal carries, in milliseconds.
fn pushback_ms(status: &Status) -> Option<u64> {
    status.metadata().get(PUSHBACK)?.to_str().ok()?.parse().ok()
}

async fn check(client: &mut HealthClient<Channel>) -> Result<HealthCheckResponse, Status> {
    // The empty service name asks for the server's overall health.
    let request = HealthCheckRequest {
        service: String::new(),
    };
    Ok(client.check(request).await?.into_inner())
}

/// Prints one call's outcome; returns the pushback of a refusal.
fn report(call: &str, at: Duration, result: Result<HealthCheckResponse, Status>) -> Option<u64> {
    let at = at.as_secs_f64() * 1000.0;
    match result {
        Ok(response) => {
            let serving = ServingStatus::try_from(response.status).map_or_else(
                |_| format!("status {}", response.status),
                |s| format!("{s:?}"),
            );
            println!("{call:<7}  {at:>6.1} ms  OK: {serving}");
            None
        }
        Err(status) => {
            let pushback = pushback_ms(&status);
            let hint = pushback.map_or_else(|| "none".to_string(), |ms| format!("{ms} ms"));
            println!(
                "{call:<7}  {at:>6.1} ms  {:?}: \"{}\", {PUSHBACK}: {hint}",
                status.code(),
                status.message()
            );
            pushback
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let limiter = Arc::new(
        WarmUp::builder(FULL_RATE)
            .warm_up_period(WARM_UP_PERIOD)
            .cold_factor(COLD_FACTOR)
            .build()?,
    );
    let shedder = Arc::new(Shedder::builder().build()?);

    // The warm-up bucket as an interceptor: it runs before the handler, for this service only.
    // `WarmUpLayer::new(limiter).grpc()` passed to `Server::builder().layer(..)` before the
    // shed layer would apply it to every service instead, outside the shedder, so that the
    // bucket's refusals would never reach the shedder at all.
    //
    // The shedder cannot be an interceptor: interceptors only see the request and never learn
    // how or when the call ended, and the shedder needs each admitted call's completion (its
    // latency, whether it passed) to hold its permit until then and to learn the capacity.
    let health = HealthService::from_health_reporter(HealthReporter::new());
    let health = HealthServer::with_interceptor(health, WarmUpInterceptor::new(limiter.clone()));

    // Port 0: the OS picks a free port; `TcpIncoming` turns the listener into the stream of
    // connections `serve_with_incoming` takes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            // `Server::layer` wraps the router, so the shedder sits outside the health service's
            // interceptor: it admits a call before the bucket sees it. The interceptor's
            // refusals come back through it as `RESOURCE_EXHAUSTED` statuses made from an admit
            // refusal, which `grpc()`'s classifier counts as failures rather than as fast
            // successful calls (they only leave the in-flight count).
            .layer(ShedLayer::new(shedder.clone()).grpc())
            .add_service(health)
            .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                let _ = stopped.await;
            }),
    );
    println!(
        "gRPC health service on {addr}: full rate {FULL_RATE}/s, cold rate {:.0}/s.\n",
        FULL_RATE / f64::from(COLD_FACTOR)
    );

    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);

    let start = Instant::now();
    let mut last_pushback = None;
    for call in 1..=CALLS {
        let result = check(&mut client).await;
        last_pushback = report(&format!("call {call}"), start.elapsed(), result).or(last_pushback);
    }

    // A well-behaved client waits as long as the server asked before calling again.
    if let Some(ms) = last_pushback {
        println!("\nWaiting the {ms} ms the last refusal asked for...");
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let result = check(&mut client).await;
        report("retry", start.elapsed(), result);
    }

    let warm = limiter.snapshot();
    let shed = shedder.snapshot();
    println!(
        "\nwarm-up bucket: limit {:.2} calls/s, {:?}, {:.1} of {:.1} tokens stored",
        warm.qps_limit, warm.phase, warm.stored_tokens, warm.max_tokens
    );
    println!(
        "shedder: CPU {}, {} passed, {} failed (the interceptor's refusals), \
         {} refused by the shedder itself",
        shed.cpu_permille
            .map_or_else(|| "unknown".to_string(), |cpu| format!("{cpu} ‰")),
        shed.passed,
        shed.failed,
        shed.dropped
    );
    if shed.dropped == 0 {
        println!(
            "The shedder refused nothing: it only sheds while the CPU is at or above {} ‰, so \
             every RESOURCE_EXHAUSTED above came from the warm-up interceptor. Its own refusals \
             look the same on the wire (code {:?}, with {PUSHBACK}).",
            shed.cpu_threshold,
            Code::ResourceExhausted
        );
    }

    drop(client);
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .map_err(|_| "the server did not shut down within 5 s")???;
    Ok(())
}
