//! A readiness probe that fails once the drain is announced: [`Drain::readiness`] and
//! [`Readiness`].

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};

use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use tower_service::Service;

use super::{Drain, Phase};

impl Drain {
    /// A readiness probe: `200 ready` while [`is_ready`](Drain::is_ready), then `503
    /// draining`, so that endpoints stop routing here while requests are still served. Route
    /// it outside the [`DrainLayer`](super::DrainLayer), which would refuse it once draining.
    ///
    /// ```
    /// use admit::drain::Drain;
    /// use axum::Router;
    /// use axum::routing::get_service;
    /// use http::{Request, StatusCode};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let drain = Drain::default();
    /// let app: Router = Router::new().route("/readyz", get_service(drain.readiness()));
    ///
    /// let probe = || Request::get("/readyz").body(axum::body::Body::empty()).unwrap();
    /// let response = app.clone().oneshot(probe()).await.unwrap();
    /// assert_eq!(response.status(), StatusCode::OK);
    /// drain.start();
    /// let response = app.oneshot(probe()).await.unwrap();
    /// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn readiness(&self) -> Readiness {
        Readiness {
            drain: self.clone(),
        }
    }
}

/// A tower service answering readiness probes from a [`Drain`]; see [`Drain::readiness`].
///
/// Any request gets `200 OK` with `ready\n` while the drain is ready, else `503 Service
/// Unavailable` with `draining\n`; both `text/plain` and `Cache-Control: no-store`. Like the
/// [`DrainLayer`](super::DrainLayer)'s responses, an HTTP/1 answer carries `Connection: close`
/// once the drain is announced, so that keep-alive connections retire. It never fails and is
/// always ready.
#[derive(Clone, Debug)]
pub struct Readiness {
    drain: Drain,
}

impl Readiness {
    /// The answer now to a request of `version`.
    fn response(&self, version: Version) -> Response<String> {
        let phase = self.drain.phase();
        let (status, body) = if phase < self.drain.inner.config.readiness_fails_at {
            (StatusCode::OK, "ready\n")
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
        };
        let mut response = Response::new(String::from(body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if phase >= Phase::Announced && version <= Version::HTTP_11 {
            crate::respond::close_connection(response.headers_mut());
        }
        response
    }
}

impl<B> Service<Request<B>> for Readiness {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        ready(Ok(self.response(request.version())))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{Request, StatusCode, Version};
    use tower::ServiceExt;

    use super::Readiness;
    use crate::drain::{Drain, Phase};

    /// The status, body and `Connection` header answered to an HTTP/1.1 probe; an HTTP/2
    /// probe gets the same without `Connection`.
    async fn probe(readiness: &Readiness) -> (StatusCode, String, Option<&'static str>) {
        let answer = |version| async move {
            let request = Request::builder().version(version).body(()).unwrap();
            let response = readiness.clone().oneshot(request).await.unwrap();
            let headers = response.headers();
            assert_eq!(headers["cache-control"], "no-store");
            assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
            let connection = headers.get("connection").map(|value| {
                assert_eq!(value, "close");
                "close"
            });
            (response.status(), response.into_body(), connection)
        };
        let http1 = answer(Version::HTTP_11).await;
        let (status, body, connection) = answer(Version::HTTP_2).await;
        assert_eq!((status, &body, connection), (http1.0, &http1.1, None));
        http1
    }

    fn ready(connection: Option<&'static str>) -> (StatusCode, String, Option<&'static str>) {
        (StatusCode::OK, "ready\n".to_owned(), connection)
    }

    fn draining() -> (StatusCode, String, Option<&'static str>) {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "draining\n".to_owned(),
            Some("close"),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn fails_from_the_announcement_by_default() {
        let drain = Drain::default();
        let readiness = drain.readiness();
        assert_eq!(probe(&readiness).await, ready(None));
        drain.start();
        assert_eq!(probe(&readiness).await, draining());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(drain.phase(), Phase::Drained);
        assert_eq!(probe(&readiness).await, draining());
    }

    /// Ready through the announcement, closing HTTP/1 connections all the same.
    #[tokio::test(start_paused = true)]
    async fn fails_from_draining_when_configured_so() {
        let drain = Drain::builder()
            .propagation_delay(Duration::from_secs(5))
            .readiness_fails_at(Phase::Draining)
            .build()
            .unwrap();
        let readiness = drain.readiness();
        assert_eq!(probe(&readiness).await, ready(None));
        drain.start();
        assert_eq!(probe(&readiness).await, ready(Some("close")));
        tokio::time::advance(Duration::from_secs(5) - Duration::from_nanos(1)).await;
        assert_eq!(drain.phase(), Phase::Announced);
        assert_eq!(probe(&readiness).await, ready(Some("close")));
        tokio::time::advance(Duration::from_nanos(1)).await;
        assert_eq!(probe(&readiness).await, draining());
    }

    /// It serves as an axum route, and any request body will do.
    #[tokio::test]
    async fn axum_routes_to_it() {
        use axum::Router;
        use axum::routing::get_service;
        use http_body_util::BodyExt;
        use tower::Service;

        let drain = Drain::default();
        let app: Router = Router::new().route("/readyz", get_service(drain.readiness()));
        let request = || {
            Request::get("/readyz")
                .body(axum::body::Body::empty())
                .unwrap()
        };
        let response = app.clone().oneshot(request()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ready\n");
        drain.start_now();
        let response = app.oneshot(request()).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["cache-control"], "no-store");

        let mut readiness = drain.readiness();
        let response = Service::<Request<String>>::call(&mut readiness, Request::new("x".into()))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
