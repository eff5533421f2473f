//! How a [`ShedLayer`](super::ShedLayer) holds its shedder.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use super::Shedder;
use super::cpu::CpuSignal;
use crate::clock::Clock;

/// The shedder a [`ShedLayer`](super::ShedLayer) and its services share: in an `Arc`, or a
/// `&'static` reference.
///
/// Every request the layer admits holds the shedder until it completes. With an `Arc` that is a
/// reference-count increment and decrement per request, two atomic read-modify-writes on a line
/// every core shares; a `&'static` shedder (a `static` in a `LazyLock`, or one leaked with
/// `Box::leak` at start-up, which suits a process-wide shedder) costs nothing. See the README's
/// benchmarks.
///
/// You rarely name this type: [`ShedLayer::new`](super::ShedLayer::new) takes a [`Shedder`], an
/// `Arc<Shedder>` or a `&'static Shedder`.
///
/// # Example
///
/// ```
/// use std::sync::LazyLock;
/// use admit::shed::{ShedLayer, Shedder};
///
/// static SHEDDER: LazyLock<Shedder> =
///     LazyLock::new(|| Shedder::builder().build().expect("valid shedder settings"));
///
/// let layer = ShedLayer::new(&*SHEDDER).http();
/// # let _ = layer;
/// ```
pub enum SharedShedder<C: Clock + 'static, S: CpuSignal + 'static> {
    /// Shared by reference counting.
    Arc(Arc<Shedder<C, S>>),
    /// Shared for the rest of the program.
    Static(&'static Shedder<C, S>),
}

impl<C: Clock + 'static, S: CpuSignal + 'static> Deref for SharedShedder<C, S> {
    type Target = Shedder<C, S>;

    #[inline]
    fn deref(&self) -> &Shedder<C, S> {
        match self {
            SharedShedder::Arc(shedder) => shedder,
            SharedShedder::Static(shedder) => shedder,
        }
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static> Clone for SharedShedder<C, S> {
    #[inline]
    fn clone(&self) -> Self {
        match self {
            SharedShedder::Arc(shedder) => SharedShedder::Arc(Arc::clone(shedder)),
            SharedShedder::Static(shedder) => SharedShedder::Static(shedder),
        }
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static> From<Shedder<C, S>> for SharedShedder<C, S> {
    fn from(shedder: Shedder<C, S>) -> Self {
        SharedShedder::Arc(Arc::new(shedder))
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static> From<Arc<Shedder<C, S>>> for SharedShedder<C, S> {
    fn from(shedder: Arc<Shedder<C, S>>) -> Self {
        SharedShedder::Arc(shedder)
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static> From<&'static Shedder<C, S>>
    for SharedShedder<C, S>
{
    fn from(shedder: &'static Shedder<C, S>) -> Self {
        SharedShedder::Static(shedder)
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static> fmt::Debug for SharedShedder<C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            SharedShedder::Arc(_) => "SharedShedder::Arc",
            SharedShedder::Static(_) => "SharedShedder::Static",
        };
        f.debug_tuple(kind).field(&**self).finish()
    }
}
