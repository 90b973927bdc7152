//! Liveness of the agent's long-running loops, for the systemd watchdog: each loop that must
//! keep making progress (the uplink's connect/session loop, the app manager's reconcile loop)
//! holds a [`Heartbeat`] and stamps it whenever it gets round its loop, including on idle
//! ticks while it waits (a backoff sleep, a poll interval, an idle session): every third of
//! the bound the watchdog allows ([`stamp_every`]: 5 s under the shipped `WatchdogSec=30s`,
//! never less than [`IDLE_STAMP`]), so an idle agent wakes no more than the watchdog needs.
//! [`Liveness::stale`] names the loops whose last stamp is older than a bound;
//! `notify::watchdog_loop` withholds `WATCHDOG=1` while any is, so a deadlocked loop gets the
//! agent killed and restarted by systemd instead of being reported healthy by a free-running
//! timer. Stamps are monotonic milliseconds (tokio's clock, so paused-time tests drive them)
//! in an `AtomicU64`: stamping is one relaxed store and never blocks.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

/// The shortest interval at which a waiting loop stamps its heartbeat (a short `WatchdogSec`,
/// tests). A loop's waits are chunked to its interval, so a loop that is merely idle never
/// looks stalled.
pub const IDLE_STAMP: Duration = Duration::from_secs(1);

/// The watchdog ping interval assumed when systemd asked for none (half the shipped unit's
/// `WatchdogSec=30s`): an agent run by hand wakes as often as the installed one.
pub const DEFAULT_PING: Duration = Duration::from_secs(15);

/// How long one bounded step (a reconcile pass, a dial) may run while still counting as
/// progress. Past it the loop stops stamping until the step ends: a pass stuck for longer is
/// treated as a stall.
pub const STEP_BOUND: Duration = Duration::from_secs(300);

struct Beat {
    name: &'static str,
    /// How often the loop stamps while it waits or runs a step.
    every: Duration,
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
        Self::starting_at(name, Instant::now(), IDLE_STAMP)
    }

    fn starting_at(name: &'static str, origin: Instant, every: Duration) -> Self {
        let beat = Self(Arc::new(Beat {
            name,
            every,
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

    /// How often the loop stamps while it waits: the interval of its idle ticks.
    pub fn every(&self) -> Duration {
        self.0.every
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

    /// Sleeps for `delay`, stamping every [`Self::every`] meanwhile.
    pub async fn idle(&self, delay: Duration) {
        let until = Instant::now() + delay;
        loop {
            self.stamp();
            let now = Instant::now();
            if now >= until {
                return;
            }
            tokio::time::sleep_until(until.min(now + self.0.every)).await;
        }
    }

    /// Runs one step of the loop, stamping every [`Self::every`] while it runs for less than
    /// `bound`; past `bound` the stamps stop until the step ends (then the loop stamps again).
    pub async fn step<F: Future>(&self, bound: Duration, step: F) -> F::Output {
        let started = Instant::now();
        let mut ticker = tokio::time::interval(self.0.every);
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
    /// The watchdog's ping interval (half `WatchdogSec`), when systemd asked for one.
    ping_every: Option<Duration>,
    /// How often each registered loop stamps while it waits.
    every: Duration,
    beats: Vec<Heartbeat>,
}

impl Default for Liveness {
    fn default() -> Self {
        Self::new()
    }
}

impl Liveness {
    /// No loops yet; they stamp every [`IDLE_STAMP`].
    pub fn new() -> Self {
        Self::stamping_every(None, IDLE_STAMP)
    }

    /// No loops yet; they stamp as often as a watchdog pinging every `ping_every` (half
    /// `WatchdogSec`; `None`: no watchdog, [`DEFAULT_PING`]) needs: [`stamp_every`].
    pub fn for_watchdog(ping_every: Option<Duration>) -> Self {
        let every = stamp_every(ping_every.unwrap_or(DEFAULT_PING));
        Self::stamping_every(ping_every, every)
    }

    fn stamping_every(ping_every: Option<Duration>, every: Duration) -> Self {
        Self {
            origin: Instant::now(),
            ping_every,
            every,
            beats: Vec::new(),
        }
    }

    /// The watchdog's ping interval this was made for ([`Self::for_watchdog`]); `None`
    /// without a watchdog.
    pub fn ping_every(&self) -> Option<Duration> {
        self.ping_every
    }

    /// A new watched loop, stamped now.
    pub fn register(&mut self, name: &'static str) -> Heartbeat {
        let beat = Heartbeat::starting_at(name, self.origin, self.every);
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

/// How often a waiting loop stamps under a watchdog pinging every `ping_every`: a third of
/// [`stale_after`], never less than [`IDLE_STAMP`], so an idle loop's stamp is at most a third
/// of the allowed age old (1 s under `WatchdogSec=5s`, 5 s under the shipped 30 s).
pub fn stamp_every(ping_every: Duration) -> Duration {
    (stale_after(ping_every) / 3).max(IDLE_STAMP)
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

    #[test]
    fn loops_stamp_a_third_of_the_bound_but_at_least_every_idle_stamp() {
        // the shipped unit (WatchdogSec=30s: pings every 15 s), and the same without systemd
        assert_eq!(stamp_every(Duration::from_secs(15)), Duration::from_secs(5));
        assert_eq!(stamp_every(DEFAULT_PING), Duration::from_secs(5));
        // WatchdogSec=5s, as the systemd test runs it
        assert_eq!(stamp_every(Duration::from_millis(2500)), IDLE_STAMP);
        assert_eq!(
            stamp_every(Duration::from_secs(60)),
            Duration::from_secs(20)
        );
        assert_eq!(
            Liveness::for_watchdog(None).register("uplink").every(),
            Duration::from_secs(5)
        );
        assert_eq!(
            Liveness::for_watchdog(Some(Duration::from_secs(1)))
                .register("uplink")
                .every(),
            IDLE_STAMP
        );
    }

    #[tokio::test(start_paused = true)]
    async fn under_the_shipped_watchdog_an_idle_loop_wakes_every_five_seconds_and_stays_fresh() {
        let ping = Duration::from_secs(15);
        let mut live = Liveness::for_watchdog(Some(ping));
        let beat = live.register("app manager");
        let idle = tokio::spawn({
            let beat = beat.clone();
            async move { beat.idle(Duration::from_secs(60)).await }
        });
        let mut stamps = 0;
        let mut last = beat.age();
        for _ in 0..600 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let age = beat.age();
            if age < last {
                stamps += 1;
            }
            last = age;
            assert!(live.stale(stale_after(ping)).is_empty(), "{age:?}");
            assert!(age <= Duration::from_secs(5), "{age:?}");
        }
        idle.await.expect("idle task");
        // 60 s of waiting: a stamp every 5 s (the last at the end of the wait), not every second
        assert!((11..=12).contains(&stamps), "{stamps} stamps");
    }
}
