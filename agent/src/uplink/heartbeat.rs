//! Liveness of a session: the agent sends a WebSocket ping every interval (20 s by default,
//! or what `welcome.heartbeat_secs` asks for) and declares the session dead when a ping stays
//! unanswered for two intervals. Pure bookkeeping; the session owns the timer.

use std::time::Duration;

use tokio::time::Instant;

/// What to do on a heartbeat tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// Send a ping.
    Ping,
    /// The oldest unanswered ping is two intervals old: reconnect.
    Dead {
        /// How long the oldest ping has gone unanswered.
        silent_for: Duration,
    },
}

/// Tracks unanswered pings.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    interval: Duration,
    oldest_unanswered: Option<Instant>,
}

impl Heartbeat {
    /// A tracker for pings every `interval` (at least 1 s).
    pub fn new(interval: Duration) -> Self {
        Self {
            interval: interval.max(Duration::from_secs(1)),
            oldest_unanswered: None,
        }
    }

    /// The ping interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// A tick at `now`. Ticks come one interval apart, give or take the timer's jitter, so the
    /// ping sent two ticks ago counts as two intervals old from one and a half intervals on:
    /// a strict `>= 2 intervals` would miss it by a fraction of a millisecond half the time and
    /// wait a whole third interval.
    pub fn tick(&mut self, now: Instant) -> Beat {
        match self.oldest_unanswered {
            Some(since)
                if now.saturating_duration_since(since)
                    >= self.interval * 2 - self.interval / 2 =>
            {
                Beat::Dead {
                    silent_for: now.saturating_duration_since(since),
                }
            }
            Some(_) => Beat::Ping,
            None => {
                self.oldest_unanswered = Some(now);
                Beat::Ping
            }
        }
    }

    /// A pong arrived: every outstanding ping counts as answered.
    pub fn pong(&mut self) {
        self.oldest_unanswered = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_silent_intervals_are_fatal_and_a_pong_clears() {
        let t0 = Instant::now();
        let iv = Duration::from_secs(20);
        let mut hb = Heartbeat::new(iv);
        assert_eq!(hb.tick(t0 + iv), Beat::Ping);
        assert_eq!(hb.tick(t0 + iv * 2), Beat::Ping);
        assert_eq!(hb.tick(t0 + iv * 3), Beat::Dead { silent_for: iv * 2 });
        hb.pong();
        assert_eq!(hb.tick(t0 + iv * 4), Beat::Ping);
        hb.pong();
        assert_eq!(hb.tick(t0 + iv * 5), Beat::Ping);
        assert_eq!(hb.tick(t0 + iv * 6), Beat::Ping);
    }

    #[test]
    fn a_tick_a_hair_early_still_ends_a_silent_session_after_two_intervals() {
        let t0 = Instant::now();
        let iv = Duration::from_secs(5);
        let hair = Duration::from_micros(300);
        let mut hb = Heartbeat::new(iv);
        // the first unanswered ping is stamped a little after its tick
        assert_eq!(hb.tick(t0 + iv + hair), Beat::Ping);
        assert_eq!(hb.tick(t0 + iv * 2), Beat::Ping);
        assert_eq!(
            hb.tick(t0 + iv * 3),
            Beat::Dead {
                silent_for: iv * 2 - hair
            }
        );
    }

    #[test]
    fn one_unanswered_interval_is_not_fatal_even_when_a_tick_is_late() {
        let t0 = Instant::now();
        let iv = Duration::from_secs(5);
        let mut hb = Heartbeat::new(iv);
        assert_eq!(hb.tick(t0 + iv), Beat::Ping);
        // a tick delayed by a busy runtime: still less than 1.5 intervals of silence
        assert_eq!(hb.tick(t0 + iv * 2 + iv / 4), Beat::Ping);
    }
}
