//! What the middleware needs from a limiter.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::classify::Outcome;
use crate::Shared;
use crate::respond::Refusal;
use crate::signal::Arrival;
use crate::signal::cpu::CpuWait;

/// A limiter that [`AdmitLayer`](super::AdmitLayer) can apply to every request: it decides
/// ([`Admission`]), an admitted request holds a [`Permit`](Limiter::Permit) until the inner
/// service answers, and the permit then records the request's [`Outcome`].
///
/// Implemented by [`Shedder`](crate::shed::Shedder) (its permit records a pass or a failure),
/// [`WarmUp`](crate::warmup::WarmUp) and
/// [`SentinelWarmUp`](crate::warmup::sentinel::SentinelWarmUp) (their permits hold nothing),
/// [`Drain`](crate::drain::Drain) (its permit counts the request in flight), and
/// [`Bound`](crate::bound::Bound), the one that makes requests wait.
/// Implement it for a limiter of your own to get the same tower glue.
///
/// # Example
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use admit::Shared;
/// use admit::middleware::{Admission, AdmitLayer, Limiter, NoWait};
/// use admit::shed::Overloaded;
/// use admit::signal::Arrival;
///
/// /// Counts the requests it sees and refuses none.
/// #[derive(Debug, Default)]
/// struct Counter(AtomicU64);
///
/// impl Limiter for Counter {
///     type Permit = ();
///     type Refusal = Overloaded;
///     type Wait = NoWait<(), Overloaded>;
///
///     fn admit(this: &Shared<Self>, _arrival: Arrival) -> Admission<(), Overloaded, Self::Wait> {
///         this.0.fetch_add(1, Ordering::Relaxed);
///         Admission::Enter(())
///     }
/// }
///
/// let layer = AdmitLayer::new(Counter::default());
/// # let _ = layer;
/// ```
pub trait Limiter: Send + Sync + 'static {
    /// What an admitted request holds until its response is ready. Finished with the
    /// request's outcome, or dropped unfinished when the request is cancelled.
    type Permit: Finish;
    /// Why a request was refused.
    type Refusal: Refusal;
    /// A request held back until it may enter: resolves to its permit or its refusal, and
    /// gives up its place when dropped. [`NoWait`] for a limiter that never holds one back.
    type Wait: Future<Output = Result<Self::Permit, Self::Refusal>>;

    /// Decides a request arriving now, knowing what the layer's [reader](super::Inspect) read
    /// from it (the [`Arrival`]; a limiter with a clock sets its reading with
    /// [`Arrival::at`] before its signals see it). `this` is the shared handle, so a permit can
    /// keep the limiter alive (a clone of the `Arc`, or the `&'static` reference).
    ///
    /// A refusal is answered by the layer's [responder](crate::respond); a request told to
    /// wait reaches the inner service when its wait resolves to a permit.
    fn admit(
        this: &Shared<Self>,
        arrival: Arrival,
    ) -> Admission<Self::Permit, Self::Refusal, Self::Wait>
    where
        Self: Sized;

    /// Counts a request offered to this limiter's layer first: the layer calls it before
    /// deciding, for each request no admit layer outside it is handling, whether it then
    /// admits or refuses. The default counts nothing. admit's limiters add one to a counter
    /// published as `admit_offered_requests_total`, which summed over a service's series counts
    /// every arrival once, refusals included, however the layers are stacked.
    ///
    /// Every admit layer ([`AdmitLayer`](super::AdmitLayer) with any limiter, the tonic
    /// `WarmUpInterceptor`) counts only the requests it sees first: it knows it is nested when it
    /// runs while a layer outside it calls its inner service or polls that service's future.
    /// That is exact when what lies between them calls inward synchronously: directly, axum's
    /// `Router` (also its `Router::layer`), tonic's routes, tower's util, limit and timeout
    /// layers. A layer that hands the request to another task between two admit layers (tower's
    /// `Buffer`) makes the inner one count it again. The interceptor marks nothing, as tonic
    /// calls the intercepted service itself: an admit layer inside an intercepted service counts
    /// again (`with_interceptor` puts only the generated server there). A request a handler
    /// makes through another admit layer while its own request is polled (an outgoing client's
    /// limiter) counts nowhere, as it is not an arrival.
    #[inline]
    fn count_offered(this: &Shared<Self>)
    where
        Self: Sized,
    {
        let _ = this;
    }
}

/// What a [`Limiter`] decides for a request.
#[derive(Debug)]
pub enum Admission<P, R, W> {
    /// It enters now, holding this permit.
    Enter(P),
    /// It waits: the future resolves to its permit or its refusal.
    Wait(W),
    /// It is refused.
    Refuse(R),
}

impl<P, R, W> From<Result<P, R>> for Admission<P, R, W> {
    #[inline(always)]
    fn from(decision: Result<P, R>) -> Self {
        match decision {
            Ok(permit) => Admission::Enter(permit),
            Err(refusal) => Admission::Refuse(refusal),
        }
    }
}

/// The [`Limiter::Wait`] of a limiter that never makes a request wait: it cannot be made.
pub struct NoWait<P, R> {
    pub(crate) never: std::convert::Infallible,
    decision: PhantomData<fn() -> (P, R)>,
}

impl<P, R> Future for NoWait<P, R> {
    type Output = Result<P, R>;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.never {}
    }
}

impl<P, R> fmt::Debug for NoWait<P, R> {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.never {}
    }
}

/// An admitted request's hold on its limiter.
///
/// The layer calls [`finish`](Finish::finish) once, when the inner service answers, then drops
/// the permit. Dropping it unfinished ends the request as cancelled (for the shedder, a
/// failure), so a permit must remember that it finished.
///
/// # Example
///
/// ```
/// use admit::middleware::{Finish, Outcome};
///
/// /// Prints each outcome; a permit dropped unfinished was cancelled.
/// #[derive(Debug)]
/// struct Logged {
///     open: bool,
/// }
///
/// impl Finish for Logged {
///     fn finish(&mut self, outcome: Outcome) {
///         if std::mem::replace(&mut self.open, false) {
///             println!("finished: {outcome:?}");
///         }
///     }
/// }
///
/// impl Drop for Logged {
///     fn drop(&mut self) {
///         if self.open {
///             println!("cancelled");
///         }
///     }
/// }
///
/// let mut permit = Logged { open: true };
/// permit.finish(Outcome::Pass);
/// drop(permit); // prints nothing more
/// ```
pub trait Finish {
    /// Ends the request with `outcome`. It takes `&mut self` so that the layer's future
    /// finishes the permit where it lies, without moving it out first.
    fn finish(&mut self, outcome: Outcome);

    /// Ends the request with `outcome`, its work having waited `cpu_wait` for a CPU (what the
    /// [classifier](super::Classify::cpu_wait) read from the response). The layer calls this
    /// one; the default ignores the wait.
    #[inline]
    fn finish_after(&mut self, outcome: Outcome, cpu_wait: CpuWait) {
        let _ = cpu_wait;
        self.finish(outcome);
    }

    /// Sees an admitted response's head before its body takes the permit, and says whether
    /// the request goes on until the body ends: when it does not, the layer finishes the permit
    /// at once. [`AtBodyEnd`](super::AtBodyEnd) calls it; the default changes nothing and goes
    /// on. The drain's permit closes HTTP/1 connections here, and ends an upgrade's request
    /// with its `101`.
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    #[inline]
    fn on_head(&mut self, status: http::StatusCode, headers: &mut http::HeaderMap) -> bool {
        let _ = (status, headers);
        true
    }
}

/// Nothing to release: limiters that decide once and record nothing afterwards.
impl Finish for () {
    #[inline]
    fn finish(&mut self, _outcome: Outcome) {}
}

/// What [`AdmitLayer::new`](super::AdmitLayer::new) accepts: a limiter, an `Arc` of one, or a
/// `&'static` one (see [`Shared`]).
pub trait IntoShared<L: Limiter> {
    /// The shared handle.
    fn into_shared(self) -> Shared<L>;
}

impl<L: Limiter> IntoShared<L> for L {
    fn into_shared(self) -> Shared<L> {
        Shared::new(self)
    }
}

impl<L: Limiter> IntoShared<L> for std::sync::Arc<L> {
    fn into_shared(self) -> Shared<L> {
        Shared::Arc(self)
    }
}

impl<L: Limiter> IntoShared<L> for &'static L {
    fn into_shared(self) -> Shared<L> {
        Shared::Static(self)
    }
}

impl<L: Limiter> IntoShared<L> for Shared<L> {
    fn into_shared(self) -> Shared<L> {
        self
    }
}
