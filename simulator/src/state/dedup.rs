//! Report deduplication, as PROTOCOL.md section 4 asks of a control plane: `(agent_id, seq)`
//! names one report for good (a resend keeps its `seq`, and `seq` never goes back), so a
//! report whose `seq` was already recorded for that agent is acked again but not recorded
//! twice. The simulator remembers the last [`WINDOW`] seqs per agent, more than an agent's
//! outbox can hold (1024 statuses, 256 events and one inventory by default).

use odac_host::lock::lock;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// How many recent seqs are remembered per agent.
pub const WINDOW: usize = 4096;

/// Seqs recorded per agent id.
#[derive(Debug, Default)]
pub struct Dedup {
    seen: Mutex<HashMap<String, BTreeSet<u64>>>,
}

impl Dedup {
    /// Records `seq` for `agent`; false when it was recorded before (a duplicate).
    pub fn first_time(&self, agent: &str, seq: u64) -> bool {
        let mut seen = lock(&self.seen);
        let set = seen.entry(agent.to_owned()).or_default();
        if !set.insert(seq) {
            return false;
        }
        while set.len() > WINDOW {
            set.pop_first();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seq_counts_once_per_agent() {
        let d = Dedup::default();
        assert!(d.first_time("a", 5));
        assert!(!d.first_time("a", 5));
        assert!(d.first_time("b", 5), "seqs are per agent");
        assert!(d.first_time("a", 6));
    }

    #[test]
    fn the_window_is_bounded() {
        let d = Dedup::default();
        for seq in 0..(WINDOW as u64 + 10) {
            assert!(d.first_time("a", seq));
        }
        assert!(!d.first_time("a", WINDOW as u64 + 9));
        assert!(d.first_time("a", 0), "the oldest fell out of the window");
    }
}
