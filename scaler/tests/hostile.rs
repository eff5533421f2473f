//! The scaler against hostile and broken callers, in process: each test sends the input that
//! used to cost time, memory or trust, and checks the bounded answer.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_scaler::service::{ScalerService, ServiceOptions};
use admit_scaler::transport::grpc::GrpcLimits;
use admit_scaler::transport::http::{self, HttpLimits};
use admit_scaler::transport::tls::{ReloadingTls, TlsFiles};
use admit_testkit::wait::{bounded, eventually};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use support::{
    FakePrometheus, Reply, Scaler, connect_from, loopback, metadata, metrics_request, object,
    serve_grpc,
};

/// Every message the scaler answers stays below this, whatever it was sent.
const MESSAGE_LIMIT: usize = 2048;

fn thirty_erlangs(prometheus: &FakePrometheus) {
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
}

#[tokio::test]
async fn names_must_be_kubernetes_names() {
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let metadata = metadata("http://127.0.0.1:9", &[]);
    let long = "n".repeat(20 << 10);
    for (namespace, name) in [
        ("shop", long.as_str()),
        (long.as_str(), "checkout"),
        ("shop", ""),
        ("", "checkout"),
        ("shop", "Checkout"),
        ("shop", "check/out"),
        ("shop\n", "checkout"),
        ("sh.op", "checkout"),
    ] {
        let mut trigger = object(name, metadata.clone());
        trigger.namespace = namespace.to_owned();
        let status = scaler.client.get_metric_spec(trigger).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
        assert!(
            status.message().len() < MESSAGE_LIMIT,
            "{}",
            status.message().len()
        );
        assert!(!status.message().contains('\n'), "{:?}", status.message());
    }
    assert_eq!(scaler.service.tracked_objects(), 0);
}

/// `GetMetricSpec`'s refusal of a valid trigger with `count` more keys named by `key`.
async fn refused_with_unknown_keys(count: usize, key: impl Fn(usize) -> String) -> tonic::Status {
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let mut metadata = metadata("http://127.0.0.1:9", &[]);
    for i in 0..count {
        metadata.insert(key(i), "1".to_owned());
    }
    scaler
        .client
        .get_metric_spec(object("checkout", metadata))
        .await
        .unwrap_err()
}

#[tokio::test]
async fn oversized_requests_are_refused_before_they_are_decoded() {
    // 200 000 unknown keys: about 4 MB.
    let status = refused_with_unknown_keys(200_000, |i| format!("unknown{i}")).await;
    assert_eq!(status.code(), Code::OutOfRange, "{}", status.message());
    assert!(status.message().len() < MESSAGE_LIMIT);
}

#[tokio::test]
async fn many_unknown_keys_within_the_size_limit_are_counted() {
    let status = refused_with_unknown_keys(1000, |i| format!("unknown{i}\u{1b}[31m")).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    let message = status.message();
    assert!(message.len() < 4096, "{} bytes", message.len());
    assert!(message.contains("more unknown keys"), "{message}");
    assert!(!message.contains('\u{1b}'), "{message:?}");
}

#[tokio::test]
async fn triggers_beyond_the_cap_are_resource_exhausted() {
    let prometheus = FakePrometheus::start().await;
    thirty_erlangs(&prometheus);
    let mut scaler = Scaler::start(ServiceOptions {
        max_triggers: 3,
        ..ServiceOptions::default()
    })
    .await;
    for name in ["a", "b", "c"] {
        let trigger = object(name, metadata(&prometheus.url(), &[]));
        scaler
            .client
            .get_metrics(metrics_request(trigger))
            .await
            .unwrap();
    }
    let status = scaler
        .client
        .get_metrics(metrics_request(object(
            "d",
            metadata(&prometheus.url(), &[]),
        )))
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::ResourceExhausted,
        "{}",
        status.message()
    );
    assert!(
        status.message().contains("--max-triggers"),
        "{}",
        status.message()
    );
    // Its spec needs no state, and the triggers tracked still answer.
    scaler
        .client
        .get_metric_spec(object("d", metadata(&prometheus.url(), &[])))
        .await
        .unwrap();
    let known = object("b", metadata(&prometheus.url(), &[]));
    assert!(
        scaler
            .client
            .is_active(known)
            .await
            .unwrap()
            .get_ref()
            .result
    );
    assert_eq!(scaler.service.tracked_objects(), 3);
    assert_eq!(prometheus.asked("lambda"), 3);
}

#[tokio::test]
async fn streams_beyond_the_cap_are_resource_exhausted() {
    let prometheus = FakePrometheus::start().await;
    thirty_erlangs(&prometheus);
    let mut scaler = Scaler::start(ServiceOptions {
        max_triggers: 2,
        ..ServiceOptions::default()
    })
    .await;
    let trigger = object("checkout", metadata(&prometheus.url(), &[]));
    let mut first = scaler
        .client
        .stream_is_active(trigger.clone())
        .await
        .unwrap()
        .into_inner();
    let _second = scaler
        .client
        .stream_is_active(trigger.clone())
        .await
        .unwrap();
    let status = scaler
        .client
        .stream_is_active(trigger.clone())
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::ResourceExhausted,
        "{}",
        status.message()
    );
    assert!(first.message().await.unwrap().unwrap().result);
    // A stream that ends frees its place.
    drop(first);
    eventually(
        "the stream is released",
        || scaler.service.open_streams() == 1,
        || format!("{} streams open", scaler.service.open_streams()),
    )
    .await;
    scaler.client.stream_is_active(trigger).await.unwrap();
}

#[tokio::test]
async fn a_caller_that_gives_up_does_not_start_a_second_decision() {
    let prometheus = FakePrometheus::start().await;
    prometheus.set(
        "lambda",
        Reply::value("120").after(Duration::from_millis(800)),
    );
    prometheus.set("s", Reply::value("0.25"));
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let trigger = object("checkout", metadata(&prometheus.url(), &[]));
    // KEDA's polls that give up (a client deadline), one after the other.
    for _ in 0..3 {
        let mut request = tonic::Request::new(metrics_request(trigger.clone()));
        request.set_timeout(Duration::from_millis(100));
        let status = scaler.client.get_metrics(request).await.unwrap_err();
        assert!(
            matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
            "{status:?}"
        );
    }
    // The next caller gets the one running decision's answer.
    let values = bounded(
        "the decision",
        scaler.client.get_metrics(metrics_request(trigger)),
    )
    .await
    .unwrap();
    assert_eq!(values.get_ref().metric_values[0].metric_value, 37);
    assert_eq!(prometheus.asked("lambda"), 1);
}

#[tokio::test]
async fn stopping_ends_the_rpcs_that_wait_for_a_decision() {
    let prometheus = FakePrometheus::start().await;
    prometheus.set(
        "lambda",
        Reply::value("120").after(Duration::from_secs(3600)),
    );
    prometheus.set("s", Reply::value("0.25"));
    let scaler = Scaler::start(ServiceOptions {
        client: admit_scaler::prometheus::ClientOptions {
            timeout: Duration::from_secs(3600),
            ..Default::default()
        },
        ..ServiceOptions::default()
    })
    .await;
    let mut client = scaler.client.clone();
    let trigger = object("checkout", metadata(&prometheus.url(), &[]));
    let waiting = tokio::spawn(async move { client.get_metrics(metrics_request(trigger)).await });
    eventually(
        "the query is asked",
        || prometheus.asked("lambda") == 1,
        || format!("asked {} times", prometheus.asked("lambda")),
    )
    .await;
    scaler.service.shut_down();
    let status = bounded("the answer", waiting).await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
}

/// A TCP relay that can stop forwarding without closing either side: a peer that vanished
/// (a node gone, a dropped NAT entry), as the server sees it.
struct Relay {
    addr: SocketAddr,
    frozen: Arc<AtomicBool>,
}

impl Relay {
    async fn start(to: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&frozen);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(to).await.unwrap();
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(forward(client_read, server_write, Arc::clone(&flag)));
                tokio::spawn(forward(server_read, client_write, Arc::clone(&flag)));
            }
        });
        Relay { addr, frozen }
    }

    fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }
}

/// Copies until frozen, then holds both ends open, silent.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buffer = vec![0; 16 << 10];
    loop {
        let Ok(read) = from.read(&mut buffer).await else {
            return;
        };
        if read == 0 || frozen.load(Ordering::SeqCst) {
            break;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
    std::future::pending::<()>().await;
    drop((from, to));
}

#[tokio::test]
async fn a_peer_that_vanishes_releases_its_stream() {
    let prometheus = FakePrometheus::start().await;
    thirty_erlangs(&prometheus);
    let service = ScalerService::new(ServiceOptions::default());
    // The scaler's limits with pings every 100 ms, answered within 100 ms.
    let limits = GrpcLimits {
        http2_keepalive_interval: Duration::from_millis(100),
        http2_keepalive_timeout: Duration::from_millis(100),
        ..GrpcLimits::new(100, Duration::from_secs(30))
    };
    let addr = serve_grpc(service.clone(), None, limits).await;
    let relay = Relay::start(addr).await;
    let mut keda = bounded(
        "connecting",
        ExternalScalerClient::connect(format!("http://{}", relay.addr)),
    )
    .await
    .unwrap();
    let trigger = object("checkout", metadata(&prometheus.url(), &[]));
    let mut stream = keda.stream_is_active(trigger).await.unwrap().into_inner();
    assert!(stream.message().await.unwrap().unwrap().result);
    assert_eq!(service.open_streams(), 1);
    relay.freeze();
    eventually(
        "the stream is released",
        || service.open_streams() == 0,
        || format!("{} streams open", service.open_streams()),
    )
    .await;
}

/// `GET /healthz` from `from`: the answer, empty if the connection was refused (closed before
/// anything was read).
async fn healthz_from(from: std::net::IpAddr, addr: SocketAddr) -> String {
    let mut probe = connect_from(from, addr).await;
    let _ = probe
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    let mut answer = Vec::new();
    let _ = bounded("the answer", probe.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Probes `/healthz` from `from` until it is answered: the answer, and the probes refused
/// before.
async fn healthz_once_admitted(from: std::net::IpAddr, addr: SocketAddr) -> (String, usize) {
    let mut refused = 0;
    let answer = bounded("a probe admitted", async {
        loop {
            let answer = healthz_from(from, addr).await;
            if !answer.is_empty() {
                break answer;
            }
            refused += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    (answer, refused)
}

#[tokio::test]
async fn a_slow_http_client_is_dropped_and_connections_are_capped() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok\n" }));
    let limits = HttpLimits {
        // Far beyond the test's bounds: only the cap closes the slow client.
        header_read_timeout: Duration::from_secs(60),
        max_connections: 1,
        ..HttpLimits::default()
    };
    tokio::spawn(http::serve(
        listener,
        router,
        limits,
        std::future::pending(),
    ));

    // A client that sends half a head and then nothing holds the one connection...
    let mut slow = connect_from(loopback(2), addr).await;
    slow.write_all(b"GET /healthz HT").await.unwrap();
    // ...until a probe comes once it is a second old: it has no request in flight, so it is
    // closed to admit the probe (had it been alone, at its deadline).
    let started = Instant::now();
    let (answer, refused) = healthz_once_admitted(loopback(3), addr).await;
    println!(
        "a probe behind a slow client (cap 1): answered after {:?}, {refused} probes refused",
        started.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    let mut rest = Vec::new();
    bounded("the slow client's close", slow.read_to_end(&mut rest))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_answer_not_read_within_its_deadline_drops_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // 16 MiB in 64 KiB chunks, as /metrics sends its page.
    let router = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(|| async {
                let chunks =
                    (0..256).map(|_| Ok::<_, std::convert::Infallible>(vec![b'x'; 64 << 10]));
                axum::body::Body::from_stream(tokio_stream::iter(chunks))
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok\n" }));
    let request_timeout = Duration::from_secs(2);
    // One connection: while the reader's answer is in flight, nobody else gets in.
    let limits = HttpLimits {
        request_timeout,
        max_connections: 1,
        ..HttpLimits::default()
    };
    tokio::spawn(http::serve(
        listener,
        router,
        limits,
        std::future::pending(),
    ));
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind(SocketAddr::new(loopback(2), 0)).unwrap();
    let mut reader = socket.connect(addr).await.unwrap();
    reader
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    // It reads nothing. A probe is refused while the answer is in flight, and admitted once
    // the answer's deadline dropped the reader's connection.
    assert_eq!(
        healthz_from(loopback(3), addr).await,
        "",
        "refused at first"
    );
    let (answer, refused) = healthz_once_admitted(loopback(3), addr).await;
    println!(
        "a probe behind a reader that never reads (cap 1, deadline {request_timeout:?}): \
         answered after {:?}, {} probes refused",
        started.elapsed(),
        refused + 1
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    // The reader's connection was closed with far less than the answer sent.
    let mut received = Vec::new();
    let read = bounded("the close", reader.read_to_end(&mut received)).await;
    assert!(
        read.is_err() || received.len() < 8 << 20,
        "{} bytes",
        received.len()
    );
}

/// A temporary directory for one test's files.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("admit-hostile-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CA, and a leaf certificate it signed for `localhost`: (CA PEM, leaf PEM, leaf key PEM).
fn issued(client: bool) -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    leaf.extended_key_usages = vec![if client {
        ExtendedKeyUsagePurpose::ClientAuth
    } else {
        ExtendedKeyUsagePurpose::ServerAuth
    }];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

fn write_all(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// A channel to `port` over TLS trusting `ca`, presenting `identity` if given.
async fn connect_tls(
    port: u16,
    ca: &str,
    identity: Option<(&str, &str)>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    bounded(
        "a TLS connection",
        Channel::from_shared(format!("https://localhost:{port}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect(),
    )
    .await
}

/// One RPC that needs no decision: the spec of a valid trigger.
async fn spec(channel: Channel) -> Result<(), tonic::Status> {
    let trigger = object("checkout", metadata("http://127.0.0.1:9", &[]));
    ExternalScalerClient::new(channel)
        .get_metric_spec(trigger)
        .await
        .map(drop)
}

#[tokio::test]
async fn certificates_rotate_without_dropping_a_call() {
    let dir = temp_dir("rotate");
    let (server_ca_a, cert_a, key_a) = issued(false);
    let (client_ca_a, client_a, client_key_a) = issued(true);
    write_all(
        &dir,
        &[
            ("tls.crt", &cert_a),
            ("tls.key", &key_a),
            ("ca.crt", &client_ca_a),
        ],
    );
    let files = TlsFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: Some(dir.join("ca.crt")),
    };
    let tls = Arc::new(ReloadingTls::load(files).unwrap());
    let port = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        Some(Arc::clone(&tls)),
        GrpcLimits::new(100, Duration::from_secs(30)),
    )
    .await
    .port();

    let before = connect_tls(port, &server_ca_a, Some((&client_a, &client_key_a)))
        .await
        .unwrap();
    spec(before.clone()).await.unwrap();
    // Without a client certificate, or with one of another CA: refused.
    let (_, client_b, client_key_b) = {
        let (ca, cert, key) = issued(true);
        (ca, cert, key)
    };
    for identity in [None, Some((client_b.as_str(), client_key_b.as_str()))] {
        let refused = match connect_tls(port, &server_ca_a, identity).await {
            Ok(channel) => spec(channel).await.is_err(),
            Err(_) => true,
        };
        assert!(refused, "{identity:?}");
    }
    assert!(!tls.reload().unwrap(), "unchanged files");

    // A half-written set is refused and the last good one stays.
    std::fs::write(dir.join("tls.crt"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    assert!(tls.reload().is_err());
    spec(
        connect_tls(port, &server_ca_a, Some((&client_a, &client_key_a)))
            .await
            .unwrap(),
    )
    .await
    .unwrap();

    // The rotation: a new certificate, key and client CA.
    let (server_ca_c, cert_c, key_c) = issued(false);
    let (client_ca_c, client_c, client_key_c) = issued(true);
    write_all(
        &dir,
        &[
            ("tls.crt", &cert_c),
            ("tls.key", &key_c),
            ("ca.crt", &client_ca_c),
        ],
    );
    assert!(tls.reload().unwrap());
    // The connection made before still works.
    spec(before).await.unwrap();
    // New connections see the new certificate and require the new client CA.
    spec(
        connect_tls(port, &server_ca_c, Some((&client_c, &client_key_c)))
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    for (ca, identity) in [
        (&server_ca_a, (client_a.as_str(), client_key_a.as_str())),
        (&server_ca_c, (client_a.as_str(), client_key_a.as_str())),
    ] {
        let refused = match connect_tls(port, ca, Some(identity)).await {
            Ok(channel) => spec(channel).await.is_err(),
            Err(_) => true,
        };
        assert!(refused);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A certificate for `localhost` in files under `name`: the server's TLS, and the CA a client
/// trusts.
fn localhost_tls(name: &str) -> (Arc<ReloadingTls>, String) {
    let dir = temp_dir(name);
    let (ca, cert, key) = issued(false);
    write_all(&dir, &[("tls.crt", &cert), ("tls.key", &key)]);
    let tls = ReloadingTls::load(TlsFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: None,
    })
    .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    (Arc::new(tls), ca)
}

#[tokio::test]
async fn a_stalled_tls_handshake_is_dropped() {
    let (tls, _) = localhost_tls("handshake");
    let limits = GrpcLimits {
        handshake_timeout: Duration::from_millis(200),
        ..GrpcLimits::new(100, Duration::from_secs(30))
    };
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        Some(tls),
        limits,
    )
    .await;
    // Connects, and never says hello: the server closes it.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut rest = Vec::new();
    bounded("the close", silent.read_to_end(&mut rest))
        .await
        .unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn silent_connections_cannot_keep_a_tls_client_out() {
    let (tls, ca) = localhost_tls("silent");
    // Their handshakes would only time out after a minute, long after the test's bound.
    let limits = GrpcLimits {
        handshake_timeout: Duration::from_secs(60),
        max_connections: 32,
        max_connections_per_peer: 8,
        ..GrpcLimits::new(100, Duration::from_secs(30))
    };
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        Some(tls),
        limits,
    )
    .await;
    // 50 from each of four addresses: each keeps eight, which fill the server; the others
    // are refused at once.
    let mut silent = Vec::new();
    for from in 2..6 {
        for _ in 0..50 {
            silent.push(connect_from(loopback(from), addr).await);
        }
    }
    let mut byte = [0];
    for (i, connection) in silent.iter_mut().enumerate() {
        if i % 50 >= 8 {
            let read = bounded("a refused connection's close", connection.read(&mut byte)).await;
            assert!(matches!(read, Ok(0) | Err(_)), "{i}: {read:?}");
        }
    }
    // Once they are a second old (silent connections are safe until then), the oldest makes
    // room for a TLS client, at once.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let channel = connect_tls(addr.port(), &ca, None).await.unwrap();
    spec(channel).await.unwrap();
    println!(
        "a TLS call behind 200 silent connections (cap 32, 8 per address): {:?}",
        started.elapsed()
    );
    // The oldest silent connection was closed for it, long before its handshake deadline.
    let closed = bounded(
        "the oldest silent connection closes",
        silent[0].read(&mut byte),
    )
    .await
    .unwrap();
    assert_eq!(closed, 0);
}
