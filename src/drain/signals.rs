//! Starting a drain from the process's signals: [`Drain::handle_signals`].

use std::future::{Future, poll_fn};
use std::io;
use std::pin::pin;
use std::task::{Context, Poll};

use tokio::task::JoinHandle;

use super::Drain;

/// The signals a drain answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signal {
    /// SIGTERM: what Kubernetes sends once the pod is deleted (after any `preStop` hook).
    #[cfg_attr(not(unix), allow(dead_code))]
    Terminate,
    /// SIGINT (Ctrl-C), or Windows' Ctrl-C: someone at a terminal, who will not wait.
    Interrupt,
}

/// What a signal does to the drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// [`Drain::start`]: announce, keep serving through the propagation delay.
    Start,
    /// [`Drain::start_now`]: refuse at once; nothing is left for a later signal to do.
    StartNow,
}

/// What the signal `signal` does, after `earlier` signals (of either kind): the first SIGTERM
/// starts the drain; SIGINT, or any signal after the first, skips the propagation delay.
/// Only signals count: a drain already started by the application (say, by a `preStop` HTTP
/// hook) still gets its propagation delay from the SIGTERM that follows.
const fn action(signal: Signal, earlier: u32) -> Action {
    match (signal, earlier) {
        (Signal::Terminate, 0) => Action::Start,
        _ => Action::StartNow,
    }
}

impl Drain {
    /// Starts the drain from the process's signals: the first SIGTERM calls
    /// [`start`](Drain::start); SIGINT, or a second signal of either kind, calls
    /// [`start_now`](Drain::start_now). On Windows, Ctrl-C calls `start_now`.
    ///
    /// Subscribes before it returns, so call it before the service reports ready: from then
    /// on, SIGTERM and SIGINT no longer kill the process, which must exit by itself (return
    /// from `main` once [`finished`](Drain::finished) resolves, or the server with it).
    /// The spawned task ends once the drain refuses requests, whatever moved it there; later
    /// signals are then ignored.
    ///
    /// ```no_run
    /// use admit::drain::Drain;
    ///
    /// # #[tokio::main]
    /// # async fn main() -> std::io::Result<()> {
    /// let drain = Drain::default();
    /// drain.handle_signals()?;
    /// // … serve, with `drain.stop_accepting()` as the graceful shutdown signal …
    /// let outcome = drain.finished().await;
    /// eprintln!("drain: {outcome:?}");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The error of subscribing to a signal (`tokio::signal`).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or in one built without IO (`enable_io`, or `enable_all`).
    #[cfg_attr(docsrs, doc(cfg(feature = "signal")))]
    pub fn handle_signals(&self) -> io::Result<JoinHandle<()>> {
        let mut signals = Signals::subscribe()?;
        Ok(tokio::spawn(watch(self.clone(), move |cx| {
            signals.poll_recv(cx)
        })))
    }
}

/// Acts on each signal `next` yields until the drain refuses requests (whatever moved it
/// there), or `next` yields `None` (the runtime no longer delivers signals).
async fn watch(drain: Drain, mut next: impl FnMut(&mut Context<'_>) -> Poll<Option<Signal>>) {
    let mut refusing = pin!(drain.stop_accepting());
    let mut earlier = 0_u32;
    loop {
        let received = poll_fn(|cx| {
            if refusing.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            next(cx)
        });
        let Some(signal) = received.await else {
            return;
        };
        match action(signal, earlier) {
            Action::Start => {
                drain.start();
            }
            Action::StartNow => {
                drain.start_now();
                return;
            }
        }
        earlier = earlier.saturating_add(1);
    }
}

/// The subscriptions: SIGTERM and SIGINT.
#[cfg(unix)]
#[derive(Debug)]
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn subscribe() -> io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};

        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// The next signal; `None` once the runtime shuts down.
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Signal>> {
        for (stream, signal) in [
            (&mut self.terminate, Signal::Terminate),
            (&mut self.interrupt, Signal::Interrupt),
        ] {
            if let Poll::Ready(received) = stream.poll_recv(cx) {
                return Poll::Ready(received.map(|()| signal));
            }
        }
        Poll::Pending
    }
}

/// The subscription: Ctrl-C.
#[cfg(windows)]
#[derive(Debug)]
struct Signals {
    interrupt: tokio::signal::windows::CtrlC,
}

#[cfg(windows)]
impl Signals {
    fn subscribe() -> io::Result<Self> {
        Ok(Signals {
            interrupt: tokio::signal::windows::ctrl_c()?,
        })
    }

    /// The next signal; `None` once the runtime shuts down.
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Signal>> {
        self.interrupt
            .poll_recv(cx)
            .map(|received| received.map(|()| Signal::Interrupt))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::{Action, Signal, action, watch};
    use crate::drain::{Drain, Phase};

    /// Every (signal, count) pair up to a few signals, and the count's extremes.
    #[test]
    fn the_first_sigterm_starts_and_anything_else_starts_now() {
        let counts = (0..=8).chain([u32::MAX - 1, u32::MAX]);
        for earlier in counts {
            for signal in [Signal::Terminate, Signal::Interrupt] {
                let expected = if signal == Signal::Terminate && earlier == 0 {
                    Action::Start
                } else {
                    Action::StartNow
                };
                assert_eq!(
                    action(signal, earlier),
                    expected,
                    "{signal:?} after {earlier}"
                );
            }
        }
    }

    /// The sequences a process meets: TERM then TERM, TERM then INT, INT alone.
    #[test]
    fn sequences() {
        let run = |signals: &[Signal]| -> Vec<Action> {
            let mut actions = Vec::new();
            for (earlier, &signal) in (0_u32..).zip(signals) {
                let action = action(signal, earlier);
                actions.push(action);
                if action == Action::StartNow {
                    break;
                }
            }
            actions
        };
        use Action::{Start, StartNow};
        use Signal::{Interrupt, Terminate};
        assert_eq!(run(&[Terminate]), [Start]);
        assert_eq!(run(&[Terminate, Terminate, Terminate]), [Start, StartNow]);
        assert_eq!(run(&[Terminate, Interrupt]), [Start, StartNow]);
        assert_eq!(run(&[Interrupt, Terminate]), [StartNow]);
    }

    /// The task over a channel of signals, on paused time: `(drain, sender, task)`.
    fn watched() -> (
        Drain,
        mpsc::UnboundedSender<Signal>,
        tokio::task::JoinHandle<()>,
    ) {
        let drain = Drain::builder()
            .propagation_delay(Duration::from_secs(5))
            .deadline(Duration::from_secs(25))
            .build()
            .unwrap();
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let task = tokio::spawn(watch(drain.clone(), move |cx| receiver.poll_recv(cx)));
        (drain, sender, task)
    }

    #[tokio::test(start_paused = true)]
    async fn sigterm_announces_and_a_second_signal_skips_the_delay() {
        let (drain, signals, task) = watched();
        tokio::task::yield_now().await;
        assert_eq!(drain.phase(), Phase::Serving);
        signals.send(Signal::Terminate).unwrap();
        tokio::task::yield_now().await;
        assert_eq!(drain.phase(), Phase::Announced);
        assert!(!task.is_finished());
        let _request = drain.admit().unwrap();
        signals.send(Signal::Terminate).unwrap();
        task.await.unwrap();
        assert_eq!(drain.phase(), Phase::Draining);
    }

    #[tokio::test(start_paused = true)]
    async fn sigint_skips_the_delay_at_once() {
        let (drain, signals, task) = watched();
        let _request = drain.admit().unwrap();
        signals.send(Signal::Interrupt).unwrap();
        task.await.unwrap();
        assert_eq!(drain.phase(), Phase::Draining);
    }

    /// The task ends when the drain refuses, by its delay or by the application.
    #[tokio::test(start_paused = true)]
    async fn ends_once_the_drain_refuses() {
        let (drain, signals, task) = watched();
        signals.send(Signal::Terminate).unwrap();
        task.await.unwrap();
        assert!(drain.phase().refuses());

        let (drain, _signals, task) = watched();
        drain.start_now();
        task.await.unwrap();
    }

    /// Without signals any more (the runtime shutting down), the task ends.
    #[tokio::test(start_paused = true)]
    async fn ends_when_signals_end() {
        let (drain, signals, task) = watched();
        drop(signals);
        task.await.unwrap();
        assert_eq!(drain.phase(), Phase::Serving);
    }
}
