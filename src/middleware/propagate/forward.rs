//! The client side: the class in scope written onto outbound requests.

use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue};
use tower_layer::Layer;
use tower_service::Service;

use super::current;
use crate::criticality::{CRITICALITY_HEADER, Criticality};

/// A tower layer for clients: writes the class in scope ([`current`]) onto each outbound
/// request as a header (HTTP) or metadata (gRPC), [`CRITICALITY_HEADER`] by default, unless the
/// request carries one already. Outside a [`ScopeLayer`](super::ScopeLayer) it writes the
/// [fallback](Self::with_fallback) class if one is set, and otherwise nothing.
///
/// For a tonic client, wrap its channel:
/// `ServiceBuilder::new().layer(PropagateLayer::new()).service(channel)`.
#[derive(Clone, Debug)]
pub struct PropagateLayer {
    name: HeaderName,
    fallback: Option<Criticality>,
}

impl PropagateLayer {
    /// Writes [`CRITICALITY_HEADER`], without a fallback.
    pub fn new() -> Self {
        PropagateLayer {
            name: HeaderName::from_static(CRITICALITY_HEADER),
            fallback: None,
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

    /// Writes `class` on requests made outside any request's scope (a background job's).
    #[must_use]
    pub fn with_fallback(self, class: Criticality) -> Self {
        PropagateLayer {
            fallback: Some(class),
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
            name: self.name.clone(),
            fallback: self.fallback,
        }
    }
}

/// The service of a [`PropagateLayer`].
#[derive(Clone, Debug)]
pub struct PropagateService<S> {
    inner: S,
    name: HeaderName,
    fallback: Option<Criticality>,
}

impl<S> PropagateService<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
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
        let headers = request.headers_mut();
        if !headers.contains_key(&self.name)
            && let Some(class) = current().or(self.fallback)
        {
            headers.insert(self.name.clone(), HeaderValue::from_static(class.as_str()));
        }
        self.inner.call(request)
    }
}
