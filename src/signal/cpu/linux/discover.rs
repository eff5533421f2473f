//! Which cgroup files measure the process: its v1 `cpuacct`, `cpu` and `cpuset` hierarchies, or
//! its place in the unified (v2) hierarchy.

use std::fs::File;
use std::path::Path;

use super::cgroupfs::{Quota, Usage};
use super::location::{Location, v1_locations};
use super::procfs::{CgroupEntry, Mount, cgroup_entries, has_item, parse_mountinfo_line};
use super::source::CpuUsageSource;
use crate::signal::cpu::sample::SourceKind;

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
}

/// Finds the process's v1 `cpuacct` hierarchy and, in the (possibly separate) `cpu` and `cpuset`
/// hierarchies, its quota and cpuset files.
pub(super) fn discover_v1(
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
pub(super) fn discover_v2(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::cpu::linux::test_support::{FakeRoot, V2_MOUNT, mask};

    #[test]
    fn fake_v2_cpuset_inherited_from_ancestor() {
        // The cpuset controller is enabled only at the root: the leaf runs on the root's CPUs.
        let fs = FakeRoot::new("v2-cpuset");
        fs.write("/sys/fs/cgroup/cpuset.cpus.effective", "0\n");
        fs.write("/sys/fs/cgroup/a/b/cpu.stat", "usage_usec 1\n");
        let mut src = CpuUsageSource::discover_from("0::/a/b\n", V2_MOUNT, fs.path()).unwrap();
        assert_eq!(src.sample().unwrap().limit_cpus, 1.0);
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
}
