//! The tower glue every admit limiter shares: one layer, one service, one response future.
//!
//! The [guide](crate::guide::recipes) has the recipes for axum, tonic and other tower stacks.
//!
//! A [`Limiter`] decides each request in `call`; an admitted request holds the limiter's
//! permit in the [`ResponseFuture`] until the inner service answers, when a [classifier](classify)
//! turns the answer into an [`Outcome`] the permit records, or, with [`AtBodyEnd`], in the
//! response's [`AdmitBody`] until its last frame; a refusal is answered by a
//! [responder](crate::respond). A limiter may also make a request wait
//! ([`Admission::Wait`]): the response future then holds the request and the ready inner
//! service until the wait resolves to a permit or a refusal.
//! [`ShedLayer`](crate::shed::ShedLayer), [`WarmUpLayer`](crate::warmup::WarmUpLayer),
//! [`DrainLayer`](crate::drain::DrainLayer) and [`BoundLayer`](crate::bound::BoundLayer) are
//! [`AdmitLayer`] with admit's limiters.
//!
//! | piece | role |
//! |---|---|
//! | [`AdmitLayer`] | holds the [`Shared`](crate::Shared) limiter, the classifier and the responder |
//! | [`AdmitService`] | decides in `call`; holds no reservation while idle or after a refusal |
//! | [`ResponseFuture`] | holds the permit; finishes it with the outcome, or as cancelled when dropped |
//! | [`Hold`]: [`AtResponse`], [`AtBodyEnd`] | when the permit ends: as the response arrives, or as its body ends ([`AdmitBody`]) |
//! | [`Inspect`]: [`ReadNothing`], [`RequestStart`], [`HttpVersion`], [`GrpcTimeout`], [`CriticalityHeader`], [`CriticalityFrom`] | what the layer reads from each request for its limiter (an [`Arrival`](crate::signal::Arrival): its wait, class, HTTP version, time left) |
//! | [`Limiter`], [`Admission`], [`NoWait`], [`Finish`] | what a limiter implements to be applied per request |
//!
//! Each request is counted once as offered, refusals included, by the first admit layer that
//! sees it, whatever the order of the layers: see [`Limiter::count_offered`].

#[cfg(feature = "http")]
mod body;
pub mod classify;
mod future;
mod hold;
mod layer;
mod limiter;
pub(crate) mod offered;
pub mod propagate;
mod read;
mod service;

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::body::AdmitBody;
pub use self::classify::{Classify, Outcome};
pub use self::future::ResponseFuture;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::hold::AtBodyEnd;
pub use self::hold::{AtResponse, Hold};
pub use self::layer::AdmitLayer;
#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
pub use self::layer::GrpcLayer;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::layer::HttpLayer;
pub use self::limiter::{Admission, Finish, IntoShared, Limiter, NoWait};
pub use self::read::{CriticalityFrom, Inspect, ReadNothing};
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::read::{
    CriticalityHeader, GrpcTimeout, HttpVersion, RequestStart, TIMEOUT_HEADER, TimeoutHeader,
};
#[cfg(feature = "http")]
pub(crate) use self::read::{parse_grpc_timeout, parse_ms};
pub use self::service::AdmitService;
