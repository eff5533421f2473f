//! Whether a request came over HTTP/1.

use super::Inspect;
use crate::signal::Arrival;

/// Reads whether an HTTP request came over HTTP/1: what the
/// [`DrainLayer`](crate::drain::DrainLayer) reads, to close HTTP/1 connections while it drains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpVersion;

impl<B> Inspect<http::Request<B>> for HttpVersion {
    #[inline]
    fn inspect(&self, request: &http::Request<B>) -> Arrival {
        Arrival::new().with_http1(request.version() <= http::Version::HTTP_11)
    }
}
