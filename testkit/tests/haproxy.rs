//! The HAProxy launcher against the real binary, in front of two axum servers on loopback:
//! servers added at runtime get requests only once their health checks pass, each request is
//! stamped with `X-Request-Start`, a drained server finishes its request in flight while new
//! ones go elsewhere, a removed server is gone, a server's own 503 reaches the client as it is
//! while HAProxy marks its own 503 (no server UP), a refused connection is retried on another
//! server, and a soft stop lets the request in flight finish.
//!
//! Without an HAProxy binary the tests print `SKIPPED: …` and pass, unless
//! `ADMIT_REQUIRE_HAPROXY` is set (see `admit_testkit::haproxy::require`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use admit_testkit::TestServer;
use admit_testkit::haproxy::{
    self, ApiError, Balance, Haproxy, HaproxyConfig, PROXY_ERROR_HEADER, REQUEST_START_HEADER,
    State,
};
use admit_testkit::wait::{bounded, eventually};
use axum::Router;
use axum::extract::State as Shared;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustix::io::Errno;
use rustix::process::{Pid, test_kill_process};
use tokio::sync::Semaphore;

/// The header in which a backend echoes the `X-Request-Start` it received.
const SEEN_STAMP: &str = "x-seen-request-start";

/// HAProxy's own 503 page says this.
const NO_SERVER: &str = "No server is available to handle this request.";

/// How long a test waits for a server's checks to change its state: many check intervals.
const STATE_LIMIT: Duration = Duration::from_secs(10);

/// What a backend counts, and what the test controls of it.
struct Backend {
    name: &'static str,
    /// Whether `/readyz` answers 200 (else 503).
    ready: AtomicBool,
    /// Requests to `/whoami`, `/refuse` and `/slow`; `/readyz` is not counted.
    served: AtomicU64,
    refused: AtomicU64,
    /// Requests that have entered `/slow`.
    slow_entered: AtomicU64,
    /// `/slow` answers once it gets a permit.
    release: Semaphore,
}

impl Backend {
    fn new(name: &'static str, ready: bool) -> Arc<Backend> {
        Arc::new(Backend {
            name,
            ready: AtomicBool::new(ready),
            served: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            slow_entered: AtomicU64::new(0),
            release: Semaphore::new(0),
        })
    }

    fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }
}

/// `/readyz` (200 or 503 as the test says), `/whoami` (the name, and the `X-Request-Start` it
/// got echoed in [`SEEN_STAMP`]), `/refuse` (a 503 of its own, as admit's shedder answers) and
/// `/slow` (the name, once the test releases it).
async fn serve(backend: &Arc<Backend>) -> TestServer {
    let router = Router::new()
        .route(
            "/readyz",
            get(|Shared(backend): Shared<Arc<Backend>>| async move {
                if backend.ready.load(Ordering::SeqCst) {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                }
            }),
        )
        .route(
            "/whoami",
            get(
                |Shared(backend): Shared<Arc<Backend>>, headers: HeaderMap| async move {
                    backend.served.fetch_add(1, Ordering::SeqCst);
                    let stamp = headers
                        .get(REQUEST_START_HEADER)
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    ([(SEEN_STAMP, stamp)], backend.name)
                },
            ),
        )
        .route(
            "/refuse",
            get(|Shared(backend): Shared<Arc<Backend>>| async move {
                backend.served.fetch_add(1, Ordering::SeqCst);
                backend.refused.fetch_add(1, Ordering::SeqCst);
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("retry-after", "1")],
                    format!("refused by {}", backend.name),
                )
            }),
        )
        .route(
            "/slow",
            get(|Shared(backend): Shared<Arc<Backend>>| async move {
                backend.served.fetch_add(1, Ordering::SeqCst);
                backend.slow_entered.fetch_add(1, Ordering::SeqCst);
                backend
                    .release
                    .acquire()
                    .await
                    .expect("the semaphore is never closed")
                    .forget();
                backend.name
            }),
        )
        .with_state(backend.clone());
    admit_testkit::axum::serve_router(router).await
}

/// What the client got back.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|value| value.to_str().expect("a visible ASCII header"))
    }

    /// Whether HAProxy made this response itself.
    fn made_by_proxy(&self) -> bool {
        self.headers.contains_key(PROXY_ERROR_HEADER)
    }
}

/// A keep-alive HTTP/1 client for the proxy's frontend.
struct Http {
    client: Client<HttpConnector, Empty<Bytes>>,
    base: String,
}

impl Http {
    fn new(proxy: &Haproxy) -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: proxy.url(),
        }
    }

    /// GETs `path`, with `headers`, and reads the whole response.
    async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let what = format!("GET {path} through HAProxy");
        let mut request = hyper::Request::get(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Empty::new()).expect("a valid request");
        let response = bounded(&what, self.client.request(request))
            .await
            .unwrap_or_else(|error| panic!("{what}: {error}"));
        let status = response.status();
        let headers = response.headers().clone();
        let body = bounded(&what, response.into_body().collect())
            .await
            .unwrap_or_else(|error| panic!("{what}: reading the body: {error}"))
            .to_bytes();
        let body = String::from_utf8(body.to_vec()).expect("a UTF-8 body");
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn get(&self, path: &str) -> Reply {
        self.get_with(path, &[]).await
    }

    /// GETs `/whoami` `count` times, one after another, and returns the names that answered.
    async fn whoami(&self, count: usize) -> Vec<String> {
        let mut names = Vec::with_capacity(count);
        for _ in 0..count {
            let reply = self.get("/whoami").await;
            assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
            names.push(reply.body);
        }
        names
    }
}

/// A proxy that checks often and decides on one check: the tests wait on checks, never on
/// the clock.
async fn launch(test: &str, retries: u32) -> Option<Haproxy> {
    haproxy::require(test)?;
    let config = HaproxyConfig {
        check_interval: Duration::from_millis(100),
        rise: 1,
        fall: 1,
        retries,
        ..HaproxyConfig::default()
    };
    Some(
        haproxy::launch(config)
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    )
}

/// Adds `backend` under its name, and checks the state its first check gave it.
async fn add(proxy: &Haproxy, backend: &Backend, server: &TestServer, state: State) {
    let added = proxy
        .add_server(backend.name, server.addr())
        .await
        .unwrap_or_else(|error| panic!("adding {}: {error}\n{}", backend.name, proxy.log_tail()));
    assert_eq!(added.name, backend.name);
    assert_eq!(added.addr, server.addr());
    assert_eq!(added.state, state, "{added:?}\n{}", proxy.log_tail());
}

/// Waits until the server `name` is in `state`.
async fn wait_for(proxy: &Haproxy, name: &str, state: State) {
    proxy
        .wait_for_state(name, state, STATE_LIMIT)
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", proxy.log_tail()));
}

/// Stops the proxy softly, its client gone first: HAProxy 2.6's soft stop closes idle
/// keep-alive connections at once, but not a connection that has not sent a request yet (such
/// as a spare a client pool opened), which holds it until `hard-stop-after` (5 s).
fn stop(proxy: Haproxy, http: Http) {
    drop(http);
    let status = proxy.stop();
    assert!(status.success(), "{status}");
}

/// `kill(pid, 0)`: whether a process with this id exists (a zombie still does).
fn exists(pid: u32) -> bool {
    let pid =
        Pid::from_raw(i32::try_from(pid).expect("a pid fits in i32")).expect("a pid is not 0");
    match test_kill_process(pid) {
        Ok(()) => true,
        Err(Errno::SRCH) => false,
        Err(error) => panic!("kill({pid:?}, 0): {error}"),
    }
}

/// Microseconds since the Unix epoch.
fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_micros()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_reach_only_servers_whose_checks_pass_and_carry_the_stamp() {
    let Some(proxy) = launch(
        "requests_reach_only_servers_whose_checks_pass_and_carry_the_stamp",
        3,
    )
    .await
    else {
        return;
    };
    let (a, b) = (Backend::new("a", true), Backend::new("b", false));
    let (server_a, server_b) = (serve(&a).await, serve(&b).await);
    add(&proxy, &a, &server_a, State::Up).await;
    let http = Http::new(&proxy);
    // Not ready: DOWN after its first check, and sent nothing before it either, while requests
    // keep coming.
    let added = AtomicBool::new(false);
    let adding = async {
        add(&proxy, &b, &server_b, State::Down).await;
        added.store(true, Ordering::SeqCst);
    };
    let sending = async {
        let mut names = Vec::new();
        while !added.load(Ordering::SeqCst) {
            names.extend(http.whoami(1).await);
        }
        names
    };
    let ((), names) = tokio::join!(adding, sending);
    assert!(names.iter().all(|name| name == "a"), "{names:?}");
    assert_eq!(b.served(), 0, "a server not ready is sent nothing");
    let servers = proxy.servers().await.expect("the servers");
    assert_eq!(servers.len(), 2, "{servers:?}");
    assert_eq!(
        (servers[0].check_status.as_str(), servers[0].check_code),
        ("L7OK", Some(200)),
        "{servers:?}"
    );
    assert_eq!(
        (servers[1].check_status.as_str(), servers[1].check_code),
        ("L7STS", Some(503)),
        "{servers:?}"
    );

    let names = http.whoami(20).await;
    assert!(names.iter().all(|name| name == "a"), "{names:?}");
    assert_eq!(b.served(), 0, "a DOWN server is sent nothing");

    // The stamp: HAProxy's, in µs since the epoch, replacing the client's.
    let before = now_micros();
    let reply = http
        .get_with("/whoami", &[(REQUEST_START_HEADER, "t=1")])
        .await;
    let after = now_micros();
    let stamp = reply
        .header(SEEN_STAMP)
        .expect("the backend echoes the stamp");
    let digits = stamp.strip_prefix("t=").expect("t=<µs>");
    assert_eq!(digits.len(), 16, "{stamp:?}");
    let micros: u128 = digits.parse().expect("digits");
    assert!(
        micros + 1_000_000 >= before && micros <= after + 1_000_000,
        "{stamp:?} not within a second of [{before}, {after}]"
    );

    b.ready.store(true, Ordering::SeqCst);
    wait_for(&proxy, "b", State::Up).await;
    let names = http.whoami(20).await;
    let to_b = names.iter().filter(|name| *name == "b").count();
    assert!(
        0 < to_b && to_b < 20,
        "both UP servers get requests: {names:?}"
    );

    // HAProxy's sessions are the backends' requests.
    let servers = proxy.servers().await.expect("the servers");
    for (server, backend) in servers.iter().zip([&a, &b]) {
        assert_eq!(server.name, backend.name);
        assert_eq!(server.total_sessions, backend.served(), "{servers:?}");
        assert_eq!(server.current_sessions, 0, "{servers:?}");
    }
    stop(proxy, http);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_server_finishes_its_request_and_a_removed_one_is_gone() {
    let Some(proxy) = launch(
        "a_drained_server_finishes_its_request_and_a_removed_one_is_gone",
        3,
    )
    .await
    else {
        return;
    };
    let (a, b) = (Backend::new("a", true), Backend::new("b", true));
    let (server_a, server_b) = (serve(&a).await, serve(&b).await);
    add(&proxy, &a, &server_a, State::Up).await;
    add(&proxy, &b, &server_b, State::Up).await;
    let http = Http::new(&proxy);

    // A request in flight on one of them: that one is drained.
    let slow = tokio::spawn({
        let http = Http::new(&proxy);
        async move { http.get("/slow").await }
    });
    eventually(
        "the slow request reaches a backend",
        || a.slow_entered.load(Ordering::SeqCst) + b.slow_entered.load(Ordering::SeqCst) == 1,
        || "no backend has it".to_owned(),
    )
    .await;
    let (busy, other) = if a.slow_entered.load(Ordering::SeqCst) == 1 {
        (&a, &b)
    } else {
        (&b, &a)
    };
    proxy.drain(busy.name).await.expect("drained");
    let drained = proxy.server(busy.name).await.expect("the drained server");
    assert_eq!(drained.state, State::Drain, "{drained:?}");
    assert_eq!(drained.current_sessions, 1, "{drained:?}");

    let served_by_busy = busy.served();
    let names = http.whoami(10).await;
    assert!(names.iter().all(|name| name == other.name), "{names:?}");
    assert_eq!(
        busy.served(),
        served_by_busy,
        "a drained server gets no new request"
    );

    // Removal waits for the request in flight: the server is in maintenance, still listed,
    // until the request is released and done.
    let removing = proxy.remove(busy.name);
    let releasing = async {
        let waiting = proxy
            .wait_for_state(busy.name, State::Maint, STATE_LIMIT)
            .await
            .expect("in maintenance while it is removed");
        assert_eq!(waiting.current_sessions, 1, "{waiting:?}");
        busy.release.add_permits(1);
    };
    let (removed, ()) = tokio::join!(removing, releasing);
    removed.unwrap_or_else(|error| panic!("{error}\n{}", proxy.log_tail()));
    let slow = bounded("the slow request", slow)
        .await
        .expect("the slow request's task");
    assert_eq!(slow.status, StatusCode::OK, "{slow:?}");
    assert_eq!(slow.body, busy.name, "finished on the drained server");

    let servers = proxy.servers().await.expect("the servers");
    let names: Vec<&str> = servers.iter().map(|server| server.name.as_str()).collect();
    assert_eq!(names, [other.name]);
    let names = http.whoami(4).await;
    assert!(names.iter().all(|name| name == other.name), "{names:?}");

    // HAProxy's refusals, quoted.
    match proxy.remove(busy.name).await {
        Err(ApiError::Refused { command, answer }) => {
            assert_eq!(
                command,
                format!("set server replicas/{} state maint", busy.name)
            );
            assert_eq!(answer, "No such server.");
        }
        other => panic!("removed twice: {other:?}"),
    }
    match proxy.add_server(other.name, server_a.addr()).await {
        Err(ApiError::Refused { answer, .. }) => {
            assert!(answer.starts_with("Already exists a server"), "{answer}");
        }
        other => panic!("added twice: {other:?}"),
    }
    assert!(matches!(
        proxy.drain("a;b").await,
        Err(ApiError::InvalidName(_))
    ));
    stop(proxy, http);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_503_passes_through_and_the_proxy_marks_its_own() {
    let Some(proxy) = launch("a_server_503_passes_through_and_the_proxy_marks_its_own", 3).await
    else {
        return;
    };
    let (a, b) = (Backend::new("a", true), Backend::new("b", true));
    let (server_a, server_b) = (serve(&a).await, serve(&b).await);
    add(&proxy, &a, &server_a, State::Up).await;
    add(&proxy, &b, &server_b, State::Up).await;
    let http = Http::new(&proxy);

    for _ in 0..10 {
        let reply = http.get("/refuse").await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
        assert!(reply.body.starts_with("refused by "), "{reply:?}");
        assert_eq!(reply.header("retry-after"), Some("1"), "{reply:?}");
        assert!(!reply.made_by_proxy(), "{reply:?}");
    }
    // Each refusal was the only try: none was sent on to the other server.
    let refused = a.refused.load(Ordering::SeqCst) + b.refused.load(Ordering::SeqCst);
    assert_eq!(refused, 10);
    assert!(a.refused.load(Ordering::SeqCst) > 0 && b.refused.load(Ordering::SeqCst) > 0);

    // No server UP: HAProxy's own 503, marked, and no backend sees the request.
    for backend in [&a, &b] {
        backend.ready.store(false, Ordering::SeqCst);
    }
    for backend in [&a, &b] {
        wait_for(&proxy, backend.name, State::Down).await;
    }
    let served = a.served() + b.served();
    let reply = http.get("/whoami").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
    assert_eq!(reply.header(PROXY_ERROR_HEADER), Some("503"), "{reply:?}");
    assert!(reply.body.contains(NO_SERVER), "{reply:?}");
    assert_eq!(a.served() + b.served(), served);

    // No server at all: the same.
    for backend in [&a, &b] {
        proxy.remove(backend.name).await.expect("removed");
    }
    assert_eq!(proxy.servers().await.expect("the servers"), []);
    let reply = http.get("/whoami").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
    assert_eq!(reply.header(PROXY_ERROR_HEADER), Some("503"), "{reply:?}");
    assert!(reply.body.contains(NO_SERVER), "{reply:?}");
    stop(proxy, http);
}

/// Adds `live` and `dead`, then stops `dead`'s server while HAProxy still holds it UP (its
/// checks disabled), and GETs `/whoami` `count` times.
async fn requests_with_a_dead_server(proxy: &Haproxy, count: usize) -> Vec<Reply> {
    let (live, dead) = (Backend::new("live", true), Backend::new("dead", true));
    let (live_server, dead_server) = (serve(&live).await, serve(&dead).await);
    add(proxy, &live, &live_server, State::Up).await;
    add(proxy, &dead, &dead_server, State::Up).await;
    let answer = proxy
        .command("disable health replicas/dead")
        .await
        .expect("checks disabled");
    assert_eq!(answer.trim(), "", "{answer:?}");
    dead_server.shutdown().await;
    let http = Http::new(proxy);
    let mut replies = Vec::with_capacity(count);
    for _ in 0..count {
        replies.push(http.get("/whoami").await);
    }
    let dead_row = proxy.server("dead").await.expect("the dead server");
    assert_eq!(dead_row.state, State::Up, "{dead_row:?}");
    assert_eq!(dead.served(), 0);
    replies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_tried_again_on_another_server() {
    let test = "a_refused_connection_is_tried_again_on_another_server";
    let Some(proxy) = launch(test, 3).await else {
        return;
    };
    let replies = requests_with_a_dead_server(&proxy, 6).await;
    for reply in &replies {
        assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
        assert_eq!(reply.body, "live", "{reply:?}");
    }
    // Counted as redispatched, not as failed: no connection error reached a client.
    let dead = proxy.server("dead").await.expect("the dead server");
    assert!(dead.redispatches > 0, "{dead:?}");
    assert_eq!(dead.connection_errors, 0, "{dead:?}");
    assert!(proxy.stop().success());

    // Without retries, a refused connection is HAProxy's own 503.
    let Some(proxy) = launch(test, 0).await else {
        return;
    };
    let replies = requests_with_a_dead_server(&proxy, 6).await;
    let failed: Vec<&Reply> = replies
        .iter()
        .filter(|reply| reply.status != StatusCode::OK)
        .collect();
    assert!(!failed.is_empty(), "{replies:?}");
    for reply in &failed {
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
        assert_eq!(reply.header(PROXY_ERROR_HEADER), Some("503"), "{reply:?}");
    }
    let dead = proxy.server("dead").await.expect("the dead server");
    assert_eq!(dead.connection_errors, failed.len() as u64, "{dead:?}");
    assert_eq!(dead.redispatches, 0, "{dead:?}");
    assert!(proxy.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_stop_lets_the_request_in_flight_finish() {
    let Some(proxy) = launch("a_soft_stop_lets_the_request_in_flight_finish", 3).await else {
        return;
    };
    let (pid, dir, addr) = (proxy.pid(), proxy.dir().to_owned(), proxy.addr());
    assert!(exists(pid), "HAProxy runs as pid {pid}");
    assert!(dir.join("admin.sock").exists(), "{dir:?}");
    let a = Backend::new("a", true);
    let server_a = serve(&a).await;
    add(&proxy, &a, &server_a, State::Up).await;
    let slow = tokio::spawn({
        let http = Http::new(&proxy);
        async move { http.get("/slow").await }
    });
    eventually(
        "the slow request reaches the backend",
        || a.slow_entered.load(Ordering::SeqCst) == 1,
        || "not yet".to_owned(),
    )
    .await;

    let stopping = tokio::task::spawn_blocking(move || proxy.stop());
    // The listener closes at once; the request in flight goes on.
    let closed = async {
        while tokio::net::TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    bounded("the frontend closes", closed).await;
    a.release.add_permits(1);
    let slow = bounded("the slow request", slow)
        .await
        .expect("the slow request's task");
    assert_eq!(slow.status, StatusCode::OK, "{slow:?}");
    assert_eq!(slow.body, "a");
    let status = bounded("the stop", stopping)
        .await
        .expect("the stop's task");
    assert!(status.success(), "{status}");
    assert!(!exists(pid), "pid {pid} reaped");
    assert!(!dir.exists(), "{dir:?} removed");

    // Dropped: stopped at once, and its directory removed.
    let Some(proxy) = launch("a_soft_stop_lets_the_request_in_flight_finish", 3).await else {
        return;
    };
    let (pid, dir) = (proxy.pid(), proxy.dir().to_owned());
    drop(proxy);
    assert!(!exists(pid), "pid {pid} reaped");
    assert!(!dir.exists(), "{dir:?} removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_options_make_a_configuration_haproxy_takes() {
    if haproxy::require("the_other_options_make_a_configuration_haproxy_takes").is_none() {
        return;
    }
    let config = HaproxyConfig {
        backend: "app.v2".to_owned(),
        health_path: "/readyz?probe=haproxy".to_owned(),
        check_interval: Duration::from_millis(100),
        rise: 1,
        fall: 1,
        request_start: false,
        retries: 0,
        balance: Balance::LeastConn,
        access_log: true,
        ..HaproxyConfig::default()
    };
    let proxy = haproxy::launch(config.clone())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(proxy.config(), &config);
    let a = Backend::new("a", true);
    let server_a = serve(&a).await;
    add(&proxy, &a, &server_a, State::Up).await;
    let http = Http::new(&proxy);
    let reply = http
        .get_with("/whoami", &[(REQUEST_START_HEADER, "t=1")])
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(
        reply.header(SEEN_STAMP),
        Some("t=1"),
        "the client's, unstamped"
    );
    let answer = proxy.command("show info").await.expect("show info");
    assert!(answer.contains("\nVersion: "), "{answer}");
    // The access log: one line per request, with the backend and server.
    eventually(
        "the request is logged",
        || proxy.log_tail().contains("app.v2/a "),
        || proxy.log_tail(),
    )
    .await;
    stop(proxy, http);
}
