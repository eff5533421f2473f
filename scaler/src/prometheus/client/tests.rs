//! The client against an in-process fake Prometheus on 127.0.0.1.

use std::convert::Infallible;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use admit_testkit::wait::eventually;
use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::{
    BearerToken, ClientOptions, DEFAULT_MAX_BODY_BYTES, MAX_TOKEN_FILE_BYTES, PrometheusClient,
};
use crate::excerpt::EXCERPT_CHARS;
use crate::prometheus::{QueryErrorKind, Sample};

const SCALAR: &str =
    r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"7"]}}"#;

/// What the fake Prometheus saw of one request.
#[derive(Debug)]
struct Seen {
    method: String,
    path_and_query: String,
    content_type: Option<String>,
    authorization: Option<String>,
    user_agent: Option<String>,
    form: Vec<(String, String)>,
}

/// A fake Prometheus answering every request with `status` and `body`.
struct Fake {
    base: String,
    seen: mpsc::UnboundedReceiver<Seen>,
}

/// Serves every request to 127.0.0.1 with `respond`, recording what it saw; the base URL and
/// the records.
async fn serve<B, F, R>(respond: F) -> Fake
where
    F: Fn() -> R + Clone + Send + 'static,
    R: Future<Output = Response<B>> + Send,
    B: Body<Data = Bytes, Error = Infallible> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (tx, respond) = (tx.clone(), respond.clone());
            let service = service_fn(move |request: Request<Incoming>| {
                let (tx, respond) = (tx.clone(), respond.clone());
                async move {
                    let _ = tx.send(record(request).await);
                    Ok::<_, Infallible>(respond().await)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    Fake { base, seen }
}

impl Fake {
    async fn start(status: u16, body: impl Into<Bytes>) -> Self {
        let body: Bytes = body.into();
        serve(move || {
            let body = body.clone();
            async move {
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Full::new(body))
                    .unwrap()
            }
        })
        .await
    }

    fn uri(&self, suffix: &str) -> Uri {
        format!("{}{suffix}", self.base).parse().unwrap()
    }

    /// The one request seen since the last call.
    fn take(&mut self) -> Seen {
        let seen = self.seen.try_recv().expect("a request");
        assert!(self.seen.try_recv().is_err(), "one request only");
        seen
    }
}

async fn record(request: Request<Incoming>) -> Seen {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    let (method, path_and_query) = (request.method().to_string(), request.uri().to_string());
    let (content_type, authorization, user_agent) = (
        header("content-type"),
        header("authorization"),
        header("user-agent"),
    );
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let form = form_urlencoded::parse(&body).into_owned().collect();
    Seen {
        method,
        path_and_query,
        content_type,
        authorization,
        user_agent,
        form,
    }
}

/// A client; with a token, allowed over http, which the fake Prometheus speaks.
fn client(timeout: Duration, bearer_token: Option<&str>) -> PrometheusClient {
    PrometheusClient::new(ClientOptions {
        timeout,
        bearer_token: bearer_token.map(|token| BearerToken::Value(token.to_owned())),
        allow_token_over_http: true,
        ..ClientOptions::default()
    })
}

/// Fails the test instead of hanging it when the client's own deadline does not work.
async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .expect("the query finished within 20 s")
}

/// Queries `up` at `base` and expects a failure.
async fn query_error(prometheus: &PrometheusClient, base: &Uri) -> crate::prometheus::QueryError {
    bounded(prometheus.query(base, &"up".into(), None))
        .await
        .unwrap_err()
}

/// Asserts that a `QueryError` is of the kind named.
macro_rules! assert_kind {
    ($error:expr, $kind:ident) => {
        assert!(
            matches!($error.kind, QueryErrorKind::$kind { .. }),
            "{:?}",
            $error
        )
    };
}

fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

#[tokio::test]
async fn posts_a_form_to_the_query_path_under_the_prefix() {
    let mut fake = Fake::start(200, SCALAR).await;
    let prometheus = PrometheusClient::new(ClientOptions::default());
    let cases = [
        ("", "/api/v1/query"),
        ("/", "/api/v1/query"),
        ("/prometheus", "/prometheus/api/v1/query"),
        ("/prometheus/", "/prometheus/api/v1/query"),
        ("/a/b?tenant=t1", "/a/b/api/v1/query?tenant=t1"),
    ];
    for (suffix, path) in cases {
        let answer = bounded(prometheus.query(&fake.uri(suffix), &"up".into(), None))
            .await
            .unwrap();
        let expected = Sample {
            value: 7.0,
            timestamp: 1700000000.0,
            labels: vec![],
        };
        assert_eq!(answer.sample, expected);
        let seen = fake.take();
        assert_eq!(seen.method, "POST");
        assert_eq!(seen.path_and_query, path, "base suffix {suffix:?}");
        assert_eq!(
            seen.content_type.as_deref(),
            Some("application/x-www-form-urlencoded")
        );
        let agent = concat!("admit-scaler/", env!("CARGO_PKG_VERSION"));
        assert_eq!(seen.user_agent.as_deref(), Some(agent));
    }
}

#[tokio::test]
async fn encodes_the_query_exactly_and_sends_the_timeout() {
    let mut fake = Fake::start(200, SCALAR).await;
    let query =
        "sum(rate(http_requests_total{path=\"/a&b=c+d\"}[1m])) # what + why\n  / 2 # ünïcødé ✓ %20";
    let prometheus = client(Duration::from_secs(5), None);
    bounded(prometheus.query(&fake.uri(""), &query.into(), None))
        .await
        .unwrap();
    assert_eq!(
        fake.take().form,
        form(&[("query", query), ("timeout", "5000ms")])
    );
}

#[tokio::test]
async fn sends_the_time_only_when_given() {
    let mut fake = Fake::start(200, SCALAR).await;
    let prometheus = client(Duration::from_millis(1500), None);
    let cases = [
        (None, form(&[("query", "up"), ("timeout", "1500ms")])),
        (
            Some(1700000000.5),
            form(&[
                ("query", "up"),
                ("timeout", "1500ms"),
                ("time", "1700000000.5"),
            ]),
        ),
        (
            Some(1700000000.0),
            form(&[
                ("query", "up"),
                ("timeout", "1500ms"),
                ("time", "1700000000"),
            ]),
        ),
        (
            Some(1700000000.12345),
            form(&[
                ("query", "up"),
                ("timeout", "1500ms"),
                ("time", "1700000000.123"),
            ]),
        ),
    ];
    for (time, expected) in cases {
        bounded(prometheus.query(&fake.uri(""), &"up".into(), time))
            .await
            .unwrap();
        assert_eq!(fake.take().form, expected, "time {time:?}");
    }
}

#[tokio::test]
async fn a_time_that_is_not_finite_is_refused_before_sending() {
    let mut fake = Fake::start(200, SCALAR).await;
    let prometheus = client(Duration::from_secs(5), None);
    let error = bounded(prometheus.query(&fake.uri(""), &"up".into(), Some(f64::NAN)))
        .await
        .unwrap_err();
    assert_eq!(error.kind.as_str(), "bad_query");
    assert!(fake.seen.try_recv().is_err());
}

#[tokio::test]
async fn sends_the_bearer_token_when_set() {
    let mut fake = Fake::start(200, SCALAR).await;
    let with = client(Duration::from_secs(5), Some("s3cr3t.token\n"));
    assert_eq!(
        authorization(&with, &mut fake).await.as_deref(),
        Some("Bearer s3cr3t.token")
    );
    let without = client(Duration::from_secs(5), None);
    assert_eq!(authorization(&without, &mut fake).await, None);
    assert!(
        !format!("{with:?}").contains("s3cr3t"),
        "Debug hides the token"
    );
}

/// The `Authorization` header of one query `prometheus` sends to `fake`.
async fn authorization(prometheus: &PrometheusClient, fake: &mut Fake) -> Option<String> {
    bounded(prometheus.query(&fake.uri(""), &"up".into(), None))
        .await
        .unwrap();
    fake.take().authorization
}

/// A client reading its bearer token from `path`, allowed over http.
fn file_client(path: &std::path::Path) -> PrometheusClient {
    PrometheusClient::new(ClientOptions {
        bearer_token: Some(BearerToken::File(path.to_owned())),
        allow_token_over_http: true,
        ..ClientOptions::default()
    })
}

/// A token file of this test's own, written with `token`.
fn token_file(name: &str, token: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("admit-scaler-token-{name}-{}", std::process::id()));
    std::fs::write(&path, token).unwrap();
    path
}

#[tokio::test]
async fn rereads_the_bearer_token_file_before_every_query() {
    let mut fake = Fake::start(200, SCALAR).await;
    let path = token_file("rotated", "first.token\n");
    let prometheus = file_client(&path);
    assert_eq!(
        authorization(&prometheus, &mut fake).await.as_deref(),
        Some("Bearer first.token")
    );
    // Rotated, as the kubelet renews a projected service-account token.
    std::fs::write(&path, "second.token").unwrap();
    assert_eq!(
        authorization(&prometheus, &mut fake).await.as_deref(),
        Some("Bearer second.token")
    );
    assert!(format!("{prometheus:?}").contains("File"));
    std::fs::remove_file(path).unwrap();
}

#[tokio::test]
async fn an_unusable_token_file_fails_the_query_before_sending_it() {
    let mut fake = Fake::start(200, SCALAR).await;
    let empty = token_file("empty", " \n");
    let missing = empty.with_extension("missing");
    let oversize = token_file("oversize", &"t".repeat(MAX_TOKEN_FILE_BYTES as usize + 1));
    let not_utf8 = token_file("not-utf8", "");
    std::fs::write(&not_utf8, b"tok\xffen").unwrap();
    let cases = [
        (&empty, "it is empty"),
        (&missing, "No such file"),
        (&oversize, "it is larger than 65536 bytes"),
        (&not_utf8, "it is not UTF-8"),
    ];
    for (path, problem) in cases {
        let error = bounded(file_client(path).query(&fake.uri(""), &"up".into(), None))
            .await
            .unwrap_err();
        let QueryErrorKind::Credentials { message } = &error.kind else {
            panic!("not a credentials error: {error:?}");
        };
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains(problem), "{message}");
        assert_eq!(error.kind.as_str(), "credentials");
    }
    assert!(fake.seen.try_recv().is_err(), "a request was sent");
    for path in [empty, oversize, not_utf8] {
        std::fs::remove_file(path).unwrap();
    }
}

#[tokio::test]
async fn a_token_file_at_the_size_cap_is_sent() {
    let mut fake = Fake::start(200, SCALAR).await;
    let token = "t".repeat(MAX_TOKEN_FILE_BYTES as usize);
    let path = token_file("at-cap", &token);
    assert_eq!(
        authorization(&file_client(&path), &mut fake).await,
        Some(format!("Bearer {token}"))
    );
    std::fs::remove_file(path).unwrap();
}

#[tokio::test]
async fn the_bearer_token_goes_over_plain_http_only_when_allowed() {
    let mut fake = Fake::start(200, SCALAR).await;
    let path = token_file("over-http", "file.token");
    let tokens = [
        BearerToken::Value("s3cr3t.token".into()),
        BearerToken::File(path.clone()),
    ];
    for token in tokens {
        let refusing = PrometheusClient::new(ClientOptions {
            bearer_token: Some(token),
            ..ClientOptions::default()
        });
        let error = query_error(&refusing, &fake.uri("")).await;
        let QueryErrorKind::Credentials { message } = &error.kind else {
            panic!("not a credentials error: {error:?}");
        };
        assert!(message.contains(&fake.base), "{message}");
        assert!(message.contains("https://"), "{message}");
        assert!(
            message.contains("--prometheus-token-over-http"),
            "{message}"
        );
        assert!(fake.seen.try_recv().is_err(), "a request was sent");
        // Over https it is sent: here the handshake with the plain server fails first.
        let https: Uri = fake
            .base
            .replacen("http://", "https://", 1)
            .parse()
            .unwrap();
        assert_kind!(query_error(&refusing, &https).await, Unreachable);
        assert!(fake.seen.try_recv().is_err(), "no HTTP request got through");
    }
    // Without a token there is nothing to refuse.
    let no_token = PrometheusClient::new(ClientOptions::default());
    bounded(no_token.query(&fake.uri(""), &"up".into(), None))
        .await
        .unwrap();
    assert_eq!(fake.take().authorization, None);
    std::fs::remove_file(path).unwrap();
}

#[tokio::test]
async fn error_answers_name_the_query() {
    let body = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
    let fake = Fake::start(400, body).await;
    let prometheus = client(Duration::from_secs(5), None);
    let error = bounded(prometheus.query(&fake.uri(""), &"sum(".into(), None))
        .await
        .unwrap_err();
    assert_eq!(&*error.query, "sum(");
    assert_eq!(
        error.kind,
        QueryErrorKind::BadQuery {
            message: "parse error".into()
        }
    );
}

#[tokio::test]
async fn a_refused_connection_is_unreachable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let base: Uri = format!("http://{address}").parse().unwrap();
    let prometheus = client(Duration::from_secs(5), None);
    let error = query_error(&prometheus, &base).await;
    assert_kind!(error, Unreachable);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base: Uri = format!("http://{}", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    // Accepts, then holds the connection open without reading or answering.
    let (hold, mut held) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = hold.send(stream);
        }
    });
    let prometheus = client(Duration::from_millis(200), None);
    let error = query_error(&prometheus, &base).await;
    assert_kind!(error, Timeout);
    assert!(
        held.try_recv().is_ok(),
        "the server accepted the connection"
    );
}

/// A client whose answers may be at most `cap` bytes.
fn capped_client(cap: usize) -> PrometheusClient {
    PrometheusClient::new(ClientOptions {
        max_body_bytes: cap,
        ..ClientOptions::default()
    })
}

#[tokio::test]
async fn a_body_declared_over_the_cap_is_a_bad_response() {
    let fake = Fake::start(200, SCALAR).await;
    let at_cap = capped_client(SCALAR.len());
    let answer = bounded(at_cap.query(&fake.uri(""), &"up".into(), None)).await;
    assert_eq!(answer.unwrap().sample.value, 7.0);
    let under = capped_client(SCALAR.len() - 1);
    let error = query_error(&under, &fake.uri("")).await;
    let cap = SCALAR.len() - 1;
    assert_eq!(
        error.kind,
        QueryErrorKind::BadResponse {
            status: 200,
            message: format!("the body exceeds the cap of {cap} bytes (--prometheus-max-body)"),
        }
    );
}

/// A body of `left` bytes, sent in 64 KiB frames without a `Content-Length`, beginning with
/// the start of a vector answer; counts what it produced and flags when it is dropped (the
/// connection is gone).
struct Stream {
    left: usize,
    produced: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

const START: &[u8] = br#"{"status":"success","data":{"resultType":"vector","result":["#;
static PADDING: [u8; 64 << 10] = [b' '; 64 << 10];

impl Body for Stream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let frame = match self.produced.load(Ordering::SeqCst) {
            _ if self.left == 0 => return Poll::Ready(None),
            0 => Bytes::from_static(START),
            _ => Bytes::from_static(&PADDING[..PADDING.len().min(self.left)]),
        };
        self.left -= frame.len().min(self.left);
        self.produced.fetch_add(frame.len(), Ordering::SeqCst);
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_streamed_body_is_cut_off_at_the_cap() {
    const STREAMED: usize = 100 << 20;
    let (produced, dropped) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let (p, d) = (produced.clone(), dropped.clone());
    let fake = serve(move || {
        let body = Stream {
            left: STREAMED,
            produced: p.clone(),
            dropped: d.clone(),
        };
        async move { Response::new(body) }
    })
    .await;
    let prometheus = PrometheusClient::new(ClientOptions::default());
    let error = query_error(&prometheus, &fake.uri("")).await;
    let QueryErrorKind::BadResponse { status, message } = &error.kind else {
        panic!("not a bad response: {error:?}");
    };
    assert_eq!(*status, 200);
    let cap = DEFAULT_MAX_BODY_BYTES;
    let start = format!(
        "the body exceeds the cap of {cap} bytes (--prometheus-max-body), starting {}",
        std::str::from_utf8(START).unwrap()
    );
    assert!(message.starts_with(&start), "{message}");
    assert!(message.len() < start.len() + EXCERPT_CHARS * 2, "{message}");
    // The client drops the connection: the server stops, far short of the whole body (what
    // it produced past the cap sits in the sockets' buffers).
    eventually(
        "the server's body is dropped",
        || dropped.load(Ordering::SeqCst),
        || format!("{} bytes produced", produced.load(Ordering::SeqCst)),
    )
    .await;
    let sent = produced.load(Ordering::SeqCst);
    assert!(sent < STREAMED / 4, "{sent} bytes produced");
}

/// A fake Prometheus that answers `SCALAR` once `release` is sent `true`; `arrived` counts
/// the requests it received.
async fn holding() -> (Fake, watch::Sender<bool>) {
    let (release, held) = watch::channel(false);
    let fake = serve(move || {
        let mut held = held.clone();
        async move {
            held.wait_for(|released| *released).await.unwrap();
            Response::new(Full::new(Bytes::from_static(SCALAR.as_bytes())))
        }
    })
    .await;
    (fake, release)
}

#[tokio::test]
async fn queries_beyond_max_in_flight_wait_for_a_slot_within_the_timeout() {
    let (mut fake, release) = holding().await;
    let long = PrometheusClient::new(ClientOptions {
        timeout: Duration::from_secs(20),
        max_in_flight: NonZeroUsize::new(2).unwrap(),
        ..ClientOptions::default()
    });
    // A clone shares the slots; only its own timeout is short.
    let mut short = long.clone();
    short.options.timeout = Duration::from_millis(200);
    let base = fake.uri("");
    let held: Vec<_> = (0..2)
        .map(|_| {
            let (prometheus, base) = (long.clone(), base.clone());
            tokio::spawn(async move { prometheus.query(&base, &"up".into(), None).await })
        })
        .collect();
    for _ in 0..2 {
        bounded(fake.seen.recv()).await.expect("a held request");
    }
    let error = query_error(&short, &base).await;
    let QueryErrorKind::Timeout { message } = &error.kind else {
        panic!("not a timeout: {error:?}");
    };
    assert_eq!(
        message,
        "waited 200ms for a query slot: 2 queries were in flight (--prometheus-max-in-flight)"
    );
    assert!(fake.seen.try_recv().is_err(), "the third query was sent");
    release.send(true).unwrap();
    for query in held {
        assert_eq!(bounded(query).await.unwrap().unwrap().sample.value, 7.0);
    }
    // The slots are free again.
    let answer = bounded(short.query(&base, &"up".into(), None))
        .await
        .unwrap();
    assert_eq!(answer.sample.value, 7.0);
    fake.take();
}

#[tokio::test]
async fn https_is_spoken_and_a_plain_server_fails_the_handshake() {
    let mut fake = Fake::start(200, SCALAR).await;
    let base: Uri = fake
        .base
        .replacen("http://", "https://", 1)
        .parse()
        .unwrap();
    let prometheus = client(Duration::from_secs(5), None);
    let error = query_error(&prometheus, &base).await;
    assert_kind!(error, Unreachable);
    assert!(fake.seen.try_recv().is_err(), "no HTTP request got through");
}

#[tokio::test]
async fn unusable_urls_are_unreachable() {
    let prometheus = client(Duration::from_secs(5), None);
    let long = format!("ftp://prom:9090/{}", "p".repeat(4000));
    for base in ["ftp://prom:9090", "/prometheus", "prom:9090", &long] {
        let base: Uri = base.parse().unwrap();
        let error = query_error(&prometheus, &base).await;
        let QueryErrorKind::Unreachable { message } = &error.kind else {
            panic!("{base}: {error:?}");
        };
        // The URL comes from a trigger's metadata: quoted as an excerpt.
        assert!(message.len() < 2 * EXCERPT_CHARS, "{message}");
    }
}

#[tokio::test]
async fn a_long_query_is_quoted_as_an_excerpt() {
    let fake = Fake::start(
        400,
        r#"{"status":"error","errorType":"bad_data","error":"no"}"#,
    )
    .await;
    let query = format!("sum(x)\n{}", "#".repeat(5000));
    let prometheus = client(Duration::from_secs(5), None);
    let error = bounded(prometheus.query(&fake.uri(""), &query.as_str().into(), None))
        .await
        .unwrap_err();
    assert_eq!(&*error.query, query, "kept whole");
    let shown = error.to_string();
    assert!(shown.starts_with(r#"query "sum(x)\n###"#), "{shown}");
    assert!(
        shown.ends_with(r#"more bytes)": Prometheus rejected the query: no"#),
        "{shown}"
    );
}

#[test]
fn durations_and_times_as_prometheus_reads_them() {
    assert_eq!(super::duration_text(Duration::from_secs(5)), "5000ms");
    assert_eq!(super::duration_text(Duration::from_micros(1500)), "2ms");
    assert_eq!(super::duration_text(Duration::ZERO), "1ms");
    assert_eq!(super::time_text(1700000000.25), "1700000000.25");
    assert_eq!(super::time_text(-0.0004), "-0");
    assert_eq!(super::time_text(0.0), "0");
}

#[test]
fn building_a_client_needs_no_runtime() {
    let prometheus = PrometheusClient::new(ClientOptions::default());
    assert!(format!("{prometheus:?}").contains("timeout: 5s"));
}
