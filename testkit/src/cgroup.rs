//! A memory cgroup for one child process: the limit a Kubernetes Deployment sets, enforced by
//! the kernel, and the peak the child reached.
//!
//! [`MemoryCgroup::create`] makes a fresh cgroup under the cgroup v2 hierarchy or the v1
//! `memory` controller (whichever is mounted and writable; both need root), with a memory limit
//! and no swap, so a child past its limit is killed as in a pod. [`MemoryCgroup::command`]
//! starts a program inside it. A test that needs one asks [`require`] first: without a writable
//! hierarchy it prints a `SKIPPED:` line and returns, unless [`REQUIRE_ENV`]
//! (`ADMIT_REQUIRE_CGROUPS`) is set, when it fails instead.

use std::env;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

/// The environment variable that turns [`require`]'s skip into a failure: set it where cgroups
/// must be writable, such as CI.
pub const REQUIRE_ENV: &str = "ADMIT_REQUIRE_CGROUPS";

/// Which hierarchy the cgroup is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The unified hierarchy (`memory.max`, `memory.peak`, `memory.events`).
    V2,
    /// The v1 `memory` controller (`memory.limit_in_bytes`, `memory.max_usage_in_bytes`).
    V1,
}

/// A memory cgroup, removed when dropped (once its processes have exited).
#[derive(Debug)]
pub struct MemoryCgroup {
    dir: PathBuf,
    version: Version,
}

impl MemoryCgroup {
    /// A new cgroup named `name` (made unique with the process id), limited to `limit_bytes`
    /// of memory and no swap.
    ///
    /// # Errors
    ///
    /// Why no cgroup could be made: no hierarchy mounted, or none writable (not root).
    pub fn create(name: &str, limit_bytes: u64) -> Result<Self, String> {
        let name = format!("{name}-{}", std::process::id());
        let (root, version) = hierarchy().ok_or("no cgroup v2 or v1 memory hierarchy mounted")?;
        let dir = root.join(&name);
        fs::create_dir(&dir)
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        let cgroup = MemoryCgroup { dir, version };
        let limit = limit_bytes.to_string();
        let settings: &[(&str, &str, bool)] = match version {
            Version::V2 => &[
                ("memory.max", &limit, true),
                ("memory.swap.max", "0", false),
            ],
            // The memory+swap limit exists only with swap accounting; set it after the memory
            // limit, which it may not be below.
            Version::V1 => &[
                ("memory.limit_in_bytes", &limit, true),
                ("memory.memsw.limit_in_bytes", &limit, false),
            ],
        };
        for (file, value, required) in settings {
            let path = cgroup.dir.join(file);
            if let Err(error) = fs::write(&path, value)
                && *required
            {
                return Err(format!("cannot write {}: {error}", path.display()));
            }
        }
        Ok(cgroup)
    }

    /// The hierarchy it is in.
    pub fn version(&self) -> Version {
        self.version
    }

    /// A command that runs `program` with `args` inside the cgroup: a shell moves itself in,
    /// then `exec`s the program, so the program's whole life is charged to the cgroup.
    pub fn command(&self, program: impl AsRef<Path>, args: &[&str]) -> Command {
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg(program.as_ref())
            .args(args);
        command
    }

    /// The most memory the cgroup's processes held at once, in bytes.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            Version::V2 => "memory.peak",
            Version::V1 => "memory.max_usage_in_bytes",
        };
        read_number(&self.dir.join(file))
    }

    /// The memory the cgroup's processes hold now, in bytes.
    pub fn current_bytes(&self) -> Option<u64> {
        let file = match self.version {
            Version::V2 => "memory.current",
            Version::V1 => "memory.usage_in_bytes",
        };
        read_number(&self.dir.join(file))
    }

    /// How many times a process of the cgroup was killed for memory (v2), or the limit was hit
    /// (v1's `memory.failcnt`).
    pub fn limit_hits(&self) -> u64 {
        match self.version {
            Version::V2 => fs::read_to_string(self.dir.join("memory.events"))
                .ok()
                .and_then(|events| {
                    events
                        .lines()
                        .find_map(|line| line.strip_prefix("oom_kill "))
                        .and_then(|count| count.trim().parse().ok())
                })
                .unwrap_or(0),
            Version::V1 => read_number(&self.dir.join("memory.failcnt")).unwrap_or(0),
        }
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The kernel needs a moment to release an exited task from its cgroup.
        let deadline = Instant::now() + Duration::from_secs(5);
        while fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
    }
}

fn read_number(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Where a new memory cgroup can go: the v2 hierarchy if its `memory` controller is enabled
/// for children, else the v1 `memory` controller's mount.
fn hierarchy() -> Option<(PathBuf, Version)> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut v1 = None;
    for line in mountinfo.lines() {
        let Some((mount, rest)) = line.split_once(" - ") else {
            continue;
        };
        let mut rest = rest.split(' ');
        let (Some(fstype), _, Some(options)) = (rest.next(), rest.next(), rest.next()) else {
            continue;
        };
        let (Some(root), Some(point)) = (mount.split(' ').nth(3), mount.split(' ').nth(4)) else {
            continue;
        };
        if root != "/" {
            continue;
        }
        let point = PathBuf::from(point);
        if fstype == "cgroup2"
            && fs::read_to_string(point.join("cgroup.subtree_control"))
                .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "memory"))
        {
            return Some((point, Version::V2));
        }
        if fstype == "cgroup" && options.split(',').any(|option| option == "memory") {
            v1 = Some((point, Version::V1));
        }
    }
    v1
}

/// The one rule for tests that need a memory cgroup: one limited to `limit_bytes`, or a
/// `SKIPPED: <test>: …` line on stderr and `None`, and the test should return.
///
/// # Panics
///
/// If no cgroup can be made and [`REQUIRE_ENV`] (`ADMIT_REQUIRE_CGROUPS`) is set.
pub fn require(test: &str, limit_bytes: u64) -> Option<MemoryCgroup> {
    match MemoryCgroup::create(test, limit_bytes) {
        Ok(cgroup) => Some(cgroup),
        Err(why) => {
            if env::var_os(REQUIRE_ENV).is_some() {
                panic!("{test}: {REQUIRE_ENV} is set but no memory cgroup can be made: {why}");
            }
            let _ = writeln!(
                io::stderr(),
                "SKIPPED: {test}: no memory cgroup: {why} (run as root on Linux). \
                 Set {REQUIRE_ENV} to fail instead of skipping."
            );
            None
        }
    }
}
