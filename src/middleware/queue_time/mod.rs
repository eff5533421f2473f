//! How a layer learns how long a request waited before reaching it.

use std::time::Duration;

#[cfg(feature = "http")]
mod request_start;

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::request_start::RequestStart;

/// Where an [`AdmitLayer`](super::AdmitLayer) reads how long a request waited before it
/// arrived (given with [`AdmitLayer::inspect`](super::AdmitLayer::inspect)): in a proxy's queue, or a socket's backlog. The shedder records the wait in its
/// [queue gate](crate::shed::ShedderBuilder::queue_gate) and refuses requests that waited too
/// long while the gate is hot; other limiters ignore it.
///
/// [`NoQueueTime`] (the default) knows nothing; `RequestStart` (feature `http`) reads a
/// request-start header stamped by a proxy (parsed by
/// [`signal::queue::header`](crate::signal::queue::header)); a closure `Fn(&Req) -> Option<Duration>` works too.
pub trait QueueTime<Req> {
    /// How long `request` waited, if known.
    fn waited(&self, request: &Req) -> Option<Duration>;
}

/// Knows no wait: the layer decides on its limiter's other signals alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoQueueTime;

impl<Req> QueueTime<Req> for NoQueueTime {
    #[inline]
    fn waited(&self, _request: &Req) -> Option<Duration> {
        None
    }
}

impl<Req, F> QueueTime<Req> for F
where
    F: Fn(&Req) -> Option<Duration>,
{
    #[inline]
    fn waited(&self, request: &Req) -> Option<Duration> {
        self(request)
    }
}
