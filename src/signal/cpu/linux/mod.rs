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
//! 1. [`SourceKind::CgroupV1`](crate::signal::cpu::sample::SourceKind::CgroupV1): the `cpuacct` controller of a cgroup v1 hierarchy
//!    (`cpuacct.usage`, one integer in nanoseconds).
//! 2. [`SourceKind::CgroupV2`](crate::signal::cpu::sample::SourceKind::CgroupV2): the unified hierarchy (`cpu.stat`, line `usage_usec N`, in
//!    microseconds). On current kernels the file exists in every v2 cgroup, the root included,
//!    whether or not the `cpu` controller is enabled.
//! 3. [`SourceKind::ProcessTime`](crate::signal::cpu::sample::SourceKind::ProcessTime): `CLOCK_PROCESS_CPUTIME_ID`, the CPU time of this process
//!    alone, when no cgroup accounting file can be opened (no cgroupfs mounted, a sandbox that
//!    hides it, a cgroup path that lies outside the visible mounts).
//!
//! v1 is preferred over v2: on "hybrid" systems the v2 tree beside the v1 controllers has a
//! `cpu.stat` unrelated to the container's limit (see the [guide](crate::guide::signals)).
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
//! Over a short window the usage can exceed the quota by a few per cent (CFS hands out runtime
//! in slices and the window rarely aligns with the enforcement periods). Consumers should clamp
//! utilisation.
//!
//! # Cost
//!
//! Discovery reads `/proc`, walks directories and allocates. [`CpuUsageSource::sample`] does not
//! allocate: every file is opened once at discovery, and each sample re-reads the open descriptors
//! with `pread` at offset 0 into a stack buffer (cgroupfs regenerates the content on every read
//! from offset 0) and parses it in place. A sample is a handful of system calls; the sampler
//! takes one every 250 ms.
//!
//! If the cgroup is removed while the source is open, its files start failing with `ENODEV` and
//! [`CpuUsageSource::sample`] returns `None`.
//!
//! [`Sample::used_nanos`]: super::sample::Sample::used_nanos
//! [`Sample::limit_cpus`]: super::sample::Sample::limit_cpus

mod cgroupfs;
mod discover;
mod location;
mod parse;
mod process;
mod procfs;
mod source;
#[cfg(test)]
mod test_support;

pub(crate) use self::source::CpuUsageSource;
