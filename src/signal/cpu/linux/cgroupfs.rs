//! The cgroupfs files a source keeps open (the usage counter, the quotas, the CPU lists) and how
//! one is re-read without allocating.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::parse::{count_cpus, parse_uint};

/// Size of the stack buffer one cgroup file is read into. The files read here are a few dozen bytes
/// (`cpu.stat` a few hundred); only a cpuset list of a very large, fragmented machine could exceed
/// it, and such a list is then ignored as a bound (see [`read_text`]).
pub(super) const READ_BUFFER: usize = 4096;

/// Where the CPU time comes from.
#[derive(Debug)]
pub(super) enum Usage {
    /// v2 `cpu.stat`.
    CpuStat(File),
    /// v1 `cpuacct.usage`.
    Cpuacct(File),
    /// `CLOCK_PROCESS_CPUTIME_ID`.
    ProcessTime,
}

/// The quota files of one cgroup on the path from the measured cgroup up to the hierarchy root.
#[derive(Debug)]
pub(super) enum Quota {
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

/// The number of CPUs in a CPU-list file: `Some(Some(n))`, `Some(None)` if the list is empty (a
/// v1 cpuset nobody configured) or too long for the buffer (it bounds nothing then), `None` if
/// the file cannot be read or parsed.
pub(super) fn cpu_count(file: &File, buf: &mut [u8]) -> Option<Option<u64>> {
    match read_text(file, buf) {
        Ok(text) => Some(Some(count_cpus(text).ok()?).filter(|&cpus| cpus > 0)),
        Err(ReadError::TooLong) => Some(None),
        Err(ReadError::Io) => None,
    }
}

impl Quota {
    /// The CPUs this cgroup's quota allows: `Some(Some(cpus))`, `Some(None)` when unlimited,
    /// `None` when a file cannot be read or parsed.
    pub(super) fn read_cpus(&self, buf: &mut [u8]) -> Option<Option<f64>> {
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

/// Why [`read_text`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadError {
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
pub(super) fn read_text<'b>(file: &File, buf: &'b mut [u8]) -> Result<&'b str, ReadError> {
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
