//! A request waiting for a place in service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use super::Bound;
use super::error::{Busy, Why};
use super::limiter::Count;
use super::permit::BoundPermit;
use super::queue::{Left, Ticket, Turn};
use crate::Shared;
use crate::clock::Clock;
use crate::criticality::Criticality;

pin_project! {
    /// A request waiting in a [`Bound`]'s queue: resolves to its place in service, or to a
    /// refusal once it can wait no longer. Dropping it leaves the queue at once (and gives a
    /// place already granted to the next waiter).
    ///
    /// Inside a tokio runtime it wakes itself when its longest allowed wait ends; elsewhere it
    /// learns it from the bound's next decision or completion.
    ///
    /// # Panics
    ///
    /// Made inside a tokio runtime whose timer is off (built without `enable_time`;
    /// `#[tokio::main]` turns it on), as `tokio::time::sleep` does.
    #[must_use = "a waiting request leaves the queue when dropped"]
    pub struct Waiting<C>
    where
        C: Clock,
        C: 'static,
    {
        bound: Shared<Bound<C>>,
        ticket: Option<Ticket>,
        class: Criticality,
        // When the wait ends at the latest, on the bound's clock.
        until: u64,
        #[pin]
        timer: Option<tokio::time::Sleep>,
    }

    impl<C> PinnedDrop for Waiting<C>
    where
        C: Clock,
        C: 'static,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(ticket) = this.ticket.take() {
                this.bound.cancel(ticket, *this.class, this.bound.now());
            }
        }
    }
}

impl<C: Clock + 'static> Waiting<C> {
    /// A waiter of `class` holding `ticket` from `since`, waiting `until` at the latest.
    pub(crate) fn new(
        bound: Shared<Bound<C>>,
        ticket: Ticket,
        class: Criticality,
        since: u64,
        until: u64,
    ) -> Self {
        let timer = tokio::runtime::Handle::try_current()
            .ok()
            .map(|_| tokio::time::sleep(Duration::from_nanos(until.saturating_sub(since))));
        Waiting {
            bound,
            ticket: Some(ticket),
            class,
            until,
            timer,
        }
    }
}

impl<C: Clock + 'static> Future for Waiting<C> {
    type Output = Result<BoundPermit<C>, Busy>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(ticket) = *this.ticket else {
            // Polled after it completed: the place went with the first answer.
            return Poll::Ready(Err(Busy::new(
                Why::Timeout,
                *this.class,
                this.bound.retry_after(),
            )));
        };
        loop {
            let now = this.bound.now();
            let why = match this.bound.look(ticket, now, cx.waker()) {
                Turn::Waiting => {
                    let Some(mut timer) = this.timer.as_mut().as_pin_mut() else {
                        return Poll::Pending;
                    };
                    if timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    // The timer ended before the bound's clock reached the limit: wait the
                    // rest (a clock of its own may run behind tokio's).
                    let rest = this.until.saturating_sub(now).max(1);
                    timer.reset(tokio::time::Instant::now() + Duration::from_nanos(rest));
                    continue;
                }
                Turn::Granted => {
                    *this.ticket = None;
                    this.bound.count(*this.class, Count::Entered);
                    return Poll::Ready(Ok(BoundPermit::new(this.bound.clone(), now)));
                }
                Turn::Left(reason) => {
                    this.bound.count_left(*this.class, reason);
                    match reason {
                        Left::Timeout => Why::Timeout,
                        Left::Deadline => Why::Deadline,
                        Left::PushedOut => Why::PushedOut,
                    }
                }
            };
            *this.ticket = None;
            return Poll::Ready(Err(Busy::new(why, *this.class, this.bound.retry_after())));
        }
    }
}

impl<C: Clock + 'static> fmt::Debug for Waiting<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiting")
            .field("class", &self.class)
            .field("waiting", &self.ticket.is_some())
            .finish_non_exhaustive()
    }
}
