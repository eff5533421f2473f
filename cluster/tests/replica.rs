//! `admit-cluster replica --bound`: the replica process serves its work through admit's bound,
//! publishes the bound's series, and drains on SIGTERM.

use std::process::Stdio;

use admit_testkit::wait::bounded;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustix::process::{Pid, Signal, kill_process};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const BINARY: &str = env!("CARGO_BIN_EXE_admit-cluster");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_replica_serves_publishes_its_bound_and_drains() {
    let mut replica = Command::new(BINARY)
        .args([
            "replica",
            "--bound",
            "--work-mean",
            "1ms",
            "--cold",
            "0s",
            "--iterations-per-ms",
            "1000",
            "--capacity",
            "10000",
            "--drain-delay",
            "100ms",
            "--drain-deadline",
            "5s",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the replica starts");
    let mut lines = BufReader::new(replica.stdout.take().expect("piped")).lines();
    let addr = bounded("the replica's address", async {
        while let Some(line) = lines.next_line().await.expect("its output") {
            if let Some((_, addr)) = line.split_once(" listening on ") {
                return addr.to_owned();
            }
        }
        panic!("the replica ended without listening");
    })
    .await;

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let get = |path: &str| {
        let client = client.clone();
        let request = http::Request::get(format!("http://{addr}{path}"))
            .body(Empty::new())
            .expect("a request");
        async move {
            let response = client.request(request).await.expect("an answer");
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.expect("a body");
            (
                status,
                String::from_utf8_lossy(&body.to_bytes()).into_owned(),
            )
        }
    };
    // Twenty at once, more than a small machine's cores: the bound's floor.
    let answers = bounded(
        "twenty requests",
        futures_util::future::join_all((0..20).map(|_| get("/work"))),
    )
    .await;
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
    let (status, metrics) = bounded("the metrics", get("/metrics")).await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"admit_bound_limit{limiter="work"}"#),
        "{metrics}"
    );
    // Nothing left in service once every answer is in.
    assert!(
        metrics.contains(r#"admit_bound_in_service{limiter="work"} 0"#),
        "{metrics}"
    );

    let pid = Pid::from_raw(replica.id().expect("running") as i32).expect("a pid");
    kill_process(pid, Signal::TERM).expect("SIGTERM");
    let status = bounded("the drain", replica.wait())
        .await
        .expect("its status");
    assert!(status.success(), "{status:?}");
}
