//! [`DrainLayer`]: the tower side of a drain (`http` feature): the layer, its service, its
//! response future and body, and its refusal.

mod body;
mod error;
mod future;
mod layer;
mod service;

pub use self::body::DrainBody;
pub use self::error::Draining;
pub use self::future::DrainFuture;
pub(crate) use self::future::close;
pub use self::layer::DrainLayer;
pub use self::service::DrainService;
