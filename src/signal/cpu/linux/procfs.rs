//! The two `/proc` texts discovery reads: `/proc/<pid>/cgroup` (which cgroup the process is in,
//! per hierarchy) and `/proc/<pid>/mountinfo` (where each hierarchy is mounted).

use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// Whether the comma-separated `list` contains `item` exactly (`cpu` is not `cpuacct`).
pub(super) fn has_item(list: &str, item: &str) -> bool {
    list.split(',').any(|x| x == item)
}

/// One line of `/proc/<pid>/cgroup`: `ID:CONTROLLERS:PATH`.
#[derive(Debug)]
pub(super) struct CgroupEntry<'a> {
    /// The hierarchy ID; `0` for the unified (v2) hierarchy.
    pub(super) hierarchy_id: &'a str,
    /// Comma-separated controllers (`cpu,cpuacct`, `name=systemd`); empty for v2.
    pub(super) controllers: &'a str,
    /// The cgroup's path relative to the hierarchy root of the process's cgroup namespace.
    pub(super) path: &'a str,
}

/// The lines of a `/proc/<pid>/cgroup` text. The path is the rest of the line after the second
/// colon, so a path containing colons survives.
pub(super) fn cgroup_entries(text: &str) -> impl Iterator<Item = CgroupEntry<'_>> {
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
pub(super) struct Mount {
    /// Field 4: the directory of the file system that is mounted (for cgroupfs, a cgroup path).
    pub(super) root: PathBuf,
    /// Field 5: where it is mounted, relative to the process's root directory.
    pub(super) mount_point: PathBuf,
    /// The first field after the `-` separator: `cgroup` (v1) or `cgroup2`.
    pub(super) fstype: String,
    /// The third field after the separator; for v1 cgroupfs it names the controllers.
    pub(super) super_options: String,
}

/// Parses one mountinfo line:
/// `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`.
/// The number of optional fields varies, so the separator is searched for.
pub(super) fn parse_mountinfo_line(line: &str) -> Option<Mount> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
}
