//! What the scaler's integration tests share: a fake Prometheus whose answers are set per
//! query, a scaler served on loopback with a tonic client standing in for KEDA, a server
//! exporting admit's metrics for a real Prometheus, and a paced load on it.

#![allow(dead_code, unreachable_pub)]

pub mod memory;
pub mod process;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::metrics::Reporter;
use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use admit_scaler::service::{ScalerService, ServiceOptions};
use admit_scaler::transport::grpc::{self, GrpcLimits};
use admit_scaler::transport::tls::ReloadingTls;
use admit_testkit::TestServer;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tonic::transport::Channel;

/// Serves `app` on loopback with a `/metrics` route outside its layers: each scrape publishes
/// `reporter`'s limiters and renders `recorder`, which must have been installed before the
/// reporter was built (its series register with it).
pub async fn serve_with_metrics(
    app: Router,
    reporter: Reporter,
    recorder: PrometheusHandle,
) -> TestServer {
    let reporter = Arc::new(reporter);
    let app = app.route(
        "/metrics",
        get(move || async move {
            reporter.report();
            recorder.render()
        }),
    );
    admit_testkit::axum::serve_router(app).await
}

/// A paced, open-loop load: a GET of a URL every period, whatever the answers, until stopped.
pub struct OpenLoop {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<StatusCode>>,
}

impl OpenLoop {
    /// Starts sending GETs of `url`, the first at once, then one every `period`.
    pub fn start(url: String, period: Duration) -> Self {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut requests = JoinSet::new();
            let mut tick = tokio::time::interval(period);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                let (client, url) = (client.clone(), url.clone());
                requests.spawn(async move {
                    let request = http::Request::get(&url).body(Empty::new()).unwrap();
                    let response = client.request(request).await.expect("the server answers");
                    let status = response.status();
                    response.into_body().collect().await.expect("the body");
                    status
                });
            }
            requests.join_all().await
        });
        Self { stop, task }
    }

    /// Stops sending, and returns the status of every request sent once all are answered.
    ///
    /// # Panics
    ///
    /// If a request got no whole answer.
    pub async fn stop(self) -> Vec<StatusCode> {
        let _ = self.stop.send(true);
        admit_testkit::wait::bounded("the load's end", self.task)
            .await
            .expect("every request answered")
    }
}

/// An instant vector of one sample.
pub fn vector(value: &str) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"job":"checkout"}},"value":[1700000000,"{value}"]}}]}}}}"#
    )
}

/// An answer: HTTP status and body, sent after `delay`.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Reply {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    pub fn ok(body: impl Into<String>) -> Self {
        Reply::new(200, body)
    }

    pub fn value(value: &str) -> Self {
        Reply::ok(vector(value))
    }

    /// The same reply, sent `delay` after the question.
    pub fn after(self, delay: Duration) -> Self {
        Reply { delay, ..self }
    }
}

#[derive(Default)]
struct Answers {
    replies: HashMap<String, Reply>,
    /// Replies for every query that starts with a prefix, tried in order after `replies`.
    prefixed: Vec<(String, Reply)>,
    asked: HashMap<String, usize>,
}

impl Answers {
    fn reply(&self, query: &str) -> Option<&Reply> {
        self.replies.get(query).or_else(|| {
            self.prefixed
                .iter()
                .find(|(prefix, _)| query.starts_with(prefix.as_str()))
                .map(|(_, reply)| reply)
        })
    }
}

/// A fake Prometheus: `POST <any prefix>/api/v1/query` answers the reply set for the form's
/// `query` (an empty vector if none), and counts the questions.
pub struct FakePrometheus {
    answers: Arc<Mutex<Answers>>,
    server: TestServer,
}

impl FakePrometheus {
    pub async fn start() -> Self {
        let answers = Arc::new(Mutex::new(Answers::default()));
        let router = Router::new()
            .route("/api/v1/query", post(answer))
            .route("/{*prefix}", post(prefixed))
            .with_state(Arc::clone(&answers));
        let server = admit_testkit::axum::serve_router(router).await;
        FakePrometheus { answers, server }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Answers `query` with `reply` from now on.
    pub fn set(&self, query: &str, reply: Reply) {
        let mut answers = self.answers.lock().unwrap();
        answers.replies.insert(query.to_owned(), reply);
    }

    /// Answers every query that starts with `prefix` (and has no reply of its own) with
    /// `reply` from now on, instead of any reply set before for `prefix`.
    pub fn set_prefixed(&self, prefix: &str, reply: Reply) {
        let mut answers = self.answers.lock().unwrap();
        match answers.prefixed.iter_mut().find(|(set, _)| set == prefix) {
            Some((_, set)) => *set = reply,
            None => answers.prefixed.push((prefix.to_owned(), reply)),
        }
    }

    /// How many times `query` was asked.
    pub fn asked(&self, query: &str) -> usize {
        let answers = self.answers.lock().unwrap();
        answers.asked.get(query).copied().unwrap_or(0)
    }
}

/// A query under a path prefix (`prometheusURL` with a path): answered as at the root.
async fn prefixed(
    Path(prefix): Path<String>,
    state: State<Arc<Mutex<Answers>>>,
    body: String,
) -> (StatusCode, String) {
    if !prefix.ends_with("/api/v1/query") {
        return (StatusCode::NOT_FOUND, String::new());
    }
    answer(state, body).await
}

async fn answer(State(answers): State<Arc<Mutex<Answers>>>, body: String) -> (StatusCode, String) {
    let query = form_urlencoded::parse(body.as_bytes())
        .find(|(key, _)| key == "query")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let reply = {
        let mut answers = answers.lock().unwrap();
        *answers.asked.entry(query.clone()).or_default() += 1;
        answers.reply(&query).cloned().unwrap_or(Reply::ok(
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
        ))
    };
    tokio::time::sleep(reply.delay).await;
    (StatusCode::from_u16(reply.status).unwrap(), reply.body)
}

/// A scaler served on loopback and a client connected to it, as KEDA would be.
pub struct Scaler {
    pub client: ExternalScalerClient<Channel>,
    pub service: ScalerService,
    server: TestServer,
}

impl Scaler {
    pub async fn start(options: ServiceOptions) -> Self {
        let service = ScalerService::new(options);
        let (addr, incoming) = admit_testkit::tonic::listen().await;
        let serve = tonic::transport::Server::builder()
            .add_service(service.clone().into_server())
            .serve_with_incoming(incoming);
        let server = admit_testkit::tonic::spawn_server(addr, serve);
        let client = admit_testkit::wait::bounded(
            "connecting to the scaler",
            ExternalScalerClient::connect(format!("http://{addr}")),
        )
        .await
        .expect("the scaler accepts connections");
        Scaler {
            client,
            service,
            server,
        }
    }
}

/// `service` behind the scaler's own gRPC server with `limits` (over TLS with `tls`), on a
/// loopback port, until the test ends.
pub async fn serve_grpc(
    service: ScalerService,
    tls: Option<Arc<ReloadingTls>>,
    limits: GrpcLimits,
) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = tonic::service::Routes::new(service.into_server());
    tokio::spawn(grpc::serve(
        listener,
        routes,
        tls,
        limits,
        std::future::pending(),
    ));
    addr
}

/// The loopback address `127.0.0.<n>`: on Linux every `127.0.0.0/8` address is local, so a
/// test can play several peers, each from its own address.
pub fn loopback(n: u8) -> std::net::IpAddr {
    std::net::Ipv4Addr::new(127, 0, 0, n).into()
}

/// A TCP connection to `to` from address `from`.
pub async fn connect_from(
    from: std::net::IpAddr,
    to: std::net::SocketAddr,
) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::new(from, 0)).unwrap();
    admit_testkit::wait::bounded("connect", socket.connect(to))
        .await
        .unwrap()
}

/// A tonic channel to `to` from address `from`, connected.
pub async fn channel_from(from: std::net::IpAddr, to: std::net::SocketAddr) -> Channel {
    admit_testkit::wait::bounded(
        "connecting",
        Channel::from_shared(format!("http://{to}"))
            .unwrap()
            .local_address(Some(from))
            .connect(),
    )
    .await
    .unwrap()
}

/// A raw HTTP/2 connection to `to` from `from`: its client, and its task, which runs while the
/// connection is open.
pub async fn h2_from(
    from: std::net::IpAddr,
    to: std::net::SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = connect_from(from, to).await;
    let (client, connection) =
        admit_testkit::wait::bounded("the handshake", h2::client::handshake(tcp))
            .await
            .unwrap();
    (client, tokio::spawn(connection))
}

/// The head of a gRPC call to `path`.
pub fn grpc_request(path: &str) -> http::Request<()> {
    http::Request::post(path)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

/// One gRPC call on `client`: `message` to `path`, and its answer's code.
pub async fn raw_call(
    client: &mut h2::client::SendRequest<Bytes>,
    path: &str,
    message: &impl prost::Message,
) -> Result<tonic::Code, h2::Error> {
    admit_testkit::wait::bounded("a call", async {
        let mut ready = client.clone().ready().await?;
        let (answer, mut body) = ready.send_request(grpc_request(path), false)?;
        body.send_data(grpc_body(message), true)?;
        Ok(answered_with(answer.await?).await)
    })
    .await
}

/// gRPC calls over one raw HTTP/2 connection, each stream its head and its body in one DATA
/// frame as flow control allows, the way grpc-go (KEDA) frames them. (hyper's client, under
/// tonic, first claims one byte of window per stream: with thousands of calls at once on one
/// connection it sends one-byte DATA frames, which h2 servers take for a flood of small
/// frames and answer with GOAWAY `ENHANCE_YOUR_CALM`.)
pub struct RawCalls {
    /// The streams, kept open.
    pub streams: Vec<h2::SendStream<Bytes>>,
    /// The `grpc-status` of each stream answered so far (the others still wait).
    pub answered: Arc<Mutex<Vec<tonic::Code>>>,
}

impl RawCalls {
    /// Calls `path` from `from` once per body, each stream ended after its body if `end`.
    pub async fn open(
        to: std::net::SocketAddr,
        from: std::net::IpAddr,
        path: &str,
        bodies: impl IntoIterator<Item = Bytes>,
        end: bool,
    ) -> Self {
        let (mut client, _connection) = h2_from(from, to).await;
        let answered = Arc::new(Mutex::new(Vec::new()));
        let mut opened = Vec::new();
        for body in bodies {
            client = admit_testkit::wait::bounded("a stream", client.ready())
                .await
                .unwrap();
            let (answer, mut stream) = client.send_request(grpc_request(path), false).unwrap();
            // Sent as flow control allows (unless the server already refused the call).
            let _ = stream.send_data(body, end);
            opened.push(stream);
            let answered = Arc::clone(&answered);
            tokio::spawn(async move {
                let code = match answer.await {
                    Ok(response) => answered_with(response).await,
                    Err(_) => tonic::Code::Unavailable,
                };
                answered.lock().unwrap().push(code);
            });
        }
        RawCalls {
            streams: opened,
            answered,
        }
    }

    /// `streams` calls to `IsActive` from `from`, each sending a gRPC prefix that announces
    /// `announced` bytes and then `sent` of them, and never ending: the client that made tonic
    /// buffer partial messages until the request timeout.
    pub async fn partial(
        to: std::net::SocketAddr,
        from: std::net::IpAddr,
        streams: usize,
        announced: u32,
        sent: usize,
    ) -> Self {
        let mut message = vec![0];
        message.extend_from_slice(&announced.to_be_bytes());
        message.resize(5 + sent, b'x');
        let message = Bytes::from(message);
        RawCalls::open(
            to,
            from,
            "/externalscaler.ExternalScaler/IsActive",
            std::iter::repeat_n(message, streams),
            false,
        )
        .await
    }

    /// How many streams got each code so far.
    pub fn answers(&self) -> HashMap<tonic::Code, usize> {
        let mut counts = HashMap::new();
        for code in self.answered.lock().unwrap().iter() {
            *counts.entry(*code).or_default() += 1;
        }
        counts
    }
}

/// A gRPC answer's code: in its head (an answer of trailers only), or in its trailers.
pub async fn answered_with(response: http::Response<h2::RecvStream>) -> tonic::Code {
    if let Some(status) = tonic::Status::from_header_map(response.headers()) {
        return status.code();
    }
    let mut body = response.into_body();
    while let Some(data) = body.data().await {
        let Ok(data) = data else {
            return tonic::Code::Unavailable;
        };
        let _ = body.flow_control().release_capacity(data.len());
    }
    match body.trailers().await {
        Ok(Some(trailers)) => tonic::Status::from_header_map(&trailers)
            .map_or(tonic::Code::Ok, |status| status.code()),
        _ => tonic::Code::Unavailable,
    }
}

/// `message` as a gRPC body: its prefix, then its bytes.
pub fn grpc_body(message: &impl prost::Message) -> Bytes {
    let encoded = message.encode_to_vec();
    let mut body = vec![0];
    body.extend_from_slice(&u32::try_from(encoded.len()).unwrap().to_be_bytes());
    body.extend_from_slice(&encoded);
    Bytes::from(body)
}

/// The metadata of a trigger reading λ from `lambda` and s from `s` at `prometheus`, at
/// T = 0 and p = 0.8, pooled (Erlang C), with `extra` keys.
pub fn metadata(prometheus: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    admit_testkit::keda::metadata(
        &[
            ("scalerAddress", "admit-scaler.admit-system:6000"),
            ("prometheusURL", prometheus),
            ("arrivalRateQuery", "lambda"),
            ("serviceTimeQuery", "s"),
            ("waitThresholdSeconds", "0"),
            ("targetSL", "0.8"),
            // The reference vectors are Erlang C's.
            ("balancing", "pooled"),
        ],
        extra,
    )
}

/// The reference to ScaledObject `shop/<name>` with `metadata`.
pub fn object(name: &str, metadata: BTreeMap<String, String>) -> ScaledObjectRef {
    ScaledObjectRef {
        name: name.to_owned(),
        namespace: "shop".to_owned(),
        scaler_metadata: metadata,
    }
}

/// `GetMetrics` for the default metric name.
pub fn metrics_request(object: ScaledObjectRef) -> GetMetricsRequest {
    GetMetricsRequest {
        scaled_object_ref: Some(object),
        metric_name: "admit-erlang".to_owned(),
    }
}
