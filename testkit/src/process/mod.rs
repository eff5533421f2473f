//! What the launchers of outside processes ([`prometheus`](crate::prometheus),
//! [`haproxy`](crate::haproxy)) share: finding a binary, the `require` rule for tests that need
//! one, a temporary directory, the end of a log, stopping a process by its id, and trying again
//! on another port.

mod attempts;
mod stop;
mod temp_dir;

use std::env;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[cfg(test)]
pub(crate) use attempts::START_ATTEMPTS;
pub(crate) use attempts::{Failure, on_a_free_port};
pub(crate) use stop::{stop, terminate};
pub(crate) use temp_dir::TempDir;

/// How many of a log's last lines the error messages and panics quote.
const LOG_TAIL_LINES: usize = 40;

/// A binary: the path in the environment variable `env_var` if set and not empty, else the
/// first executable `name` on `PATH`, else `fallback` if it is executable.
pub(crate) fn find_binary(env_var: &str, name: &str, fallback: &str) -> Option<PathBuf> {
    if let Some(path) = env::var_os(env_var).filter(|path| !path.is_empty()) {
        return Some(PathBuf::from(path));
    }
    on_path(name).or_else(|| {
        let fallback = PathBuf::from(fallback);
        is_executable(&fallback).then_some(fallback)
    })
}

/// The first executable `name` in the directories of `PATH`.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    env::var_os("PATH").and_then(|paths| {
        env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
    })
}

/// Whether `path` is a file with an execute bit.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

/// The `require` rule of a launcher: `binary` if there is one; otherwise a
/// `SKIPPED: <test>: no <what> binary: <hint>. …` line on stderr and `None`.
///
/// # Panics
///
/// If there is no binary and the environment variable `require_env` is set, whatever its value,
/// with `hint`.
pub(crate) fn require(
    test: &str,
    what: &str,
    binary: Option<PathBuf>,
    require_env: &str,
    hint: &str,
) -> Option<PathBuf> {
    if binary.is_none() {
        if env::var_os(require_env).is_some() {
            panic!("{test}: {require_env} is set but there is no {what} binary: {hint}");
        }
        // Straight to stderr: the test harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            io::stderr(),
            "SKIPPED: {test}: no {what} binary: {hint}. \
             Set {require_env} to fail instead of skipping."
        );
    }
    binary
}

/// The last [`LOG_TAIL_LINES`] lines of `log`.
pub(crate) fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// The last lines of the file at `path`, or why it cannot be read.
pub(crate) fn file_tail(path: &Path) -> String {
    match fs::read(path) {
        Ok(log) => tail(&String::from_utf8_lossy(&log)),
        Err(error) => format!("(no log: {error})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_tail_is_its_last_lines() {
        let log: String = (0..100).map(|line| format!("line {line}\n")).collect();
        let tail = tail(&log);
        assert!(tail.starts_with("line 60\n"), "{tail}");
        assert!(tail.ends_with("line 99"), "{tail}");
        assert_eq!(super::tail("one\ntwo"), "one\ntwo");
    }

    #[test]
    fn a_file_tail_says_why_there_is_none() {
        let dir = TempDir::new("process").expect("a dir");
        let log = dir.path().join("log");
        let missing = file_tail(&log);
        assert!(missing.starts_with("(no log: "), "{missing}");
        fs::write(&log, "first\nlast\n").expect("write the log");
        assert_eq!(file_tail(&log), "first\nlast");
    }

    #[test]
    fn require_passes_a_binary_on() {
        let binary = Some(PathBuf::from("/bin/sh"));
        assert_eq!(
            require("t", "Shell", binary.clone(), "PATH", "hint"),
            binary
        );
    }

    #[test]
    #[should_panic(expected = "t: PATH is set but there is no Shell binary: install it")]
    fn require_fails_without_a_binary_where_one_is_required() {
        // `PATH` stands for the launcher's variable, set as CI sets it.
        require("t", "Shell", None, "PATH", "install it");
    }

    #[test]
    fn a_binary_is_found_on_path_or_at_its_fallback() {
        // A variable that is never set: the search falls through to `PATH` and the fallback.
        assert_eq!(
            find_binary("ADMIT_TESTKIT_NO_SUCH_VARIABLE", "sh", "/nonexistent"),
            on_path("sh")
        );
        assert_eq!(
            find_binary(
                "ADMIT_TESTKIT_NO_SUCH_VARIABLE",
                "admit-no-such-binary",
                "/nonexistent"
            ),
            None
        );
        assert_eq!(
            find_binary(
                "ADMIT_TESTKIT_NO_SUCH_VARIABLE",
                "admit-no-such-binary",
                "/bin/sh"
            ),
            Some(PathBuf::from("/bin/sh"))
        );
    }
}
