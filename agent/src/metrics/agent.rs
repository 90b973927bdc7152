//! The agent's own health, `odac_agent_…`: whether the control-plane link is up and how often
//! it was dialled again ([`LinkMetrics`], fed from the uplink's link events), reports sent,
//! acknowledged and pending (read from the outbox at scrape time), apps by state and GPU
//! requests by attach result and reason (from the app manager's statuses at scrape time),
//! and the build. Event metrics counted where they happen are in [`super::events`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use odac_protocol::{AppState, AppStatus};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use super::gpu::Statuses;

/// Every app state, so a dashboard sees zeros rather than gaps.
const STATES: [AppState; 10] = [
    AppState::Pending,
    AppState::Pulling,
    AppState::Creating,
    AppState::Running,
    AppState::Restarting,
    AppState::CrashLoop,
    AppState::Stopped,
    AppState::Exited,
    AppState::Failed,
    AppState::Removed,
];

/// The link metrics, set from the uplink's link events (`crate::metrics_feed`).
#[derive(Debug, Clone, Default)]
pub struct LinkMetrics {
    up: Gauge,
    reconnects: Counter,
    dialled: Arc<AtomicBool>,
}

impl LinkMetrics {
    /// Adds the link metrics to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "odac_agent_link_up",
            "Whether the agent has an established session with the control plane (1) or not (0)",
            self.up.clone(),
        );
        registry.register(
            "odac_agent_reconnects",
            "Times the agent dialled the control plane again after a failed attempt or a lost session",
            self.reconnects.clone(),
        );
    }

    /// The agent dials the control plane (every dial after the first is a reconnect).
    pub fn dialling(&self) {
        if self.dialled.swap(true, Ordering::Relaxed) {
            self.reconnects.inc();
        }
    }

    /// A session is established.
    pub fn up(&self) {
        self.up.set(1);
    }

    /// No session: an attempt failed, a session ended, or the uplink stopped.
    pub fn down(&self) {
        self.up.set(0);
    }
}

/// Reports sent so far (resends included), acknowledged so far, and pending now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportCounts {
    pub sent: u64,
    pub acked: u64,
    pub pending: usize,
}

/// Reads the report counts at scrape time.
pub type Reports = Arc<dyn Fn() -> ReportCounts + Send + Sync>;

/// What the agent collector reads at scrape time.
#[derive(Clone)]
pub struct AgentCollector {
    /// The app manager's statuses.
    pub statuses: Statuses,
    /// The uplink's report counts.
    pub reports: Option<Reports>,
}

impl fmt::Debug for AgentCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentCollector").finish_non_exhaustive()
    }
}

/// Apps that asked for a GPU, by what became of the request: `attached`, `fallback` (runs
/// without it), `failed`, `pending` (not decided yet); `reason` is the fallback's reason
/// code, `none` without one.
pub fn gpu_requests(statuses: &[AppStatus]) -> BTreeMap<(&'static str, String), i64> {
    let mut out = BTreeMap::new();
    for s in statuses.iter().filter(|s| s.gpu.requested.is_some()) {
        if s.state == AppState::Removed {
            continue;
        }
        let result = if s.gpu.attached.is_some() {
            "attached"
        } else if s.state == AppState::Failed {
            "failed"
        } else if s.gpu.fallback.is_some() {
            "fallback"
        } else {
            "pending"
        };
        let reason = s
            .gpu
            .fallback
            .as_ref()
            .map_or_else(|| "none".to_owned(), |f| f.reason.as_str().to_owned());
        *out.entry((result, reason)).or_insert(0) += 1;
    }
    out
}

/// Apps by state, every known state present.
pub fn apps_by_state(statuses: &[AppStatus]) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = STATES.iter().map(|s| (s.to_string(), 0)).collect();
    for s in statuses {
        *out.entry(s.state.to_string()).or_insert(0) += 1;
    }
    out
}

impl Collector for AgentCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let info = ConstGauge::new(1i64);
        let mut m = encoder.encode_descriptor(
            "odac_agent_build_info",
            "The agent's version (always 1).",
            None,
            MetricType::Gauge,
        )?;
        info.encode(m.encode_family(&[("version", crate::AGENT_VERSION)])?)?;

        if let Some(reports) = &self.reports {
            let ReportCounts {
                sent,
                acked,
                pending,
            } = reports();
            let c = ConstCounter::new(sent);
            let m = encoder.encode_descriptor(
                "odac_agent_reports_sent",
                "Reports sent to the control plane, resends included.",
                None,
                c.metric_type(),
            )?;
            c.encode(m)?;
            let c = ConstCounter::new(acked);
            let m = encoder.encode_descriptor(
                "odac_agent_reports_acked",
                "Reports the control plane acknowledged.",
                None,
                c.metric_type(),
            )?;
            c.encode(m)?;
            let g = ConstGauge::new(i64::try_from(pending).unwrap_or(i64::MAX));
            let m = encoder.encode_descriptor(
                "odac_agent_reports_pending",
                "Reports waiting for an acknowledgement.",
                None,
                g.metric_type(),
            )?;
            g.encode(m)?;
        }

        let statuses = (self.statuses)();
        let mut m = encoder.encode_descriptor(
            "odac_agent_apps",
            "Apps of the desired state by state.",
            None,
            MetricType::Gauge,
        )?;
        for (state, n) in apps_by_state(&statuses) {
            ConstGauge::new(n).encode(m.encode_family(&[("state", state)])?)?;
        }
        let requests = gpu_requests(&statuses);
        if !requests.is_empty() {
            let mut m = encoder.encode_descriptor(
                "odac_agent_gpu_requests",
                "Apps that asked for a GPU by attach result and fallback reason.",
                None,
                MetricType::Gauge,
            )?;
            for ((result, reason), n) in requests {
                let labels = [("result", result.to_owned()), ("reason", reason)];
                ConstGauge::new(n).encode(m.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use odac_protocol::{Fallback, FallbackTier, GpuRequest, Reason};

    use super::*;

    fn app(state: AppState, requested: bool, fallback: Option<Reason>) -> AppStatus {
        let mut s = AppStatus {
            state,
            ..AppStatus::default()
        };
        if requested {
            s.gpu.requested = Some(GpuRequest::default());
        }
        s.gpu.fallback = fallback.map(|reason| Fallback {
            tier: FallbackTier::Preflight,
            reason,
            detail: None,
        });
        s
    }

    #[test]
    fn apps_count_by_state_and_gpu_requests_by_result_and_reason() {
        let statuses = vec![
            app(AppState::Running, true, Some(Reason::NoDevice)),
            app(AppState::Running, false, None),
            app(AppState::Failed, true, Some(Reason::NoDevice)),
            app(AppState::Pending, true, None),
            app(AppState::Removed, true, None),
        ];
        let states = apps_by_state(&statuses);
        assert_eq!(states["running"], 2);
        assert_eq!(states["failed"], 1);
        assert_eq!(states["crash_loop"], 0, "every state is listed");
        let requests = gpu_requests(&statuses);
        let want = BTreeMap::from([
            (("failed", "no_device".to_owned()), 1),
            (("fallback", "no_device".to_owned()), 1),
            (("pending", "none".to_owned()), 1),
        ]);
        assert_eq!(requests, want, "a removed app is not counted");
    }
}
