//! `[exec]` of agent.toml: whether the control plane may open exec sessions (`odac app exec`,
//! `odac app shell`) into this agent's apps, and their bounds: `max_sessions` at once (3),
//! `idle_timeout_secs` without a byte either way (15 min), `max_lifetime_secs` (4 h),
//! `max_unsent_bytes` of output a stalled reader may leave unsent before the session is closed
//! (8 MiB), and `allow_user` (whether a session may name another user; off).

use std::time::Duration;

use serde::Deserialize;

/// `[exec]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecConfig {
    /// Serve exec sessions at all; `false` refuses each with reason `disabled`.
    pub enabled: bool,
    /// Sessions open at once; one more is refused with reason `busy` (1..=64).
    pub max_sessions: usize,
    /// A session with no byte either way for this long is closed (1..=86400).
    pub idle_timeout_secs: u64,
    /// A session is closed after this long, whatever it does (1..=604800).
    pub max_lifetime_secs: u64,
    /// Output left unsent to a reader that stopped reading, past which the session is closed
    /// (65536..=268435456 bytes).
    pub max_unsent_bytes: usize,
    /// Whether a session may run as another user than the container's (`--user`).
    pub allow_user: bool,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_sessions: 3,
            idle_timeout_secs: 15 * 60,
            max_lifetime_secs: 4 * 3600,
            max_unsent_bytes: 8 * 1024 * 1024,
            allow_user: false,
        }
    }
}

/// The ranges checked, `(key, min, max)`.
pub const RANGES: [(&str, u64, u64); 4] = [
    ("exec.max_sessions", 1, 64),
    ("exec.idle_timeout_secs", 1, 86_400),
    ("exec.max_lifetime_secs", 1, 604_800),
    ("exec.max_unsent_bytes", 65_536, 268_435_456),
];

impl ExecConfig {
    /// The values [`RANGES`] bounds, in its order.
    pub fn ranged(&self) -> [u64; 4] {
        [
            self.max_sessions as u64,
            self.idle_timeout_secs,
            self.max_lifetime_secs,
            self.max_unsent_bytes as u64,
        ]
    }

    /// The idle timeout.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_secs)
    }

    /// The maximum lifetime.
    pub fn max_lifetime(&self) -> Duration {
        Duration::from_secs(self.max_lifetime_secs)
    }
}
