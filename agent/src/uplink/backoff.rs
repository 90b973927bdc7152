//! Reconnect delays: backon's exponential schedule (base 1 s, doubling, capped at 60 s) gives
//! the ceiling of attempt n, and the delay is drawn uniformly from `[0, ceiling]` ("full
//! jitter", so a fleet that lost its control plane does not reconnect in lockstep). The
//! schedule restarts once a session stayed healthy long enough. A refused token takes a
//! separate, long delay so a host with a revoked token never hammers the control plane.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The reconnect policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// Ceiling of the first retry.
    pub base: Duration,
    /// Largest ceiling.
    pub cap: Duration,
    /// A session that stayed up this long resets the schedule.
    pub healthy_after: Duration,
    /// Delay after the control plane refused the token (401/403): drawn from
    /// `[auth_retry / 2, auth_retry]`.
    pub auth_retry: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            healthy_after: Duration::from_secs(60),
            auth_retry: Duration::from_secs(300),
        }
    }
}

impl BackoffPolicy {
    /// The ceiling of retry number `attempt` (1-based): `min(cap, base * 2^(attempt-1))`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        self.base.saturating_mul(factor).min(self.cap)
    }
}

/// One delay decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    /// Retry number since the last reset (1-based).
    pub attempt: u32,
    /// The envelope the delay was drawn from.
    pub ceiling: Duration,
    /// The chosen delay.
    pub delay: Duration,
}

/// The reconnect schedule.
#[derive(Debug)]
pub struct Backoff {
    policy: BackoffPolicy,
    schedule: ExponentialBackoff,
    attempt: u32,
    rng: fastrand::Rng,
}

impl Backoff {
    /// A fresh schedule with a random seed.
    pub fn new(policy: BackoffPolicy) -> Self {
        Self::with_rng(policy, fastrand::Rng::new())
    }

    /// A fresh schedule with a fixed seed (tests).
    pub fn seeded(policy: BackoffPolicy, seed: u64) -> Self {
        Self::with_rng(policy, fastrand::Rng::with_seed(seed))
    }

    fn with_rng(policy: BackoffPolicy, rng: fastrand::Rng) -> Self {
        Self {
            policy,
            schedule: schedule(&policy),
            attempt: 0,
            rng,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }

    /// Retries since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The delay before the next connection attempt.
    pub fn next_delay(&mut self) -> Delay {
        self.attempt = self.attempt.saturating_add(1);
        let ceiling = self
            .schedule
            .next()
            .unwrap_or(self.policy.cap)
            .min(self.policy.cap);
        let delay = ceiling.mul_f64(self.rng.f64());
        Delay {
            attempt: self.attempt,
            ceiling,
            delay,
        }
    }

    /// The delay after a refused token; the normal schedule keeps advancing too.
    pub fn next_auth_delay(&mut self) -> Delay {
        let normal = self.next_delay();
        let half = self.policy.auth_retry / 2;
        let delay = half + half.mul_f64(self.rng.f64());
        Delay {
            attempt: normal.attempt,
            ceiling: self.policy.auth_retry.max(normal.ceiling),
            delay: delay.max(normal.delay),
        }
    }

    /// Restarts the schedule (after a healthy session).
    pub fn reset(&mut self) {
        self.schedule = schedule(&self.policy);
        self.attempt = 0;
    }
}

fn schedule(policy: &BackoffPolicy) -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(policy.base)
        .with_max_delay(policy.cap)
        .with_factor(2.0)
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_inside_the_full_jitter_envelope_and_the_cap() {
        let policy = BackoffPolicy::default();
        for seed in 0..200 {
            let mut b = Backoff::seeded(policy, seed);
            for n in 1..=20u32 {
                let d = b.next_delay();
                assert_eq!(d.attempt, n);
                assert_eq!(d.ceiling, policy.ceiling(n));
                assert!(d.delay <= d.ceiling, "seed {seed} attempt {n}: {d:?}");
                assert!(d.ceiling <= policy.cap);
            }
        }
        assert_eq!(policy.ceiling(1), Duration::from_secs(1));
        assert_eq!(policy.ceiling(6), Duration::from_secs(32));
        assert_eq!(policy.ceiling(7), Duration::from_secs(60));
        assert_eq!(policy.ceiling(1000), Duration::from_secs(60));
    }

    #[test]
    fn jitter_spreads_over_the_whole_envelope() {
        let mut low = false;
        let mut high = false;
        let mut b = Backoff::seeded(BackoffPolicy::default(), 7);
        for _ in 0..7 {
            b.next_delay();
        }
        for _ in 0..500 {
            let d = b.next_delay();
            low |= d.delay < Duration::from_secs(10);
            high |= d.delay > Duration::from_secs(50);
        }
        assert!(low && high, "full jitter draws from [0, cap]");
    }

    #[test]
    fn reset_restarts_the_schedule() {
        let mut b = Backoff::seeded(BackoffPolicy::default(), 1);
        for _ in 0..10 {
            b.next_delay();
        }
        b.reset();
        let d = b.next_delay();
        assert_eq!((d.attempt, d.ceiling), (1, Duration::from_secs(1)));
    }

    #[test]
    fn auth_delay_is_long() {
        let policy = BackoffPolicy::default();
        let mut b = Backoff::seeded(policy, 3);
        for _ in 0..100 {
            let d = b.next_auth_delay();
            assert!(d.delay >= policy.auth_retry / 2 && d.delay <= policy.auth_retry);
        }
    }
}
