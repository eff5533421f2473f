//! A replica's CPUs as the kernel gives them: the requests in service share them equally
//! (processor sharing, each on its own thread), at most one core each and the machine's cores
//! in all, and a CFS quota throttles the replica for the rest of a period once it has used its
//! quota in that period.

/// How close to done a request counts as done, in CPU-seconds: a nanosecond of work, so that
/// rounding never leaves a sliver to schedule.
const DONE: f64 = 1e-9;

/// One replica's CPUs and the requests on them. Times are seconds on the simulation's clock.
#[derive(Debug)]
pub(crate) struct Cpu {
    /// Cores the replica's threads can run on at once.
    cores: f64,
    /// CPU-seconds the replica may use per period.
    quota: f64,
    /// The CFS period.
    period: f64,
    /// When the current period ends.
    period_end: f64,
    /// CPU-seconds left in the current period.
    left: f64,
    /// When the state was last brought up to date.
    at: f64,
    /// CPU-seconds used since the start.
    used: f64,
    /// The requests in service: an id and the CPU-seconds each still needs.
    jobs: Vec<(u64, f64)>,
}

impl Cpu {
    /// CPUs with `quota` CPUs' worth per `period` (seconds) on `cores`, whose periods start at
    /// `phase` (in `[0, period)`), at time `now`.
    pub(crate) fn new(cores: f64, quota: f64, period: f64, phase: f64, now: f64) -> Self {
        let periods = ((now - phase) / period).floor() + 1.0;
        Cpu {
            cores,
            quota: quota * period,
            period,
            period_end: phase + periods * period,
            left: quota * period,
            at: now,
            used: 0.0,
            jobs: Vec::new(),
        }
    }

    /// CPU-seconds used since the start, as cAdvisor reads a cgroup.
    pub(crate) fn used(&self) -> f64 {
        self.used
    }

    /// Whether the quota is spent for the rest of the current period: nothing of the replica
    /// runs, its runtime included, until [`period_end`](Self::period_end).
    pub(crate) fn throttled(&self) -> bool {
        self.left <= 0.0
    }

    /// When the current period ends.
    pub(crate) fn period_end(&self) -> f64 {
        self.period_end
    }

    /// Starts a request `id` needing `work` CPU-seconds (call [`advance`](Self::advance) to
    /// now first).
    pub(crate) fn start(&mut self, id: u64, work: f64) {
        self.jobs.push((id, work.max(DONE)));
    }

    /// The next time something changes without a new request: a request finishes, the quota
    /// runs out, or a throttled period ends. `None` when nothing is in service.
    pub(crate) fn next_event(&self) -> Option<f64> {
        if self.jobs.is_empty() {
            return None;
        }
        if self.throttled() {
            return Some(self.period_end);
        }
        Some(self.at + self.until_change())
    }

    /// Brings the state to `to`, pushing each request that finishes with when it did.
    pub(crate) fn advance(&mut self, to: f64, done: &mut Vec<(u64, f64)>) {
        while self.at < to {
            let end = self.period_end.min(to);
            if self.jobs.is_empty() || self.throttled() {
                self.at = end;
            } else {
                let (total, each) = self.rates();
                let dt = (end - self.at).min(self.until_change());
                let burnt = each * dt;
                self.at += dt;
                self.used += total * dt;
                self.left -= total * dt;
                if self.left <= DONE {
                    self.left = 0.0;
                }
                let at = self.at;
                self.jobs.retain_mut(|(id, left)| {
                    *left -= burnt;
                    let finished = *left <= DONE;
                    if finished {
                        done.push((*id, at));
                    }
                    !finished
                });
            }
            if self.at >= self.period_end {
                let periods = ((self.at - self.period_end) / self.period).floor() + 1.0;
                self.period_end += periods * self.period;
                self.left = self.quota;
            }
        }
    }

    /// Unthrottled with requests in service: the time until the nearest one finishes or the
    /// quota runs out.
    fn until_change(&self) -> f64 {
        let (total, each) = self.rates();
        let shortest = self
            .jobs
            .iter()
            .map(|&(_, left)| left)
            .fold(f64::MAX, f64::min);
        (shortest / each).min(self.left / total)
    }

    /// The CPUs in use in all, and each request's share.
    fn rates(&self) -> (f64, f64) {
        let n = self.jobs.len() as f64;
        let total = n.min(self.cores);
        (total, total / n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cpu: &mut Cpu, to: f64) -> Vec<(u64, f64)> {
        let mut done = Vec::new();
        while let Some(next) = cpu.next_event().filter(|&next| next <= to) {
            cpu.advance(next, &mut done);
        }
        cpu.advance(to, &mut done);
        done
    }

    #[test]
    fn requests_share_the_cpus_equally() {
        // No quota to speak of: two requests of 10 and 30 ms on one core.
        let mut cpu = Cpu::new(1.0, 1.0, 0.1, 0.0, 0.0);
        cpu.start(1, 0.010);
        cpu.start(2, 0.030);
        let done = run(&mut cpu, 1.0);
        // Each at half a core until the first is done at 20 ms; the second alone after.
        assert_eq!(done.len(), 2);
        assert!((done[0].1 - 0.020).abs() < 1e-9, "{done:?}");
        assert!((done[1].1 - 0.040).abs() < 1e-9, "{done:?}");
        assert!((cpu.used() - 0.040).abs() < 1e-9);
    }

    #[test]
    fn a_spent_quota_throttles_until_the_period_ends() {
        // A quarter of a CPU per 100 ms period on two cores: 25 ms per period.
        let mut cpu = Cpu::new(2.0, 0.25, 0.1, 0.0, 0.0);
        cpu.start(1, 0.040);
        // 25 ms by 25 ms, throttled to 100 ms, the last 15 ms by 115 ms.
        cpu.advance(0.025, &mut Vec::new());
        assert!(cpu.throttled());
        assert_eq!(cpu.next_event(), Some(0.1));
        let done = run(&mut cpu, 1.0);
        assert!((done[0].1 - 0.115).abs() < 1e-9, "{done:?}");
        assert!(!cpu.throttled());
    }

    #[test]
    fn parallel_requests_spend_the_quota_faster() {
        let mut cpu = Cpu::new(2.0, 0.25, 0.1, 0.0, 0.0);
        for id in 0..4 {
            cpu.start(id, 0.010);
        }
        // Two cores for four requests: half a core each; 25 ms of quota in 12.5 ms.
        let done = run(&mut cpu, 1.0);
        assert_eq!(done.len(), 4);
        // 40 ms of work: 25 in the first period (by 12.5 ms), 15 in the second (7.5 ms).
        assert!((done[3].1 - 0.1075).abs() < 1e-9, "{done:?}");
        assert!((cpu.used() - 0.040).abs() < 1e-9);
    }

    #[test]
    fn the_periods_keep_their_phase() {
        let cpu = Cpu::new(1.0, 0.5, 0.1, 0.03, 1.0);
        assert!((cpu.period_end() - 1.03).abs() < 1e-9);
        let cpu = Cpu::new(1.0, 0.5, 0.1, 0.03, 1.05);
        assert!((cpu.period_end() - 1.13).abs() < 1e-9);
    }
}
