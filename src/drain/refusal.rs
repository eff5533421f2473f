//! The refusal of a draining server.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::respond::{Refusal, Refused};

/// A request refused because the server is draining: the [`Refusal`] the
/// [`DrainLayer`](super::DrainLayer) hands its responder. Its [`reason`](Refusal::reason) is
/// `draining`, and it [closes the connection](Refusal::closes_connection) of a request that
/// came over HTTP/1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draining {
    retry_after: Duration,
    http1: bool,
}

impl Draining {
    pub(crate) fn new(retry_after: Duration, http1: bool) -> Self {
        Draining { retry_after, http1 }
    }
}

impl fmt::Display for Draining {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the server is draining: retry on another replica")
    }
}

impl Error for Draining {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&Refused)
    }
}

impl Refusal for Draining {
    fn retry_after(&self) -> Duration {
        self.retry_after
    }

    fn reason(&self) -> &'static str {
        "draining"
    }

    fn closes_connection(&self) -> bool {
        self.http1
    }
}
