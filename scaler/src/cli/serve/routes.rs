//! `serve`'s HTTP side: the Prometheus recorder and the routes for Prometheus and the probes.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use admit_scaler::telemetry;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::cli::BoxError;

/// The Prometheus recorder for the scaler's metrics: duration histograms with buckets, and a
/// trigger's series dropped once it has not changed for the state TTL.
pub(super) fn install_recorder(state_ttl: Duration) -> Result<PrometheusHandle, BoxError> {
    let mut builder = PrometheusBuilder::new().idle_timeout(MetricKindMask::ALL, Some(state_ttl));
    for name in telemetry::HISTOGRAMS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_owned()), &telemetry::DURATION_BUCKETS)?;
    }
    Ok(builder.install_recorder()?)
}

/// `GET /metrics` (the recorder's text, at most `max_scrapes` at once), `/healthz`, and
/// `/readyz` (503 once `ready` is false). The probes take no scrape slot.
pub(super) fn http_router(
    metrics: PrometheusHandle,
    max_scrapes: usize,
    ready: Arc<AtomicBool>,
) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Arc::new(MetricsPage::new(metrics, max_scrapes)))
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.load(Ordering::SeqCst);
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "stopping\n")
                    }
                }
            }),
        )
}

/// A page is rendered again only once the last is older than this: scrapes that come
/// together (two Prometheus replicas, a person with curl) share one.
const FRESH: Duration = Duration::from_secs(1);

/// The most pages in memory at once: the latest, and one that slow readers still hold.
const PAGES: usize = 2;

/// A page is sent in chunks of this many bytes (slices of the shared page, not copies).
const CHUNK_BYTES: usize = 64 << 10;

/// `/metrics`' page: rendered once for the scrapes of the same second and shared by them (one
/// copy in memory however many read it), and at most [`PAGES`] in memory. While readers still
/// hold an older page, a scrape gets the latest one even if it is no longer fresh.
#[derive(Debug)]
struct MetricsPage {
    handle: PrometheusHandle,
    /// The latest page and when it was rendered; the lock makes renders single-flight.
    latest: Mutex<Option<(Instant, Bytes)>>,
    /// One permit per page in memory, held until its last reader is done.
    pages: Arc<Semaphore>,
    /// One permit per scrape being answered.
    scrapes: Arc<Semaphore>,
}

impl MetricsPage {
    fn new(handle: PrometheusHandle, max_scrapes: usize) -> Self {
        MetricsPage {
            handle,
            latest: Mutex::new(None),
            pages: Arc::new(Semaphore::new(PAGES)),
            scrapes: Arc::new(Semaphore::new(max_scrapes.max(1))),
        }
    }

    /// The page to answer with now.
    async fn page(&self) -> Bytes {
        let mut latest = self.latest.lock().await;
        let permit = match (&*latest, Arc::clone(&self.pages).try_acquire_owned()) {
            (Some((rendered, page)), _) if rendered.elapsed() < FRESH => return page.clone(),
            // Slow readers hold an older page and the latest: no third one.
            (Some((_, page)), Err(_)) => return page.clone(),
            // Before the first render every permit is free.
            (_, permit) => permit.ok(),
        };
        // On this worker thread, as a handler's work: on a blocking thread each render would
        // leave its memory in that thread's malloc arena, and the resident set would grow by a
        // page for each thread that rendered one.
        let page = Bytes::from_owner(Page {
            text: self.handle.render(),
            _permit: permit,
        });
        *latest = Some((Instant::now(), page.clone()));
        page
    }
}

/// A rendered page, holding its place among the [`PAGES`] until its last copy is dropped.
struct Page {
    text: String,
    _permit: Option<OwnedSemaphorePermit>,
}

impl AsRef<[u8]> for Page {
    fn as_ref(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// `GET /metrics`: the shared page, or 503 when as many scrapes are being answered as may be.
async fn scrape(State(page): State<Arc<MetricsPage>>) -> Response {
    let Ok(slot) = Arc::clone(&page.scrapes).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "too many scrapes at once (--http-max-scrapes)\n",
        )
            .into_response();
    };
    let page = page.page().await;
    // In chunks, so that the answer is done with only once nearly all of it is sent; the slot
    // is held until then (or until the connection is dropped).
    let chunks = (0..page.len()).step_by(CHUNK_BYTES).map(move |start| {
        let end = (start + CHUNK_BYTES).min(page.len());
        Ok::<_, Infallible>(Frame::data(page.slice(start..end)))
    });
    let body = StreamBody::new(tokio_stream::iter(chunks)).map_frame(move |frame| {
        let _slot = &slot;
        frame
    });
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        Body::new(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of one counter.
    fn page() -> MetricsPage {
        let recorder = PrometheusBuilder::new().build_recorder();
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("admit_scaler_test_total").increment(1);
        });
        MetricsPage::new(recorder.handle(), 4)
    }

    #[tokio::test(start_paused = true)]
    async fn scrapes_of_the_same_second_share_one_page() {
        let page = page();
        let first = page.page().await;
        assert!(first.starts_with(b"# TYPE admit_scaler_test_total counter"));
        let second = page.page().await;
        assert_eq!(first.as_ptr(), second.as_ptr(), "one copy");
        tokio::time::advance(FRESH).await;
        let third = page.page().await;
        assert_ne!(first.as_ptr(), third.as_ptr(), "rendered again");
    }

    #[tokio::test(start_paused = true)]
    async fn while_readers_hold_an_older_page_no_third_is_rendered() {
        let page = page();
        let old = page.page().await;
        tokio::time::advance(FRESH).await;
        let latest = page.page().await;
        // A reader still holds the old page: the latest is served, stale.
        tokio::time::advance(FRESH).await;
        assert_eq!(page.page().await.as_ptr(), latest.as_ptr());
        assert_eq!(page.pages.available_permits(), 0);
        // Once it lets go, the next scrape gets a fresh page.
        drop(old);
        assert_eq!(page.pages.available_permits(), 1);
        assert_ne!(page.page().await.as_ptr(), latest.as_ptr());
    }
}
