//! The gRPC server's connections and request budget, in process: idle and silent connections
//! closed, a new client admitted at the cap, the largest valid trigger accepted, and partial
//! messages on one connection unable to shut another out.

mod support;

use std::time::Duration;

use admit_scaler::metadata::longest_metadata;
use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use admit_scaler::service::{ScalerService, ServiceOptions, max_request_bytes};
use admit_scaler::transport::grpc::GrpcLimits;
use admit_testkit::wait::{bounded, eventually};
use prost::Message;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tonic::Code;
use tonic::transport::Channel;

use support::{FakePrometheus, PartialMessages, Reply, metadata, object, serve_grpc};

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

/// A raw HTTP/2 connection to `addr`: the client and the connection's own future.
async fn h2_connection(
    addr: std::net::SocketAddr,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    (client, tokio::spawn(connection))
}

#[tokio::test]
async fn a_connection_idle_too_long_is_closed_with_a_goaway() {
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
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
    let (mut quiet, quiet_connection) = h2_connection(addr).await;
    // Before the call: its idle time starts after it.
    let started = Instant::now();
    let request = http::Request::post("/externalscaler.ExternalScaler/GetMetricSpec")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (answer, mut body) = quiet.send_request(request, false).unwrap();
    let mut message = vec![0];
    let trigger = object("checkout", metadata("http://127.0.0.1:9", &[])).encode_to_vec();
    message.extend_from_slice(&u32::try_from(trigger.len()).unwrap().to_be_bytes());
    message.extend_from_slice(&trigger);
    body.send_data(message.into(), true).unwrap();
    assert_eq!(answer.await.unwrap().status(), 200);

    let mut streaming = keda(addr).await;
    let trigger = object("checkout", metadata(&prometheus.url(), &[]));
    let mut stream = streaming
        .stream_is_active(trigger)
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().unwrap().result);

    // The quiet one ends cleanly (a GOAWAY, then the close).
    bounded("the quiet connection's close", quiet_connection)
        .await
        .unwrap()
        .unwrap();
    println!("closed after {:?} idle", started.elapsed());
    assert!(started.elapsed() >= idle_timeout);
    // Three idle timeouts later the one with a stream in flight is still served.
    tokio::time::sleep(3 * idle_timeout).await;
    spec(&mut streaming).await.unwrap();
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
async fn at_the_cap_idle_connections_make_room_for_a_new_client() {
    let addr = serve_grpc(
        ScalerService::new(ServiceOptions::default()),
        None,
        GrpcLimits {
            max_connections: 4,
            // Far longer than the test's bound: no silent connection times out by itself.
            handshake_timeout: Duration::from_secs(60),
            ..limits()
        },
    )
    .await;
    let mut silent = Vec::new();
    for _ in 0..1000 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    let started = Instant::now();
    let mut client = keda(addr).await;
    spec(&mut client).await.unwrap();
    println!(
        "a call behind 1000 silent connections (cap 4): {:?}",
        started.elapsed()
    );
    // Later connections close the idle ones, not the one that made a call.
    let mut others = Vec::new();
    for _ in 0..8 {
        others.push(TcpStream::connect(addr).await.unwrap());
    }
    spec(&mut client).await.unwrap();
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
    let attack = PartialMessages::open(addr, 500, announced, 1000).await;
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
    assert!(waiting * (20 << 10) <= budget / 4, "{waiting} in transit");
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
    let oversized = PartialMessages::open(addr, 50, 65_536, 65_000).await;
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
