//! A running pod's CPU time: its cgroup's, or its process's without one.

use std::sync::Arc;
use std::time::Duration;

use admit_testkit::cgroup::Cgroup;

/// How a running pod's CPU time is read.
#[derive(Debug, Clone)]
pub(super) enum CpuMeter {
    Cgroup(Arc<Cgroup>),
    /// `/proc/<pid>/stat`, without cgroups: the process alone.
    Process(u32),
}

impl CpuMeter {
    pub(super) fn usage(&self) -> Option<Duration> {
        match self {
            CpuMeter::Cgroup(cgroup) => cgroup.cpu_usage(),
            CpuMeter::Process(pid) => process_cpu(*pid),
        }
    }
}

/// A process's user and system time from `/proc/<pid>/stat`, at the usual 100 ticks a second.
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it are plain.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}
