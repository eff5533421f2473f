//! How a limiter is shared between the services and permits that use it.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// The limiter an [`AdmitLayer`](crate::middleware::AdmitLayer) and all its services share: in an `Arc`,
/// or a `&'static` reference.
///
/// A limiter whose permits hold it until the request completes (the shedder) pays for an
/// `Arc` with a reference-count increment and decrement per request, two atomic
/// read-modify-writes on a line every core shares; a `&'static` limiter (a `static` in a
/// `LazyLock`, or one leaked with `Box::leak` at start-up, which suits a process-wide one)
/// costs nothing.
///
/// You rarely name this type: [`AdmitLayer::new`](crate::middleware::AdmitLayer::new) takes a limiter, an
/// `Arc` of one or a `&'static` one.
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
#[non_exhaustive]
pub enum Shared<L: 'static> {
    /// Shared by reference counting.
    Arc(Arc<L>),
    /// Shared for the rest of the program.
    Static(&'static L),
}

impl<L: 'static> Shared<L> {
    /// `limiter` in a new `Arc`.
    pub fn new(limiter: L) -> Self {
        Shared::Arc(Arc::new(limiter))
    }
}

impl<L: 'static> Deref for Shared<L> {
    type Target = L;

    #[inline]
    fn deref(&self) -> &L {
        match self {
            Shared::Arc(limiter) => limiter,
            Shared::Static(limiter) => limiter,
        }
    }
}

impl<L: 'static> Clone for Shared<L> {
    #[inline]
    fn clone(&self) -> Self {
        match self {
            Shared::Arc(limiter) => Shared::Arc(Arc::clone(limiter)),
            Shared::Static(limiter) => Shared::Static(limiter),
        }
    }
}

impl<L: 'static> From<Arc<L>> for Shared<L> {
    fn from(limiter: Arc<L>) -> Self {
        Shared::Arc(limiter)
    }
}

impl<L: 'static> From<&'static L> for Shared<L> {
    fn from(limiter: &'static L) -> Self {
        Shared::Static(limiter)
    }
}

impl<L: fmt::Debug + 'static> fmt::Debug for Shared<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Shared::Arc(_) => "Shared::Arc",
            Shared::Static(_) => "Shared::Static",
        };
        f.debug_tuple(kind).field(&**self).finish()
    }
}
