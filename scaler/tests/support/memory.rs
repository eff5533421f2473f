//! The scaler's memory as a pod sees it: the Deployment's limit, the binary in a cgroup at it,
//! its resident set, and calls made as KEDA makes them, many over one channel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_testkit::cgroup::Cgroup;
use admit_testkit::wait::bounded;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tonic::transport::Channel;

use super::process::{BINARY, Served};

/// The Deployment's memory limit, read from the manifest this repository ships.
pub fn deployment_limit() -> u64 {
    let manifest = include_str!("../../../deploy/scaler.yaml");
    let limits = manifest
        .split("limits:")
        .nth(1)
        .expect("the Deployment has resource limits");
    let memory = limits
        .lines()
        .find_map(|line| line.trim().strip_prefix("memory:"))
        .expect("a memory limit")
        .trim();
    let mebibytes: u64 = memory
        .strip_suffix("Mi")
        .expect("the limit in Mi")
        .parse()
        .unwrap();
    mebibytes << 20
}

/// The scaler in `cgroup`, with `args`.
pub fn serve_in(cgroup: &Cgroup, args: &[&str]) -> Served {
    Served::start_with(cgroup.command(BINARY, &[] as &[&str]), args)
}

/// A line of `served`'s `/proc/<pid>/status`, in bytes.
fn status_bytes(served: &Served, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", served.child.id()))
        .expect("the scaler is running");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field}"));
    kib << 10
}

/// The resident set of `served`, in bytes.
pub fn resident(served: &Served) -> u64 {
    status_bytes(served, "VmRSS:")
}

/// The largest resident set `served` has had, in bytes.
pub fn peak_resident(served: &Served) -> u64 {
    status_bytes(served, "VmHWM:")
}

/// The resident set of `served` once it has stopped growing: sampled every 100 ms until ten
/// samples in a row (a second) grew by less than 1 %; the highest of them.
///
/// # Panics
///
/// If it still grows after a minute.
pub async fn settled_resident(served: &Served) -> u64 {
    const WINDOW: usize = 10;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut samples = std::collections::VecDeque::with_capacity(WINDOW + 1);
    loop {
        samples.push_back(resident(served));
        if samples.len() > WINDOW {
            samples.pop_front();
        }
        let (first, highest) = (samples[0], *samples.iter().max().unwrap());
        if samples.len() == WINDOW && highest <= first + first / 100 {
            return highest;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the resident set still grows: {samples:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

pub async fn connect(served: &Served) -> Channel {
    bounded(
        "connecting",
        Channel::from_shared(format!("http://{}", served.grpc))
            .unwrap()
            .connect(),
    )
    .await
    .unwrap()
}

/// Calls `call(i)` for `i` in `0..count`, `concurrency` at a time over one channel, as KEDA
/// does (one connection for every ScaledObject); returns the codes' counts: OK, and others.
/// Each call is bounded, not the whole: on a busy machine thousands of calls can take longer
/// than one network operation's limit.
pub async fn each<F, Fut>(
    channel: &Channel,
    count: usize,
    concurrency: usize,
    call: F,
) -> (usize, usize)
where
    F: Fn(ExternalScalerClient<Channel>, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), tonic::Status>> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(AtomicUsize::new(0));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (call, next, ok, failed) = (
            Arc::clone(&call),
            Arc::clone(&next),
            Arc::clone(&ok),
            Arc::clone(&failed),
        );
        let client = ExternalScalerClient::new(channel.clone());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return;
                }
                match bounded("a call", call(client.clone(), i)).await {
                    Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(status) => {
                        assert!(status.message().len() < 2048, "{status:?}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        });
    }
    while let Some(done) = workers.join_next().await {
        done.unwrap();
    }
    (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

/// A client that sends `GET /metrics` and never reads the answer (with a small receive
/// buffer, so that the scaler's writes stall at once).
pub async fn never_reads(http: SocketAddr) -> TcpStream {
    never_reads_from(super::loopback(1), http).await
}

/// [`never_reads`] from address `from`.
pub async fn never_reads_from(from: std::net::IpAddr, http: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let mut stream = bounded("connect", socket.connect(http)).await.unwrap();
    stream
        .write_all(format!("GET /metrics HTTP/1.1\r\nHost: {http}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    stream
}
