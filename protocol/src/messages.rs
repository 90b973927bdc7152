//! The messages, tagged by `type`, in both directions. Agent → control plane: `hello`,
//! `inventory`, `app_status`, `event`, `ack`, `error`; every report carries a `seq` that the
//! control plane acks. Control plane → agent: `welcome`, `desired_state`, `app_upsert`,
//! `app_delete`, `ack`, `error`; state-changing messages carry a `seq` that the agent acks
//! once it has persisted them. Live logs (`logs_request` / `logs_cancel` one way, `logs_chunk`
//! / `logs_end` the other) carry no `seq`: see [`crate::logs`]. Agent self-update
//! (`update_offer` one way, `update_status` the other): see [`crate::release`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::AppSpec;
use crate::desired::{DesiredState, validate_apps};
pub use crate::error_message::{ErrorCode, ErrorMessage};
use crate::exec::{ExecRefused, ExecRequest};
use crate::gpu_stats::GpuStatsReport;
use crate::image_removed::ImageRemoved;
use crate::inventory::Inventory;
use crate::limits::MAX_NAME;
use crate::logs::{LogsCancel, LogsChunk, LogsEnd, LogsRequest};
use crate::release::{UpdateOffer, UpdateStatusReport};
use crate::status::AppStatus;
use crate::validation::{
    ValidationError, check_dns_label, check_len, check_opt_string, check_range, check_required,
    check_string,
};

/// A message from the agent to the control plane.
// A message lives for one encode or decode; an app status is the commonest message, so it is
// kept inline rather than boxed for the sake of the rarer small ones.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentMessage {
    /// First message of a session.
    Hello(Hello),
    /// The host's inventory (sent after `welcome` and whenever it changes).
    Inventory(InventoryReport),
    /// One app's status (sent whenever it changes).
    AppStatus(AppStatusReport),
    /// A log-worthy event.
    Event(Event),
    /// Acknowledges a control-plane message: it was persisted.
    Ack(Ack),
    /// A control-plane message was refused.
    Error(ErrorMessage),
    /// The agent needs a full `desired_state` snapshot before it applies anything else.
    Resync(Resync),
    /// The next lines of a live log stream.
    LogsChunk(LogsChunk),
    /// A live log stream is over.
    LogsEnd(LogsEnd),
    /// Live per-GPU figures and the GPUs each app holds (see `gpu_stats.rs`).
    GpuStats(GpuStatsReport),
    /// Where the host's agent update stands (see `release.rs`).
    UpdateStatus(UpdateStatusReport),
    /// An exec session was refused (the agent does not dial it).
    ExecRefused(ExecRefused),
}

/// A message from the control plane to the agent.
// Messages are decoded one at a time and moved straight into the agent's store, so the size
// of `AppUpsert` (an inline `AppSpec`) costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlMessage {
    /// Answer to `hello`.
    Welcome(Welcome),
    /// Full desired-state snapshot.
    DesiredState(DesiredStateMessage),
    /// Adds or replaces one app.
    AppUpsert(AppUpsert),
    /// Removes one app.
    AppDelete(AppDelete),
    /// Acknowledges an agent report.
    Ack(Ack),
    /// An agent message was refused.
    Error(ErrorMessage),
    /// Starts a live log stream.
    LogsRequest(LogsRequest),
    /// Ends a live log stream.
    LogsCancel(LogsCancel),
    /// Offers a signed agent release (see `release.rs`).
    UpdateOffer(UpdateOffer),
    /// Starts an exec session (the agent dials its own socket with the ticket).
    ExecRequest(ExecRequest),
}

/// `hello`: who the agent is and where it stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Hello {
    /// Stable agent id (from enrollment).
    pub agent_id: String,
    /// Host name.
    pub hostname: String,
    /// Agent version, e.g. `0.1.0`.
    pub agent_version: String,
    /// Protocol version the agent speaks ([`crate::PROTOCOL_VERSION`]).
    pub protocol_version: u32,
    /// Last desired-state generation the agent applied, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_generation: Option<u64>,
}

/// `inventory`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct InventoryReport {
    /// Report sequence number.
    pub seq: u64,
    /// The inventory.
    pub inventory: Inventory,
}

/// `app_status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AppStatusReport {
    /// Report sequence number.
    pub seq: u64,
    /// The status.
    pub status: AppStatus,
}

/// `event`: something an operator may want to see in the control plane's log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// Report sequence number.
    pub seq: u64,
    /// Severity.
    pub level: EventLevel,
    /// App concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// What happened.
    pub message: String,
    /// Events dropped before this one because the outbox was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
    /// An image the agent removed (the message says so in words too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_removed: Option<ImageRemoved>,
}

/// `resync`: the agent could not apply or persist a desired-state change (or refused one), so
/// its state may differ from what the control plane believes; it applies no `app_upsert` or
/// `app_delete` until a full `desired_state` arrives, and asks for one with this message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Resync {
    /// Why, for the control plane's log (e.g. `seq 18: cannot write desired.json: ...`).
    pub reason: String,
    /// Generation of the desired state the agent has applied and persisted, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_generation: Option<u64>,
}

/// Severity of an event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventLevel {
    /// Informational.
    #[default]
    Info,
    /// Something degraded (e.g. a GPU fallback).
    Warn,
    /// Something failed.
    Error,
}

/// `ack`: the message with this `seq` was received (and, agent-side, persisted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Ack {
    /// The acknowledged sequence number.
    pub seq: u64,
}

/// `welcome`: the control plane accepted the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Welcome {
    /// The control plane's id for this host.
    pub host_id: String,
    /// Session id, for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Interval at which the agent should ping, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_secs: Option<u32>,
}

/// `desired_state`: a full snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct DesiredStateMessage {
    /// Sequence number the agent acks once the snapshot is persisted.
    pub seq: u64,
    /// Snapshot generation.
    pub generation: u64,
    /// Every app the host should run.
    #[serde(default)]
    pub apps: Vec<AppSpec>,
}

impl DesiredStateMessage {
    /// Wraps a snapshot.
    pub fn new(seq: u64, state: DesiredState) -> Self {
        Self {
            seq,
            generation: state.generation,
            apps: state.apps,
        }
    }

    /// The snapshot carried.
    pub fn into_state(self) -> DesiredState {
        DesiredState {
            generation: self.generation,
            apps: self.apps,
        }
    }
}

/// `app_upsert`: adds or replaces one app; the generation moves to `generation`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AppUpsert {
    /// Sequence number the agent acks once persisted.
    pub seq: u64,
    /// Generation after this change.
    pub generation: u64,
    /// The app.
    pub app: AppSpec,
}

/// `app_delete`: removes one app; the generation moves to `generation`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AppDelete {
    /// Sequence number the agent acks once persisted.
    pub seq: u64,
    /// Generation after this change.
    pub generation: u64,
    /// Name of the app to remove.
    pub name: String,
}

impl AgentMessage {
    /// The wire `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            AgentMessage::Hello(_) => "hello",
            AgentMessage::Inventory(_) => "inventory",
            AgentMessage::AppStatus(_) => "app_status",
            AgentMessage::Event(_) => "event",
            AgentMessage::Ack(_) => "ack",
            AgentMessage::Error(_) => "error",
            AgentMessage::Resync(_) => "resync",
            AgentMessage::LogsChunk(_) => "logs_chunk",
            AgentMessage::LogsEnd(_) => "logs_end",
            AgentMessage::GpuStats(_) => "gpu_stats",
            AgentMessage::UpdateStatus(_) => "update_status",
            AgentMessage::ExecRefused(_) => "exec_refused",
        }
    }

    /// The report `seq`, for messages that carry one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            AgentMessage::Hello(_)
            | AgentMessage::Ack(_)
            | AgentMessage::Resync(_)
            | AgentMessage::LogsChunk(_)
            | AgentMessage::LogsEnd(_)
            | AgentMessage::ExecRefused(_) => None,
            AgentMessage::Inventory(m) => Some(m.seq),
            AgentMessage::AppStatus(m) => Some(m.seq),
            AgentMessage::Event(m) => Some(m.seq),
            AgentMessage::Error(m) => m.seq,
            AgentMessage::GpuStats(m) => Some(m.seq),
            AgentMessage::UpdateStatus(m) => Some(m.seq),
        }
    }

    /// Checks every field; errors name the field (e.g. `status.name`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            AgentMessage::Hello(h) => {
                crate::identity::validate_agent_id("agent_id", &h.agent_id)?;
                check_string("hostname", &h.hostname)?;
                check_string("agent_version", &h.agent_version)
            }
            AgentMessage::Inventory(m) => m.inventory.validate().map_err(|e| e.under("inventory")),
            AgentMessage::AppStatus(m) => m.status.validate().map_err(|e| e.under("status")),
            AgentMessage::Event(e) => {
                check_string("message", &e.message)?;
                if let Some(r) = &e.image_removed {
                    r.validate().map_err(|e| e.under("image_removed"))?;
                }
                check_opt_string("app", e.app.as_ref())
            }
            AgentMessage::Ack(_) => Ok(()),
            AgentMessage::Error(e) => e.validate(),
            AgentMessage::Resync(r) => check_string("reason", &r.reason),
            AgentMessage::LogsChunk(c) => c.validate(),
            AgentMessage::LogsEnd(e) => e.validate(),
            AgentMessage::GpuStats(m) => m.stats.validate().map_err(|e| e.under("stats")),
            AgentMessage::UpdateStatus(m) => m.validate(),
            AgentMessage::ExecRefused(r) => r.validate(),
        }
    }
}

impl ControlMessage {
    /// The wire `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            ControlMessage::Welcome(_) => "welcome",
            ControlMessage::DesiredState(_) => "desired_state",
            ControlMessage::AppUpsert(_) => "app_upsert",
            ControlMessage::AppDelete(_) => "app_delete",
            ControlMessage::Ack(_) => "ack",
            ControlMessage::Error(_) => "error",
            ControlMessage::LogsRequest(_) => "logs_request",
            ControlMessage::LogsCancel(_) => "logs_cancel",
            ControlMessage::UpdateOffer(_) => "update_offer",
            ControlMessage::ExecRequest(_) => "exec_request",
        }
    }

    /// The `seq` the agent must ack, for state-changing messages.
    pub fn seq(&self) -> Option<u64> {
        match self {
            ControlMessage::DesiredState(m) => Some(m.seq),
            ControlMessage::AppUpsert(m) => Some(m.seq),
            ControlMessage::AppDelete(m) => Some(m.seq),
            ControlMessage::UpdateOffer(m) => Some(m.seq),
            ControlMessage::Welcome(_)
            | ControlMessage::Ack(_)
            | ControlMessage::Error(_)
            | ControlMessage::LogsRequest(_)
            | ControlMessage::LogsCancel(_)
            | ControlMessage::ExecRequest(_) => None,
        }
    }

    /// Checks every field; errors name the field (e.g. `apps[2].gpu.count`, `app.name`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            ControlMessage::Welcome(w) => {
                check_required("host_id", &w.host_id)?;
                check_len("host_id", &w.host_id, 256)?;
                check_opt_string("session_id", w.session_id.as_ref())?;
                check_range("heartbeat_secs", w.heartbeat_secs, 1..=3600)
            }
            ControlMessage::DesiredState(m) => validate_apps(&m.apps),
            ControlMessage::AppUpsert(m) => m.app.validate().map_err(|e| e.under("app")),
            ControlMessage::AppDelete(m) => {
                check_len("name", &m.name, MAX_NAME.max(256))?;
                check_dns_label("name", &m.name)
            }
            ControlMessage::Ack(_) => Ok(()),
            ControlMessage::Error(e) => e.validate(),
            ControlMessage::LogsRequest(r) => r.validate(),
            ControlMessage::LogsCancel(c) => c.validate(),
            ControlMessage::UpdateOffer(o) => o.release.validate(),
            ControlMessage::ExecRequest(r) => r.validate(),
        }
    }
}

/// `type` values of agent messages.
pub const AGENT_TYPES: [&str; 12] = [
    "hello",
    "inventory",
    "app_status",
    "event",
    "ack",
    "error",
    "resync",
    "logs_chunk",
    "logs_end",
    "gpu_stats",
    "update_status",
    "exec_refused",
];

/// `type` values of control-plane messages.
pub const CONTROL_TYPES: [&str; 10] = [
    "welcome",
    "desired_state",
    "app_upsert",
    "app_delete",
    "ack",
    "error",
    "logs_request",
    "logs_cancel",
    "update_offer",
    "exec_request",
];
