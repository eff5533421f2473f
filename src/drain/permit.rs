//! The drain as a [`Limiter`] of the tower glue.

use http::{HeaderMap, StatusCode};

use super::{Drain, Draining, Phase, RequestGuard};
use crate::Shared;
use crate::middleware::{Finish, Limiter, Outcome};
use crate::respond::close_connection;
use crate::signal::Arrival;

/// What a request the [`DrainLayer`](super::DrainLayer) admitted holds: its in-flight count
/// (a [`RequestGuard`]), until its response body ends.
///
/// At the response head it adds `Connection: close` to an HTTP/1 response once the drain is
/// [`Announced`](Phase::Announced), and it ends an upgrade's request with its
/// `101 Switching Protocols` (the socket and any session outlive it).
#[derive(Debug)]
pub struct DrainPermit {
    guard: Option<RequestGuard>,
    http1: bool,
}

impl Finish for DrainPermit {
    #[inline]
    fn finish(&mut self, _outcome: Outcome) {
        self.guard = None;
    }

    fn on_head(&mut self, status: StatusCode, headers: &mut HeaderMap) -> bool {
        if status == StatusCode::SWITCHING_PROTOCOLS {
            return false;
        }
        let announced = self
            .guard
            .as_ref()
            .is_some_and(|guard| guard.drain().phase() >= Phase::Announced);
        if self.http1 && announced {
            close_connection(headers);
        }
        true
    }
}

/// The drain in the tower glue: see [`DrainLayer`](super::DrainLayer), which applies it with
/// [`HttpVersion`](crate::middleware::HttpVersion) and
/// [`AtBodyEnd`](crate::middleware::AtBodyEnd). Another layer built on it ends each request
/// when its permit ends, and closes connections only if it reads the HTTP version and holds
/// the permit until the body ends.
impl Limiter for Drain {
    type Permit = DrainPermit;
    type Refusal = Draining;
    type Wait = crate::middleware::NoWait<DrainPermit, Draining>;

    #[inline]
    fn admit(
        this: &Shared<Self>,
        arrival: Arrival,
    ) -> crate::middleware::Admission<DrainPermit, Draining, Self::Wait> {
        let http1 = arrival.http1();
        match this.admit() {
            Ok(guard) => crate::middleware::Admission::Enter(DrainPermit {
                guard: Some(guard),
                http1,
            }),
            Err(_) => {
                crate::middleware::Admission::Refuse(Draining::new(this.retry_after(), http1))
            }
        }
    }

    #[inline]
    fn count_offered(this: &Shared<Self>) {
        this.count_offered();
    }
}
