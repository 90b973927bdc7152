//! The report `seq` high-water mark, kept in `<state_dir>/report_seq` so that `seq` never
//! goes back, across reconnects and agent restarts: `(agent_id, seq)` names one report for
//! good and a control plane can drop duplicates. Seqs are reserved in blocks of
//! [`SEQ_BLOCK`]: the file holds the first seq a restarted agent may use, written (atomically)
//! before any seq of a new block is handed out, so the file is written once per block.
//! A missing file means a fresh agent (start at 1); an unreadable or corrupt one is logged and
//! replaced by one starting above the current Unix time in milliseconds, which is above any
//! seq an agent can have used. A file that cannot be written is logged; the agent goes on.

use std::path::{Path, PathBuf};

use crate::appmgr::state::store::write_atomic;

/// File name of the high-water mark inside the state directory.
pub const SEQ_FILE: &str = "report_seq";
/// How many seqs one write of the file reserves.
pub const SEQ_BLOCK: u64 = 1024;

/// The persisted high-water mark of report seqs.
#[derive(Debug)]
pub struct SeqMark {
    path: PathBuf,
    /// Seqs below this may be used; the file says so.
    reserved: u64,
    /// A write failed and was logged.
    failing: bool,
}

impl SeqMark {
    /// Reads the mark in `state_dir`; returns it and the first seq to use.
    pub fn open(state_dir: &Path) -> (SeqMark, u64) {
        let path = state_dir.join(SEQ_FILE);
        let first = match std::fs::read_to_string(&path) {
            Ok(text) => match text.trim().parse::<u64>() {
                Ok(n) => n.max(1),
                Err(_) => {
                    tracing::warn!(path = %path.display(), "report seq file is corrupt; continuing above the current time in milliseconds");
                    clock_floor()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the report seq file; continuing above the current time in milliseconds");
                clock_floor()
            }
        };
        let mut mark = SeqMark {
            path,
            reserved: first,
            failing: false,
        };
        mark.ensure(first);
        (mark, first)
    }

    /// Makes sure `seq` is covered by the reservation in the file, writing a new block when
    /// it is not.
    pub fn ensure(&mut self, seq: u64) {
        if seq < self.reserved {
            return;
        }
        let next = seq.saturating_add(SEQ_BLOCK);
        match write_atomic(&self.path, &next) {
            Ok(()) => {
                if self.failing {
                    tracing::info!(path = %self.path.display(), "report seq file writable again");
                }
                self.failing = false;
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!(error = %e, "cannot persist the report seq high-water mark; seqs may repeat after a restart");
                }
                self.failing = true;
            }
        }
        // on failure, the next block retries the write
        self.reserved = next;
    }
}

fn clock_floor() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 2))
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn seqs_never_go_back_across_reopen_and_blocks_are_reserved() {
        let dir = tempfile::tempdir().unwrap();
        let (mut m, first) = SeqMark::open(dir.path());
        assert_eq!(first, 1);
        let on_disk = || {
            std::fs::read_to_string(dir.path().join(SEQ_FILE))
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        };
        assert_eq!(on_disk(), 1 + SEQ_BLOCK);
        for seq in 1..=SEQ_BLOCK + 5 {
            m.ensure(seq);
            assert!(on_disk() > seq, "seq {seq} used before being reserved");
        }
        let (_, again) = SeqMark::open(dir.path());
        assert!(
            again > SEQ_BLOCK + 5,
            "a restart continues above every seq used"
        );
    }

    #[test]
    fn a_corrupt_file_continues_above_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SEQ_FILE), "not a number").unwrap();
        let (_, first) = SeqMark::open(dir.path());
        assert!(first > 1_700_000_000_000, "{first}");
    }
}
