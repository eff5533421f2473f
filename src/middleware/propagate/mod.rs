//! Carrying a request's [`Criticality`] to the requests made while serving it.
//!
//! On the server, [`ScopeLayer`] reads each request's class (with any [`Inspect`](super::Inspect) reader, such
//! as [`CriticalityHeader`](super::CriticalityHeader)) and keeps it in scope while the inner
//! service handles the request: [`current`] returns it from the handler's code, on whatever
//! thread polls it. On the client, [`PropagateLayer`] (feature `http`) writes the class in
//! scope onto each outbound request as the [`CRITICALITY_HEADER`](crate::criticality::CRITICALITY_HEADER)
//! header, which is also gRPC metadata, unless the request already carries one.
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

thread_local! {
    /// The class of the request whose handling runs on this thread now, if any.
    static CURRENT: Cell<Option<Criticality>> = const { Cell::new(None) };
}

/// The class of the request being handled, inside a [`ScopeLayer`]; `None` outside one.
pub fn current() -> Option<Criticality> {
    CURRENT.get()
}

/// Puts `class` in scope while it lives, and the class it found back when dropped, also when
/// what runs inside panics.
#[must_use = "the class is in scope while the guard lives"]
struct InScope(Option<Criticality>);

impl InScope {
    fn enter(class: Criticality) -> Self {
        InScope(CURRENT.replace(Some(class)))
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

    /// What a client behind `layer` sends for a request that carries `preset`.
    fn sent(layer: &PropagateLayer, preset: Option<&'static str>) -> Option<String> {
        let mut service = layer.layer(service_fn(|request: http::Request<()>| {
            let value = request.headers().get("admit-criticality").cloned();
            std::future::ready(Ok::<_, Infallible>(value))
        }));
        let mut request = http::Request::new(());
        if let Some(preset) = preset {
            request
                .headers_mut()
                .insert("admit-criticality", preset.parse().unwrap());
        }
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let answer = match std::pin::pin!(service.call(request)).poll(&mut cx) {
            std::task::Poll::Ready(Ok(value)) => value,
            _ => unreachable!("a ready future"),
        };
        answer.map(|value| value.to_str().unwrap().to_owned())
    }

    #[test]
    fn scopes_nest_and_restore_also_on_panic() {
        assert_eq!(current(), None);
        {
            let _outer = InScope::enter(Criticality::Sheddable);
            {
                let _inner = InScope::enter(Criticality::CriticalPlus);
                assert_eq!(current(), Some(Criticality::CriticalPlus));
            }
            assert_eq!(current(), Some(Criticality::Sheddable));
        }
        assert_eq!(current(), None);
        let panicked = std::panic::catch_unwind(|| {
            let _scope = InScope::enter(Criticality::Critical);
            panic!("the handler");
        });
        assert!(panicked.is_err());
        assert_eq!(current(), None);
    }

    #[test]
    fn the_client_writes_the_class_in_scope_or_its_fallback_and_keeps_one_set() {
        let plain = PropagateLayer::new();
        assert_eq!(sent(&plain, None), None);
        let fallback = PropagateLayer::new().with_fallback(Criticality::Sheddable);
        assert_eq!(sent(&fallback, None).as_deref(), Some("sheddable"));
        {
            let _scope = InScope::enter(Criticality::SheddablePlus);
            assert_eq!(sent(&plain, None).as_deref(), Some("sheddable_plus"));
            assert_eq!(sent(&fallback, None).as_deref(), Some("sheddable_plus"));
            assert_eq!(sent(&plain, Some("critical")).as_deref(), Some("critical"));
        }
    }
}
