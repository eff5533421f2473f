//! CPU usage and CPU limit of the process's cgroup, read from cgroupfs (Linux and Android).
//!
//! The shedder's CPU signal is utilisation relative to what the process may use:
//!
//! ```text
//! utilisation ‰ = 1000 · Δused_ns / (Δwall_ns · limit_cpus)
//! ```
//!
//! A [`CpuUsageSource`] supplies both inputs. [`CpuUsageSource::sample`] returns the cumulative CPU
//! time of what is measured ([`Sample::used_nanos`]) and how many CPUs it may use right now
//! ([`Sample::limit_cpus`]); the sampler supplies Δwall from a monotonic clock.
//!
//! # What is measured
//!
//! The process's own cgroup, because that is what a CFS quota throttles: helper processes in the
//! same container count, and so do other containers' processes only if they share the cgroup.
//! Three sources, in order of preference:
//!
//! 1. [`SourceKind::CgroupV1`]: the `cpuacct` controller of a cgroup v1 hierarchy
//!    (`cpuacct.usage`, one integer in nanoseconds).
//! 2. [`SourceKind::CgroupV2`]: the unified hierarchy (`cpu.stat`, line `usage_usec N`, in
//!    microseconds). On current kernels the file exists in every v2 cgroup, the root included,
//!    whether or not the `cpu` controller is enabled.
//! 3. [`SourceKind::ProcessTime`]: `CLOCK_PROCESS_CPUTIME_ID`, the CPU time of this process
//!    alone, when no cgroup accounting file can be opened (no cgroupfs mounted, a sandbox that
//!    hides it, a cgroup path that lies outside the visible mounts).
//!
//! v1 is preferred over v2 because "hybrid" systems (systemd's default before v2-only distributions)
//! mount the v1 controllers *and* a nearly empty v2 tree at `/sys/fs/cgroup/unified` (no CPU
//! controller is bound to it; at most a leftover such as `hugetlb`). That v2 tree has a `cpu.stat`
//! too, but the process's v2 path there (often `/`) has nothing to do with the container's CPU
//! limit. A controller is bound to at most one hierarchy, so if a v1 `cpuacct` hierarchy exists it
//! is the right one.
//!
//! # The layouts handled
//!
//! `/proc/<pid>/cgroup` has one line per hierarchy, `ID:CONTROLLERS:PATH`:
//!
//! ```text
//! 4:memory:/user.slice         v1 hierarchy 4, the memory controller
//! 2:cpu,cpuacct:/docker/abc    v1, cpu and cpuacct co-mounted (most distributions)
//! 1:cpu:/docker/abc            v1, cpu on its own (cpuacct then has a line of its own)
//! 0::/system.slice/foo.service the v2 (unified) hierarchy: ID 0, no controller list
//! ```
//!
//! The PATH is relative to the root of the hierarchy *as seen from the process's cgroup namespace*.
//! `/proc/self/mountinfo` says where each hierarchy is mounted and which directory of it the mount
//! shows (field 4, "root"):
//!
//! ```text
//! 33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
//! 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
//! ```
//!
//! Fields: mount ID, parent ID, device, root, mount point, mount options, optional fields, `-`,
//! file-system type, source, super options. A v1 hierarchy is a `cgroup` mount whose super options
//! name the controller; the v2 hierarchy is the `cgroup2` mount. The cgroup's directory is the mount
//! point plus the PATH with the mount's root stripped off:
//!
//! - On a host, and inside a container with a private cgroup namespace, the root is `/`: the
//!   directory is `mount point + PATH` (inside the namespace PATH is usually just `/`, the
//!   container's own cgroup).
//! - Inside a container *without* a cgroup namespace (Docker and containerd on cgroup v1 hosts,
//!   where the default namespace mode is the host's), the runtime bind-mounts the container's
//!   cgroup: mountinfo root `/docker/abc`, PATH `/docker/abc` (or `/docker/abc/x` for a
//!   sub-cgroup), so the directory is the mount point itself (or `mount point/x`).
//! - A PATH outside the mount's root, or one with `..` components (a process moved out of its
//!   namespace's root shows `/../x`), cannot be reached through that mount; another mount of the
//!   same hierarchy is tried, then the next kind of source.
//!
//! Mount points and roots in mountinfo escape space, tab, newline and backslash as `\040`-style
//! octal; they are unescaped. Android mounts the `cpuset` hierarchy with the `noprefix` option, so
//! its files are `cpus` and `effective_cpus` instead of `cpuset.cpus` and `cpuset.effective_cpus`;
//! that is handled too.
//!
//! # The limit
//!
//! [`Sample::limit_cpus`] is the minimum of
//!
//! - the tightest CFS bandwidth quota on the path from the cgroup up to the hierarchy root, as
//!   `quota / period` CPUs (a parent's quota caps all its children). v2: `cpu.max`, `"max 100000"`
//!   (unlimited) or `"50000 100000"` (µs), absent in the root cgroup and in cgroups whose parent
//!   does not enable the `cpu` controller. v1: `cpu.cfs_quota_us` (`-1` = unlimited) and
//!   `cpu.cfs_period_us`, in the `cpu` controller's hierarchy, which may be mounted separately from
//!   `cpuacct`;
//! - the size of the cgroup's cpuset. v2: `cpuset.cpus.effective` of the nearest cgroup on the path
//!   up that has it (a cgroup without the `cpuset` controller enabled runs on its nearest such
//!   ancestor's CPUs). v1: `cpuset.effective_cpus`, or `cpuset.cpus` on kernels without it, in the
//!   `cpuset` hierarchy;
//! - the size of the process's CPU affinity mask (`sched_getaffinity` of the main thread). The
//!   kernel already intersects it with the cpuset, but a process may also narrow it itself
//!   (`taskset`, `sched_setaffinity`), and a source built for *another* process's cgroup still
//!   reads this process's mask.
//!
//! Quotas, periods, the cpuset and the mask are re-read on every sample: an orchestrator may resize
//! a container while it runs (Kubernetes in-place pod resize rewrites `cpu.max`). The *set* of files
//! is fixed at discovery, though: a v2 `cpu.max` or `cpuset.cpus.effective` that only appears later
//! (a controller enabled in a parent's `cgroup.subtree_control` after discovery) is not seen until
//! the source is discovered again.
//!
//! Over a short window the measured usage can exceed the quota by a few per cent (CFS hands out
//! runtime in slices and the window rarely aligns with the enforcement periods): a process in a
//! 0.5-CPU cgroup measured 0.51–0.55 CPUs over 1 s here. Consumers should clamp utilisation.
//!
//! # Cost
//!
//! Discovery reads `/proc`, walks directories and allocates. [`CpuUsageSource::sample`] does not
//! allocate: every file is opened once at discovery, and each sample re-reads the open descriptors
//! with `pread` at offset 0 into a stack buffer (cgroupfs regenerates the content on every read
//! from offset 0) and parses it in place. A sample is a handful of system calls, a few
//! microseconds; the sampler takes one every 250 ms.
//!
//! If the cgroup is removed while the source is open, its files start failing with `ENODEV` and
//! [`CpuUsageSource::sample`] returns `None`.

use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};

use rustix::process::getpid;
use rustix::thread::sched_getaffinity;
use rustix::time::{ClockId, clock_gettime};

/// Size of the stack buffer one cgroup file is read into. The files read here are a few dozen bytes
/// (`cpu.stat` a few hundred); only a cpuset list of a very large, fragmented machine could exceed
/// it, and such a list is then ignored as a bound (see [`read_text`]).
const READ_BUFFER: usize = 4096;

/// Nanoseconds per microsecond (`cpu.stat` and `cpu.max` count microseconds).
const NANOS_PER_MICRO: u64 = 1_000;

/// What a source measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceKind {
    /// The unified (v2) cgroup hierarchy: `cpu.stat` `usage_usec`.
    CgroupV2,
    /// A v1 `cpuacct` hierarchy: `cpuacct.usage`.
    CgroupV1,
    /// This process only: `CLOCK_PROCESS_CPUTIME_ID`. No quota is known; the limit is the size of
    /// the affinity mask.
    ProcessTime,
}

/// One reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    /// What this reading measured: the source's kind, or [`SourceKind::ProcessTime`] for a
    /// cgroup source while the process's affinity mask covers fewer CPUs than the cgroup may use
    /// (the cgroup's usage on the other CPUs is none of this process's load). Readings of
    /// different kinds cannot be subtracted from each other.
    pub(crate) kind: SourceKind,
    /// Cumulative CPU time used by what is measured, in nanoseconds (monotone; arbitrary origin).
    pub(crate) used_nanos: u64,
    /// CPUs available right now: the minimum of the tightest CFS quota on the cgroup's path up to
    /// its hierarchy root (quota / period; unlimited if none), the cgroup's cpuset size (if
    /// readable) and the size of the process's CPU affinity mask. Always finite and > 0.
    pub(crate) limit_cpus: f64,
}

/// A value that does not parse (see [`parse_uint`] and [`for_each_cpu`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParseError;

/// Where the CPU time comes from.
#[derive(Debug)]
enum Usage {
    /// v2 `cpu.stat`.
    CpuStat(File),
    /// v1 `cpuacct.usage`.
    Cpuacct(File),
    /// `CLOCK_PROCESS_CPUTIME_ID`.
    ProcessTime,
}

/// The quota files of one cgroup on the path from the measured cgroup up to the hierarchy root.
#[derive(Debug)]
enum Quota {
    /// v2 `cpu.max`.
    CpuMax(File),
    /// v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    Cfs {
        /// `cpu.cfs_quota_us`.
        quota: File,
        /// `cpu.cfs_period_us`.
        period: File,
    },
}

/// The CPU usage and CPU limit of a cgroup (or of this process), with its files kept open.
#[derive(Debug)]
pub(crate) struct CpuUsageSource {
    /// What is measured.
    kind: SourceKind,
    /// The usage counter.
    usage: Usage,
    /// Quota files from the measured cgroup up to the root of its `cpu` hierarchy.
    quotas: Vec<Quota>,
    /// The cpuset list that applies to the cgroup, if one could be opened.
    cpuset: Option<File>,
    /// The limit used when the affinity mask cannot be read (`sched_getaffinity` fails with
    /// `EINVAL` on machines with more CPUs than a `cpu_set_t` holds):
    /// `std::thread::available_parallelism` at discovery.
    fallback_cpus: f64,
    /// `/sys/devices/system/cpu/online`: the CPUs a cgroup without a readable cpuset may use.
    online: Option<File>,
}

impl CpuUsageSource {
    /// The process's own cgroup.
    ///
    /// Parses `/proc/self/cgroup` and `/proc/self/mountinfo`; prefers a v1 `cpuacct` hierarchy,
    /// else v2. If no cgroup accounting file can be opened, falls back to the process's own CPU
    /// time ([`SourceKind::ProcessTime`], limited by the affinity mask). `None` only if nothing
    /// works.
    pub(crate) fn discover() -> Option<CpuUsageSource> {
        // Unreadable /proc (a sandbox) leaves only the process clock.
        let proc_cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        Self::discover_from(&proc_cgroup, &mountinfo, Path::new("/"))
    }

    /// Discovery from the texts of a `/proc/<pid>/cgroup` and a `/proc/<pid>/mountinfo`, with every
    /// absolute path they name looked up under `root` (`Path::new("/")` for the real system).
    ///
    /// Tests use it with fake directory trees, and to measure another process's cgroup (by passing
    /// that process's `/proc/<pid>/cgroup`). The affinity mask is always this process's.
    pub(crate) fn discover_from(
        proc_cgroup: &str,
        mountinfo: &str,
        root: &Path,
    ) -> Option<CpuUsageSource> {
        let entries: Vec<CgroupEntry<'_>> = cgroup_entries(proc_cgroup).collect();
        let mounts: Vec<Mount> = mountinfo.lines().filter_map(parse_mountinfo_line).collect();
        let fallback_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;

        // A source is taken only if it can produce a sample now: a file that opens but does not
        // parse (an old kernel's root `cpu.stat` without `usage_usec`) moves on to the next kind.
        let with_online = |mut source: CpuUsageSource| {
            source.online = File::open(root.join("sys/devices/system/cpu/online")).ok();
            source.verified()
        };
        discover_v1(&entries, &mounts, root, fallback_cpus)
            .and_then(with_online)
            .or_else(|| discover_v2(&entries, &mounts, root, fallback_cpus).and_then(with_online))
            .or_else(|| {
                CpuUsageSource {
                    kind: SourceKind::ProcessTime,
                    usage: Usage::ProcessTime,
                    quotas: Vec::new(),
                    cpuset: None,
                    fallback_cpus,
                    online: None,
                }
                .verified()
            })
    }

    /// `self` if it can take a sample.
    fn verified(mut self) -> Option<CpuUsageSource> {
        self.sample().map(|_| self)
    }

    /// What this source measures.
    #[cfg(test)]
    pub(crate) fn kind(&self) -> SourceKind {
        self.kind
    }

    /// One reading: the limit, then the usage counter. Does not allocate.
    ///
    /// If the process's affinity mask covers fewer CPUs than the cgroup may use (its cpuset, or
    /// all online CPUs), the cgroup's usage includes work on CPUs this process cannot run on, and
    /// the reading is the process's own CPU time instead (kind [`SourceKind::ProcessTime`]),
    /// against the mask and the quota. A server pinned to one core of two that keeps its core
    /// busy then reads 1000 ‰, and one idling beside a busy neighbour reads ~0 ‰.
    ///
    /// `None` if a file can no longer be read or no longer parses (for example because the cgroup
    /// was removed).
    pub(crate) fn sample(&mut self) -> Option<Sample> {
        let mut buf = [0u8; READ_BUFFER];
        let mut quota = f64::INFINITY;
        for level in &self.quotas {
            if let Some(cpus) = level.read_cpus(&mut buf)? {
                quota = quota.min(cpus);
            }
        }
        let cpuset = match &self.cpuset {
            Some(file) => cpu_count(file, &mut buf)?,
            None => None,
        };
        let online = match &self.online {
            Some(file) => cpu_count(file, &mut buf)?,
            None => None,
        };
        let mask = affinity_cpus();
        let cgroup_cpus = cpuset.or(online);
        let narrowed = self.kind != SourceKind::ProcessTime
            && matches!((mask, cgroup_cpus), (Some(mask), Some(cgroup)) if u64::from(mask) < cgroup);

        let (kind, used_nanos) = if narrowed {
            (SourceKind::ProcessTime, process_cpu_nanos())
        } else {
            let used = match &self.usage {
                Usage::CpuStat(file) => {
                    let text = read_text(file, &mut buf).ok()?;
                    cpu_stat_usage_usec(text)?.saturating_mul(NANOS_PER_MICRO)
                }
                Usage::Cpuacct(file) => parse_uint(read_text(file, &mut buf).ok()?).ok()?,
                Usage::ProcessTime => process_cpu_nanos(),
            };
            (self.kind, used)
        };

        let mut limit = quota
            .min(cpuset.map_or(f64::INFINITY, |cpus| cpus as f64))
            .min(mask.map_or(self.fallback_cpus, f64::from));
        if !(limit.is_finite() && limit > 0.0) {
            limit = self.fallback_cpus;
        }
        Some(Sample {
            kind,
            used_nanos,
            limit_cpus: limit,
        })
    }
}

/// This process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`), in nanoseconds.
fn process_cpu_nanos() -> u64 {
    let now = clock_gettime(ClockId::ProcessCPUTime);
    // The kernel keeps both fields non-negative and `tv_nsec` below one second.
    u64::try_from(now.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(now.tv_nsec).unwrap_or(0))
}

/// The number of CPUs in a CPU-list file: `Some(Some(n))`, `Some(None)` if the list is empty (a
/// v1 cpuset nobody configured) or too long for the buffer (it bounds nothing then), `None` if
/// the file cannot be read or parsed.
fn cpu_count(file: &File, buf: &mut [u8]) -> Option<Option<u64>> {
    match read_text(file, buf) {
        Ok(text) => Some(Some(count_cpus(text).ok()?).filter(|&cpus| cpus > 0)),
        Err(ReadError::TooLong) => Some(None),
        Err(ReadError::Io) => None,
    }
}

impl Quota {
    /// The CPUs this cgroup's quota allows: `Some(Some(cpus))`, `Some(None)` when unlimited,
    /// `None` when a file cannot be read or parsed.
    fn read_cpus(&self, buf: &mut [u8]) -> Option<Option<f64>> {
        let (quota_us, period_us) = match self {
            Quota::CpuMax(file) => {
                let text = read_text(file, buf).ok()?;
                let mut fields = text.split_ascii_whitespace();
                let quota = fields.next()?;
                let period = parse_uint(fields.next()?).ok()?;
                if quota == "max" {
                    return Some(None);
                }
                (parse_uint(quota).ok()?, period)
            }
            Quota::Cfs { quota, period } => {
                // `-1` (no quota) parses as 0.
                let quota_us = parse_uint(read_text(quota, buf).ok()?).ok()?;
                let period_us = parse_uint(read_text(period, buf).ok()?).ok()?;
                (quota_us, period_us)
            }
        };
        // The kernel rejects a zero quota or period; treat one as "no quota" rather than 0 CPUs.
        if quota_us == 0 || period_us == 0 {
            return Some(None);
        }
        Some(Some(quota_us as f64 / period_us as f64))
    }
}

/// The number of CPUs in this process's affinity mask (of the main thread: the sampler's own
/// thread may have been pinned), or `None` if it cannot be read.
fn affinity_cpus() -> Option<u32> {
    let set = sched_getaffinity(Some(getpid())).ok()?;
    Some(set.count()).filter(|&n| n > 0)
}

/// Finds the process's v1 `cpuacct` hierarchy and, in the (possibly separate) `cpu` and `cpuset`
/// hierarchies, its quota and cpuset files.
fn discover_v1(
    entries: &[CgroupEntry<'_>],
    mounts: &[Mount],
    root: &Path,
    fallback_cpus: f64,
) -> Option<CpuUsageSource> {
    let usage = v1_locations(entries, mounts, root, "cpuacct")
        .find_map(|loc| File::open(loc.dir().join("cpuacct.usage")).ok())?;

    let mut quotas = Vec::new();
    if let Some(loc) = v1_locations(entries, mounts, root, "cpu").find(|loc| loc.dir().is_dir()) {
        for level in loc.levels() {
            let quota = File::open(level.join("cpu.cfs_quota_us"));
            let period = File::open(level.join("cpu.cfs_period_us"));
            if let (Ok(quota), Ok(period)) = (quota, period) {
                quotas.push(Quota::Cfs { quota, period });
            }
        }
    }

    let cpuset = v1_locations(entries, mounts, root, "cpuset").find_map(|loc| {
        let prefix = if has_item(&loc.mount.super_options, "noprefix") {
            ""
        } else {
            "cpuset."
        };
        let dir = loc.dir();
        // `effective_cpus` also reflects CPUs taken offline; older kernels only have `cpus`.
        ["effective_cpus", "cpus"]
            .iter()
            .find_map(|name| File::open(dir.join(format!("{prefix}{name}"))).ok())
    });

    Some(CpuUsageSource {
        kind: SourceKind::CgroupV1,
        usage: Usage::Cpuacct(usage),
        quotas,
        cpuset,
        fallback_cpus,
        online: None,
    })
}

/// Finds the process's cgroup in the unified (v2) hierarchy and its quota and cpuset files.
fn discover_v2(
    entries: &[CgroupEntry<'_>],
    mounts: &[Mount],
    root: &Path,
    fallback_cpus: f64,
) -> Option<CpuUsageSource> {
    let path = entries
        .iter()
        .find(|e| e.hierarchy_id == "0" && e.controllers.is_empty())?
        .path;
    mounts
        .iter()
        .filter(|m| m.fstype == "cgroup2")
        .filter_map(|mount| Location::new(mount, path, root))
        .find_map(|loc| {
            let usage = File::open(loc.dir().join("cpu.stat")).ok()?;
            let quotas = loc
                .levels()
                .filter_map(|level| File::open(level.join("cpu.max")).ok())
                .map(Quota::CpuMax)
                .collect();
            let cpuset = loc
                .levels()
                .find_map(|level| File::open(level.join("cpuset.cpus.effective")).ok());
            Some(CpuUsageSource {
                kind: SourceKind::CgroupV2,
                usage: Usage::CpuStat(usage),
                quotas,
                cpuset,
                fallback_cpus,
                online: None,
            })
        })
}

/// The locations of the process's cgroup in every mount of the v1 hierarchy that carries
/// `controller` (a hierarchy can be mounted more than once).
fn v1_locations<'m>(
    entries: &[CgroupEntry<'_>],
    mounts: &'m [Mount],
    root: &Path,
    controller: &str,
) -> impl Iterator<Item = Location<'m>> {
    let path = entries
        .iter()
        .find(|e| e.hierarchy_id != "0" && has_item(e.controllers, controller))
        .map(|e| e.path.to_owned());
    let root = root.to_owned();
    let controller = controller.to_owned();
    mounts
        .iter()
        .filter(move |m| m.fstype == "cgroup" && has_item(&m.super_options, &controller))
        .filter_map(move |mount| Location::new(mount, path.as_deref()?, &root))
}

/// Whether the comma-separated `list` contains `item` exactly (`cpu` is not `cpuacct`).
fn has_item(list: &str, item: &str) -> bool {
    list.split(',').any(|x| x == item)
}

/// One line of `/proc/<pid>/cgroup`: `ID:CONTROLLERS:PATH`.
#[derive(Debug)]
struct CgroupEntry<'a> {
    /// The hierarchy ID; `0` for the unified (v2) hierarchy.
    hierarchy_id: &'a str,
    /// Comma-separated controllers (`cpu,cpuacct`, `name=systemd`); empty for v2.
    controllers: &'a str,
    /// The cgroup's path relative to the hierarchy root of the process's cgroup namespace.
    path: &'a str,
}

/// The lines of a `/proc/<pid>/cgroup` text. The path is the rest of the line after the second
/// colon, so a path containing colons survives.
fn cgroup_entries(text: &str) -> impl Iterator<Item = CgroupEntry<'_>> {
    text.lines().filter_map(|line| {
        let mut parts = line.splitn(3, ':');
        Some(CgroupEntry {
            hierarchy_id: parts.next()?,
            controllers: parts.next()?,
            path: parts.next()?,
        })
    })
}

/// The fields of a `/proc/<pid>/mountinfo` line that discovery needs.
#[derive(Debug)]
struct Mount {
    /// Field 4: the directory of the file system that is mounted (for cgroupfs, a cgroup path).
    root: PathBuf,
    /// Field 5: where it is mounted, relative to the process's root directory.
    mount_point: PathBuf,
    /// The first field after the `-` separator: `cgroup` (v1) or `cgroup2`.
    fstype: String,
    /// The third field after the separator; for v1 cgroupfs it names the controllers.
    super_options: String,
}

/// Parses one mountinfo line:
/// `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`.
/// The number of optional fields varies, so the separator is searched for.
fn parse_mountinfo_line(line: &str) -> Option<Mount> {
    let fields: Vec<&str> = line.split(' ').collect();
    let separator = 6 + fields.get(6..)?.iter().position(|f| *f == "-")?;
    Some(Mount {
        root: unescape_mountinfo(fields.get(3)?),
        mount_point: unescape_mountinfo(fields.get(4)?),
        fstype: (*fields.get(separator + 1)?).to_owned(),
        super_options: (*fields.get(separator + 3)?).to_owned(),
    })
}

/// Undoes mountinfo's escaping of space, tab, newline and backslash as `\ooo` (three octal
/// digits). Paths need not be UTF-8.
fn unescape_mountinfo(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| {
            d.iter().all(|b| (b'0'..=b'7').contains(b)) && d[0] <= b'3' // fits in a byte
        });
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// A cgroup's place inside one mount of its hierarchy.
#[derive(Debug)]
struct Location<'m> {
    /// The mount.
    mount: &'m Mount,
    /// The mount point, under the caller's `root`.
    mount_dir: PathBuf,
    /// The cgroup's directory relative to `mount_dir`: only normal components, empty for the
    /// mount's own root.
    relative: PathBuf,
}

impl<'m> Location<'m> {
    /// Where `cgroup_path` (from `/proc/<pid>/cgroup`) lies under `mount`, or `None` if the
    /// mount does not show it: the path must lie at or below the mount's root, with no `..`.
    fn new(mount: &'m Mount, cgroup_path: &str, root: &Path) -> Option<Location<'m>> {
        // `strip_prefix` compares whole components: root `/docker/abc` does not contain
        // `/docker/abcd`.
        let relative = Path::new(cgroup_path).strip_prefix(&mount.root).ok()?;
        if !relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            return None;
        }
        let mount_point = mount
            .mount_point
            .strip_prefix("/")
            .unwrap_or(&mount.mount_point);
        Some(Location {
            mount,
            mount_dir: root.join(mount_point),
            relative: relative.to_owned(),
        })
    }

    /// The cgroup's directory.
    fn dir(&self) -> PathBuf {
        self.mount_dir.join(&self.relative)
    }

    /// The cgroup's directory, then each parent up to and including the mount point.
    fn levels(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.relative.ancestors().map(|a| self.mount_dir.join(a))
    }
}

/// Why [`read_text`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadError {
    /// The read failed (the cgroup was removed: `ENODEV`) or the content is not UTF-8.
    Io,
    /// The content does not fit the buffer.
    TooLong,
}

/// Reads the whole of an open file from offset 0 into `buf`, without allocating.
///
/// cgroupfs regenerates a file's content when it is read from offset 0, so a descriptor kept open
/// since discovery yields current values. Reads continue until end of file, because a `pread` may
/// legally return less than asked for.
fn read_text<'b>(file: &File, buf: &'b mut [u8]) -> Result<&'b str, ReadError> {
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Err(ReadError::TooLong);
        }
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(ReadError::Io),
        }
    }
    std::str::from_utf8(&buf[..len]).map_err(|_| ReadError::Io)
}

/// The `usage_usec` value of a v2 `cpu.stat` (flat keyed: one `key value` pair per line).
fn cpu_stat_usage_usec(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("usage_usec "))
        .and_then(|value| parse_uint(value).ok())
}

/// Parses a cgroup integer with go-zero's `parseUint` semantics: a decimal `u64`; a negative number
/// of any magnitude (`-1`, `-18446744073709551616`) parses as 0, which turns v1's "no quota" `-1`
/// into 0; anything else is an error. Surrounding whitespace (the trailing newline) is trimmed.
pub(crate) fn parse_uint(s: &str) -> Result<u64, ParseError> {
    parse_uint_exact(s.trim())
}

/// [`parse_uint`] without trimming, as go-zero applies it to the elements of a list.
///
/// Like Go's `strconv.ParseUint` (which go-zero calls first) it accepts only ASCII digits: no `+`,
/// no whitespace, no `_`. Like go-zero's fallback to `ParseInt` it maps `-` followed by digits to
/// 0, except when the number's value is zero (`-0`): `ParseInt` accepts that as 0, which is not
/// negative, so go-zero reports the original error.
fn parse_uint_exact(s: &str) -> Result<u64, ParseError> {
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if let Some(magnitude) = s.strip_prefix('-') {
        return if all_digits(magnitude) && magnitude.bytes().any(|b| b != b'0') {
            Ok(0)
        } else {
            Err(ParseError)
        };
    }
    if !all_digits(s) {
        return Err(ParseError);
    }
    s.parse().map_err(|_| ParseError)
}

/// Calls `f` for every CPU in a cpuset list such as `0-3,5,7-9`, in the order listed.
///
/// `""` (after trimming surrounding whitespace) is the empty set. Elements are separated by commas
/// and are `N` or `LOW-HIGH` with `LOW <= HIGH`; each number parses as in [`parse_uint`] but
/// untrimmed, as in go-zero's `parseUints`. `3-1`, `1-bar`, `bar-3`, `1,,2` and `1,` are errors.
/// The whole list is validated before `f` is first called, so on error `f` is never called.
/// Unlike go-zero, repeated CPUs are not removed (the kernel never writes any). Does not allocate.
pub(crate) fn for_each_cpu(list: &str, mut f: impl FnMut(u32)) -> Result<(), ParseError> {
    for_each_range(list, |_, _| {})?;
    for_each_range(list, |low, high| (low..=high).for_each(&mut f))
}

/// The number of CPUs in a cpuset list (see [`for_each_cpu`]).
fn count_cpus(list: &str) -> Result<u64, ParseError> {
    let mut count = 0u64;
    for_each_cpu(list, |_| count += 1)?;
    Ok(count)
}

/// Calls `f(low, high)` for every element of a cpuset list (`N` is `N-N`), stopping at the first
/// invalid element.
fn for_each_range(list: &str, mut f: impl FnMut(u32, u32)) -> Result<(), ParseError> {
    let list = list.trim();
    if list.is_empty() {
        return Ok(());
    }
    let cpu = |s: &str| u32::try_from(parse_uint_exact(s)?).map_err(|_| ParseError);
    for element in list.split(',') {
        let (low, high) = match element.split_once('-') {
            Some((low, high)) => (cpu(low)?, cpu(high)?),
            None => {
                let n = cpu(element)?;
                (n, n)
            }
        };
        if high < low {
            return Err(ParseError);
        }
        f(low, high);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    fn cpus(list: &str) -> Result<Vec<u32>, ParseError> {
        let mut out = Vec::new();
        for_each_cpu(list, |c| out.push(c)).map(|()| out)
    }

    /// Test vector 22 (go-zero `cgroup_linux_test.go`).
    #[test]
    fn vector_22_parsers() {
        assert_eq!(parse_uint("0"), Ok(0));
        assert_eq!(parse_uint("123"), Ok(123));
        assert_eq!(parse_uint("-1"), Ok(0));
        assert_eq!(parse_uint("-18446744073709551616"), Ok(0));
        assert_eq!(parse_uint("foo"), Err(ParseError));

        assert_eq!(cpus(""), Ok(vec![]));
        assert_eq!(cpus("1,2,3"), Ok(vec![1, 2, 3]));
        assert_eq!(cpus("1-3"), Ok(vec![1, 2, 3]));
        assert_eq!(cpus("1-3,5,7-9"), Ok(vec![1, 2, 3, 5, 7, 8, 9]));
        assert_eq!(cpus("3-1"), Err(ParseError));
        assert_eq!(cpus("1-bar"), Err(ParseError));
        assert_eq!(cpus("bar-3"), Err(ParseError));
    }

    #[test]
    fn parser_edges() {
        assert_eq!(parse_uint(" 42\n"), Ok(42));
        assert_eq!(parse_uint("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_uint("18446744073709551616"), Err(ParseError));
        assert_eq!(parse_uint("-99999999999999999999999"), Ok(0));
        assert_eq!(parse_uint("+5"), Err(ParseError));
        assert_eq!(parse_uint("-0"), Err(ParseError));
        assert_eq!(parse_uint("-"), Err(ParseError));
        assert_eq!(parse_uint(""), Err(ParseError));
        assert_eq!(parse_uint("1_000"), Err(ParseError));
        assert_eq!(parse_uint("max"), Err(ParseError));

        assert_eq!(cpus("0-3\n"), Ok(vec![0, 1, 2, 3]));
        assert_eq!(cpus("\n"), Ok(vec![]));
        assert_eq!(cpus("7"), Ok(vec![7]));
        assert_eq!(cpus("2-2"), Ok(vec![2]));
        assert_eq!(cpus("1,,2"), Err(ParseError));
        assert_eq!(cpus("1,"), Err(ParseError));
        assert_eq!(cpus("1, 2"), Err(ParseError));
        assert_eq!(cpus("-1"), Err(ParseError));
        assert_eq!(cpus("4294967296"), Err(ParseError));
        // Validation precedes the calls.
        let mut called = false;
        assert_eq!(for_each_cpu("0-3,x", |_| called = true), Err(ParseError));
        assert!(!called);
        assert_eq!(count_cpus("0-3,8-11,16"), Ok(9));
    }

    #[test]
    fn mountinfo_lines() {
        let m = parse_mountinfo_line(
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 \
             cgroup2 rw,nsdelegate,memory_recursiveprot",
        )
        .unwrap();
        assert_eq!(m.root, Path::new("/"));
        assert_eq!(m.mount_point, Path::new("/sys/fs/cgroup"));
        assert_eq!(m.fstype, "cgroup2");
        assert_eq!(m.super_options, "rw,nsdelegate,memory_recursiveprot");

        // No optional fields, escaped space and backslash.
        let m = parse_mountinfo_line(
            "32 31 0:29 /my\\040group /mnt/a\\134b rw - cgroup cgroup rw,cpu,cpuacct",
        )
        .unwrap();
        assert_eq!(m.root, Path::new("/my group"));
        assert_eq!(m.mount_point, Path::new("/mnt/a\\b"));
        assert!(has_item(&m.super_options, "cpu"));
        assert!(has_item(&m.super_options, "cpuacct"));
        assert!(!has_item(&m.super_options, "cpuset"));

        assert!(parse_mountinfo_line("garbage").is_none());
        assert!(parse_mountinfo_line("1 2 3:4 / /x rw shared:1 no separator").is_none());
    }

    /// A fake file-system tree under the system's temporary directory, removed on drop.
    struct FakeRoot(PathBuf);

    impl FakeRoot {
        fn new(name: &str) -> FakeRoot {
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
        fn write(&self, path: &str, content: &str) {
            let path = self.0.join(path.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for FakeRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// This process's affinity mask size, as the source reads it.
    fn mask() -> f64 {
        f64::from(affinity_cpus().expect("sched_getaffinity"))
    }

    const V2_MOUNT: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 \
                            - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

    #[test]
    fn fake_v2() {
        let fs = FakeRoot::new("v2");
        fs.write("/sys/fs/cgroup/cpu.stat", "usage_usec 999999999\n");
        fs.write("/sys/fs/cgroup/cpuset.cpus.effective", "0-63\n");
        fs.write("/sys/fs/cgroup/a/cpu.max", "150000 100000\n");
        fs.write("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
        // A real cpuset always covers the process's mask (the kernel narrows the mask to it).
        let all = format!("0-{}\n", mask() as u32 - 1);
        fs.write("/sys/fs/cgroup/a/b/cpuset.cpus.effective", &all);
        fs.write(
            "/sys/fs/cgroup/a/b/cpu.stat",
            "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n",
        );
        let mut src = CpuUsageSource::discover_from("0::/a/b\n", V2_MOUNT, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::CgroupV2);
        let s = src.sample().unwrap();
        assert_eq!(s.used_nanos, 123_456_000);
        assert_eq!(s.limit_cpus, 1.5f64.min(mask()));

        // Rewritten in place: the next sample sees the new values through the open descriptors.
        fs.write("/sys/fs/cgroup/a/b/cpu.stat", "usage_usec 200000\n");
        fs.write("/sys/fs/cgroup/a/cpu.max", "50000 100000\n");
        let s = src.sample().unwrap();
        assert_eq!(s.used_nanos, 200_000_000);
        assert_eq!(s.limit_cpus, 0.5);

        // The leaf's quota counts too, and the tightest wins.
        fs.write("/sys/fs/cgroup/a/b/cpu.max", "25000 100000\n");
        assert_eq!(src.sample().unwrap().limit_cpus, 0.25);

        // No quota anywhere: the cpuset, then the affinity mask bound the limit.
        fs.write("/sys/fs/cgroup/a/cpu.max", "max 100000\n");
        fs.write("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
        fs.write("/sys/fs/cgroup/a/b/cpuset.cpus.effective", "1\n");
        assert_eq!(src.sample().unwrap().limit_cpus, 1.0);
        fs.write("/sys/fs/cgroup/a/b/cpuset.cpus.effective", "0-1023\n");
        let limit = src.sample().unwrap().limit_cpus;
        assert_eq!(limit, mask());
        assert!(limit <= mask());

        // A file that stops parsing fails the sample instead of producing a bogus value.
        fs.write("/sys/fs/cgroup/a/b/cpuset.cpus.effective", &all);
        fs.write("/sys/fs/cgroup/a/b/cpu.stat", "user_usec 1\n");
        assert_eq!(src.sample(), None);
    }

    #[test]
    fn fake_v2_cpuset_inherited_from_ancestor() {
        // The cpuset controller is enabled only at the root: the leaf runs on the root's CPUs.
        let fs = FakeRoot::new("v2-cpuset");
        fs.write("/sys/fs/cgroup/cpuset.cpus.effective", "0\n");
        fs.write("/sys/fs/cgroup/a/b/cpu.stat", "usage_usec 1\n");
        let mut src = CpuUsageSource::discover_from("0::/a/b\n", V2_MOUNT, fs.path()).unwrap();
        assert_eq!(src.sample().unwrap().limit_cpus, 1.0);
    }

    /// This machine's layout: every v1 controller in its own hierarchy, plus an empty v2 tree.
    const V1_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
";
    const V1_CGROUP: &str = "\
9:name=systemd:/
4:memory:/other
3:cpuset:/grp
2:cpuacct:/grp
1:cpu:/grp
0::/
";

    fn v1_tree(name: &str) -> FakeRoot {
        let fs = FakeRoot::new(name);
        fs.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        fs.write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        fs.write("/sys/fs/cgroup/cpu/grp/cpu.cfs_quota_us", "50000\n");
        fs.write("/sys/fs/cgroup/cpu/grp/cpu.cfs_period_us", "100000\n");
        fs.write("/sys/fs/cgroup/cpuacct/cpuacct.usage", "111111111111\n");
        fs.write("/sys/fs/cgroup/cpuacct/grp/cpuacct.usage", "987654321\n");
        fs.write("/sys/fs/cgroup/cpuset/grp/cpuset.cpus", "0-1\n");
        fs.write("/sys/fs/cgroup/cpuset/grp/cpuset.effective_cpus", "0-1\n");
        fs
    }

    #[test]
    fn fake_v1_separate_mounts() {
        let fs = v1_tree("v1");
        let mut src = CpuUsageSource::discover_from(V1_CGROUP, V1_MOUNTS, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::CgroupV1);
        let s = src.sample().unwrap();
        assert_eq!(s.used_nanos, 987_654_321);
        assert_eq!(s.limit_cpus, 0.5);

        fs.write("/sys/fs/cgroup/cpuacct/grp/cpuacct.usage", "1987654321\n");
        fs.write("/sys/fs/cgroup/cpu/grp/cpu.cfs_quota_us", "-1\n");
        fs.write("/sys/fs/cgroup/cpu/grp/cpu.cfs_period_us", "50000\n");
        fs.write("/sys/fs/cgroup/cpuset/grp/cpuset.effective_cpus", "1\n");
        let s = src.sample().unwrap();
        assert_eq!(s.used_nanos, 1_987_654_321);
        assert_eq!(s.limit_cpus, 1.0);

        // A parent's quota caps the child.
        fs.write(
            "/sys/fs/cgroup/cpuset/grp/cpuset.effective_cpus",
            "0-1023\n",
        );
        fs.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "30000\n");
        assert_eq!(src.sample().unwrap().limit_cpus, 0.3f64.min(mask()));
        fs.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        assert_eq!(src.sample().unwrap().limit_cpus, mask());
    }

    #[test]
    fn fake_hybrid_prefers_v1() {
        // Co-mounted cpu,cpuacct (the usual distribution layout) plus systemd's empty v2 tree.
        let fs = FakeRoot::new("hybrid");
        let mounts = "\
24 23 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
25 24 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
29 24 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct
30 24 0:28 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpuset
";
        let cgroup = "3:cpuset:/\n2:cpu,cpuacct:/svc\n1:name=systemd:/svc\n0::/svc\n";
        fs.write("/sys/fs/cgroup/unified/svc/cpu.stat", "usage_usec 5\n");
        fs.write("/sys/fs/cgroup/cpu,cpuacct/svc/cpuacct.usage", "777\n");
        fs.write(
            "/sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_quota_us",
            "200000\n",
        );
        fs.write(
            "/sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_period_us",
            "100000\n",
        );
        fs.write(
            "/sys/fs/cgroup/cpuset/cpuset.cpus",
            &format!("0-{}\n", mask() as u32 - 1),
        );
        let mut src = CpuUsageSource::discover_from(cgroup, mounts, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::CgroupV1);
        let s = src.sample().unwrap();
        assert_eq!(s.used_nanos, 777);
        assert_eq!(s.limit_cpus, 2.0f64.min(mask()));

        // Without the v1 accounting file, the v2 tree is used.
        std::fs::remove_file(
            fs.path()
                .join("sys/fs/cgroup/cpu,cpuacct/svc/cpuacct.usage"),
        )
        .unwrap();
        let mut src = CpuUsageSource::discover_from(cgroup, mounts, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::CgroupV2);
        assert_eq!(src.sample().unwrap().used_nanos, 5_000);
    }

    #[test]
    fn fake_mount_root_not_slash() {
        // A container without a cgroup namespace: the runtime bind-mounts its cgroup.
        let fs = FakeRoot::new("nsroot");
        let mounts = "1000 999 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n";
        fs.write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
        fs.write("/sys/fs/cgroup/cpu.stat", "usage_usec 1\n");
        fs.write("/sys/fs/cgroup/x/cpu.stat", "usage_usec 42\n");
        let mut src =
            CpuUsageSource::discover_from("0::/docker/abc/x\n", mounts, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::CgroupV2);
        let s = src.sample().unwrap();
        assert_eq!(s.used_nanos, 42_000);
        // The mount point's quota (the container's own cgroup) counts.
        assert_eq!(s.limit_cpus, 1.0);

        // The mount's own root.
        let mut src = CpuUsageSource::discover_from("0::/docker/abc\n", mounts, fs.path()).unwrap();
        assert_eq!(src.sample().unwrap().used_nanos, 1_000);

        // Paths the mount does not show: a sibling with a common string prefix, and `..`.
        for path in [
            "0::/docker/abcd/x\n",
            "0::/../x\n",
            "0::/docker/abc/../abc/x\n",
        ] {
            let src = CpuUsageSource::discover_from(path, mounts, fs.path()).unwrap();
            assert_eq!(src.kind(), SourceKind::ProcessTime, "{path}");
        }

        // The same through a v1 mount with a non-/ root, and Android's `noprefix` cpuset.
        let mounts = "\
50 49 0:30 /docker/abc /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
51 49 0:31 /docker/abc /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,noprefix,cpuset
";
        fs.write("/sys/fs/cgroup/cpuacct/x/cpuacct.usage", "31\n");
        fs.write("/sys/fs/cgroup/cpuset/x/cpus", "3\n");
        let cgroup = "2:cpuset:/docker/abc/x\n1:cpuacct:/docker/abc/x\n";
        let mut src = CpuUsageSource::discover_from(cgroup, mounts, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::CgroupV1);
        assert_eq!(
            src.sample().unwrap(),
            Sample {
                kind: SourceKind::CgroupV1,
                used_nanos: 31,
                limit_cpus: 1.0
            }
        );
    }

    /// A process pinned to fewer CPUs than its cgroup may use measures its own CPU time: the
    /// cgroup's usage on the other CPUs is not its load.
    #[test]
    fn fake_affinity_narrower_than_the_cgroup() {
        let fs = FakeRoot::new("narrow");
        let mounts = "33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
";
        fs.write(
            "/sys/fs/cgroup/cpuacct/svc/cpuacct.usage",
            "5000000000
",
        );
        let cgroup = "2:cpuacct:/svc
";
        // No cpuset: the online CPUs bound the cgroup. More of them than this process's mask.
        fs.write(
            "/sys/devices/system/cpu/online",
            "0-4095
",
        );
        let mut src = CpuUsageSource::discover_from(cgroup, mounts, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::CgroupV1);
        let sample = src.sample().unwrap();
        assert_eq!(sample.kind, SourceKind::ProcessTime);
        assert_eq!(sample.limit_cpus, mask());
        assert_ne!(
            sample.used_nanos, 5_000_000_000,
            "the process's time, not the cgroup's"
        );
        // As many online CPUs as the mask holds: the cgroup is measured again.
        fs.write(
            "/sys/devices/system/cpu/online",
            &format!("0-{}\n", mask() as u32 - 1),
        );
        let sample = src.sample().unwrap();
        assert_eq!(sample.kind, SourceKind::CgroupV1);
        assert_eq!(sample.used_nanos, 5_000_000_000);
    }

    #[test]
    fn fake_no_cgroup_mounts() {
        let fs = FakeRoot::new("none");
        let mounts = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n";
        let mut src = CpuUsageSource::discover_from(V1_CGROUP, mounts, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::ProcessTime);
        let a = src.sample().unwrap();
        assert_eq!(a.limit_cpus, mask());
        busy(Duration::from_millis(5));
        let b = src.sample().unwrap();
        assert!(b.used_nanos > a.used_nanos, "{a:?} {b:?}");

        // Mounts but nothing behind them (and empty texts): the same.
        let src = CpuUsageSource::discover_from(V1_CGROUP, V1_MOUNTS, fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::ProcessTime);
        let src = CpuUsageSource::discover_from("", "", fs.path()).unwrap();
        assert_eq!(src.kind(), SourceKind::ProcessTime);
    }

    /// Spins for about `d` (bounded by an iteration cap), without sleeping.
    fn busy(d: Duration) {
        let start = Instant::now();
        let mut x = 0u64;
        for i in 0..10_000_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
            if i % 1024 == 0 && start.elapsed() >= d {
                break;
            }
        }
        std::hint::black_box(x);
    }

    #[test]
    fn real_machine() {
        let mut src = CpuUsageSource::discover().expect("discovery");
        let a = src.sample().unwrap();
        let t = Instant::now();
        busy(Duration::from_millis(50));
        let b = src.sample().unwrap();
        let wall = t.elapsed();
        println!(
            "real machine: kind {:?}, limit {} CPUs, used {} ns over {:?} of busy loop",
            src.kind(),
            b.limit_cpus,
            b.used_nanos - a.used_nanos,
            wall
        );
        assert!(b.used_nanos > a.used_nanos, "{a:?} {b:?}");
        assert!(b.limit_cpus > 0.0 && b.limit_cpus <= mask());

        let t = Instant::now();
        for _ in 0..1000 {
            std::hint::black_box(src.sample().unwrap());
        }
        println!("real machine: one sample takes {:?}", t.elapsed() / 1000);
    }

    /// v1 cgroups created for a test, with a child process in them; removed on drop.
    struct RealCgroup {
        dirs: Vec<PathBuf>,
        child: Option<std::process::Child>,
    }

    impl RealCgroup {
        fn cleanup(&mut self) {
            if let Some(mut child) = self.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            for dir in self.dirs.drain(..) {
                // A reaped task leaves its cgroup at once, but be lenient.
                for _ in 0..50 {
                    match std::fs::remove_dir(&dir) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        _ => break,
                    }
                }
            }
        }
    }

    impl Drop for RealCgroup {
        fn drop(&mut self) {
            self.cleanup();
        }
    }

    #[test]
    fn real_v1_cgroup_with_quota() {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let v1 = |controller: &str, dir: &str| {
            mountinfo.lines().filter_map(parse_mountinfo_line).any(|m| {
                m.fstype == "cgroup"
                    && m.mount_point == Path::new(dir)
                    && has_item(&m.super_options, controller)
            })
        };
        if !rustix::process::geteuid().is_root() {
            println!("skipped real_v1_cgroup_with_quota: not running as root");
            return;
        }
        if !(v1("cpu", "/sys/fs/cgroup/cpu") && v1("cpuacct", "/sys/fs/cgroup/cpuacct")) {
            println!(
                "skipped real_v1_cgroup_with_quota: /sys/fs/cgroup/cpu and cpuacct are not v1 \
                 hierarchies"
            );
            return;
        }
        let name = format!("admit-test-{}", std::process::id());
        let cpu_dir = Path::new("/sys/fs/cgroup/cpu").join(&name);
        let acct_dir = Path::new("/sys/fs/cgroup/cpuacct").join(&name);
        let mut guard = RealCgroup {
            dirs: Vec::new(),
            child: None,
        };
        for dir in [&cpu_dir, &acct_dir] {
            if let Err(e) = std::fs::create_dir(dir) {
                println!("skipped real_v1_cgroup_with_quota: cannot create {dir:?}: {e}");
                return;
            }
            guard.dirs.push(dir.clone());
        }
        std::fs::write(cpu_dir.join("cpu.cfs_period_us"), "100000").unwrap();
        std::fs::write(cpu_dir.join("cpu.cfs_quota_us"), "50000").unwrap();

        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        guard.child = Some(child);
        for dir in [&cpu_dir, &acct_dir] {
            std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
        }

        let proc_cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let mut src = CpuUsageSource::discover_from(&proc_cgroup, &mountinfo, Path::new("/"))
            .expect("discovery");
        assert_eq!(src.kind(), SourceKind::CgroupV1);

        let (a, ta) = (src.sample().unwrap(), Instant::now());
        std::thread::sleep(Duration::from_secs(1));
        let (b, tb) = (src.sample().unwrap(), Instant::now());
        let used = b.used_nanos - a.used_nanos;
        let wall = tb.duration_since(ta).as_nanos() as f64;
        let ratio = used as f64 / wall;
        println!(
            "real v1 cgroup {name}: limit {} CPUs, used {used} ns over {wall} ns wall: {ratio:.3} \
             CPUs, utilisation {:.0} permille",
            b.limit_cpus,
            1000.0 * ratio / b.limit_cpus
        );
        assert_eq!(a.limit_cpus, 0.5);
        assert_eq!(b.limit_cpus, 0.5);
        assert!((0.35..=0.6).contains(&ratio), "ratio {ratio}");

        // Quota changes are seen by the next sample.
        std::fs::write(cpu_dir.join("cpu.cfs_quota_us"), "25000").unwrap();
        assert_eq!(src.sample().unwrap().limit_cpus, 0.25);

        // Once the cgroup is gone, its open files fail and so does the sample.
        guard.cleanup();
        assert!(
            !cpu_dir.exists() && !acct_dir.exists(),
            "cgroups not removed"
        );
        assert_eq!(src.sample(), None);
    }
}
