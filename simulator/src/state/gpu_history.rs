//! Live GPU figures per host from the agents' `gpu_stats` reports: the latest sample of every
//! GPU and the last hour of points per GPU (one point per report; agents send only when a
//! figure moved, so the series is a step line), plus which GPUs each app holds and what it
//! uses of them. Kept in memory only: an hour of history is not worth a restart's
//! persistence.
//! `GET /api/hosts/{id}/gpu-stats` serves it (`server/gpu_stats.rs`); each report is also pushed to
//! SSE clients as a `gpu_stats` event with the same payload.

use odac_host::lock::lock;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use odac_protocol::{AppGpuUsage, AppGpus, GpuSample, GpuStats};
use serde::{Deserialize, Serialize};

/// How long points are kept, ms.
pub const WINDOW_MS: u64 = 3_600_000;
/// Most points kept per GPU (an hour at the shortest interval, 10 s).
pub const MAX_POINTS: usize = 360;

/// One point of a GPU's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// When it arrived, ms since the epoch.
    pub t_ms: u64,
    /// Utilisation, %.
    pub util: Option<u8>,
    /// VRAM in use, MiB.
    pub vram_used_mib: Option<u64>,
    /// Power, W.
    pub power_w: Option<u32>,
    /// Temperature, °C.
    pub temp_c: Option<i32>,
}

/// One GPU: its latest figures and the last hour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSeries {
    /// GPU id (the inventory's `pci_address`).
    pub id: String,
    /// The latest figures.
    pub current: GpuSample,
    /// Points of the last hour, oldest first.
    pub history: Vec<Point>,
}

/// A host's GPU figures as the API shows them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostGpuStats {
    /// Host id.
    pub host: String,
    /// The agent's sampling interval, s (0 before the first report).
    pub interval_secs: u32,
    /// When the latest report arrived, RFC 3339 (empty before the first).
    pub updated: String,
    /// One entry per GPU of the latest report.
    pub gpus: Vec<GpuSeries>,
    /// The GPUs each app holds.
    pub apps: Vec<AppGpus>,
    /// What each app uses of each GPU (NVIDIA: per-process figures mapped to apps).
    #[serde(default)]
    pub usage: Vec<AppGpuUsage>,
}

#[derive(Debug, Default)]
struct HostRecord {
    latest: GpuStats,
    updated_ms: u64,
    points: BTreeMap<String, VecDeque<Point>>,
}

/// Every host's GPU figures.
#[derive(Debug, Default)]
pub struct GpuHistory {
    hosts: Mutex<HashMap<String, HostRecord>>,
}

impl GpuHistory {
    /// Records a report that arrived at `now_ms`; returns the host's view.
    pub fn record(&self, host: &str, stats: GpuStats, now_ms: u64) -> HostGpuStats {
        let mut hosts = lock(&self.hosts);
        let rec = hosts.entry(host.to_owned()).or_default();
        for g in &stats.gpus {
            let series = rec.points.entry(g.id.clone()).or_default();
            series.push_back(Point {
                t_ms: now_ms,
                util: g.util,
                vram_used_mib: g.vram_used_mib,
                power_w: g.power_w,
                temp_c: g.temp_c,
            });
        }
        rec.points
            .retain(|id, _| stats.gpus.iter().any(|g| &g.id == id));
        rec.latest = stats;
        rec.updated_ms = now_ms;
        prune(rec, now_ms);
        view(host, rec)
    }

    /// A host's view at `now_ms` (empty when it never reported).
    pub fn view(&self, host: &str, now_ms: u64) -> HostGpuStats {
        let mut hosts = lock(&self.hosts);
        match hosts.get_mut(host) {
            Some(rec) => {
                prune(rec, now_ms);
                view(host, rec)
            }
            None => HostGpuStats {
                host: host.to_owned(),
                ..HostGpuStats::default()
            },
        }
    }
}

impl GpuHistory {
    /// Every host that reported, sorted by host id.
    pub fn all(&self, now_ms: u64) -> Vec<HostGpuStats> {
        let mut hosts = lock(&self.hosts);
        let mut out: Vec<HostGpuStats> = hosts
            .iter_mut()
            .map(|(host, rec)| {
                prune(rec, now_ms);
                view(host, rec)
            })
            .collect();
        out.sort_by(|a, b| a.host.cmp(&b.host));
        out
    }
}

fn prune(rec: &mut HostRecord, now_ms: u64) {
    let oldest = now_ms.saturating_sub(WINDOW_MS);
    for series in rec.points.values_mut() {
        // the latest point stays: it is the current value, however old
        while series.len() > 1 && series.front().is_some_and(|p| p.t_ms < oldest) {
            series.pop_front();
        }
        while series.len() > MAX_POINTS {
            series.pop_front();
        }
    }
}

fn view(host: &str, rec: &HostRecord) -> HostGpuStats {
    HostGpuStats {
        host: host.to_owned(),
        interval_secs: rec.latest.interval_secs,
        updated: crate::clock::rfc3339(rec.updated_ms),
        gpus: rec
            .latest
            .gpus
            .iter()
            .map(|g| GpuSeries {
                id: g.id.clone(),
                current: g.clone(),
                history: rec
                    .points
                    .get(&g.id)
                    .map(|p| p.iter().cloned().collect())
                    .unwrap_or_default(),
            })
            .collect(),
        apps: rec.latest.apps.clone(),
        usage: rec.latest.usage.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(util: u8) -> GpuStats {
        GpuStats {
            interval_secs: 60,
            gpus: vec![GpuSample {
                id: "0000:19:00.0".into(),
                util: Some(util),
                ..GpuSample::default()
            }],
            apps: vec![],
            usage: vec![],
        }
    }

    #[test]
    fn an_hour_is_kept_and_the_latest_point_always() {
        let h = GpuHistory::default();
        let t0 = 1_000_000_000;
        h.record("h1", stats(10), t0);
        h.record("h1", stats(20), t0 + 60_000);
        let v = h.view("h1", t0 + 60_000);
        assert_eq!(v.gpus[0].history.len(), 2);
        assert_eq!(v.gpus[0].current.util, Some(20));
        let later = h.view("h1", t0 + WINDOW_MS + 30_000);
        assert_eq!(
            later.gpus[0].history.len(),
            1,
            "the older point left the window"
        );
        let much_later = h.view("h1", t0 + 10 * WINDOW_MS);
        assert_eq!(
            much_later.gpus[0].history.len(),
            1,
            "the current value stays"
        );
        assert!(h.view("h2", t0).gpus.is_empty());
    }
}
