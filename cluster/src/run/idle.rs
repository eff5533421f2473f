//! How idle the host's CPUs were while a run ran, from `/proc/stat`.

/// The machine's CPU counters now (`/proc/stat`'s first line): idle and total jiffies.
pub(super) fn idle_share_now() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    // idle and iowait are the 4th and 5th fields.
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((idle, fields.iter().sum()))
}

/// The idle share since `before` ([`idle_share_now`]).
pub(super) fn idle_share_since(before: Option<(u64, u64)>) -> Option<f64> {
    let (idle_before, total_before) = before?;
    let (idle, total) = idle_share_now()?;
    let total = total.checked_sub(total_before)?;
    (total > 0).then(|| idle.saturating_sub(idle_before) as f64 / total as f64)
}
