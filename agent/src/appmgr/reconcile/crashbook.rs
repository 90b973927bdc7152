//! The crash bookkeeping that survives an agent restart: per app, the container it is about,
//! the crash-loop counters, the next restart (as wall-clock time: monotonic instants do not
//! survive a process) and the last exit with its output tail, in `crashes.json` in the state
//! directory, written atomically ([`write_atomic`]) after a pass that changed it. A file that
//! does not parse is logged and ignored (the next save replaces it): the counters start over,
//! nothing else depends on them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::appmgr::crash::crashloop::CrashGuard;
use crate::appmgr::crash::diagnosis::{LastExit, instant_of, wall_ms_of};
use crate::appmgr::error::StoreError;
use crate::appmgr::pass::AppMemory;
use crate::appmgr::state::store::{off_the_executor, write_atomic};

/// File name of the crash bookkeeping.
pub const CRASHES_FILE: &str = "crashes.json";

/// What is kept of one app.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Saved {
    /// The container the counters are about; another container starts over.
    pub container_id: String,
    /// Exits since the last healthy run.
    pub consecutive: u32,
    /// Restarts done by the agent.
    pub restart_count: u32,
    /// Exit code of the last exit.
    pub last_exit_code: Option<i64>,
    /// The next restart, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_start_at_ms: Option<u64>,
    /// The last exit as first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<LastExit>,
}

/// Per app name.
pub(crate) type Book = BTreeMap<String, Saved>;

/// The book in `dir` (empty when there is none or it does not parse).
pub(crate) fn load(dir: &Path) -> Book {
    let path = dir.join(CRASHES_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Book::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "crash bookkeeping not read; restart counts start over");
            return Book::new();
        }
    };
    serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "crash bookkeeping is not valid json; restart counts start over");
        Book::new()
    })
}

/// Write the book to `dir` atomically.
pub(crate) fn save(dir: &Path, book: &Book) -> Result<(), StoreError> {
    off_the_executor(|| write_atomic(&dir.join(CRASHES_FILE), book))
}

/// The wall-clock time of the record's next restart, computed once per deadline so that it
/// does not drift between passes.
pub(in crate::appmgr) fn retry_at_ms(rec: &mut AppMemory) -> Option<u64> {
    let at = rec.guard.next_start?;
    match rec.retry_at {
        Some((cached, ms)) if cached == at => Some(ms),
        _ => {
            let ms = wall_ms_of(at);
            rec.retry_at = Some((at, ms));
            Some(ms)
        }
    }
}

/// What to keep of a record; `None` when there is nothing worth keeping.
pub(in crate::appmgr) fn snapshot(rec: &mut AppMemory) -> Option<Saved> {
    let container_id = rec.container_id.clone()?;
    let next_start_at_ms = retry_at_ms(rec);
    let g = &rec.guard;
    let worth = g.consecutive > 0
        || g.restart_count > 0
        || next_start_at_ms.is_some()
        || rec.last_exit.is_some();
    worth.then(|| Saved {
        container_id,
        consecutive: g.consecutive,
        restart_count: g.restart_count,
        last_exit_code: g.last_exit_code,
        next_start_at_ms,
        last_exit: rec.last_exit.clone(),
    })
}

/// A record restored from what was kept.
pub(in crate::appmgr) fn restore(saved: Saved) -> AppMemory {
    let next_start: Option<Instant> = saved.next_start_at_ms.map(instant_of);
    AppMemory {
        guard: CrashGuard {
            consecutive: saved.consecutive,
            restart_count: saved.restart_count,
            last_exit_code: saved.last_exit_code,
            next_start,
            running_since: None,
        },
        container_id: Some(saved.container_id),
        last_exit: saved.last_exit,
        retry_at: next_start.zip(saved.next_start_at_ms),
        ..AppMemory::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_record_survives_a_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(load(dir.path()).is_empty());
        let mut rec = AppMemory {
            container_id: Some("c1".into()),
            ..AppMemory::default()
        };
        assert_eq!(snapshot(&mut rec), None, "nothing worth keeping");
        rec.guard.consecutive = 3;
        rec.guard.restart_count = 2;
        rec.guard.last_exit_code = Some(3);
        rec.guard.next_start = Some(Instant::now() + std::time::Duration::from_secs(8));
        rec.last_exit = Some(LastExit {
            container_id: "c1".into(),
            exit_code: Some(3),
            output_tail: Some("boom\n".into()),
            ..LastExit::default()
        });
        let saved = snapshot(&mut rec).unwrap_or_default();
        assert_eq!(
            snapshot(&mut rec).as_ref(),
            Some(&saved),
            "stable between passes"
        );
        let book = Book::from([("web".to_owned(), saved.clone())]);
        save(dir.path(), &book).unwrap_or_else(|e| panic!("{e}"));
        let loaded = load(dir.path());
        assert_eq!(loaded, book);
        let mut back = restore(loaded["web"].clone());
        assert_eq!(back.guard.restart_count, 2);
        assert_eq!(back.container_id.as_deref(), Some("c1"));
        assert_eq!(
            snapshot(&mut back),
            Some(saved),
            "restoring does not change it"
        );
        std::fs::write(dir.path().join(CRASHES_FILE), b"{").unwrap_or_else(|e| panic!("{e}"));
        assert!(load(dir.path()).is_empty(), "a corrupt file is ignored");
    }
}
