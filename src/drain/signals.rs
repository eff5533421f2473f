//! Starting a drain from the process's signals: [`Drain::handle_signals`].

use std::future::poll_fn;
use std::io::{self, Write};
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

impl Signal {
    /// The name a log line gives it.
    const fn name(self) -> &'static str {
        match self {
            Signal::Terminate => "SIGTERM",
            Signal::Interrupt => "SIGINT",
        }
    }

    /// The exit status of a process this signal ended: 128 plus the signal's number, as shells
    /// and container runtimes report a process the signal killed.
    #[cfg(not(windows))]
    const fn exit_code(self) -> i32 {
        match self {
            Signal::Terminate => 128 + 15,
            Signal::Interrupt => 128 + 2,
        }
    }

    /// The exit status of a process Ctrl-C ended: `STATUS_CONTROL_C_EXIT`.
    #[cfg(windows)]
    const fn exit_code(self) -> i32 {
        0xC000_013A_u32 as i32
    }
}

/// What a signal does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// [`Drain::start`]: announce, keep serving through the propagation delay.
    Start,
    /// [`Drain::start_now`]: refuse at once.
    StartNow,
    /// End the process, as the signal's default action would: nothing is left for it to do
    /// to the drain.
    Exit,
}

/// What the signal `signal` does after `earlier` signals (of either kind), to a drain that
/// `refuses` requests or not: the first SIGTERM starts the drain; SIGINT, or any signal after
/// the first, skips the propagation delay; a signal after the first that finds the drain
/// already refusing ends the process. Only signals count as earlier ones: a drain the
/// application started (say, from a `preStop` HTTP hook) still gets its propagation delay from
/// the SIGTERM that follows, and that first signal never ends the process.
const fn action(signal: Signal, earlier: u32, refuses: bool) -> Action {
    match (signal, earlier, refuses) {
        (Signal::Terminate, 0, _) => Action::Start,
        (Signal::Interrupt, 0, _) | (_, _, false) => Action::StartNow,
        (_, _, true) => Action::Exit,
    }
}

impl Drain {
    /// Starts the drain from the process's signals: the first SIGTERM calls
    /// [`start`](Drain::start); SIGINT, or a second signal of either kind, calls
    /// [`start_now`](Drain::start_now). On Windows, Ctrl-C calls `start_now`.
    ///
    /// Subscribes before it returns, so call it before the service reports ready: from then
    /// on SIGTERM and SIGINT no longer kill the process (tokio never restores their default
    /// action), which must exit by itself (return from `main` once
    /// [`finished`](Drain::finished) resolves, or the server with it).
    ///
    /// A signal that is not the first and finds the drain already refusing requests (after a
    /// signal or the propagation delay moved it there, or the application) has nothing left to
    /// do to the drain, so it ends the process at once, as the signal's default action would:
    /// a line on stderr, then [`std::process::exit`] with 128 plus the signal's number (143
    /// for SIGTERM, 130 for SIGINT; `STATUS_CONTROL_C_EXIT` on Windows), without waiting for
    /// the drain or running destructors. So SIGINT then SIGINT, or SIGTERM three times, stop
    /// the process; the first signal never does, even to a drain the application started.
    /// The spawned task runs until then, or until the runtime shuts down.
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
        let watching = watch(self.clone(), move |cx| signals.poll_recv(cx));
        Ok(tokio::spawn(async move {
            if let Some(signal) = watching.await {
                let code = signal.exit_code();
                // Not `eprintln!`, which panics if stderr is a closed pipe: exit regardless.
                let _ = writeln!(
                    io::stderr(),
                    "admit: {} while the drain refuses requests: exiting with status {code}",
                    signal.name()
                );
                std::process::exit(code);
            }
        }))
    }
}

/// Acts on each signal `next` yields: returns the signal that should end the process, or
/// `None` once `next` yields `None` (the runtime no longer delivers signals).
async fn watch(
    drain: Drain,
    mut next: impl FnMut(&mut Context<'_>) -> Poll<Option<Signal>>,
) -> Option<Signal> {
    let mut earlier = 0_u32;
    loop {
        let signal = poll_fn(&mut next).await?;
        match action(signal, earlier, drain.phase().refuses()) {
            Action::Start => {
                drain.start();
            }
            Action::StartNow => {
                drain.start_now();
            }
            Action::Exit => return Some(signal),
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

    /// Every (signal, count, refusing) case up to a few signals, and the count's extremes.
    #[test]
    fn the_first_sigterm_starts_sigint_or_a_second_starts_now_and_a_later_one_exits() {
        let counts = (0..=8).chain([u32::MAX - 1, u32::MAX]);
        for earlier in counts {
            for signal in [Signal::Terminate, Signal::Interrupt] {
                for refuses in [false, true] {
                    let expected = match (signal, earlier, refuses) {
                        (Signal::Terminate, 0, _) => Action::Start,
                        (Signal::Interrupt, 0, _) => Action::StartNow,
                        (_, _, false) => Action::StartNow,
                        (_, _, true) => Action::Exit,
                    };
                    assert_eq!(
                        action(signal, earlier, refuses),
                        expected,
                        "{signal:?} after {earlier}, refusing: {refuses}"
                    );
                }
            }
        }
        #[cfg(not(windows))]
        assert_eq!(
            (Signal::Terminate.exit_code(), Signal::Interrupt.exit_code()),
            (143, 130)
        );
    }

    /// The task over a channel of signals, on paused time: `(drain, sender, task)`.
    fn watched() -> (
        Drain,
        mpsc::UnboundedSender<Signal>,
        tokio::task::JoinHandle<Option<Signal>>,
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

    /// Lets the task act on what was sent.
    async fn settle() {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sigterm_announces_a_second_signal_skips_the_delay_and_a_third_exits() {
        let (drain, signals, task) = watched();
        settle().await;
        assert_eq!(drain.phase(), Phase::Serving);
        signals.send(Signal::Terminate).unwrap();
        settle().await;
        assert_eq!(drain.phase(), Phase::Announced);
        let _request = drain.admit().unwrap();
        signals.send(Signal::Terminate).unwrap();
        settle().await;
        assert_eq!(drain.phase(), Phase::Draining);
        assert!(!task.is_finished());
        signals.send(Signal::Terminate).unwrap();
        assert_eq!(task.await.unwrap(), Some(Signal::Terminate));
    }

    #[tokio::test(start_paused = true)]
    async fn sigint_skips_the_delay_at_once_and_a_second_exits() {
        let (drain, signals, task) = watched();
        let _request = drain.admit().unwrap();
        signals.send(Signal::Interrupt).unwrap();
        settle().await;
        assert_eq!(drain.phase(), Phase::Draining);
        assert!(!task.is_finished());
        signals.send(Signal::Interrupt).unwrap();
        assert_eq!(task.await.unwrap(), Some(Signal::Interrupt));
    }

    /// Once the delay has moved the drain to refusing, the second signal exits.
    #[tokio::test(start_paused = true)]
    async fn a_second_signal_after_the_delay_exits() {
        let (drain, signals, task) = watched();
        let _request = drain.admit().unwrap();
        signals.send(Signal::Terminate).unwrap();
        settle().await;
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(drain.phase(), Phase::Draining);
        assert!(!task.is_finished());
        signals.send(Signal::Interrupt).unwrap();
        assert_eq!(task.await.unwrap(), Some(Signal::Interrupt));
    }

    /// A drain the application started still takes its first signal as one.
    #[tokio::test(start_paused = true)]
    async fn the_first_signal_never_exits() {
        let (drain, signals, task) = watched();
        let _request = drain.admit().unwrap();
        drain.start_now();
        signals.send(Signal::Terminate).unwrap();
        settle().await;
        assert!(!task.is_finished());
        assert_eq!(drain.phase(), Phase::Draining);
        signals.send(Signal::Terminate).unwrap();
        assert_eq!(task.await.unwrap(), Some(Signal::Terminate));
    }

    /// Without signals any more (the runtime shutting down), the task ends.
    #[tokio::test(start_paused = true)]
    async fn ends_when_signals_end() {
        let (drain, signals, task) = watched();
        drop(signals);
        assert_eq!(task.await.unwrap(), None);
        assert_eq!(drain.phase(), Phase::Serving);
    }
}
