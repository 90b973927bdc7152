//! Liveness of the agent's long-running loops, for the systemd watchdog: each loop that must
//! keep making progress (the uplink's connect/session loop, the app manager's reconcile loop)
//! holds a [`Heartbeat`] and stamps it whenever it gets round its loop, including on idle
//! ticks of at most [`IDLE_STAMP`] while it waits (a backoff sleep, a poll interval, an idle
//! session). [`Liveness::stale`] names the loops whose last stamp is older than a bound;
//! `notify::watchdog_loop` withholds `WATCHDOG=1` while any is, so a deadlocked loop gets the
//! agent killed and restarted by systemd instead of being reported healthy by a free-running
//! timer. Stamps are monotonic milliseconds (tokio's clock, so paused-time tests drive them)
//! in an `AtomicU64`: stamping is one relaxed store and never blocks.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

/// How often a waiting loop stamps its heartbeat. A loop's waits are chunked to this, so a
/// loop that is merely idle never looks stalled.
pub const IDLE_STAMP: Duration = Duration::from_secs(1);

/// How long one bounded step (a reconcile pass, a dial) may run while still counting as
/// progress. Past it the loop stops stamping until the step ends: a pass stuck for longer is
/// treated as a stall.
pub const STEP_BOUND: Duration = Duration::from_secs(300);

struct Beat {
    name: &'static str,
    origin: Instant,
    /// Milliseconds since `origin` at the last stamp.
    last_ms: AtomicU64,
}

/// One loop's heartbeat. Cheap to clone; clones stamp the same beat.
#[derive(Clone)]
pub struct Heartbeat(Arc<Beat>);

impl Heartbeat {
    /// A heartbeat nobody watches (tests, callers without a watchdog). Stamped now.
    pub fn detached(name: &'static str) -> Self {
        Self::starting_at(name, Instant::now())
    }

    fn starting_at(name: &'static str, origin: Instant) -> Self {
        let beat = Self(Arc::new(Beat {
            name,
            origin,
            last_ms: AtomicU64::new(0),
        }));
        beat.stamp();
        beat
    }

    /// The loop's name, as the watchdog reports it.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// Records progress now.
    pub fn stamp(&self) {
        let ms = u64::try_from(self.0.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Time since the last stamp.
    pub fn age(&self) -> Duration {
        let now = self.0.origin.elapsed();
        now.saturating_sub(Duration::from_millis(
            self.0.last_ms.load(Ordering::Relaxed),
        ))
    }

    /// Sleeps for `delay`, stamping every [`IDLE_STAMP`] meanwhile.
    pub async fn idle(&self, delay: Duration) {
        let until = Instant::now() + delay;
        loop {
            self.stamp();
            let now = Instant::now();
            if now >= until {
                return;
            }
            tokio::time::sleep_until(until.min(now + IDLE_STAMP)).await;
        }
    }

    /// Runs one step of the loop, stamping every [`IDLE_STAMP`] while it runs for less than
    /// `bound`; past `bound` the stamps stop until the step ends (then the loop stamps again).
    pub async fn step<F: Future>(&self, bound: Duration, step: F) -> F::Output {
        let started = Instant::now();
        let mut ticker = tokio::time::interval(IDLE_STAMP);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tokio::pin!(step);
        loop {
            tokio::select! {
                biased;
                out = &mut step => {
                    self.stamp();
                    return out;
                }
                _ = ticker.tick() => {
                    if started.elapsed() < bound {
                        self.stamp();
                    }
                }
            }
        }
    }
}

/// The loops the watchdog waits on.
#[derive(Clone)]
pub struct Liveness {
    origin: Instant,
    beats: Vec<Heartbeat>,
}

impl Default for Liveness {
    fn default() -> Self {
        Self::new()
    }
}

impl Liveness {
    /// No loops yet.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
            beats: Vec::new(),
        }
    }

    /// A new watched loop, stamped now.
    pub fn register(&mut self, name: &'static str) -> Heartbeat {
        let beat = Heartbeat::starting_at(name, self.origin);
        self.beats.push(beat.clone());
        beat
    }

    /// The loops silent for longer than `bound`, with how long.
    pub fn stale(&self, bound: Duration) -> Vec<(&'static str, Duration)> {
        self.beats
            .iter()
            .map(|b| (b.name(), b.age()))
            .filter(|(_, age)| *age > bound)
            .collect()
    }
}

/// How old a stamp may be before the watchdog stops pinging, given the ping interval (half
/// `WatchdogSec`): one ping interval, but never less than three idle stamps, so the timer
/// jitter of a busy runtime does not count as a stall. A loop stuck for longer than this plus
/// `WatchdogSec` gets the agent restarted.
pub fn stale_after(ping_every: Duration) -> Duration {
    ping_every.max(IDLE_STAMP * 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stamp_ages_with_the_clock_and_a_new_stamp_resets_it() {
        let mut live = Liveness::new();
        let beat = live.register("uplink");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(beat.age(), Duration::from_secs(5));
        assert_eq!(
            live.stale(Duration::from_secs(4)),
            vec![("uplink", Duration::from_secs(5))]
        );
        beat.stamp();
        assert!(live.stale(Duration::from_secs(4)).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_loop_keeps_stamping() {
        let mut live = Liveness::new();
        let beat = live.register("app manager");
        let idle = tokio::spawn({
            let beat = beat.clone();
            async move { beat.idle(Duration::from_secs(60)).await }
        });
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(700)).await;
            assert!(live.stale(IDLE_STAMP * 2).is_empty(), "{:?}", beat.age());
        }
        idle.await.expect("idle task");
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_counts_as_progress_only_up_to_its_bound() {
        let mut live = Liveness::new();
        let beat = live.register("app manager");
        let bound = Duration::from_secs(10);
        let step = tokio::spawn({
            let beat = beat.clone();
            async move {
                beat.step(bound, std::future::pending::<()>()).await;
            }
        });
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(live.stale(Duration::from_secs(3)).is_empty());
        tokio::time::sleep(Duration::from_secs(6)).await;
        let stale = live.stale(Duration::from_secs(3));
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert_eq!(stale[0].0, "app manager");
        step.abort();
    }

    #[test]
    fn the_bound_is_the_ping_interval_but_at_least_three_idle_stamps() {
        assert_eq!(
            stale_after(Duration::from_secs(15)),
            Duration::from_secs(15)
        );
        assert_eq!(stale_after(Duration::from_millis(500)), IDLE_STAMP * 3);
    }
}
