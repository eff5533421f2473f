//! Throttles per destination, in a map of bounded size.

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use super::draw::Draws;
use super::tally::Tally;
use super::throttle::Throttle;
use super::window::Window;
use crate::clock::Clock;
use crate::sync::Mutex;

/// One [`Throttle`] per destination, made on first use, at most `capacity` of them: when a new
/// destination finds the map full, the destination used longest ago leaves it (and its counts
/// with it). A client that calls many backends, or destinations a caller chooses, so never
/// holds more than `capacity` windows.
///
/// Built by [`ThrottleBuilder::per_destination`](super::ThrottleBuilder::per_destination);
/// every throttle has the builder's settings. A lookup takes the map's lock; a destination new
/// to a full map also scans it for the one to leave, so keep the capacity to the destinations a
/// client really calls (a few hundred at most).
///
/// ```
/// use admit::client::Throttle;
///
/// let throttles = Throttle::builder().per_destination::<&'static str>(2)?;
/// let inventory = throttles.get(&"inventory");
/// inventory.refused();
/// let _ = throttles.get(&"pricing");
/// // A third destination makes the one used longest ago, inventory, leave: its counts go.
/// let _ = throttles.get(&"search");
/// assert_eq!(throttles.len(), 2);
/// assert_eq!(throttles.get(&"inventory").snapshot().requests, 0);
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct Throttles<K, C> {
    map: Mutex<Map<K, C>>,
    capacity: usize,
    template: Template<C>,
}

/// The throttles, and when each was last used.
struct Map<K, C> {
    throttles: HashMap<K, (Arc<Throttle<C>>, u64)>,
    uses: u64,
}

/// What every throttle is made with.
#[derive(Debug)]
pub(super) struct Template<C> {
    pub(super) buckets: usize,
    pub(super) bucket_nanos: u64,
    pub(super) k: f64,
    pub(super) name: Option<Cow<'static, str>>,
    pub(super) clock: C,
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> Throttles<K, C> {
    /// At most `capacity` throttles made from `template`.
    pub(super) fn new(capacity: usize, template: Template<C>) -> Self {
        Throttles {
            map: Mutex::new(Map {
                throttles: HashMap::with_capacity(capacity),
                uses: 0,
            }),
            capacity,
            template,
        }
    }

    /// The throttle of `destination`, made now if it has none.
    pub fn get<Q>(&self, destination: &Q) -> Arc<Throttle<C>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut map = self.lock();
        map.uses += 1;
        let now = map.uses;
        if let Some((throttle, used)) = map.throttles.get_mut(destination) {
            *used = now;
            return Arc::clone(throttle);
        }
        if map.throttles.len() >= self.capacity {
            let oldest = map
                .throttles
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                map.throttles.remove::<K>(&oldest);
            }
        }
        let throttle = Arc::new(self.detached());
        map.throttles
            .insert(destination.to_owned(), (Arc::clone(&throttle), now));
        throttle
    }

    /// How many destinations have a throttle now.
    pub fn len(&self) -> usize {
        self.lock().throttles.len()
    }

    /// Whether no destination has a throttle yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each destination's throttle now, in `into` (cleared first): the map's lock is held only
    /// while they are copied out.
    #[cfg(feature = "metrics")]
    pub(crate) fn entries(&self, into: &mut Vec<(K, Arc<Throttle<C>>)>) {
        into.clear();
        let map = self.lock();
        into.extend(
            map.throttles
                .iter()
                .map(|(key, (throttle, _))| (key.clone(), Arc::clone(throttle))),
        );
    }

    /// A throttle with the map's settings, outside the map.
    pub(super) fn detached(&self) -> Throttle<C> {
        let template = &self.template;
        Throttle {
            window: Window::new(template.buckets, template.bucket_nanos),
            k: template.k,
            draws: Draws::seeded(),
            name: template.name.clone(),
            clock: template.clock.clone(),
            attempts: Tally::new(),
            throttled: Tally::new(),
        }
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Map<K, C>> {
        // Nothing under this lock is left half-updated by a panic.
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<K, C> Throttles<K, C> {
    /// The name given to the builder, if any: every throttle of the map has it.
    #[cfg(feature = "metrics")]
    pub(crate) fn name(&self) -> Option<&str> {
        self.template.name.as_deref()
    }
}

impl<K, C> fmt::Debug for Throttles<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttles")
            .field("capacity", &self.capacity)
            .field("k", &self.template.k)
            .field("name", &self.template.name)
            .finish_non_exhaustive()
    }
}
