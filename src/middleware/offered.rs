//! How an admit layer knows it is the first to see a request (see
//! [`Limiter::count_offered`](super::Limiter::count_offered)), without touching the request (an
//! extension would allocate): a thread-local mark, set while an admit service calls its inner
//! service and while it polls the inner service's future, and restored afterwards, also when
//! they panic. A layer that runs while the mark is set is nested in another and counts nothing.
//!
//! Polls are marked as well as calls because axum's `Router` calls the services that
//! `Router::layer` wrapped from its route future's poll, not from its own `call` (tonic's routes
//! are axum's). The mark is a `Cell<bool>` with a constant initializer and no destructor: reading
//! and writing it is a thread-local access, with nothing to register or allocate.

use std::cell::Cell;

thread_local! {
    /// Set while an admit service calls or polls what is inside it.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `count` unless an admit layer outside the caller is handling the request.
#[inline]
pub(crate) fn count_if_first(count: impl FnOnce()) {
    if !INSIDE.get() {
        count();
    }
}

/// Marks the thread as inside an admit layer while it lives: held across a call of the inner
/// service or a poll of its future. Dropping it puts back the mark it found, also when that
/// call or poll panics.
#[must_use = "the mark lasts while the guard lives"]
pub(crate) struct Inside(bool);

impl Inside {
    /// Sets the mark, keeping the one it found.
    #[inline]
    pub(crate) fn enter() -> Self {
        Inside(INSIDE.replace(true))
    }
}

impl Drop for Inside {
    #[inline]
    fn drop(&mut self) {
        INSIDE.set(self.0);
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::{Inside, count_if_first};

    /// Runs `step` as an admit layer runs what is inside it.
    fn inside<T>(step: impl FnOnce() -> T) -> T {
        let _inside = Inside::enter();
        step()
    }

    fn counted() -> bool {
        let mut counted = false;
        count_if_first(|| counted = true);
        counted
    }

    #[test]
    fn only_the_outermost_counts_and_the_mark_is_restored() {
        assert!(counted());
        inside(|| {
            assert!(!counted());
            inside(|| assert!(!counted()));
            // Leaving the nested step keeps the outer mark.
            assert!(!counted());
        });
        assert!(counted());
    }

    #[test]
    fn a_panic_inside_restores_the_mark() {
        let panicked = std::panic::catch_unwind(|| inside(|| panic!("the inner service")));
        assert!(panicked.is_err());
        assert!(counted());
    }
}
