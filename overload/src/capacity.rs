//! The server's capacity: what a warm, unprotected server completes per second when kept
//! saturated.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

use crate::BoxError;
use crate::policy::Policy;
use crate::process::ServerProcess;
use crate::server::ServeArgs;

/// How long the measurement keeps the server saturated, after a second to settle.
pub(crate) const MEASURED: Duration = Duration::from_secs(3);
/// Requests kept outstanding beyond those awaiting I/O: enough that the core never waits for
/// one.
const CLIENTS: usize = 6;

/// Requests completed per second by a warm, unprotected server with `server`'s work, kept
/// saturated by a closed loop of clients: no request waits long and none is refused, so it is
/// the most the server can do.
pub(crate) async fn measure(server: &ServeArgs, pinned: bool) -> Result<f64, BoxError> {
    let server = ServeArgs {
        policy: Policy::Unprotected,
        cold_ms: 0,
        ..server.clone()
    };
    let process = ServerProcess::start(&server, pinned)?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let work: Uri = format!("http://{}/work", process.addr()).parse()?;
    let start = Instant::now();
    let (from, until) = (
        start + Duration::from_secs(1),
        start + Duration::from_secs(1) + MEASURED,
    );
    let done = Arc::new(AtomicU64::new(0));
    // Twice as many as the core's nominal capacity keeps awaiting I/O.
    let awaiting = 2.0 * server.io_wait().as_secs_f64() * 1e3 / server.work_ms;
    let clients: Vec<_> = (0..CLIENTS + awaiting.ceil() as usize)
        .map(|_| {
            let (client, work, done) = (client.clone(), work.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                while Instant::now() < until {
                    let response = client.get(work.clone()).await?;
                    let ok = response.status() == StatusCode::OK;
                    response.into_body().collect().await?;
                    let now = Instant::now();
                    if ok && now >= from && now < until {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok::<(), BoxError>(())
            })
        })
        .collect();
    for client in clients {
        client.await??;
    }
    drop(process);
    let capacity = done.load(Ordering::Relaxed) as f64 / MEASURED.as_secs_f64();
    if capacity < 1.0 {
        return Err("the capacity measurement completed no request".into());
    }
    Ok(capacity)
}
