//! The gRPC server's connections and request budget, in process: idle and silent connections
//! closed, a new client admitted at the cap, busy connections unable to keep others out, an
//! answer its client never takes closing its connection, the largest valid trigger accepted,
//! and partial messages on one connection unable to shut another out.
//!
//! Each peer connects from its own loopback address, as KEDA, kubelet and an attacker would
//! from their own pods and nodes.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use admit_scaler::metadata::longest_metadata;
use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use admit_scaler::service::{ScalerService, ServiceOptions, max_request_bytes};
use admit_scaler::transport::grpc::GrpcLimits;
use admit_testkit::wait::{bounded, eventually};
use bytes::Bytes;
use prost::Message;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::Code;
use tonic::transport::Channel;

use support::{
    FakePrometheus, RawCalls, Reply, connect_from, grpc_body, grpc_request, h2_from, loopback,
    metadata, object, raw_call, serve_grpc,
};

/// How long a connection that never made a call is safe from being closed to make room
/// (`transport::connections::FRESH`).
const FRESH: Duration = Duration::from_secs(1);

const SPEC: &str = "/externalscaler.ExternalScaler/GetMetricSpec";
const STREAM: &str = "/externalscaler.ExternalScaler/StreamIsActive";

fn limits() -> GrpcLimits {
    GrpcLimits::new(100, Duration::from_secs(30))
}

async fn keda(addr: std::net::SocketAddr) -> ExternalScalerClient<Channel> {
    bounded(
        "connecting",
        ExternalScalerClient::connect(format!("http://{addr}")),
    )
    .await
    .unwrap()
}

/// A spec call, which needs no decision.
async fn spec(client: &mut ExternalScalerClient<Channel>) -> Result<(), tonic::Status> {
    let trigger = object("checkout", metadata("http://127.0.0.1:9", &[]));
    bounded("a spec", client.get_metric_spec(trigger))
        .await
        .map(drop)
}

/// A spec call on a raw HTTP/2 connection: its code, or why the connection failed it.
async fn raw_spec(client: &mut h2::client::SendRequest<Bytes>) -> Result<Code, h2::Error> {
    let trigger = object("checkout", metadata("http://127.0.0.1:9", &[]));
    raw_call(client, SPEC, &trigger).await
}

/// Thirty erlangs: λ = 120/s, s = 0.25 s.
async fn thirty_erlangs() -> FakePrometheus {
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    prometheus
}

/// A `StreamIsActive` stream on its own connection from `from`, its first message received:
/// the connection's client and task, and the stream's two halves, all to keep.
struct OpenStream {
    client: h2::client::SendRequest<Bytes>,
    connection: JoinHandle<Result<(), h2::Error>>,
    _halves: (h2::SendStream<Bytes>, h2::RecvStream),
}

impl OpenStream {
    async fn open(from: IpAddr, to: SocketAddr, prometheus: &FakePrometheus) -> Self {
        let (client, connection) = h2_from(from, to).await;
        let mut ready = bounded("a stream", client.clone().ready()).await.unwrap();
        let (answer, mut sent) = ready.send_request(grpc_request(STREAM), false).unwrap();
        let trigger = object("checkout", metadata(&prometheus.url(), &[]));
        sent.send_data(grpc_body(&trigger), true).unwrap();
        let response = bounded("the stream's head", answer).await.unwrap();
        assert_eq!(response.status(), 200);
        let mut received = response.into_body();
        let first = bounded("the first message", received.data()).await;
        assert!(first.is_some_and(|data| data.is_ok()));
        OpenStream {
            client,
            connection,
            _halves: (sent, received),
        }
    }
}

/// Whether a connection from `from` is refused: closed before the server says anything (an
/// admitted one gets the server's SETTINGS at once).
async fn refused(from: IpAddr, to: SocketAddr) -> bool {
    let mut tcp = connect_from(from, to).await;
    let mut first = [0; 64];
    matches!(
        bounded("the server's first bytes", tcp.read(&mut first)).await,
        Ok(0) | Err(_)
    )
}

#[tokio::test]
async fn a_connection_idle_too_long_is_closed_with_a_goaway() {
    let prometheus = thirty_erlangs().await;
    let idle_timeout = Duration::from_millis(300);
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        GrpcLimits {
            idle_timeout,
            ..limits()
        },
    )
    .await;
    // One connection makes a call and goes quiet; another keeps a stream open.
    let (mut quiet, quiet_connection) = h2_from(loopback(1), addr).await;
    // Before the call: its idle time starts after it.
    let started = Instant::now();
    assert_eq!(raw_spec(&mut quiet).await.unwrap(), Code::Ok);
    let mut streaming = OpenStream::open(loopback(2), addr, &prometheus).await;

    // The quiet one ends cleanly (a GOAWAY, then the close).
    bounded("the quiet connection's close", quiet_connection)
        .await
        .unwrap()
        .unwrap();
    println!("closed after {:?} idle", started.elapsed());
    assert!(started.elapsed() >= idle_timeout);
    // Three idle timeouts later the connection with a stream in flight is still open, and
    // serves another call.
    tokio::time::sleep(3 * idle_timeout).await;
    assert!(!streaming.connection.is_finished());
    assert_eq!(raw_spec(&mut streaming.client).await.unwrap(), Code::Ok);
}

#[tokio::test]
async fn a_connection_that_never_sends_the_preface_is_closed() {
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        GrpcLimits {
            handshake_timeout: Duration::from_millis(300),
            ..limits()
        },
    )
    .await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut rest = Vec::new();
    bounded("the close", silent.read_to_end(&mut rest))
        .await
        .unwrap();
    // The server's SETTINGS at most; no answer to anything.
    assert!(rest.len() < 256, "{} bytes", rest.len());
}

#[tokio::test]
async fn at_the_cap_old_silent_connections_make_room_for_a_new_client() {
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        GrpcLimits {
            max_connections: 4,
            max_connections_per_peer: 4,
            // Far longer than the test's bound: no silent connection times out by itself.
            handshake_timeout: Duration::from_secs(60),
            ..limits()
        },
    )
    .await;
    // A thousand connections that never send a byte, from one address: four are kept, the
    // others refused at once (none is a second old yet).
    let mut silent = Vec::new();
    for _ in 0..1000 {
        silent.push(connect_from(loopback(2), addr).await);
    }
    let mut byte = [0];
    for (i, connection) in silent.iter_mut().enumerate().skip(4) {
        let read = bounded("a refused connection's close", connection.read(&mut byte)).await;
        assert!(matches!(read, Ok(0) | Err(_)), "{i}: {read:?}");
    }
    // Once they are a second old, the oldest makes room for a client, at once.
    tokio::time::sleep(FRESH).await;
    let started = Instant::now();
    let (mut client, client_connection) = h2_from(loopback(1), addr).await;
    assert_eq!(raw_spec(&mut client).await.unwrap(), Code::Ok);
    println!(
        "a call behind 1000 silent connections (cap 4): {:?}",
        started.elapsed()
    );
    let mut settings = [0; 256];
    let closed = |read: std::io::Result<usize>| matches!(read, Ok(0) | Err(_));
    // It got the server's SETTINGS, then the close.
    let _ = bounded("the settings", silent[0].read(&mut settings)).await;
    assert!(closed(
        bounded("the oldest's close", silent[0].read(&mut settings)).await
    ));
    // Newcomers close the other old silent ones, not the connection that made a call.
    let mut others = Vec::new();
    for _ in 0..3 {
        others.push(connect_from(loopback(3), addr).await);
    }
    for connection in &mut silent[1..4] {
        let _ = bounded("the settings", connection.read(&mut settings)).await;
        assert!(closed(
            bounded("the close", connection.read(&mut settings)).await
        ));
    }
    assert!(!client_connection.is_finished());
    assert_eq!(raw_spec(&mut client).await.unwrap(), Code::Ok);
}

#[tokio::test]
async fn busy_connections_never_stall_admission_nor_let_one_address_fill_the_server() {
    let prometheus = thirty_erlangs().await;
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        GrpcLimits {
            max_connections: 4,
            max_connections_per_peer: 2,
            ..limits()
        },
    )
    .await;
    // Two addresses keep two connections each, each busy with a stream.
    let mut streams = Vec::new();
    for from in [2, 3] {
        // A third from the same address is refused: its own two are busy.
        for _ in 0..2 {
            streams.push(OpenStream::open(loopback(from), addr, &prometheus).await);
        }
        assert!(refused(loopback(from), addr).await);
    }
    // The server is full of busy connections: a newcomer from elsewhere is refused at once,
    // rather than waiting (and holding up every connection after it) for one to end.
    assert!(refused(loopback(4), addr).await);
    // A stream ends: the next newcomer from elsewhere gets in, and is served...
    drop(streams.pop());
    let started = Instant::now();
    let (mut probe, _connection) = loop {
        if !refused(loopback(4), addr).await {
            break h2_from(loopback(4), addr).await;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "still refused");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(raw_spec(&mut probe).await.unwrap(), Code::Ok);
    // ...while the address at its own cap is still refused.
    assert!(refused(loopback(2), addr).await);
    assert!(
        streams
            .iter()
            .all(|stream| !stream.connection.is_finished())
    );
}

#[tokio::test]
async fn an_answer_its_client_never_takes_closes_its_connection_but_a_stream_stays() {
    let prometheus = thirty_erlangs().await;
    let answer_timeout = Duration::from_millis(500);
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        GrpcLimits {
            answer_timeout,
            ..limits()
        },
    )
    .await;
    let mut streaming = OpenStream::open(loopback(3), addr, &prometheus).await;
    // A client that grants no flow-control window: its answer's message can never be sent,
    // though HTTP/2 pings are answered.
    let tcp = connect_from(loopback(2), addr).await;
    let (stalled, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    let stalled_connection = tokio::spawn(connection);
    let started = Instant::now();
    let mut ready = bounded("a stream", stalled.ready()).await.unwrap();
    let (answer, mut body) = ready.send_request(grpc_request(SPEC), false).unwrap();
    let trigger = object("checkout", metadata("http://127.0.0.1:9", &[]));
    body.send_data(grpc_body(&trigger), true).unwrap();
    // The answer's head comes (it needs no window); its message never does.
    let head = bounded("the answer's head", answer).await.unwrap();
    assert_eq!(head.status(), 200);
    // Past its deadline the connection is closed: a GOAWAY, then dropped.
    let _ = bounded("the stalled connection's close", stalled_connection).await;
    println!(
        "an answer never taken: its connection closed after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() >= answer_timeout);
    // A stream has no such deadline: its connection stays and serves.
    tokio::time::sleep(2 * answer_timeout).await;
    assert!(!streaming.connection.is_finished());
    assert_eq!(raw_spec(&mut streaming.client).await.unwrap(), Code::Ok);
}

/// A `GetMetricsRequest` for the largest valid trigger, with its Prometheus at `prometheus`
/// (a URL of the same length as the longest's).
fn largest_request(prometheus: &str) -> GetMetricsRequest {
    let mut metadata = longest_metadata();
    let url = metadata.get_mut("prometheusURLFromEnv").unwrap();
    let padding = url.len() - prometheus.len() - 1;
    *url = format!("{prometheus}/{}", "p".repeat(padding));
    let metric_name = metadata["metricNameFromEnv"].clone();
    let label = "o".repeat(63);
    let name = [label.as_str(); 4].join(".")[..253].to_owned();
    GetMetricsRequest {
        scaled_object_ref: Some(ScaledObjectRef {
            name,
            namespace: "n".repeat(63),
            scaler_metadata: metadata,
        }),
        metric_name,
    }
}

#[tokio::test]
async fn the_largest_valid_trigger_passes_and_one_byte_more_is_out_of_range() {
    let prometheus = FakePrometheus::start().await;
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        limits(),
    )
    .await;
    let mut client = keda(addr).await;
    let largest = largest_request(&prometheus.url());
    assert_eq!(largest.encoded_len(), max_request_bytes());
    let object = largest.scaled_object_ref.clone().unwrap();
    bounded("the spec", client.get_metric_spec(object))
        .await
        .unwrap();
    // Decoded and decided: its Prometheus path does not exist, so the decision fails, but
    // not for its size.
    let status = bounded("the metrics", client.get_metrics(largest.clone()))
        .await
        .unwrap_err();
    assert!(
        !matches!(
            status.code(),
            Code::OutOfRange | Code::ResourceExhausted | Code::InvalidArgument
        ),
        "{status:?}"
    );
    let mut larger = largest;
    larger.metric_name.push('m');
    assert_eq!(larger.encoded_len(), max_request_bytes() + 1);
    let status = bounded("the metrics", client.get_metrics(larger))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_messages_on_one_connection_cannot_shut_another_out() {
    let budget = 4 << 20;
    let body_timeout = Duration::from_secs(2);
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        GrpcLimits {
            max_request_bytes_in_flight: budget,
            request_body_timeout: body_timeout,
            ..limits()
        },
    )
    .await;
    let announced = u32::try_from(max_request_bytes()).unwrap();
    let attack = RawCalls::partial(addr, loopback(2), 500, announced, 1000).await;
    // A quarter of the budget holds a few dozen; the rest are refused at once.
    eventually(
        "the streams beyond the connection's share are refused",
        || attack.answers().get(&Code::ResourceExhausted).copied() >= Some(400),
        || format!("{:?}", attack.answers()),
    )
    .await;
    let mut client = keda(addr).await;
    for _ in 0..20 {
        spec(&mut client).await.unwrap();
    }
    let answers = attack.answers();
    let waiting = 500 - answers.values().sum::<usize>();
    println!("500 partial messages: {answers:?}, {waiting} still in transit");
    // Each charged 16 KiB and twice its message (`transport::budget`).
    let charged = (16 << 10) + 5 + 2 * announced as usize;
    assert!(waiting * charged <= budget / 4, "{waiting} in transit");
    // Past their deadline, those in transit fail and free what they held.
    eventually(
        "the messages in transit time out",
        || attack.answers().values().sum::<usize>() == 500,
        || format!("{:?}", attack.answers()),
    )
    .await;
    let answers = attack.answers();
    assert_eq!(
        answers.get(&Code::DeadlineExceeded),
        Some(&waiting),
        "{answers:?}"
    );
    drop(attack);
    // A message announced beyond the limit is refused as its prefix is read (or, past the
    // connection's share, as its head arrives): none waits.
    let oversized = RawCalls::partial(addr, loopback(2), 50, 65_536, 65_000).await;
    eventually(
        "oversized messages are refused",
        || {
            let answers = oversized.answers();
            answers.get(&Code::OutOfRange).unwrap_or(&0)
                + answers.get(&Code::ResourceExhausted).unwrap_or(&0)
                == 50
        },
        || format!("{:?}", oversized.answers()),
    )
    .await;
    assert!(oversized.answers()[&Code::OutOfRange] > 0);
    drop(oversized);
    spec(&mut client).await.unwrap();
}
