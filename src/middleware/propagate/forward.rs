//! The client side: the class in scope written onto outbound requests.

use std::task::{Context, Poll};

use http::header::Entry;
use http::{HeaderName, HeaderValue};
use tower_layer::Layer;
use tower_service::Service;

use super::current;
use crate::criticality::{CRITICALITY_HEADER, Claim, Criticality, claim_lines};

/// A tower layer for clients: writes the class in scope ([`current`]) onto each outbound
/// request as a header (HTTP) or metadata (gRPC), [`CRITICALITY_HEADER`] by default.
///
/// A class is a trust boundary: a handler that forwards its incoming headers must not pass a
/// client's claim past the cap its server's reader applied. So the layer bounds each request by
/// the class in scope, and outside any [`ScopeLayer`](super::ScopeLayer) by its
/// [fallback](Self::with_fallback):
///
/// | the request carries | in scope, or with a fallback | outside scope, no fallback |
/// |---|---|---|
/// | no class header | that class | nothing written |
/// | a class | the lower of the two | kept as it is |
/// | a value that names no class | that class | kept as it is |
///
/// The existing header is read as [`CriticalityHeader`](crate::middleware::CriticalityHeader)
/// reads it (several lines and comma-separated elements are one list whose last element counts),
/// and what the layer writes is one line that replaces all of them. A handler can so lower the
/// class of a call it makes (a prefetch made while serving a `critical` request can say
/// `sheddable`), never raise it above its own (the [guide](crate::guide::criticality) says
/// why). Outside a scope without a fallback the layer has nothing to bound a header with and
/// leaves the request as it is; set a fallback where background work forwards headers it was
/// given.
///
/// [`keep_existing`](Self::keep_existing) turns the bound off for requests that carry the
/// header: for a client whose code sets each class itself and is trusted to.
///
/// For a tonic client, wrap its channel:
/// `ServiceBuilder::new().layer(PropagateLayer::new()).service(channel)`.
#[derive(Clone, Debug)]
pub struct PropagateLayer {
    name: HeaderName,
    fallback: Option<Criticality>,
    keep_existing: bool,
}

impl PropagateLayer {
    /// Writes [`CRITICALITY_HEADER`], without a fallback, bounding an existing header.
    pub fn new() -> Self {
        PropagateLayer {
            name: HeaderName::from_static(CRITICALITY_HEADER),
            fallback: None,
            keep_existing: false,
        }
    }

    /// Writes the header `name` instead.
    ///
    /// # Errors
    ///
    /// `name` is not a valid header name.
    pub fn with_name(self, name: &str) -> Result<Self, http::header::InvalidHeaderName> {
        Ok(PropagateLayer {
            name: HeaderName::try_from(name)?,
            ..self
        })
    }

    /// Writes `class` on requests made outside any request's scope (a background job's), and
    /// bounds the class of those that carry one by it.
    #[must_use]
    pub fn with_fallback(self, class: Criticality) -> Self {
        PropagateLayer {
            fallback: Some(class),
            ..self
        }
    }

    /// Leaves a request that carries the header (any line of it) as it is, whatever the class
    /// in scope: the caller's code sets classes, and is trusted to. Requests without the
    /// header still get the class in scope, or the fallback.
    #[must_use]
    pub fn keep_existing(self) -> Self {
        PropagateLayer {
            keep_existing: true,
            ..self
        }
    }
}

impl Default for PropagateLayer {
    fn default() -> Self {
        PropagateLayer::new()
    }
}

impl<S> Layer<S> for PropagateLayer {
    type Service = PropagateService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PropagateService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of a [`PropagateLayer`].
#[derive(Clone, Debug)]
pub struct PropagateService<S> {
    inner: S,
    layer: PropagateLayer,
}

impl<S> PropagateService<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl PropagateLayer {
    /// Writes the class `headers` should carry, per the table on [`PropagateLayer`], looking
    /// the header up once.
    #[inline]
    fn bound(&self, headers: &mut http::HeaderMap) {
        let Some(bound) = current().or(self.fallback) else {
            return;
        };
        match headers.entry(&self.name) {
            Entry::Vacant(vacant) => {
                vacant.insert(HeaderValue::from_static(bound.as_str()));
            }
            Entry::Occupied(_) if self.keep_existing => {}
            Entry::Occupied(mut lines) => {
                let class = match claim_lines(lines.iter()) {
                    Claim::Class(existing) => existing.min(bound),
                    Claim::Absent | Claim::Invalid => bound,
                };
                // Replaces every line.
                lines.insert(HeaderValue::from_static(class.as_str()));
            }
        }
    }
}

impl<S, B> Service<http::Request<B>> for PropagateService<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        self.layer.bound(request.headers_mut());
        self.inner.call(request)
    }
}
