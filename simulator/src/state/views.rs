//! The REST API's views of hosts and apps: the stored records joined with the live session
//! table, plus the summaries the CLI and the dashboard show side by side (GPUs by vendor,
//! schedulable vendors and reasons; requested vs attached vs fallback reason).

use std::collections::BTreeMap;

use odac_protocol::{
    AppSpec, AppStatus, Attached, Fallback, GpuRequest, ImageFailure, Inventory, Reason, Vendor,
};
use serde::{Deserialize, Serialize};

use crate::state::model::{AppRecord, HostRecord};

/// GPUs of one vendor on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuGroup {
    /// Vendor.
    pub vendor: Vendor,
    /// How many.
    pub count: usize,
    /// Distinct models.
    pub models: Vec<String>,
}

/// One host as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostView {
    /// Host id.
    pub id: String,
    /// Host name.
    pub hostname: String,
    /// Whether an agent session is live.
    pub connected: bool,
    /// Agent version.
    pub agent_version: String,
    /// The agent's self-update, as last reported.
    #[serde(default)]
    pub update: Option<crate::state::model::HostUpdate>,
    /// Last message, RFC 3339.
    pub last_seen: String,
    /// Desired-state generation.
    pub generation: u64,
    /// Generation the agent acknowledged.
    pub acked_generation: Option<u64>,
    /// Apps placed on this host.
    pub apps: Vec<String>,
    /// GPUs by vendor.
    pub gpus: Vec<GpuGroup>,
    /// Vendors whose GPUs can be passed into containers.
    pub schedulable: Vec<Vendor>,
    /// Why the other vendors present cannot (vendor → reason), absent vendors excluded.
    pub reasons: BTreeMap<Vendor, Reason>,
    /// Engine, e.g. `docker 24.0.7`, or `unreachable`.
    pub engine: String,
    /// Last error the agent reported.
    pub last_error: Option<String>,
    /// The full inventory, when received.
    pub inventory: Option<std::sync::Arc<Inventory>>,
}

/// One app as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppView {
    /// App name.
    pub name: String,
    /// Host id.
    pub host: String,
    /// Host name.
    pub hostname: String,
    /// Lifecycle state (`pending` until the agent reports).
    pub state: String,
    /// Image (from the status when reported, else the spec).
    pub image: Option<String>,
    /// The GPU request, exactly as stored in the spec.
    pub requested: Option<GpuRequest>,
    /// What the container got.
    pub attached: Option<Attached>,
    /// The GPU fallback taken.
    pub fallback: Option<Fallback>,
    /// Why the app's image could not be had (a failed pull or build), from the status.
    #[serde(default)]
    pub image_failure: Option<ImageFailure>,
    /// The reason code for tables: the image failure's, else the GPU fallback's.
    pub reason: Option<Reason>,
    /// The running container does not match the spec.
    pub restart_required: bool,
    /// Restart token in the spec.
    pub restart_token: Option<String>,
    /// The spec sent to the agent, without secrets (a git source's token is never shown).
    pub spec: AppSpec,
    /// The agent's latest status.
    pub status: Option<AppStatus>,
}

/// Summaries of an inventory: GPU groups, schedulable vendors, reasons, engine.
pub fn summarize(
    inv: Option<&Inventory>,
) -> (Vec<GpuGroup>, Vec<Vendor>, BTreeMap<Vendor, Reason>, String) {
    let Some(inv) = inv else {
        return (
            Vec::new(),
            Vec::new(),
            BTreeMap::new(),
            "unknown".to_owned(),
        );
    };
    let mut gpus: Vec<GpuGroup> = Vec::new();
    for g in &inv.gpus {
        match gpus.iter_mut().find(|x| x.vendor == g.vendor) {
            Some(x) => {
                x.count += 1;
                if !x.models.contains(&g.model) {
                    x.models.push(g.model.clone());
                }
            }
            None => gpus.push(GpuGroup {
                vendor: g.vendor,
                count: 1,
                models: vec![g.model.clone()],
            }),
        }
    }
    let schedulable = inv
        .accelerators
        .iter()
        .filter(|(_, v)| v.schedulable)
        .map(|(k, _)| *k)
        .collect();
    let reasons = inv
        .accelerators
        .iter()
        .filter(|(k, v)| !v.schedulable && gpus.iter().any(|g| g.vendor == **k))
        .filter_map(|(k, v)| v.reason.map(|r| (*k, r)))
        .collect();
    let engine = if inv.engine.reachable {
        format!("docker {}", inv.engine.version.as_deref().unwrap_or("?"))
    } else {
        "unreachable".to_owned()
    };
    (gpus, schedulable, reasons, engine)
}

/// The view of a host.
pub fn host_view(h: &HostRecord, connected: bool, apps: Vec<String>) -> HostView {
    let (gpus, schedulable, reasons, engine) = summarize(h.inventory.as_deref());
    HostView {
        id: h.id.clone(),
        hostname: h.hostname.clone(),
        connected,
        agent_version: h.agent_version.clone(),
        update: h.update.clone(),
        last_seen: crate::clock::rfc3339(h.last_seen_ms),
        generation: h.generation,
        acked_generation: h.acked_generation,
        apps,
        gpus,
        schedulable,
        reasons,
        engine,
        last_error: h.last_error.clone(),
        inventory: h.inventory.clone(),
    }
}

/// The view of an app; `host` is its host's record when known.
pub fn app_view(name: &str, a: &AppRecord, host: Option<&HostRecord>) -> AppView {
    let status = host.and_then(|h| h.statuses.get(name)).cloned();
    let fallback = status.as_ref().and_then(|s| s.gpu.fallback.clone());
    let image_failure = status.as_ref().and_then(|s| s.image_failure.clone());
    AppView {
        name: name.to_owned(),
        host: a.host.clone(),
        hostname: host.map(|h| h.hostname.clone()).unwrap_or_default(),
        state: status
            .as_ref()
            .map_or_else(|| "pending".to_owned(), |s| s.state.as_str().to_owned()),
        image: status
            .as_ref()
            .and_then(|s| s.image.clone())
            .or_else(|| a.spec.image.clone()),
        requested: a.spec.gpu.clone(),
        attached: status.as_ref().and_then(|s| s.gpu.attached.clone()),
        reason: image_failure
            .as_ref()
            .map(|f| f.reason)
            .or(fallback.as_ref().map(|f| f.reason)),
        fallback,
        image_failure,
        restart_required: status.as_ref().is_some_and(|s| s.restart_required),
        restart_token: a.spec.restart_token.clone(),
        spec: a.spec.without_secrets(),
        status,
    }
}
