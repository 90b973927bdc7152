//! Control-plane-side liveness of an agent session (PROTOCOL.md 1.2): an agent sends a
//! WebSocket ping every `heartbeat_secs`, so a session with no frame at all — ping, pong,
//! text or binary — for [`MISSED_HEARTBEATS`] intervals is dead. The session is then closed
//! with [`CLOSE_CODE`] and [`CLOSE_REASON`] and the host counts as disconnected.

use std::time::Duration;

use tokio::time::Instant;

/// Heartbeat intervals without any frame after which a session is dead.
pub const MISSED_HEARTBEATS: u32 = 3;

/// The close code of a session found dead.
pub const CLOSE_CODE: u16 = 4001;

/// The close reason of a session found dead.
pub const CLOSE_REASON: &str = "no heartbeat";

/// When the session's agent was last heard from, and when it is dead.
#[derive(Debug, Clone)]
pub struct Liveness {
    window: Duration,
    last: Instant,
}

impl Liveness {
    /// A session told to ping every `heartbeat_secs`, heard from now.
    pub fn new(heartbeat_secs: u32) -> Self {
        Self {
            window: Duration::from_secs(u64::from(heartbeat_secs.max(1)))
                .saturating_mul(MISSED_HEARTBEATS),
            last: Instant::now(),
        }
    }

    /// A frame arrived.
    pub fn heard(&mut self) {
        self.last = Instant::now();
    }

    /// When the session is dead unless a frame arrives first.
    pub fn deadline(&self) -> Instant {
        self.last + self.window
    }

    /// How long the agent may stay silent: `MISSED_HEARTBEATS` intervals.
    pub fn window(&self) -> Duration {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn dead_after_three_silent_intervals_and_a_frame_resets_it() {
        let mut l = Liveness::new(20);
        assert_eq!(l.window(), Duration::from_secs(60));
        let start = Instant::now();
        tokio::time::sleep(Duration::from_secs(50)).await;
        l.heard();
        assert_eq!(l.deadline(), start + Duration::from_secs(110));
        tokio::time::sleep_until(l.deadline()).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(110));
        assert_eq!(Liveness::new(0).window(), Duration::from_secs(3));
    }
}
