//! Learned refusals: once the engine has refused a device set (the
//! [`Attachment`] a create asked for), later creates that would ask for the same set on the
//! same inventory do not pay the engine's failed create or start again. They go straight to
//! the CPU (optional intent) or fail (required intent) with the refusal remembered: tier
//! `engine`, reason `engine_rejected`, the engine's original words, and when it was learned.
//!
//! A refusal is forgotten when the inventory changes (a new driver, a GPU that appeared or
//! went, another engine: anything the wire inventory's hash sees) or after
//! `apps.refusal_memory_secs` (default 10 minutes; 0 never remembers), and when an app that
//! met it is restarted explicitly (`odac app restart`: a new restart token): the operator who
//! removed the cause asks for the engine to be asked again, and it is. The clock is tokio's,
//! so the expiry is tested with paused time.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use odac_protocol::Fallback;
use tokio::time::Instant;

use odac_host::engine::EngineError;
use odac_host::gpu::Attachment;

/// Most refusals remembered at once (one per distinct device set; the oldest goes first).
const MAX_LEARNED: usize = 64;

/// One refusal the engine gave.
#[derive(Debug, Clone)]
pub(in crate::appmgr) struct Learned {
    /// What was asked for.
    attachment: Attachment,
    /// Hash of the inventory it was refused on.
    inventory: String,
    /// When (tokio's clock, for the expiry).
    at: Instant,
    /// The fallback to report: the engine's words, marked with when they were learned.
    pub(in crate::appmgr) fallback: Fallback,
    /// The engine's words, reported again as the error of a required intent.
    words: String,
    /// The apps that met this refusal, with the restart token each had then.
    met_by: BTreeMap<String, String>,
}

/// The app asking: its name and restart token.
#[derive(Debug, Clone, Copy)]
pub(in crate::appmgr) struct Asker<'a> {
    pub(in crate::appmgr) app: &'a str,
    pub(in crate::appmgr) restart_token: &'a str,
}

impl Learned {
    /// The engine's refusal, as the error a required intent fails with.
    pub(in crate::appmgr) fn error(&self) -> EngineError {
        EngineError::Other(self.words.clone())
    }
}

/// The refusals learned so far.
#[derive(Debug, Default)]
pub(in crate::appmgr) struct Refusals {
    learned: Vec<Learned>,
}

impl Refusals {
    /// The refusal of `attachment` on this `inventory` learned less than `memory` ago, if
    /// any. Refusals learned on another inventory or too long ago are forgotten here, and so
    /// is one that `asker` met under another restart token: it was restarted explicitly.
    pub(in crate::appmgr) fn recall(
        &mut self,
        attachment: &Attachment,
        inventory: &str,
        now: Instant,
        memory: Duration,
        asker: Asker<'_>,
    ) -> Option<Learned> {
        self.learned
            .retain(|l| l.inventory == inventory && now.saturating_duration_since(l.at) < memory);
        let i = self
            .learned
            .iter()
            .position(|l| l.attachment == *attachment)?;
        let met = self.learned[i].met_by.get(asker.app).cloned();
        match met {
            Some(token) if token != asker.restart_token => {
                tracing::info!(app = %asker.app, "restarted explicitly: asking the engine again for the devices it refused");
                self.learned.remove(i);
                return None;
            }
            Some(_) => {}
            None => {
                self.learned[i]
                    .met_by
                    .insert(asker.app.to_owned(), asker.restart_token.to_owned());
            }
        }
        Some(self.learned[i].clone())
    }

    /// Remember that the engine refused `attachment` on `inventory`; `fallback` is the one
    /// the refused create reported (its detail holds the engine's words).
    pub(in crate::appmgr) fn learn(
        &mut self,
        attachment: &Attachment,
        inventory: String,
        now: Instant,
        fallback: &Fallback,
        asker: Asker<'_>,
    ) {
        self.learned.retain(|l| l.attachment != *attachment);
        if self.learned.len() >= MAX_LEARNED {
            self.learned.remove(0);
        }
        let words = fallback.detail.clone().unwrap_or_default();
        let mut fallback = fallback.clone();
        fallback.detail = Some(format!(
            "{words} (learned {}: the engine was not asked again)",
            utc(SystemTime::now())
        ));
        self.learned.push(Learned {
            attachment: attachment.clone(),
            inventory,
            at: now,
            fallback,
            words,
            met_by: BTreeMap::from([(asker.app.to_owned(), asker.restart_token.to_owned())]),
        });
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a wall-clock time (the epoch for one before it).
pub(in crate::appmgr) fn utc(at: SystemTime) -> String {
    let secs = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // civil-from-days (H. Hinnant), for days since 1970-01-01 (never negative here)
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(utc(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(utc(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(utc(at(1_796_392_033)), "2026-12-04T13:47:13Z");
    }
}
