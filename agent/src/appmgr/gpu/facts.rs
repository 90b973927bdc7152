//! The latest host and engine facts, shared by the reconcile passes and the agent's
//! inventory loop: a quiet pass reuses those younger than [`FACTS_TTL`].

use odac_host::lock::lock;
use std::time::Duration;

use tokio::time::Instant;

use odac_host::inventory::Assessment;

/// How long a quiet pass may reuse the engine's capabilities and the host scan: longer than
/// the inventory loop's default interval (10 s), which keeps them fresh in the agent.
pub(crate) const FACTS_TTL: Duration = Duration::from_secs(15);

/// The latest host and engine facts (an [`Assessment`] of a reachable engine) and when they
/// were read, shared by the passes and the agent's inventory loop.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    latest: std::sync::Mutex<Option<(Instant, Assessment)>>,
    /// The latest telemetry reading of free VRAM in MiB per GPU id, and when it was made.
    free_vram: std::sync::Mutex<Option<(Instant, std::collections::BTreeMap<String, u64>)>>,
    /// The GPUs the health watch finds unhealthy (id → error), kept until it says otherwise.
    unhealthy: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

/// How long a free-VRAM reading counts as fresh.
pub(crate) const FREE_VRAM_TTL: Duration = Duration::from_secs(30);

impl Facts {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(Instant, Assessment)>> {
        lock(&self.latest)
    }

    /// Facts read less than [`FACTS_TTL`] ago.
    pub(in crate::appmgr) fn fresh(&self, now: Instant) -> Option<Assessment> {
        self.slot()
            .as_ref()
            .filter(|(at, _)| now.saturating_duration_since(*at) < FACTS_TTL)
            .map(|(_, a)| a.clone())
    }

    /// Keeps `assessment`, read now; one of an unreachable engine is not kept.
    pub(crate) fn offer(&self, assessment: Assessment) {
        if assessment.engine.reachable {
            *self.slot() = Some((Instant::now(), assessment));
        }
    }

    /// Gives the GPUs of `scan` whose VRAM size it lacks the size the latest facts had (of
    /// any age): NVIDIA sizes come from NVML, which only the inventory loop reads.
    pub(in crate::appmgr) fn keep_vram(&self, scan: &mut odac_host::inventory::HostScan) {
        let slot = self.slot();
        let Some((_, latest)) = slot.as_ref() else {
            return;
        };
        for (id, known) in &latest.scan.gpu_details {
            let Some(bytes) = known.vram_bytes else {
                continue;
            };
            if scan.gpus.iter().any(|g| g.id() == *id) {
                let details = scan.gpu_details.entry(id.clone()).or_default();
                details.vram_bytes = details.vram_bytes.or(Some(bytes));
            }
        }
    }

    /// Keeps a telemetry reading of free VRAM (MiB per GPU id), made now.
    pub(crate) fn offer_free_vram(&self, free: std::collections::BTreeMap<String, u64>) {
        *lock(&self.free_vram) = Some((Instant::now(), free));
    }

    /// Keeps the health watch's unhealthy GPUs.
    pub(crate) fn offer_unhealthy(&self, unhealthy: std::collections::BTreeMap<String, String>) {
        *lock(&self.unhealthy) = unhealthy;
    }

    /// `assessment` with the free VRAM of a reading younger than [`FREE_VRAM_TTL`] (none
    /// otherwise) and the unhealthy GPUs.
    pub(in crate::appmgr) fn with_free_vram(
        &self,
        mut assessment: Assessment,
        now: Instant,
    ) -> Assessment {
        assessment.unhealthy = lock(&self.unhealthy).clone();
        assessment.free_vram_mib = lock(&self.free_vram)
            .as_ref()
            .filter(|(at, _)| now.saturating_duration_since(*at) < FREE_VRAM_TTL)
            .map(|(_, free)| free.clone())
            .unwrap_or_default();
        assessment
    }

    pub(in crate::appmgr) fn forget(&self) {
        *self.slot() = None;
    }
}
