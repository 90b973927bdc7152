//! "No silent divergence": an `ack` means the host has exactly that generation's state. Once
//! a desired-state change was refused (it did not validate, or it could not be persisted),
//! the agent's state may differ from what the control plane believes, so the agent applies no
//! `app_upsert`/`app_delete` (each is answered `error{code:"conflict"}`) until a full
//! `desired_state` has been applied, and asks for one with a `resync` message: at once after a
//! refused incremental change, after a growing delay (1 s doubling to 5 min) after a refused
//! snapshot, which would likely be refused again if asked for at once. The state outlives a
//! session; the snapshot every new session begins with ends it as well.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use odac_protocol::ControlMessage;

/// Longest wait before asking again after refused snapshots.
pub const MAX_RESYNC_DELAY: Duration = Duration::from_secs(300);

/// Whether the agent waits for a full snapshot; shared by the sessions of one uplink.
#[derive(Debug, Default)]
pub struct ResyncState {
    awaiting: AtomicBool,
    refused_snapshots: AtomicU32,
}

impl ResyncState {
    /// Whether incremental changes are refused until a snapshot is applied.
    pub fn awaiting(&self) -> bool {
        self.awaiting.load(Ordering::SeqCst)
    }

    /// A change was refused; how long to wait before sending `resync`.
    pub fn refused(&self, snapshot: bool) -> Duration {
        self.awaiting.store(true, Ordering::SeqCst);
        if !snapshot {
            return Duration::ZERO;
        }
        let n = self
            .refused_snapshots
            .fetch_add(1, Ordering::SeqCst)
            .min(16);
        Duration::from_secs(1u64 << n).min(MAX_RESYNC_DELAY)
    }

    /// A snapshot was applied and persisted: in step again.
    pub fn snapshot_applied(&self) {
        self.awaiting.store(false, Ordering::SeqCst);
        self.refused_snapshots.store(0, Ordering::SeqCst);
    }
}

/// Whether `msg` is an incremental change (`app_upsert`, `app_delete`).
pub fn is_incremental(msg: &ControlMessage) -> bool {
    matches!(
        msg,
        ControlMessage::AppUpsert(_) | ControlMessage::AppDelete(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_snapshots_back_off_and_a_snapshot_resets() {
        let r = ResyncState::default();
        assert!(!r.awaiting());
        assert_eq!(r.refused(false), Duration::ZERO);
        assert!(r.awaiting());
        let delays: Vec<u64> = (0..12).map(|_| r.refused(true).as_secs()).collect();
        assert_eq!(&delays[..4], &[1, 2, 4, 8]);
        assert_eq!(*delays.last().unwrap_or(&0), 300);
        r.snapshot_applied();
        assert!(!r.awaiting());
        assert_eq!(r.refused(true), Duration::from_secs(1));
    }
}
