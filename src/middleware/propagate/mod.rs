//! Carrying a request's [`Criticality`] to the requests made while serving it.
//!
//! On the server, [`ScopeLayer`] reads each request's class (with any [`Inspect`](super::Inspect) reader, such
//! as [`CriticalityHeader`](super::CriticalityHeader)) and keeps it in scope while the inner
//! service handles the request: [`current`] returns it from the handler's code, on whatever
//! thread polls it. On the client, [`PropagateLayer`] (feature `http`) writes the class in
//! scope onto each outbound request as the [`CRITICALITY_HEADER`](crate::criticality::CRITICALITY_HEADER)
//! header, which is also gRPC metadata. A request that already carries one (a handler that
//! forwards its incoming headers) gets the lower of its class and the class in scope, so a
//! client's claim never passes the cap its server applied.
//!
//! The scope is a thread-local mark set while the inner service is called and while its future
//! is polled, and restored afterwards: it allocates nothing. Work the handler spawns onto other
//! tasks is outside it; take the class with [`current`] and pass it on.
//!
//! ```
//! use admit::criticality::Criticality;
//! use admit::middleware::CriticalityHeader;
//! use admit::middleware::propagate::{PropagateLayer, ScopeLayer, current};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A downstream service that reports the class it was called with.
//! let downstream = service_fn(|request: http::Request<()>| async move {
//!     let class = request.headers().get("admit-criticality").cloned();
//!     Ok::<_, std::convert::Infallible>(class)
//! });
//! let client = PropagateLayer::new().layer(downstream);
//!
//! // A server whose handler calls the downstream service.
//! let handler = service_fn(move |_: http::Request<()>| {
//!     let client = client.clone();
//!     async move {
//!         assert_eq!(current(), Some(Criticality::Sheddable));
//!         client.oneshot(http::Request::new(())).await
//!     }
//! });
//! let server = ScopeLayer::new(CriticalityHeader::new()).layer(handler);
//! let request = http::Request::get("/").header("admit-criticality", "sheddable").body(())?;
//! let forwarded = server.oneshot(request).await?;
//! assert_eq!(forwarded.unwrap(), "sheddable");
//! # Ok(())
//! # }
//! ```

use std::cell::Cell;

use crate::criticality::Criticality;

#[cfg(feature = "http")]
mod forward;
mod scope;

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::forward::{PropagateLayer, PropagateService};
pub use self::scope::{ScopeFuture, ScopeLayer, ScopeService};

/// What is in scope while a request is handled: its class, and its deadline as a reading of
/// the scope's clock, if known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scope {
    pub(crate) class: Option<Criticality>,
    pub(crate) deadline_nanos: Option<u64>,
}

thread_local! {
    /// The scope of the request whose handling runs on this thread now.
    static CURRENT: Cell<Scope> = const {
        Cell::new(Scope { class: None, deadline_nanos: None })
    };
}

/// The class of the request being handled, inside a [`ScopeLayer`]; `None` outside one.
pub fn current() -> Option<Criticality> {
    CURRENT.get().class
}

/// The deadline of the request being handled, as a reading of its [`ScopeLayer`]'s clock;
/// `None` outside a scope or for a request that carried none.
#[cfg(feature = "http")]
pub(crate) fn deadline_nanos() -> Option<u64> {
    CURRENT.get().deadline_nanos
}

/// Puts a scope in place while it lives, and the scope it found back when dropped, also when
/// what runs inside panics.
#[must_use = "the scope is in place while the guard lives"]
struct InScope(Scope);

impl InScope {
    fn enter(scope: Scope) -> Self {
        InScope(CURRENT.replace(scope))
    }

    #[cfg(all(test, feature = "http", not(admit_loom)))]
    fn class(class: Criticality) -> Self {
        InScope::enter(Scope {
            class: Some(class),
            deadline_nanos: None,
        })
    }
}

impl Drop for InScope {
    fn drop(&mut self) {
        CURRENT.set(self.0);
    }
}

#[cfg(all(test, feature = "http", not(admit_loom)))]
mod tests {
    use std::convert::Infallible;
    use std::future::Future;

    use tower::{Layer, Service, service_fn};

    use super::{InScope, PropagateLayer, current};
    use crate::criticality::Criticality;

    /// The `admit-criticality` lines a client behind `layer` sends for a request that carries
    /// `preset`.
    fn sent(layer: &PropagateLayer, preset: &[&'static str]) -> Vec<String> {
        let mut service = layer.layer(service_fn(|request: http::Request<()>| {
            let lines = request.headers().get_all("admit-criticality");
            let lines = lines.iter().map(|line| line.to_str().unwrap().to_owned());
            std::future::ready(Ok::<_, Infallible>(lines.collect()))
        }));
        let mut request = http::Request::new(());
        for line in preset {
            request
                .headers_mut()
                .append("admit-criticality", line.parse().unwrap());
        }
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::pin::pin!(service.call(request)).poll(&mut cx) {
            std::task::Poll::Ready(Ok(lines)) => lines,
            _ => unreachable!("a ready future"),
        }
    }

    #[test]
    fn scopes_nest_and_restore_also_on_panic() {
        assert_eq!(current(), None);
        {
            let _outer = InScope::class(Criticality::Sheddable);
            {
                let _inner = InScope::class(Criticality::CriticalPlus);
                assert_eq!(current(), Some(Criticality::CriticalPlus));
            }
            assert_eq!(current(), Some(Criticality::Sheddable));
        }
        assert_eq!(current(), None);
        let panicked = std::panic::catch_unwind(|| {
            let _scope = InScope::class(Criticality::Critical);
            panic!("the handler");
        });
        assert!(panicked.is_err());
        assert_eq!(current(), None);
    }

    #[test]
    fn the_client_writes_the_class_in_scope_or_its_fallback() {
        let plain = PropagateLayer::new();
        assert!(sent(&plain, &[]).is_empty());
        let fallback = PropagateLayer::new().with_fallback(Criticality::Sheddable);
        assert_eq!(sent(&fallback, &[]), ["sheddable"]);
        let _scope = InScope::class(Criticality::SheddablePlus);
        assert_eq!(sent(&plain, &[]), ["sheddable_plus"]);
        assert_eq!(sent(&fallback, &[]), ["sheddable_plus"]);
    }

    #[test]
    fn an_existing_header_is_bounded_by_the_class_in_scope() {
        let plain = PropagateLayer::new();
        let fallback = PropagateLayer::new().with_fallback(Criticality::Sheddable);
        // Outside a scope: the fallback bounds it; without one, it is kept as it is.
        assert_eq!(
            sent(&plain, &["critical_plus", "x"]),
            ["critical_plus", "x"]
        );
        assert_eq!(sent(&fallback, &["critical_plus"]), ["sheddable"]);
        assert_eq!(sent(&fallback, &["urgent"]), ["sheddable"]);
        let _scope = InScope::class(Criticality::SheddablePlus);
        for layer in [&plain, &fallback] {
            // A higher claim is lowered; a lower one stays: the lower of the two.
            assert_eq!(sent(layer, &["critical_plus"]), ["sheddable_plus"]);
            assert_eq!(sent(layer, &["SHEDDABLE"]), ["sheddable"]);
            // Unparsable: the class in scope. Several lines: read as one list, the last
            // element counting, and replaced by one line.
            assert_eq!(sent(layer, &["urgent"]), ["sheddable_plus"]);
            assert_eq!(sent(layer, &[""]), ["sheddable_plus"]);
            assert_eq!(sent(layer, &["critical_plus", "sheddable"]), ["sheddable"]);
            assert_eq!(
                sent(layer, &["sheddable", "critical_plus"]),
                ["sheddable_plus"]
            );
            assert_eq!(sent(layer, &["sheddable, urgent"]), ["sheddable_plus"]);
        }
    }

    #[test]
    fn keep_existing_leaves_a_header_as_it_is() {
        let keep = PropagateLayer::new().keep_existing();
        assert_eq!(sent(&keep, &["critical_plus", "x"]), ["critical_plus", "x"]);
        let _scope = InScope::class(Criticality::Sheddable);
        assert_eq!(sent(&keep, &["critical_plus", "x"]), ["critical_plus", "x"]);
        assert_eq!(sent(&keep, &[]), ["sheddable"]);
        let renamed = PropagateLayer::new().with_name("x-class").unwrap();
        assert_eq!(sent(&renamed, &["critical_plus"]), ["critical_plus"]);
        assert!(PropagateLayer::new().with_name("bad name").is_err());
    }
}
