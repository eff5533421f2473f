//! Test fixtures shared by the files of this module: a fake file-system tree, this process's mask
//! size, a v2 mount line.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::process::affinity_cpus;

/// A fake file-system tree under the system's temporary directory, removed on drop.
pub(super) struct FakeRoot(PathBuf);

impl FakeRoot {
    pub(super) fn new(name: &str) -> FakeRoot {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "admit-cpu-{}-{name}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        FakeRoot(dir)
    }

    /// Writes `content` to the absolute `path` inside the tree, in place (same inode, so a
    /// descriptor opened earlier sees the new content).
    pub(super) fn write(&self, path: &str, content: &str) {
        let path = self.0.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FakeRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// This process's affinity mask size, as the source reads it.
pub(super) fn mask() -> f64 {
    f64::from(affinity_cpus().expect("sched_getaffinity"))
}

pub(super) const V2_MOUNT: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime \
                                   shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";
