//! The guide: why admit works as it does, and how to choose, tune, deploy and measure it.
//!
//! This module holds no code. Each chapter is a page; every Rust block in it compiles and runs
//! as a doctest.
//!
//! | chapter | read it to |
//! |---|---|
//! | [`limiters`] | choose between [`WarmUp`](crate::warmup::WarmUp), [`SentinelWarmUp`](crate::warmup::sentinel::SentinelWarmUp) and the [`Shedder`](crate::shed::Shedder), and tune each |
//! | [`signals`] | pick the overload signals that fit your work: CPU, queue time, runtime lag, your own |
//! | [`recipes`] | put the limiters in front of axum, tonic and any tower stack |
//! | [`bound`] | bound the work in service and order the requests that wait, by class |
//! | [`criticality`] | shed the least important requests first |
//! | [`client`] | refuse at the client what the backend would refuse, and retry without storming |
//! | [`metrics`] | publish what the limiters see, and the PromQL and rules that read it |
//! | [`capacity`] | size a service with Erlang C and A, and plan replicas |
//! | [`drain`] | leave without cutting a request or a session on scale-in |
//! | [`scaler`] | autoscale on Kubernetes with `admit-scaler` and KEDA, or try it on a laptop |
//! | [`parity`] | what matches Sentinel and go-zero number for number, and every deliberate difference |
//! | [`platforms`] | the operating systems, architectures, clocks and Rust versions admit supports |

#[doc = include_str!("limiters.md")]
pub mod limiters {}

#[doc = include_str!("signals.md")]
pub mod signals {}

#[doc = include_str!("recipes.md")]
pub mod recipes {}

#[doc = include_str!("bound.md")]
#[cfg(all(feature = "tower", feature = "tokio"))]
pub mod bound {}

#[doc = include_str!("criticality.md")]
pub mod criticality {}

#[doc = include_str!("client.md")]
pub mod client {}

#[doc = include_str!("metrics.md")]
pub mod metrics {}

#[doc = include_str!("capacity.md")]
pub mod capacity {}

#[doc = include_str!("drain.md")]
pub mod drain {}

#[doc = include_str!("scaler.md")]
pub mod scaler {}

#[doc = include_str!("parity.md")]
pub mod parity {}

#[doc = include_str!("platforms.md")]
pub mod platforms {}
