//! The `StreamIsActive` streams open, counted in all and per namespace, each count capped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The streams open now and their caps.
#[derive(Debug)]
pub(super) struct Streams {
    max: usize,
    max_per_namespace: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_namespace: HashMap<Arc<str>, usize>,
}

/// Which cap a new stream would pass, and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Full {
    /// Streams in all.
    Scaler(usize),
    /// Streams for one namespace.
    Namespace(usize),
}

/// A stream counted as open while it lives.
#[derive(Debug)]
pub(super) struct OpenStream {
    streams: Arc<Streams>,
    namespace: Arc<str>,
}

impl Streams {
    /// At most `max` streams open, `max_per_namespace` for one namespace.
    pub(super) fn new(max: usize, max_per_namespace: usize) -> Arc<Self> {
        Arc::new(Streams {
            max,
            max_per_namespace,
            open: Mutex::new(Open::default()),
        })
    }

    /// How many streams are open.
    pub(super) fn open(&self) -> usize {
        lock(&self.open).total
    }

    /// A stream of `namespace` counted as open, unless a cap is reached.
    pub(super) fn open_one(self: &Arc<Self>, namespace: &Arc<str>) -> Result<OpenStream, Full> {
        let mut open = lock(&self.open);
        if open.total >= self.max {
            return Err(Full::Scaler(self.max));
        }
        let in_namespace = open.per_namespace.get(namespace).copied().unwrap_or(0);
        if in_namespace >= self.max_per_namespace {
            return Err(Full::Namespace(self.max_per_namespace));
        }
        open.total += 1;
        open.per_namespace
            .insert(Arc::clone(namespace), in_namespace + 1);
        Ok(OpenStream {
            streams: Arc::clone(self),
            namespace: Arc::clone(namespace),
        })
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let mut open = lock(&self.streams.open);
        open.total -= 1;
        if let Some(count) = open.per_namespace.get_mut(&self.namespace) {
            *count -= 1;
            if *count == 0 {
                open.per_namespace.remove(&self.namespace);
            }
        }
    }
}

/// The guard, whether or not another thread panicked holding the lock.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_capped_in_all_and_per_namespace() {
        let streams = Streams::new(3, 2);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let first = streams.open_one(&a).unwrap();
        let _second = streams.open_one(&a).unwrap();
        assert_eq!(streams.open_one(&a).unwrap_err(), Full::Namespace(2));
        let third = streams.open_one(&b).unwrap();
        assert_eq!(streams.open_one(&b).unwrap_err(), Full::Scaler(3));
        assert_eq!(streams.open(), 3);
        drop((first, third));
        assert_eq!(streams.open(), 1);
        streams.open_one(&a).unwrap();
    }
}
