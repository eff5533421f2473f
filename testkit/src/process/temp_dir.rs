//! [`TempDir`], a launched process's temporary directory.

use std::env;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A directory of its own under [`env::temp_dir`], removed (with its contents) on drop.
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// `admit-<name>-<pid>-<counter>-<nanos>`: unique within this process by the counter, and
    /// across processes by the id and the clock.
    pub(crate) fn new(name: &str) -> io::Result<TempDir> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let path = env::temp_dir().join(format!(
            "admit-{name}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&path)?;
        Ok(TempDir(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_directories_are_distinct_and_removed() {
        let (first, second) = (
            TempDir::new("test").expect("a dir"),
            TempDir::new("test").expect("a dir"),
        );
        assert_ne!(first.path(), second.path());
        fs::write(first.path().join("file"), "x").expect("a file");
        let path = first.path().to_owned();
        drop(first);
        assert!(!path.exists(), "{path:?} removed");
    }
}
