//! A cgroup for child processes, as a container runtime makes one for a pod: a memory limit
//! (with no swap) or a CPU quota, enforced by the kernel, and what the children used.
//!
//! [`Cgroup::memory`] and [`Cgroup::cpu`] make a fresh group under the cgroup v2 hierarchy,
//! enabling the controller for its children there if it is not yet, or else under the v1
//! controllers' mounts (both need root; on a hybrid host, a controller bound to v1 is not in v2);
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
        match hierarchy("memory")? {
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
        match hierarchy("cpu")? {
            (root, Version::V2) => Cgroup::make(name, Version::V2, &[root]).and_then(|cgroup| {
                cgroup.set(0, "cpu.max", &format!("{quota} {period}"), true)?;
                Ok(cgroup)
            }),
            (cpu, Version::V1) => {
                let cpuacct = v1_mount(&mounts()?, "cpuacct")
                    .ok_or("no cgroup v1 cpuacct hierarchy mounted")?;
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

/// Where a new cgroup with `controller` can go: the v2 hierarchy if the controller is enabled
/// for its children or can be (this writes `+<controller>` to the mount's
/// `cgroup.subtree_control`), else the v1 mount of the controller.
///
/// # Errors
///
/// Why neither can be had: each v2 mount's reason, and that no v1 mount carries `controller`.
fn hierarchy(controller: &str) -> Result<(PathBuf, Version), String> {
    let mounts = mounts()?;
    let mut v2_refusals = Vec::new();
    for mount in mounts.iter().filter(|mount| mount.fstype == "cgroup2") {
        match enable_v2(&mount.point, controller) {
            Ok(()) => return Ok((mount.point.clone(), Version::V2)),
            Err(why) => v2_refusals.push(why),
        }
    }
    match v1_mount(&mounts, controller) {
        Some(point) => {
            if !v2_refusals.is_empty() {
                eprintln!(
                    "cgroup: {}; using the v1 hierarchy at {}",
                    v2_refusals.join("; "),
                    point.display()
                );
            }
            Ok((point, Version::V1))
        }
        None if v2_refusals.is_empty() => {
            Err(format!("no cgroup v2 or v1 {controller} hierarchy mounted"))
        }
        None => Err(format!(
            "{}; no cgroup v1 {controller} hierarchy mounted",
            v2_refusals.join("; ")
        )),
    }
}

/// A cgroup mount of a whole hierarchy (its root `/`), from `/proc/self/mountinfo`.
struct Mount {
    /// `cgroup2`, or `cgroup` for a v1 hierarchy.
    fstype: String,
    /// Where it is mounted.
    point: PathBuf,
    /// The super options; a v1 mount's list its controllers.
    options: String,
}

/// The cgroup mounts of whole hierarchies.
///
/// # Errors
///
/// `/proc/self/mountinfo` cannot be read.
fn mounts() -> Result<Vec<Mount>, String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|error| format!("cannot read /proc/self/mountinfo: {error}"))?;
    Ok(mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, rest) = line.split_once(" - ")?;
            let mut rest = rest.split(' ');
            let (fstype, _source, options) = (rest.next()?, rest.next()?, rest.next()?);
            let mut mount = mount.split(' ').skip(3);
            let (root, point) = (mount.next()?, mount.next()?);
            (root == "/" && (fstype == "cgroup" || fstype == "cgroup2")).then(|| Mount {
                fstype: fstype.to_owned(),
                point: PathBuf::from(point),
                options: options.to_owned(),
            })
        })
        .collect())
}

/// The mount point of the v1 hierarchy that carries `controller`.
fn v1_mount(mounts: &[Mount], controller: &str) -> Option<PathBuf> {
    mounts
        .iter()
        .find(|mount| {
            mount.fstype == "cgroup" && mount.options.split(',').any(|option| option == controller)
        })
        .map(|mount| mount.point.clone())
}

/// Enables `controller` for the children of the v2 cgroup at `dir`, unless it is already.
///
/// # Errors
///
/// Why it cannot be: the parent does not give `dir` the controller (on a hybrid host, a v1
/// hierarchy holds it), `dir` has processes of its own, or the files are not writable.
fn enable_v2(dir: &Path, controller: &str) -> Result<(), String> {
    let read = |file: &str| {
        let path = dir.join(file);
        fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let lists = |text: &str| text.split_whitespace().any(|c| c == controller);
    if lists(&read("cgroup.subtree_control")?) {
        return Ok(());
    }
    let available = read("cgroup.controllers")?;
    if !lists(&available) {
        return Err(format!(
            "cgroup v2 at {} has no {controller} controller (its cgroup.controllers lists \"{}\"): \
             a v1 hierarchy holds it, or the parent does not delegate it",
            dir.display(),
            available.trim()
        ));
    }
    let path = dir.join("cgroup.subtree_control");
    fs::write(&path, format!("+{controller}")).map_err(|error| {
        let why = if error.kind() == io::ErrorKind::ResourceBusy {
            " (the cgroup has processes of its own, and v2 gives no controller to the children \
             of such a cgroup)"
        } else {
            ""
        };
        format!(
            "cannot enable {controller} in {}: {error}{why}",
            path.display()
        )
    })
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
