//! Where a layer reads each request's [`Criticality`].

use std::fmt;

use super::{Inbound, Inspect};
use crate::criticality::Criticality;

/// Reads a request's class from a function of the request: for classes that come from the
/// route, the caller's identity or anything else the request says.
///
/// ```
/// use admit::criticality::Criticality;
/// use admit::middleware::{CriticalityFrom, Inspect};
///
/// let by_path = CriticalityFrom(|request: &http::Request<()>| {
///     if request.uri().path().starts_with("/prefetch") {
///         Criticality::Sheddable
///     } else {
///         Criticality::Critical
///     }
/// });
/// let request = http::Request::get("/prefetch/feed").body(())?;
/// assert_eq!(by_path.inspect(&request).criticality(), Some(Criticality::Sheddable));
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct CriticalityFrom<F>(pub F);

impl<Req, F: Fn(&Req) -> Criticality> Inspect<Req> for CriticalityFrom<F> {
    #[inline]
    fn inspect(&self, request: &Req) -> Inbound {
        Inbound::new().with_criticality((self.0)(request))
    }
}

impl<F> fmt::Debug for CriticalityFrom<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CriticalityFrom").finish_non_exhaustive()
    }
}

#[cfg(feature = "http")]
pub use self::header::CriticalityHeader;

#[cfg(feature = "http")]
mod header {
    use std::fmt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use http::HeaderName;
    use http::header::InvalidHeaderName;

    use super::super::{Inbound, Inspect};
    use crate::criticality::{CRITICALITY_HEADER, Criticality};

    /// Reads a request's class from a header, or from gRPC metadata (the same thing on the
    /// wire): [`CRITICALITY_HEADER`] by default, a [`Criticality`] name such as `sheddable`
    /// or `CRITICAL_PLUS`.
    ///
    /// - A request without the header gets the [default](Self::with_default) class
    ///   (`critical`).
    /// - A class above the [cap](Self::with_cap) counts as the cap: by default a caller may
    ///   claim at most `critical`, so `critical_plus` is reserved for classes your own code
    ///   sets. Raise the cap to `critical_plus` only where every caller is trusted (behind a
    ///   proxy that strips the header from outside requests).
    /// - A value that names no class gets the default too, and is counted
    ///   ([`invalid`](Self::invalid)), never guessed at.
    ///
    /// Clones share the count. Reading allocates nothing.
    ///
    /// ```
    /// use admit::criticality::Criticality;
    /// use admit::middleware::{CriticalityHeader, Inspect};
    ///
    /// let header = CriticalityHeader::new().with_default(Criticality::SheddablePlus);
    /// let read = |value: Option<&str>| {
    ///     let mut request = http::Request::builder();
    ///     if let Some(value) = value {
    ///         request = request.header("admit-criticality", value);
    ///     }
    ///     header.inspect(&request.body(()).unwrap()).criticality()
    /// };
    /// assert_eq!(read(Some("sheddable")), Some(Criticality::Sheddable));
    /// assert_eq!(read(None), Some(Criticality::SheddablePlus));
    /// assert_eq!(read(Some("CRITICAL_PLUS")), Some(Criticality::Critical)); // capped
    /// assert_eq!(read(Some("urgent")), Some(Criticality::SheddablePlus));
    /// assert_eq!(header.invalid(), 1);
    /// ```
    #[derive(Clone)]
    pub struct CriticalityHeader {
        name: HeaderName,
        default: Criticality,
        cap: Criticality,
        invalid: Arc<AtomicU64>,
    }

    impl CriticalityHeader {
        /// Reads [`CRITICALITY_HEADER`]; `critical` by default, capped at `critical`.
        pub fn new() -> Self {
            CriticalityHeader {
                name: HeaderName::from_static(CRITICALITY_HEADER),
                default: Criticality::Critical,
                cap: Criticality::Critical,
                invalid: Arc::new(AtomicU64::new(0)),
            }
        }

        /// Reads the header `name` instead.
        ///
        /// # Errors
        ///
        /// `name` is not a valid header name.
        pub fn with_name(self, name: &str) -> Result<Self, InvalidHeaderName> {
            Ok(CriticalityHeader {
                name: HeaderName::try_from(name)?,
                ..self
            })
        }

        /// The class of a request without the header, or with a value that names none.
        #[must_use]
        pub fn with_default(self, default: Criticality) -> Self {
            CriticalityHeader { default, ..self }
        }

        /// The highest class a request may claim; a higher one counts as `cap`.
        #[must_use]
        pub fn with_cap(self, cap: Criticality) -> Self {
            CriticalityHeader { cap, ..self }
        }

        /// The header read.
        pub fn name(&self) -> &HeaderName {
            &self.name
        }

        /// The class of a request that says none.
        pub fn default_class(&self) -> Criticality {
            self.default
        }

        /// The highest class a request may claim.
        pub fn cap(&self) -> Criticality {
            self.cap
        }

        /// How many values named no class, since the reader was built.
        pub fn invalid(&self) -> u64 {
            self.invalid.load(Ordering::Relaxed)
        }

        /// The class of a request with `value` in the header, if any.
        fn class(&self, value: Option<&[u8]>) -> Criticality {
            let Some(value) = value else {
                return self.default;
            };
            match Criticality::parse(value) {
                Some(claimed) => claimed.min(self.cap),
                None => {
                    self.invalid.fetch_add(1, Ordering::Relaxed);
                    self.default
                }
            }
        }
    }

    impl Default for CriticalityHeader {
        fn default() -> Self {
            CriticalityHeader::new()
        }
    }

    impl<B> Inspect<http::Request<B>> for CriticalityHeader {
        #[inline]
        fn inspect(&self, request: &http::Request<B>) -> Inbound {
            let value = request
                .headers()
                .get(&self.name)
                .map(|value| value.as_bytes());
            Inbound::new().with_criticality(self.class(value))
        }
    }

    impl fmt::Debug for CriticalityHeader {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("CriticalityHeader")
                .field("name", &self.name)
                .field("default", &self.default)
                .field("cap", &self.cap)
                .field("invalid", &self.invalid())
                .finish()
        }
    }
}

#[cfg(all(test, feature = "http", not(admit_loom)))]
mod tests {
    use std::time::Duration;

    use super::{CriticalityFrom, CriticalityHeader};
    use crate::criticality::Criticality;
    use crate::middleware::{Inbound, Inspect};

    fn request(value: Option<&str>) -> http::Request<()> {
        let mut request = http::Request::builder();
        if let Some(value) = value {
            request = request.header("x-class", value);
        }
        request.body(()).unwrap()
    }

    #[test]
    fn the_header_is_read_capped_and_defaulted() {
        let header = CriticalityHeader::new()
            .with_name("x-class")
            .unwrap()
            .with_cap(Criticality::CriticalPlus)
            .with_default(Criticality::Sheddable);
        let class = |value| header.inspect(&request(value)).criticality().unwrap();
        for claimed in Criticality::ALL {
            assert_eq!(class(Some(claimed.as_str())), claimed);
        }
        assert_eq!(class(None), Criticality::Sheddable);
        assert_eq!(class(Some("")), Criticality::Sheddable);
        assert_eq!(class(Some("critical,sheddable")), Criticality::Sheddable);
        assert_eq!(header.invalid(), 2);
        let capped = header.clone().with_cap(Criticality::SheddablePlus);
        assert_eq!(
            capped.inspect(&request(Some("critical"))).criticality(),
            Some(Criticality::SheddablePlus)
        );
        assert!(CriticalityHeader::new().with_name("bad name").is_err());
    }

    #[test]
    fn a_pair_reads_with_both_and_the_first_wins() {
        /// Reads a 3 ms wait.
        struct Waited;
        impl Inspect<http::Request<()>> for Waited {
            fn inspect(&self, _: &http::Request<()>) -> Inbound {
                Inbound::new().with_waited(Some(Duration::from_millis(3)))
            }
        }
        let wait = Waited;
        let sheddable = CriticalityFrom(|_: &http::Request<()>| Criticality::Sheddable);
        let read = (wait, sheddable).inspect(&request(None));
        assert_eq!(
            read,
            Inbound::new()
                .with_waited(Some(Duration::from_millis(3)))
                .with_criticality(Criticality::Sheddable)
        );
        let both = (
            sheddable,
            CriticalityHeader::new().with_name("x-class").unwrap(),
        );
        assert_eq!(
            both.inspect(&request(Some("critical"))).criticality(),
            Some(Criticality::Sheddable)
        );
    }
}
