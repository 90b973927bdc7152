//! The crash-loop guard of one app: when its container exits (or cannot be started), the next
//! start waits 1 s, then 2 s, 4 s, ... capped at 5 min (configurable); a run that lasts
//! 10 minutes resets the backoff. Pure bookkeeping on [`tokio::time::Instant`], so tests drive
//! it with paused time. There is never a tight loop: every restart has a deadline.

use std::time::Duration;

use tokio::time::Instant;

use crate::appmgr::settings::CrashLoopConfig;

/// Per-app crash bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashGuard {
    /// Exits since the last healthy run.
    pub consecutive: u32,
    /// Restarts done by the agent since the container was created.
    pub restart_count: u32,
    /// Exit code of the last exit.
    pub last_exit_code: Option<i64>,
    /// When the next start is due; `Some` while waiting.
    pub next_start: Option<Instant>,
    /// When the container was last seen to start.
    pub running_since: Option<Instant>,
}

/// The delay before restart number `consecutive` (1-based): initial × 2^(n-1), capped.
pub fn backoff(config: &CrashLoopConfig, consecutive: u32) -> Duration {
    let doublings = consecutive.saturating_sub(1).min(30);
    config
        .initial()
        .saturating_mul(1u32 << doublings)
        .min(config.max())
}

impl CrashGuard {
    /// A fresh guard for a container started at `now`.
    pub fn started(now: Instant) -> Self {
        Self {
            running_since: Some(now),
            ..Self::default()
        }
    }

    /// The container was seen exited (`code`) or failed to start (`None`) at `now`: schedule
    /// the next start and return its delay. A run that lasted the healthy period resets the
    /// backoff first.
    pub fn on_exit(
        &mut self,
        now: Instant,
        code: Option<i64>,
        config: &CrashLoopConfig,
    ) -> Duration {
        if let Some(since) = self.running_since.take()
            && now.saturating_duration_since(since) >= config.healthy_reset()
        {
            self.consecutive = 0;
        }
        self.consecutive = self.consecutive.saturating_add(1);
        if code.is_some() {
            self.last_exit_code = code;
        }
        let delay = backoff(config, self.consecutive);
        self.next_start = Some(now + delay);
        delay
    }

    /// Whether a scheduled start is due.
    pub fn due(&self, now: Instant) -> bool {
        self.next_start.is_some_and(|t| t <= now)
    }

    /// Whether a start is scheduled.
    pub fn waiting(&self) -> bool {
        self.next_start.is_some()
    }

    /// The agent restarted the container at `now`.
    pub fn on_restarted(&mut self, now: Instant) {
        self.restart_count = self.restart_count.saturating_add(1);
        self.next_start = None;
        self.running_since = Some(now);
    }

    /// The container was seen running at `now`: after a healthy period the backoff resets.
    pub fn on_running(&mut self, now: Instant, config: &CrashLoopConfig) {
        let since = *self.running_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= config.healthy_reset() {
            self.consecutive = 0;
        }
    }

    /// In a crash loop: exited again after a restart, waiting for the next one.
    pub fn in_crash_loop(&self) -> bool {
        self.consecutive >= 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_and_cap() {
        let c = CrashLoopConfig::default();
        let secs: Vec<u64> = (1..=12).map(|n| backoff(&c, n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(backoff(&c, u32::MAX), Duration::from_secs(300));
    }

    #[tokio::test(start_paused = true)]
    async fn healthy_run_resets_the_backoff() {
        let c = CrashLoopConfig::default();
        let t0 = Instant::now();
        let mut g = CrashGuard::started(t0);
        assert_eq!(g.on_exit(t0, Some(3), &c), Duration::from_secs(1));
        assert!(!g.due(t0) && g.due(t0 + Duration::from_secs(1)));
        g.on_restarted(t0 + Duration::from_secs(1));
        assert_eq!(
            g.on_exit(t0 + Duration::from_secs(2), Some(3), &c),
            Duration::from_secs(2)
        );
        assert!(g.in_crash_loop());
        assert_eq!((g.restart_count, g.last_exit_code), (1, Some(3)));
        let t1 = t0 + Duration::from_secs(10);
        g.on_restarted(t1);
        g.on_running(t1 + Duration::from_secs(599), &c);
        assert_eq!(g.consecutive, 2);
        g.on_running(t1 + Duration::from_secs(600), &c);
        assert_eq!(g.consecutive, 0, "ten healthy minutes reset it");
        assert_eq!(
            g.on_exit(t1 + Duration::from_secs(700), Some(1), &c),
            Duration::from_secs(1)
        );
        assert!(!g.in_crash_loop());
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_run_unobserved_also_resets() {
        let c = CrashLoopConfig::default();
        let t0 = Instant::now();
        let mut g = CrashGuard::started(t0);
        g.consecutive = 5;
        assert_eq!(
            g.on_exit(t0 + Duration::from_secs(3600), Some(0), &c),
            Duration::from_secs(1)
        );
    }
}
