//! The hub: the simulator's shared state. It owns the fleet data (behind a mutex that is never
//! held across an await), the live agent sessions, the standing faults and two broadcast
//! channels: desired-state changes (to agent sessions) and fleet events (to SSE clients).
//! Every REST mutation goes through here, is saved and fanned out.
//!
//! The methods are split by concern: `sessions.rs` (live agent sessions), `reports.rs` (what
//! agents report), `queries.rs` (views for the API), `mutations.rs` (desired-state changes),
//! `enrollment.rs` (codes and tokens) and `persist.rs` (saving only what changed, off the
//! runtime worker). A refused change is a [`HubError`]; the hub knows nothing of HTTP.

mod enrollment;
mod error;
mod mutations;
mod persist;
mod queries;
mod reports;
mod sessions;
#[cfg(test)]
mod tests;

use odac_host::lock::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use odac_protocol::{AppSpec, EventLevel};
use serde::Serialize;
use tokio::sync::{Notify, broadcast, mpsc};

pub use error::HubError;
use persist::Dirty;

use crate::state::faults::Faults;
use crate::state::identity::Credentials;
use crate::state::model::FleetData;
use crate::state::store::Store;

/// A change of one host's desired state, for its agent session.
#[derive(Debug, Clone)]
pub struct DesiredChange {
    /// Host id.
    pub host: String,
    /// Generation after the change.
    pub generation: u64,
    /// What changed.
    pub kind: ChangeKind,
}

/// Upsert or delete.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ChangeKind {
    /// Add or replace this app.
    Upsert(AppSpec),
    /// Remove the app with this name.
    Delete(String),
}

/// An event for SSE clients: `kind` is the SSE event name, `data` its JSON.
#[derive(Debug, Clone, Serialize)]
pub struct FleetEvent {
    /// `host`, `app`, `app_deleted`, `event` or `faults`.
    pub kind: &'static str,
    /// Payload.
    pub data: serde_json::Value,
}

/// A command to one live agent session.
#[derive(Debug, Clone)]
pub enum SessionCmd {
    /// Drop the connection at once, without a close frame.
    Drop,
    /// Close with this code and reason.
    Close(u16, String),
    /// Send this text frame as is.
    SendRaw(String),
    /// Offer this agent release (`update_offer`, with the session's next `seq`).
    OfferUpdate(odac_protocol::SignedRelease),
}

struct SessionEntry {
    session_id: String,
    tx: mpsc::UnboundedSender<SessionCmd>,
}

/// The shared state.
pub struct Hub {
    data: Mutex<FleetData>,
    store: Store,
    /// What changed since the last save (see `persist.rs`).
    dirty: Mutex<Dirty>,
    /// Held while one save takes its changes and writes them, so saves never interleave.
    save_lock: Mutex<()>,
    dirty_notify: Notify,
    sessions: Mutex<HashMap<String, SessionEntry>>,
    credentials: Credentials,
    /// Bearer token the REST API requires, if any.
    pub api_token: Option<String>,
    /// Standing faults.
    pub faults: Faults,
    /// Report seqs already recorded, per agent.
    pub dedup: crate::state::dedup::Dedup,
    /// Heartbeat interval told to agents in `welcome`.
    pub heartbeat_secs: u32,
    changes: broadcast::Sender<DesiredChange>,
    events: broadcast::Sender<FleetEvent>,
    closing: tokio::sync::watch::Sender<bool>,
    /// Open live-log viewers.
    pub logs: crate::state::log_viewers::LogViewers,
    /// Exec sessions waiting for their agent (tickets).
    pub exec: crate::state::exec_tickets::ExecTickets,
    /// Live GPU figures and their last hour, per host (`gpu_stats` reports).
    pub gpu_history: crate::state::gpu_history::GpuHistory,
    /// Registry logins (kept sealed in the state dir), sent with the apps that need them.
    pub registries: crate::state::registries::Registries,
    /// The mirror the catalog's images are pulled from (`--catalog-registry`).
    pub catalog_registry: std::sync::OnceLock<String>,
    /// The directory of signed agent releases (`--releases`).
    pub releases: std::sync::OnceLock<std::path::PathBuf>,
    /// Release public keys handed to enrolling agents (`--release-public-key`).
    pub release_keys: std::sync::OnceLock<Vec<String>>,
}

fn to_value<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

impl Hub {
    /// A hub over `data`, persisted in `store`, accepting the agent tokens of `credentials`.
    pub fn new(
        store: Store,
        data: FleetData,
        credentials: Credentials,
        api_token: Option<String>,
        heartbeat_secs: u32,
    ) -> Arc<Self> {
        // a fleet loaded from an older layout is written whole at the first save
        let dirty = Dirty::everything_if(data.version < crate::state::store::FORMAT_VERSION);
        Arc::new(Self {
            data: Mutex::new(data),
            store,
            dirty: Mutex::new(dirty),
            save_lock: Mutex::new(()),
            dirty_notify: Notify::new(),
            sessions: Mutex::new(HashMap::new()),
            credentials,
            api_token,
            faults: Faults::default(),
            dedup: crate::state::dedup::Dedup::default(),
            heartbeat_secs,
            changes: broadcast::channel(1024).0,
            events: broadcast::channel(1024).0,
            closing: tokio::sync::watch::channel(false).0,
            logs: crate::state::log_viewers::LogViewers::default(),
            exec: crate::state::exec_tickets::ExecTickets::default(),
            gpu_history: crate::state::gpu_history::GpuHistory::default(),
            registries: crate::state::registries::Registries::default(),
            catalog_registry: std::sync::OnceLock::new(),
            releases: std::sync::OnceLock::new(),
            release_keys: std::sync::OnceLock::new(),
        })
    }

    /// Reads the fleet data.
    pub fn read<R>(&self, f: impl FnOnce(&FleetData) -> R) -> R {
        f(&lock(&self.data))
    }

    /// Changes the fleet data; the part outside hosts and apps is marked for saving (callers
    /// mark the hosts and apps they touch with [`Hub::mark`]).
    fn write<R>(&self, f: impl FnOnce(&mut FleetData) -> R) -> R {
        let r = f(&mut lock(&self.data));
        self.mark(Dirty::rest);
        r
    }

    /// Subscribes to desired-state changes.
    pub fn subscribe_changes(&self) -> broadcast::Receiver<DesiredChange> {
        self.changes.subscribe()
    }

    /// Subscribes to fleet events.
    pub fn subscribe_events(&self) -> broadcast::Receiver<FleetEvent> {
        self.events.subscribe()
    }

    /// Tells long-lived streams (SSE) that the server is going away.
    pub fn close_streams(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once [`Hub::close_streams`] was called.
    pub fn closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        let mut rx = self.closing.subscribe();
        async move {
            let _ = rx.wait_for(|c| *c).await;
        }
    }

    fn emit(&self, kind: &'static str, data: serde_json::Value) {
        let _ = self.events.send(FleetEvent { kind, data });
    }

    fn emit_host(&self, id: &str) {
        if let Some(v) = self.host(id) {
            self.emit("host", to_value(&v));
        }
    }

    fn emit_app(&self, name: &str) {
        if let Some(v) = self.app(name) {
            self.emit("app", to_value(&v));
        }
    }

    /// Emits the standing faults to SSE clients.
    pub fn emit_faults(&self) {
        self.emit("faults", to_value(&self.faults.view()));
    }

    fn log(
        &self,
        d: &mut FleetData,
        level: EventLevel,
        host: Option<&str>,
        app: Option<&str>,
        msg: String,
    ) {
        let e = d.push_event(level, "control_plane", host, app, msg);
        self.emit("event", to_value(&e));
    }
}
