//! Where a cgroup's directory is: the process's cgroup path resolved against the mounts of its
//! hierarchy.

use std::path::{Component, Path, PathBuf};

use super::procfs::{CgroupEntry, Mount, has_item};

/// A cgroup's place inside one mount of its hierarchy.
#[derive(Debug)]
pub(super) struct Location<'m> {
    /// The mount.
    pub(super) mount: &'m Mount,
    /// The mount point, under the caller's `root`.
    mount_dir: PathBuf,
    /// The cgroup's directory relative to `mount_dir`: only normal components, empty for the
    /// mount's own root.
    relative: PathBuf,
}

impl<'m> Location<'m> {
    /// Where `cgroup_path` (from `/proc/<pid>/cgroup`) lies under `mount`, or `None` if the
    /// mount does not show it: the path must lie at or below the mount's root, with no `..`.
    pub(super) fn new(mount: &'m Mount, cgroup_path: &str, root: &Path) -> Option<Location<'m>> {
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
    pub(super) fn dir(&self) -> PathBuf {
        self.mount_dir.join(&self.relative)
    }

    /// The cgroup's directory, then each parent up to and including the mount point.
    pub(super) fn levels(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.relative.ancestors().map(|a| self.mount_dir.join(a))
    }
}

/// The locations of the process's cgroup in every mount of the v1 hierarchy that carries
/// `controller` (a hierarchy can be mounted more than once).
pub(super) fn v1_locations<'m>(
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

#[cfg(test)]
mod tests {
    use crate::signal::cpu::linux::CpuUsageSource;
    use crate::signal::cpu::linux::test_support::FakeRoot;
    use crate::signal::cpu::sample::Sample;
    use crate::signal::cpu::sample::SourceKind;

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
}
