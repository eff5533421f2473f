//! Launching on a free port, again on another when a process took the port first.

use std::future::Future;
use std::io;

/// How many times a launch tries, each on a new port, when another process took the port first.
pub(crate) const START_ATTEMPTS: u32 = 3;

/// Why one launch attempt failed: whether another attempt, on another port, may succeed.
pub(crate) enum Failure<E> {
    PortTaken(E),
    Fatal(E),
}

impl<E: From<io::Error>> From<io::Error> for Failure<E> {
    fn from(error: io::Error) -> Self {
        Failure::Fatal(E::from(error))
    }
}

/// Runs `attempt` until it succeeds, fails fatally, or has found its port taken
/// [`START_ATTEMPTS`] times; then the last error.
pub(crate) async fn on_a_free_port<T, E, F>(mut attempt: impl FnMut() -> F) -> Result<T, E>
where
    F: Future<Output = Result<T, Failure<E>>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Ok(started) => return Ok(started),
            Err(Failure::PortTaken(_)) if tries < START_ATTEMPTS => tries += 1,
            Err(Failure::PortTaken(error) | Failure::Fatal(error)) => return Err(error),
        }
    }
}
