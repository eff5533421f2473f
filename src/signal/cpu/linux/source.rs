//! The source: found once from the process's `/proc` texts, then sampled from its open files.

use std::fs::File;

use super::cgroupfs::{Quota, READ_BUFFER, Usage, cpu_count, read_text};
use super::parse::{cpu_stat_usage_usec, parse_uint};
use super::process::{affinity_cpus, process_cpu_nanos};
use crate::signal::cpu::sample::{Sample, SourceKind};

/// Nanoseconds per microsecond (`cpu.stat` and `cpu.max` count microseconds).
const NANOS_PER_MICRO: u64 = 1_000;

/// The CPU usage and CPU limit of a cgroup (or of this process), with its files kept open.
#[derive(Debug)]
pub(crate) struct CpuUsageSource {
    /// What is measured.
    pub(super) kind: SourceKind,
    /// The usage counter.
    pub(super) usage: Usage,
    /// Quota files from the measured cgroup up to the root of its `cpu` hierarchy.
    pub(super) quotas: Vec<Quota>,
    /// The cpuset list that applies to the cgroup, if one could be opened.
    pub(super) cpuset: Option<File>,
    /// The limit used when the affinity mask cannot be read (`sched_getaffinity` fails with
    /// `EINVAL` on machines with more CPUs than a `cpu_set_t` holds):
    /// `std::thread::available_parallelism` at discovery.
    pub(super) fallback_cpus: f64,
    /// `/sys/devices/system/cpu/online`: the CPUs a cgroup without a readable cpuset may use.
    pub(super) online: Option<File>,
}

impl CpuUsageSource {
    /// `self` if it can take a sample.
    pub(super) fn verified(mut self) -> Option<CpuUsageSource> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::cpu::linux::procfs::{has_item, parse_mountinfo_line};
    use crate::signal::cpu::linux::test_support::{FakeRoot, V2_MOUNT, mask};
    use std::io;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

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

    /// Skips `real_v1_cgroup_with_quota` with `reason`, or fails if CI requires cgroups
    /// (`ADMIT_REQUIRE_CGROUPS`) and `required`: a v2-only host is no failure, since
    /// `tests/system_cpu.rs` measures a quota there.
    fn skip(reason: &str, required: bool) {
        if required && std::env::var_os("ADMIT_REQUIRE_CGROUPS").is_some() {
            panic!("real_v1_cgroup_with_quota cannot run: {reason}");
        }
        println!("SKIPPED: real_v1_cgroup_with_quota: {reason}");
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
            skip("not running as root", true);
            return;
        }
        if !(v1("cpu", "/sys/fs/cgroup/cpu") && v1("cpuacct", "/sys/fs/cgroup/cpuacct")) {
            skip(
                "/sys/fs/cgroup/cpu and cpuacct are not v1 hierarchies",
                false,
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
                skip(&format!("cannot create {dir:?}: {e}"), true);
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
