//! Each GPU's health and the recovery rule. A critical kernel error makes a GPU `unhealthy`
//! (since then, with the error, its fix and a count); it is trusted again once it has
//! answered (present on the PCI bus, its config space readable) for the recovery period with
//! no new critical error, or at once when its driver reports a successful reset. Pure state:
//! the caller passes the time (`tokio::time::Instant`, so tests pause the clock) and the wall
//! clock in epoch milliseconds for the wire.

use std::collections::BTreeMap;
use std::time::Duration;

use odac_protocol::{GpuError, GpuHealth, GpuHealthState};
use tokio::time::Instant;

use odac_host::gpu_health::GpuKernelEvent;

/// Default `gpu.health_recovery_secs`.
pub const DEFAULT_RECOVERY: Duration = Duration::from_secs(300);

/// A health change worth an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The GPU became unhealthy with this error.
    Unhealthy { gpu: String, error: GpuError },
    /// The GPU is trusted again.
    Recovered { gpu: String, why: Recovery },
}

/// Why a GPU is trusted again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// It answered for the whole recovery period.
    Answered(Duration),
    /// Its driver reported a successful reset.
    DriverReset,
}

#[derive(Debug, Clone)]
struct Entry {
    unhealthy: bool,
    since_ms: u64,
    last_error_at: Instant,
    last_error: GpuError,
    /// Since when the GPU has been answering without a break (`None`: not now).
    answering_since: Option<Instant>,
}

/// The health of every GPU that had a critical error since the agent started; the others are
/// healthy.
#[derive(Debug, Clone)]
pub struct HealthBook {
    recovery: Duration,
    gpus: BTreeMap<String, Entry>,
}

impl HealthBook {
    /// Every GPU healthy; `recovery` is `gpu.health_recovery_secs`.
    pub fn new(recovery: Duration) -> Self {
        Self {
            recovery,
            gpus: BTreeMap::new(),
        }
    }

    /// A critical error on `gpu` (an inventory GPU id). A change only when it was healthy.
    pub fn critical(
        &mut self,
        gpu: &str,
        event: &GpuKernelEvent,
        now: Instant,
        now_ms: u64,
    ) -> Option<Change> {
        let count = self
            .gpus
            .get(gpu)
            .map_or(1, |e| e.last_error.count.saturating_add(1));
        let error = GpuError {
            at_ms: now_ms,
            xid: event.xid,
            summary: event.summary.clone(),
            fix: event.fix.map(str::to_owned),
            count,
        };
        match self.gpus.get_mut(gpu) {
            Some(entry) if entry.unhealthy => {
                entry.last_error_at = now;
                entry.last_error = error;
                None
            }
            _ => {
                self.gpus.insert(
                    gpu.to_owned(),
                    Entry {
                        unhealthy: true,
                        since_ms: now_ms,
                        last_error_at: now,
                        last_error: error.clone(),
                        answering_since: None,
                    },
                );
                Some(Change::Unhealthy {
                    gpu: gpu.to_owned(),
                    error,
                })
            }
        }
    }

    /// The driver reset `gpu` successfully: trusted again at once.
    pub fn reset(&mut self, gpu: &str, now_ms: u64) -> Option<Change> {
        let entry = self.gpus.get_mut(gpu).filter(|e| e.unhealthy)?;
        entry.unhealthy = false;
        entry.since_ms = now_ms;
        entry.answering_since = None;
        Some(Change::Recovered {
            gpu: gpu.to_owned(),
            why: Recovery::DriverReset,
        })
    }

    /// Which unhealthy GPUs answer now (`answers(id)`); those that answered for the recovery
    /// period since their last error are trusted again.
    pub fn observe(
        &mut self,
        answers: impl Fn(&str) -> bool,
        now: Instant,
        now_ms: u64,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        for (gpu, entry) in self.gpus.iter_mut().filter(|(_, e)| e.unhealthy) {
            if !answers(gpu) {
                entry.answering_since = None;
                continue;
            }
            let since = *entry.answering_since.get_or_insert(now);
            let quiet_from = since.max(entry.last_error_at);
            if now.saturating_duration_since(quiet_from) >= self.recovery {
                entry.unhealthy = false;
                entry.since_ms = now_ms;
                entry.answering_since = None;
                changes.push(Change::Recovered {
                    gpu: gpu.clone(),
                    why: Recovery::Answered(self.recovery),
                });
            }
        }
        changes
    }

    /// True when `gpu` is unhealthy now.
    pub fn is_unhealthy(&self, gpu: &str) -> bool {
        self.gpus.get(gpu).is_some_and(|e| e.unhealthy)
    }

    /// Whether any GPU is unhealthy (the caller then observes them often).
    pub fn any_unhealthy(&self) -> bool {
        self.gpus.values().any(|e| e.unhealthy)
    }

    /// Unhealthy GPU ids with the evidence the GPU decision gives (`xid 79: …`).
    pub fn unhealthy(&self) -> BTreeMap<String, String> {
        self.gpus
            .iter()
            .filter(|(_, e)| e.unhealthy)
            .map(|(id, e)| (id.clone(), e.last_error.summary.clone()))
            .collect()
    }

    /// The wire health of every GPU that had an error (others: healthy, no history).
    pub fn wire(&self) -> BTreeMap<String, GpuHealth> {
        self.gpus
            .iter()
            .map(|(id, e)| {
                let state = if e.unhealthy {
                    GpuHealthState::Unhealthy
                } else {
                    GpuHealthState::Healthy
                };
                let health = GpuHealth {
                    state,
                    since_ms: Some(e.since_ms),
                    last_error: Some(e.last_error.clone()),
                };
                (id.clone(), health)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
