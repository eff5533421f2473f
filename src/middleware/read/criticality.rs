//! Where a layer reads each request's [`Criticality`].

use std::fmt;

use super::Inspect;
use crate::criticality::Criticality;
use crate::signal::Arrival;

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
/// assert_eq!(by_path.inspect(&request).class(), Some(Criticality::Sheddable));
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct CriticalityFrom<F>(pub F);

impl<Req, F: Fn(&Req) -> Criticality> Inspect<Req> for CriticalityFrom<F> {
    #[inline]
    fn inspect(&self, request: &Req) -> Arrival {
        Arrival::new().with_class((self.0)(request))
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

    use http::header::InvalidHeaderName;
    use http::{Extensions, HeaderMap, HeaderName};

    use super::super::Inspect;
    use crate::criticality::{CRITICALITY_HEADER, Claim, Criticality, claim};
    use crate::signal::Arrival;

    /// Reads a request's class from a header, or from gRPC metadata (the same thing on the
    /// wire): [`CRITICALITY_HEADER`] by default, a [`Criticality`] name such as `sheddable`
    /// or `CRITICAL_PLUS`.
    ///
    /// - A request without the header gets the [default](Self::with_default) class
    ///   (`critical`).
    /// - Several lines of the header, and comma-separated elements (a proxy may fold lines
    ///   into one), are one list whose **last** element counts: an edge proxy that appends its
    ///   own line (`http-request add-header` in HAProxy) decides the class whatever the client
    ///   sent before it. Empty elements are skipped; the elements before the last are not read.
    /// - A class above the [cap](Self::with_cap) counts as the cap: by default a caller may
    ///   claim at most `critical`, so `critical_plus` is reserved for classes your own code
    ///   sets, and for the callers you [trust](Self::with_trusted). Raise the cap itself only
    ///   where every caller is trusted (behind a proxy that strips or overwrites the header
    ///   from outside requests).
    /// - A last element that names no class (or a header with no element at all) gets the
    ///   default too, and is counted ([`invalid`](Self::invalid)), never guessed at.
    ///
    /// Clones share the count. Reading allocates nothing.
    ///
    /// ```
    /// use admit::criticality::Criticality;
    /// use admit::middleware::{CriticalityHeader, Inspect};
    ///
    /// let header = CriticalityHeader::new().with_default(Criticality::SheddablePlus);
    /// let read = |lines: &[&str]| {
    ///     let mut request = http::Request::builder();
    ///     for line in lines {
    ///         request = request.header("admit-criticality", *line);
    ///     }
    ///     header.inspect(&request.body(()).unwrap()).class()
    /// };
    /// assert_eq!(read(&["sheddable"]), Some(Criticality::Sheddable));
    /// assert_eq!(read(&[]), Some(Criticality::SheddablePlus));
    /// assert_eq!(read(&["CRITICAL_PLUS"]), Some(Criticality::Critical)); // capped
    /// assert_eq!(read(&["critical_plus", "sheddable"]), Some(Criticality::Sheddable)); // the last line
    /// assert_eq!(read(&["urgent"]), Some(Criticality::SheddablePlus));
    /// assert_eq!(header.invalid(), 1);
    /// ```
    #[derive(Clone)]
    pub struct CriticalityHeader {
        name: HeaderName,
        default: Criticality,
        cap: Criticality,
        trusted: Option<Trusted>,
        invalid: Arc<AtomicU64>,
    }

    /// Which callers are trusted, and how high they may claim.
    #[derive(Clone)]
    struct Trusted {
        cap: Criticality,
        caller: Arc<TrustedCaller>,
    }

    /// Whether a request comes from a trusted caller, from its headers and extensions.
    type TrustedCaller = dyn Fn(&HeaderMap, &Extensions) -> bool + Send + Sync;

    impl CriticalityHeader {
        /// Reads [`CRITICALITY_HEADER`]; `critical` by default, capped at `critical`, no caller
        /// trusted.
        pub fn new() -> Self {
            CriticalityHeader {
                name: HeaderName::from_static(CRITICALITY_HEADER),
                default: Criticality::Critical,
                cap: Criticality::Critical,
                trusted: None,
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

        /// The highest class a request may claim; a higher one counts as `cap`. Callers that
        /// [`with_trusted`](Self::with_trusted) trusts have a cap of their own.
        #[must_use]
        pub fn with_cap(self, cap: Criticality) -> Self {
            CriticalityHeader { cap, ..self }
        }

        /// Callers for which `trusted` returns true may claim up to `cap` instead of the
        /// [cap](Self::with_cap) every other caller has. `trusted` sees the request's headers
        /// and extensions: where the server put the peer's address (axum's
        /// `ConnectInfo<SocketAddr>`, tonic's `TcpConnectInfo`), a TLS identity, or an
        /// authentication layer (placed before this reader) its marker. It is called only for
        /// a request that claims more than the lower of the two caps, so it costs nothing on
        /// other requests, and nothing at all until it is set. A later call replaces it.
        ///
        /// ```
        /// use admit::criticality::Criticality;
        /// use admit::middleware::{CriticalityHeader, Inspect};
        ///
        /// /// What an authentication layer inserts for a request from another of our services.
        /// #[derive(Clone)]
        /// struct Internal;
        ///
        /// let header = CriticalityHeader::new()
        ///     .with_trusted(Criticality::CriticalPlus, |_headers, extensions| {
        ///         extensions.get::<Internal>().is_some()
        ///     });
        /// let mut request = http::Request::get("/")
        ///     .header("admit-criticality", "critical_plus")
        ///     .body(())?;
        /// assert_eq!(header.inspect(&request).class(), Some(Criticality::Critical));
        /// request.extensions_mut().insert(Internal);
        /// assert_eq!(header.inspect(&request).class(), Some(Criticality::CriticalPlus));
        /// # Ok::<(), http::Error>(())
        /// ```
        #[must_use]
        pub fn with_trusted<F>(self, cap: Criticality, trusted: F) -> Self
        where
            F: Fn(&HeaderMap, &Extensions) -> bool + Send + Sync + 'static,
        {
            CriticalityHeader {
                trusted: Some(Trusted {
                    cap,
                    caller: Arc::new(trusted),
                }),
                ..self
            }
        }

        /// The highest class a [trusted](Self::with_trusted) caller may claim, if any caller
        /// is trusted.
        fn trusted_cap(&self) -> Option<Criticality> {
            self.trusted.as_ref().map(|trusted| trusted.cap)
        }

        /// How many requests' headers named no class, since the reader was built.
        pub fn invalid(&self) -> u64 {
            self.invalid.load(Ordering::Relaxed)
        }

        /// The class of a request with these headers and extensions.
        fn class(&self, headers: &HeaderMap, extensions: &Extensions) -> Criticality {
            match claim(headers, &self.name) {
                Claim::Absent => self.default,
                Claim::Invalid => {
                    self.invalid.fetch_add(1, Ordering::Relaxed);
                    self.default
                }
                Claim::Class(claimed) => claimed.min(self.cap_for(claimed, headers, extensions)),
            }
        }

        /// The cap of a request that claims `claimed`: the trusted one if it matters and the
        /// caller is trusted.
        #[inline]
        fn cap_for(
            &self,
            claimed: Criticality,
            headers: &HeaderMap,
            extensions: &Extensions,
        ) -> Criticality {
            match &self.trusted {
                Some(trusted)
                    if claimed > trusted.cap.min(self.cap)
                        && (trusted.caller)(headers, extensions) =>
                {
                    trusted.cap
                }
                _ => self.cap,
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
        fn inspect(&self, request: &http::Request<B>) -> Arrival {
            Arrival::new().with_class(self.class(request.headers(), request.extensions()))
        }
    }

    impl fmt::Debug for CriticalityHeader {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("CriticalityHeader")
                .field("name", &self.name)
                .field("default", &self.default)
                .field("cap", &self.cap)
                .field("trusted_cap", &self.trusted_cap())
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
    use crate::middleware::Inspect;
    use crate::signal::Arrival;

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
        let class = |value| header.inspect(&request(value)).class().unwrap();
        for claimed in Criticality::ALL {
            assert_eq!(class(Some(claimed.as_str())), claimed);
        }
        assert_eq!(class(None), Criticality::Sheddable);
        assert_eq!(class(Some("")), Criticality::Sheddable);
        assert_eq!(class(Some("critical, urgent")), Criticality::Sheddable);
        assert_eq!(class(Some("urgent, critical")), Criticality::Critical);
        assert_eq!(header.invalid(), 2);
        let capped = header.clone().with_cap(Criticality::SheddablePlus);
        assert_eq!(
            capped.inspect(&request(Some("critical"))).class(),
            Some(Criticality::SheddablePlus)
        );
        assert!(CriticalityHeader::new().with_name("bad name").is_err());
    }

    /// A request with the lines `lines` of `x-class`, from a caller marked `Internal` or not.
    fn from(lines: &[&str], internal: bool) -> http::Request<()> {
        let mut request = http::Request::builder();
        for line in lines {
            request = request.header("x-class", *line);
        }
        if internal {
            request = request.extension(Internal);
        }
        request.body(()).unwrap()
    }

    /// An authentication layer's mark of a trusted caller.
    #[derive(Clone, Copy, Debug)]
    struct Internal;

    #[test]
    fn the_last_line_wins_and_is_capped() {
        let header = CriticalityHeader::new().with_name("x-class").unwrap();
        let class = |lines| header.inspect(&from(lines, false)).class().unwrap();
        assert_eq!(
            class(&["critical_plus", "sheddable"]),
            Criticality::Sheddable
        );
        assert_eq!(
            class(&["sheddable", "critical_plus"]),
            Criticality::Critical
        );
        assert_eq!(class(&["sheddable", "urgent"]), Criticality::Critical);
        assert_eq!(header.invalid(), 1);
    }

    #[test]
    fn trusted_callers_have_their_own_cap_and_are_asked_only_when_it_matters() {
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = asked.clone();
        let header = CriticalityHeader::new()
            .with_name("x-class")
            .unwrap()
            .with_cap(Criticality::SheddablePlus)
            .with_trusted(Criticality::CriticalPlus, move |headers, extensions| {
                assert!(headers.contains_key("x-class"));
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                extensions.get::<Internal>().is_some()
            });
        let class = |lines, internal| header.inspect(&from(lines, internal)).class();
        for internal in [false, true] {
            assert_eq!(
                class(&["sheddable"], internal),
                Some(Criticality::Sheddable)
            );
            assert_eq!(class(&[], internal), Some(Criticality::Critical));
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(
            class(&["critical_plus"], false),
            Some(Criticality::SheddablePlus)
        );
        assert_eq!(
            class(&["critical"], false),
            Some(Criticality::SheddablePlus)
        );
        assert_eq!(
            class(&["critical_plus"], true),
            Some(Criticality::CriticalPlus)
        );
        assert_eq!(class(&["critical"], true), Some(Criticality::Critical));
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 4);
        // A trusted cap below the common one lowers what trusted callers may claim.
        let lower = header
            .clone()
            .with_trusted(Criticality::Sheddable, |_, extensions| {
                extensions.get::<Internal>().is_some()
            });
        let class = |lines, internal| lower.inspect(&from(lines, internal)).class();
        assert_eq!(class(&["critical"], true), Some(Criticality::Sheddable));
        assert_eq!(
            class(&["critical"], false),
            Some(Criticality::SheddablePlus)
        );
        // Clone and Debug, with the trusted cap but not the function.
        let debug = format!("{lower:?}");
        assert!(debug.contains("trusted_cap: Some(Sheddable)"), "{debug}");
    }

    #[test]
    fn a_pair_reads_with_both_and_the_first_wins() {
        /// Reads a 3 ms wait.
        struct Waited;
        impl Inspect<http::Request<()>> for Waited {
            fn inspect(&self, _: &http::Request<()>) -> Arrival {
                Arrival::new().with_wait(Duration::from_millis(3))
            }
        }
        let wait = Waited;
        let sheddable = CriticalityFrom(|_: &http::Request<()>| Criticality::Sheddable);
        let read = (wait, sheddable).inspect(&request(None));
        assert_eq!(
            read,
            Arrival::new()
                .with_wait(Duration::from_millis(3))
                .with_class(Criticality::Sheddable)
        );
        let both = (
            sheddable,
            CriticalityHeader::new().with_name("x-class").unwrap(),
        );
        assert_eq!(
            both.inspect(&request(Some("critical"))).class(),
            Some(Criticality::Sheddable)
        );
    }
}
