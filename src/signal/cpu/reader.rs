//! Which reader feeds a [`SystemCpu`](super::SystemCpu), and the sources each one reads.

#[cfg(any(target_os = "linux", target_os = "android"))]
use super::linux::CpuUsageSource;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
use super::portable::CpuUsageSource;
use super::sample::Sample;
#[cfg(any(windows, feature = "sysinfo"))]
use super::sysinfo_source::SysinfoSource;

/// A way of reading the CPU usage; each has its own sampler thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    /// The platform's own sources (cgroupfs and the process's CPU time on Linux, the process's
    /// CPU time on other Unix systems), then sysinfo where it is built and they find nothing.
    Native,
    /// sysinfo only.
    #[cfg(any(windows, feature = "sysinfo"))]
    Sysinfo,
}

/// A source found by a [`Reader`].
#[derive(Debug)]
pub(crate) enum UsageSource {
    Native(CpuUsageSource),
    /// Boxed: sysinfo's `System` is some 400 bytes.
    #[cfg(any(windows, feature = "sysinfo"))]
    Sysinfo(Box<SysinfoSource>),
}

impl UsageSource {
    /// The first source `reader` can take a reading from now, or `None`.
    pub(crate) fn discover(reader: Reader) -> Option<UsageSource> {
        match reader {
            Reader::Native => Self::native_or_fallback(CpuUsageSource::discover()),
            #[cfg(any(windows, feature = "sysinfo"))]
            Reader::Sysinfo => Self::sysinfo(),
        }
    }

    /// `native`, or sysinfo where it is built and `native` is `None`.
    fn native_or_fallback(native: Option<CpuUsageSource>) -> Option<UsageSource> {
        let native = native.map(UsageSource::Native);
        #[cfg(any(windows, feature = "sysinfo"))]
        let native = native.or_else(Self::sysinfo);
        native
    }

    #[cfg(any(windows, feature = "sysinfo"))]
    fn sysinfo() -> Option<UsageSource> {
        SysinfoSource::discover().map(|source| UsageSource::Sysinfo(Box::new(source)))
    }

    /// A reading now, or `None` if the source cannot be read any more.
    pub(crate) fn sample(&mut self) -> Option<Sample> {
        match self {
            UsageSource::Native(native) => native.sample(),
            #[cfg(any(windows, feature = "sysinfo"))]
            UsageSource::Sysinfo(sysinfo) => sysinfo.sample(),
        }
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_native_reader_takes_its_own_source_first() {
        let native = CpuUsageSource::discover();
        let found = native.is_some();
        let taken = UsageSource::native_or_fallback(native);
        assert_eq!(
            matches!(taken, Some(UsageSource::Native(_))),
            found,
            "{taken:?}"
        );
    }

    #[cfg(any(windows, feature = "sysinfo"))]
    #[test]
    fn where_the_native_reader_finds_nothing_sysinfo_reads() {
        let mut taken = UsageSource::native_or_fallback(None).expect("sysinfo reads here");
        assert!(matches!(taken, UsageSource::Sysinfo(_)), "{taken:?}");
        let sample = taken.sample().expect("a second reading");
        assert_eq!(sample.kind, super::super::sample::SourceKind::Sysinfo);
    }
}
