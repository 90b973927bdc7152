//! The fleet's data as the simulator keeps and persists it: hosts (identity, inventory,
//! desired generation, reported statuses), apps (spec + host), the event log, enrollment
//! secrets (stored as SHA-256 hashes, never in clear) and which credential each agent id is
//! bound to.

use std::collections::{BTreeMap, VecDeque};

use odac_protocol::{AppSpec, AppStatus, EventLevel, Inventory};
use serde::{Deserialize, Serialize};

/// Most events kept in the log.
pub const MAX_EVENTS: usize = 500;

/// One host (one agent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    /// Host id: the agent's id from `hello`.
    pub id: String,
    /// Host name from `hello`.
    pub hostname: String,
    /// Agent version from `hello`.
    pub agent_version: String,
    /// First time the host connected (ms since epoch).
    pub first_seen_ms: u64,
    /// Last message from the host (ms since epoch).
    pub last_seen_ms: u64,
    /// Latest inventory.
    #[serde(default)]
    pub inventory: Option<std::sync::Arc<Inventory>>,
    /// Desired-state generation for this host.
    pub generation: u64,
    /// Highest generation the agent acknowledged.
    #[serde(default)]
    pub acked_generation: Option<u64>,
    /// Latest status per app name.
    #[serde(default)]
    pub statuses: BTreeMap<String, AppStatus>,
    /// Last error the agent reported about a control-plane message.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Number of sessions so far.
    #[serde(default)]
    pub sessions: u64,
    /// The agent's self-update, as it last reported it (`None` since an offer was sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<HostUpdate>,
}

/// A host's agent update, as its agent last reported it (`update_status`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostUpdate {
    /// The version being installed (empty when the offer was refused before it was read).
    pub version: String,
    /// Where it stands.
    pub phase: odac_protocol::UpdatePhase,
    /// Why (refused, update_failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Download progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The artefact's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// One app of the fleet (names are unique fleet-wide).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRecord {
    /// Host id the app runs on.
    pub host: String,
    /// The spec as sent to the agent (catalog apps resolved to an image).
    pub spec: AppSpec,
    /// Creation time (ms since epoch).
    pub created_ms: u64,
    /// Last change (ms since epoch).
    pub updated_ms: u64,
    /// The `request_id` of the last restart request, so a retried request restarts once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart_request: Option<String>,
    /// The git source's secret, sealed (only in the app's file; in memory it sits in `spec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_secret: Option<String>,
}

/// An entry of the event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Monotonic id.
    pub id: u64,
    /// When (ms since epoch).
    pub ts_ms: u64,
    /// Severity.
    pub level: EventLevel,
    /// `agent` for events an agent sent, `control_plane` for the simulator's own.
    pub source: String,
    /// Host concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// App concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// What happened.
    pub message: String,
}

/// An enrollment code or token, by hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secret {
    /// SHA-256 of the secret, hex.
    pub sha256: String,
    /// When it was created (ms since epoch).
    pub created_ms: u64,
    /// Agent id the token was issued to, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// Everything the simulator persists (`DIR/fleet.json`, `DIR/hosts/`, `DIR/apps/`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetData {
    /// File format version.
    #[serde(default)]
    pub version: u32,
    /// Hosts by id.
    #[serde(default)]
    pub hosts: BTreeMap<String, HostRecord>,
    /// Apps by name.
    #[serde(default)]
    pub apps: BTreeMap<String, AppRecord>,
    /// The latest events, oldest first.
    #[serde(default)]
    pub events: VecDeque<EventRecord>,
    /// Next event id.
    #[serde(default)]
    pub next_event_id: u64,
    /// Unused enrollment codes.
    #[serde(default)]
    pub enroll_codes: Vec<Secret>,
    /// Tokens issued by enrollment.
    #[serde(default)]
    pub enrolled_tokens: Vec<Secret>,
    /// Agent id → SHA-256 of the one credential allowed to speak for it (see `identity.rs`).
    #[serde(default)]
    pub bindings: BTreeMap<String, String>,
    /// Restart tokens issued so far (makes each one unique).
    #[serde(default)]
    pub restarts: u64,
}

/// SHA-256 of a secret, hex.
pub fn hash_secret(secret: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}

impl FleetData {
    /// Appends an event, dropping the oldest beyond [`MAX_EVENTS`]; returns it.
    pub fn push_event(
        &mut self,
        level: EventLevel,
        source: &str,
        host: Option<&str>,
        app: Option<&str>,
        message: impl Into<String>,
    ) -> EventRecord {
        self.next_event_id += 1;
        let e = EventRecord {
            id: self.next_event_id,
            ts_ms: crate::clock::now_ms(),
            level,
            source: source.to_owned(),
            host: host.map(str::to_owned),
            app: app.map(str::to_owned),
            message: message.into(),
        };
        self.events.push_back(e.clone());
        while self.events.len() > MAX_EVENTS {
            self.events.pop_front();
        }
        e
    }

    /// A copy of everything but the hosts and the apps (each of those is saved in a file of
    /// its own).
    pub fn without_hosts_and_apps(&self) -> FleetData {
        let FleetData {
            version,
            hosts: _,
            apps: _,
            events,
            next_event_id,
            enroll_codes,
            enrolled_tokens,
            bindings,
            restarts,
        } = self;
        FleetData {
            version: *version,
            hosts: BTreeMap::new(),
            apps: BTreeMap::new(),
            events: events.clone(),
            next_event_id: *next_event_id,
            enroll_codes: enroll_codes.clone(),
            enrolled_tokens: enrolled_tokens.clone(),
            bindings: bindings.clone(),
            restarts: *restarts,
        }
    }

    /// Apps of `host`, as a desired-state snapshot list (sorted by name).
    pub fn host_apps(&self, host: &str) -> Vec<AppSpec> {
        self.apps
            .values()
            .filter(|a| a.host == host)
            .map(|a| a.spec.clone())
            .collect()
    }
}
