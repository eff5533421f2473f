//! A cgroup for child processes, as a container runtime makes one for a pod: a memory limit
//! (with no swap) or a CPU quota, enforced by the kernel, and what the children used.
//!
//! [`Cgroup::memory`] and [`Cgroup::cpu`] make a fresh group under the cgroup v2 hierarchy or
//! the v1 controllers' mounts, whichever has the controller and is writable (both need root);
//! [`Cgroup::command`] starts a program inside it. A test that needs one asks [`require`]
//! first: without a writable hierarchy it prints a `SKIPPED:` line and returns, unless
//! [`REQUIRE_ENV`] (`ADMIT_REQUIRE_CGROUPS`) is set, when it fails instead.

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

/// The CFS period a CPU quota is given over (v1's and v2's default).
const CPU_PERIOD_US: u64 = 100_000;

/// Which hierarchy a cgroup is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The unified hierarchy (`memory.max`, `cpu.max`, `cpu.stat`).
    V2,
    /// The v1 controllers (`memory.limit_in_bytes`, `cpu.cfs_quota_us`, `cpuacct.usage`).
    V1,
}

/// A cgroup: one directory in the v2 hierarchy, or one per v1 controller it spans (`cpu` and
/// `cpuacct` may be mounted apart). Removed when dropped, once its processes have exited.
#[derive(Debug)]
pub struct Cgroup {
    dirs: Vec<PathBuf>,
    version: Version,
}

impl Cgroup {
    /// A new cgroup named `name` (made unique with the process id), limited to `limit_bytes`
    /// of memory and no swap.
    ///
    /// # Errors
    ///
    /// Why no cgroup could be made: no hierarchy with the memory controller, or none writable
    /// (not root).
    pub fn memory(name: &str, limit_bytes: u64) -> Result<Self, String> {
        let limit = limit_bytes.to_string();
        match hierarchy("memory").ok_or("no cgroup v2 or v1 memory hierarchy mounted")? {
            (root, Version::V2) => Cgroup::make(name, Version::V2, &[root]).and_then(|cgroup| {
                cgroup.set(0, "memory.max", &limit, true)?;
                cgroup.set(0, "memory.swap.max", "0", false)?;
                Ok(cgroup)
            }),
            (root, Version::V1) => Cgroup::make(name, Version::V1, &[root]).and_then(|cgroup| {
                // The memory+swap limit exists only with swap accounting; it may not be below
                // the memory limit, so it comes second.
                cgroup.set(0, "memory.limit_in_bytes", &limit, true)?;
                cgroup.set(0, "memory.memsw.limit_in_bytes", &limit, false)?;
                Ok(cgroup)
            }),
        }
    }

    /// A new cgroup named `name` (made unique with the process id) whose processes may use
    /// `cpus` CPUs' worth of time per 100 ms period (a pod's CPU limit), measured by
    /// [`cpu_usage`](Self::cpu_usage).
    ///
    /// # Errors
    ///
    /// A `cpus` that is not positive and finite; no hierarchy with the CPU controller (and,
    /// in v1, `cpuacct`), or none writable.
    pub fn cpu(name: &str, cpus: f64) -> Result<Self, String> {
        if !(cpus.is_finite() && cpus > 0.0) {
            return Err(format!("a CPU quota of {cpus} CPUs"));
        }
        let quota = ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1_000);
        let period = CPU_PERIOD_US.to_string();
        match hierarchy("cpu").ok_or("no cgroup v2 or v1 cpu hierarchy mounted")? {
            (root, Version::V2) => Cgroup::make(name, Version::V2, &[root]).and_then(|cgroup| {
                cgroup.set(0, "cpu.max", &format!("{quota} {period}"), true)?;
                Ok(cgroup)
            }),
            (cpu, Version::V1) => {
                let (cpuacct, _) =
                    hierarchy("cpuacct").ok_or("no cgroup v1 cpuacct hierarchy mounted")?;
                let roots = if cpuacct == cpu {
                    vec![cpu]
                } else {
                    vec![cpu, cpuacct]
                };
                Cgroup::make(name, Version::V1, &roots).and_then(|cgroup| {
                    cgroup.set(0, "cpu.cfs_period_us", &period, true)?;
                    cgroup.set(0, "cpu.cfs_quota_us", &quota.to_string(), true)?;
                    Ok(cgroup)
                })
            }
        }
    }

    /// Makes the group's directory under each of `roots`.
    fn make(name: &str, version: Version, roots: &[PathBuf]) -> Result<Self, String> {
        let name = format!("{name}-{}", std::process::id());
        let mut cgroup = Cgroup {
            dirs: Vec::new(),
            version,
        };
        for root in roots {
            let dir = root.join(&name);
            fs::create_dir(&dir)
                .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
            cgroup.dirs.push(dir);
        }
        Ok(cgroup)
    }

    /// Writes `value` to `file` in the group's `index`th directory; a failure is an error only
    /// if `required`.
    fn set(&self, index: usize, file: &str, value: &str, required: bool) -> Result<(), String> {
        let path = self.dirs[index].join(file);
        match fs::write(&path, value) {
            Err(error) if required => Err(format!("cannot write {}: {error}", path.display())),
            _ => Ok(()),
        }
    }

    /// The hierarchy it is in.
    pub fn version(&self) -> Version {
        self.version
    }

    /// A command that runs `program` with `args` inside the cgroup: a shell moves itself into
    /// the group (each of its directories), then `exec`s the program, so the program's whole
    /// life is charged to the group.
    pub fn command(
        &self,
        program: impl AsRef<Path>,
        args: &[impl AsRef<std::ffi::OsStr>],
    ) -> Command {
        let mut command = Command::new("/bin/sh");
        let joins: Vec<String> = (1..=self.dirs.len())
            .map(|i| format!(r#"echo $$ > "${i}""#))
            .collect();
        let script = format!(
            r#"{} && shift {} && exec "$@""#,
            joins.join(" && "),
            self.dirs.len()
        );
        command.arg("-c").arg(script).arg("sh");
        for dir in &self.dirs {
            command.arg(dir.join("cgroup.procs"));
        }
        command.arg(program.as_ref()).args(args);
        command
    }

    /// The most memory the group's processes held at once, in bytes.
    pub fn peak_bytes(&self) -> Option<u64> {
        self.read_number(match self.version {
            Version::V2 => "memory.peak",
            Version::V1 => "memory.max_usage_in_bytes",
        })
    }

    /// The memory the group's processes hold now, in bytes.
    pub fn current_bytes(&self) -> Option<u64> {
        self.read_number(match self.version {
            Version::V2 => "memory.current",
            Version::V1 => "memory.usage_in_bytes",
        })
    }

    /// How many times a process of the group was killed for memory (v2), or the limit was hit
    /// (v1's `memory.failcnt`).
    pub fn limit_hits(&self) -> u64 {
        match self.version {
            Version::V2 => self.stat("memory.events", "oom_kill"),
            Version::V1 => self.read_number("memory.failcnt"),
        }
        .unwrap_or(0)
    }

    /// The CPU time the group's processes have used, all of their threads together.
    pub fn cpu_usage(&self) -> Option<Duration> {
        match self.version {
            Version::V2 => self
                .stat("cpu.stat", "usage_usec")
                .map(Duration::from_micros),
            Version::V1 => self.read_number("cpuacct.usage").map(Duration::from_nanos),
        }
    }

    /// The first of the group's directories that has `file`, and the number in it.
    fn read_number(&self, file: &str) -> Option<u64> {
        self.dirs
            .iter()
            .find_map(|dir| fs::read_to_string(dir.join(file)).ok())?
            .trim()
            .parse()
            .ok()
    }

    /// The value of `key` in a flat-keyed file such as `cpu.stat`.
    fn stat(&self, file: &str, key: &str) -> Option<u64> {
        let text = self
            .dirs
            .iter()
            .find_map(|dir| fs::read_to_string(dir.join(file)).ok())?;
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // The kernel needs a moment to release an exited task from its cgroup.
        let deadline = Instant::now() + Duration::from_secs(5);
        for dir in &self.dirs {
            while fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Where a new cgroup with `controller` can go: the v2 hierarchy if that controller is enabled
/// for its children, else the v1 mount of the controller.
fn hierarchy(controller: &str) -> Option<(PathBuf, Version)> {
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
                .is_ok_and(|enabled| enabled.split_whitespace().any(|c| c == controller))
        {
            return Some((point, Version::V2));
        }
        if fstype == "cgroup" && options.split(',').any(|option| option == controller) {
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
pub fn require(test: &str, limit_bytes: u64) -> Option<Cgroup> {
    required(test, Cgroup::memory(test, limit_bytes))
}

/// [`require`] for a CPU cgroup of `cpus` CPUs.
///
/// # Panics
///
/// As [`require`].
pub fn require_cpu(test: &str, cpus: f64) -> Option<Cgroup> {
    required(test, Cgroup::cpu(test, cpus))
}

fn required(test: &str, made: Result<Cgroup, String>) -> Option<Cgroup> {
    match made {
        Ok(cgroup) => Some(cgroup),
        Err(why) => {
            if env::var_os(REQUIRE_ENV).is_some() {
                panic!("{test}: {REQUIRE_ENV} is set but no cgroup can be made: {why}");
            }
            let _ = writeln!(
                io::stderr(),
                "SKIPPED: {test}: no cgroup: {why} (run as root on Linux). \
                 Set {REQUIRE_ENV} to fail instead of skipping."
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_quota_holds_a_busy_child_to_its_share() {
        let Some(cgroup) = require_cpu("testkit_cpu_quota", 0.25) else {
            return;
        };
        // Two busy shells for a second of wall time: at most a quarter of a CPU between them.
        let started = Instant::now();
        let mut child = cgroup
            .command(
                "/bin/sh",
                &["-c", "timeout 1 sh -c 'while :; do :; done' & timeout 1 sh -c 'while :; do :; done'; wait"],
            )
            .spawn()
            .expect("sh starts");
        assert!(child.wait().expect("it exits").success());
        let wall = started.elapsed();
        let used = cgroup.cpu_usage().expect("the group's CPU usage");
        // A quarter of the wall time, allowing a period of slack.
        assert!(
            used <= wall / 4 + Duration::from_millis(100),
            "{used:?} of CPU in {wall:?}"
        );
        assert!(
            used >= Duration::from_millis(50),
            "{used:?} of CPU in {wall:?}"
        );
    }
}
