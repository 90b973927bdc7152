//! The hub: the simulator's shared state. It owns the fleet data (behind a mutex that is never
//! held across an await), the live agent sessions, the standing faults and two broadcast
//! channels: desired-state changes (to agent sessions) and fleet events (to SSE clients).
//! Every REST mutation goes through here, is persisted at once and fanned out.

use odac_agent::lock::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use odac_protocol::{AppSpec, AppStatus, EventLevel, GpuRequest, Hello, Inventory};
use serde::Serialize;
use tokio::sync::{Notify, broadcast, mpsc};

use crate::server::api_error::ApiError;
use crate::state::faults::Faults;
use crate::state::identity::{Credentials, Refusal};
use crate::state::model::{FleetData, HostRecord, Secret, hash_secret};
use crate::state::store::Store;
use crate::state::views::{AppView, HostView, app_view, host_view};

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
}

struct SessionEntry {
    session_id: String,
    tx: mpsc::UnboundedSender<SessionCmd>,
}

/// The shared state.
pub struct Hub {
    data: Mutex<FleetData>,
    store: Store,
    dirty: AtomicBool,
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
    pub logs: crate::server::logs::LogViewers,
    /// Live GPU figures and their last hour, per host (`gpu_stats` reports).
    pub gpu_history: crate::state::gpu_history::GpuHistory,
    /// Registry logins, in memory only, sent with the apps that need them.
    pub registries: crate::state::registries::Registries,
    /// The mirror the catalog's images are pulled from (`--catalog-registry`).
    pub catalog_registry: std::sync::OnceLock<String>,
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
        Arc::new(Self {
            data: Mutex::new(data),
            store,
            dirty: AtomicBool::new(false),
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
            logs: crate::server::logs::LogViewers::default(),
            gpu_history: crate::state::gpu_history::GpuHistory::default(),
            registries: crate::state::registries::Registries::default(),
            catalog_registry: std::sync::OnceLock::new(),
        })
    }

    /// Reads the fleet data.
    pub fn read<R>(&self, f: impl FnOnce(&FleetData) -> R) -> R {
        f(&lock(&self.data))
    }

    fn write<R>(&self, f: impl FnOnce(&mut FleetData) -> R) -> R {
        f(&mut lock(&self.data))
    }

    // ---- persistence -------------------------------------------------------------------

    /// Writes the fleet file now.
    pub fn persist_now(&self) {
        self.dirty.store(false, Ordering::SeqCst);
        let snapshot = self.read(Clone::clone);
        if let Err(e) = self.store.save(&snapshot) {
            tracing::error!(error = %e, "cannot persist the fleet");
        }
    }

    /// Marks the fleet changed; the background writer saves it shortly.
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        self.dirty_notify.notify_one();
    }

    /// Runs the debounced writer until the hub is dropped elsewhere (call in a task).
    pub async fn run_writer(self: Arc<Self>) {
        loop {
            self.dirty_notify.notified().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            if self.dirty.swap(false, Ordering::SeqCst) {
                let hub = Arc::clone(&self);
                let _ = tokio::task::spawn_blocking(move || {
                    let snapshot = hub.read(Clone::clone);
                    if let Err(e) = hub.store.save(&snapshot) {
                        tracing::error!(error = %e, "cannot persist the fleet");
                    }
                })
                .await;
            }
        }
    }

    // ---- channels ----------------------------------------------------------------------

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

    // ---- sessions ----------------------------------------------------------------------

    /// Whether `token` may open an agent session.
    pub fn agent_token_ok(&self, token: &str) -> bool {
        if self.faults.reject_tokens() {
            return false;
        }
        let h = hash_secret(token);
        self.read(|d| self.credentials.known(d, &h))
    }

    /// Checks that the token with hash `token_sha256` may speak for agent `id` (binding the id
    /// to it on first use, persisted at once); see `identity.rs`.
    pub fn authorize(&self, token_sha256: &str, id: &str) -> Result<(), Refusal> {
        if self.faults.reject_tokens() {
            return Err(Refusal::UnknownToken);
        }
        let changed = self.write(|d| self.credentials.authorize(d, token_sha256, id))?;
        if changed {
            self.persist_now();
        }
        Ok(())
    }

    /// Registers a live session for `host`; an older session of the same host is closed.
    pub fn register_session(
        &self,
        host: &str,
        session_id: &str,
        tx: mpsc::UnboundedSender<SessionCmd>,
    ) {
        let old = lock(&self.sessions).insert(
            host.to_owned(),
            SessionEntry {
                session_id: session_id.to_owned(),
                tx,
            },
        );
        if let Some(old) = old {
            let _ = old.tx.send(SessionCmd::Close(
                4000,
                "replaced by a newer session".to_owned(),
            ));
        }
        self.emit_host(host);
    }

    /// Logs that `host`'s session was closed because its agent stayed silent for `silent`
    /// (see `liveness.rs`); [`Hub::unregister_session`] then marks it disconnected.
    pub fn record_dead_session(&self, host: &str, silent: std::time::Duration) {
        self.write(|d| {
            self.log(
                d,
                EventLevel::Warn,
                Some(host),
                None,
                format!(
                    "host {host} missed {} heartbeats (no frame for {} s): session closed with {}",
                    crate::server::liveness::MISSED_HEARTBEATS,
                    silent.as_secs(),
                    crate::server::liveness::CLOSE_CODE
                ),
            );
        });
    }

    /// Forgets `session_id` of `host` (if it is still the live one) and logs the disconnect.
    pub fn unregister_session(&self, host: &str, session_id: &str) {
        let removed = {
            let mut s = lock(&self.sessions);
            if s.get(host).is_some_and(|e| e.session_id == session_id) {
                s.remove(host);
                true
            } else {
                false
            }
        };
        if removed {
            self.write(|d| {
                self.log(
                    d,
                    EventLevel::Warn,
                    Some(host),
                    None,
                    format!("host {host} disconnected"),
                );
            });
            self.mark_dirty();
            self.emit_host(host);
        }
    }

    /// Whether `host` has a live session.
    pub fn is_connected(&self, host: &str) -> bool {
        lock(&self.sessions).contains_key(host)
    }

    /// Ids of connected hosts.
    pub fn connected_hosts(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        v.sort();
        v
    }

    /// The id of `host`'s live session, if it has one.
    pub fn session_id(&self, host: &str) -> Option<String> {
        lock(&self.sessions).get(host).map(|e| e.session_id.clone())
    }

    /// Sends `cmd` to `host`'s live session; `false` when it has none.
    pub fn send_to_session(&self, host: &str, cmd: SessionCmd) -> bool {
        lock(&self.sessions)
            .get(host)
            .is_some_and(|e| e.tx.send(cmd).is_ok())
    }

    /// Sends `cmd` to every live session; returns how many got it.
    pub fn broadcast_cmd(&self, cmd: &SessionCmd) -> usize {
        lock(&self.sessions)
            .values()
            .filter(|e| e.tx.send(cmd.clone()).is_ok())
            .count()
    }

    // ---- agent reports -----------------------------------------------------------------

    /// Records a `hello`; returns the host id.
    pub fn hello(&self, h: &Hello) -> String {
        let id = h.agent_id.clone();
        let now = crate::clock::now_ms();
        self.write(|d| {
            let rec = d.hosts.entry(id.clone()).or_insert_with(|| HostRecord {
                id: id.clone(),
                first_seen_ms: now,
                ..HostRecord::default()
            });
            rec.hostname.clone_from(&h.hostname);
            rec.agent_version.clone_from(&h.agent_version);
            rec.last_seen_ms = now;
            rec.sessions += 1;
            let msg = format!(
                "host {id} ({}) connected, agent {}, last generation {}",
                h.hostname,
                h.agent_version,
                h.last_generation
                    .map_or_else(|| "none".to_owned(), |g| g.to_string())
            );
            self.log(d, EventLevel::Info, Some(&id), None, msg);
        });
        self.mark_dirty();
        id
    }

    /// The desired-state snapshot of `host`: (generation, apps).
    pub fn snapshot(&self, host: &str) -> (u64, Vec<AppSpec>) {
        self.read(|d| {
            (
                d.hosts.get(host).map_or(0, |h| h.generation),
                d.host_apps(host),
            )
        })
    }

    fn touch_host(&self, host: &str, f: impl FnOnce(&mut HostRecord)) {
        self.write(|d| {
            if let Some(h) = d.hosts.get_mut(host) {
                h.last_seen_ms = crate::clock::now_ms();
                f(h);
            }
        });
        self.mark_dirty();
    }

    /// Records a message seen from `host` (keeps `last_seen` fresh).
    pub fn seen(&self, host: &str) {
        self.write(|d| {
            if let Some(h) = d.hosts.get_mut(host) {
                h.last_seen_ms = crate::clock::now_ms();
            }
        });
    }

    /// Records an inventory.
    pub fn record_inventory(&self, host: &str, inv: Inventory) {
        self.touch_host(host, |h| h.inventory = Some(Arc::new(inv)));
        self.emit_host(host);
    }

    /// Records a `gpu_stats` report and pushes it to SSE clients (`gpu_stats` event).
    pub fn record_gpu_stats(&self, host: &str, stats: odac_protocol::GpuStats) {
        let view = self.gpu_history.record(host, stats, crate::clock::now_ms());
        self.emit("gpu_stats", to_value(&view));
    }

    /// Records an app status; a `removed` one forgets the app's status on that host.
    pub fn record_status(&self, host: &str, status: AppStatus) {
        let name = status.name.clone();
        let removed = status.state == odac_protocol::AppState::Removed;
        self.touch_host(host, |h| {
            if removed {
                h.statuses.remove(&name);
            } else {
                h.statuses.insert(name.clone(), status);
            }
        });
        if removed {
            self.write(|d| {
                let msg = format!("app {name} removed from host {host}");
                self.log(d, EventLevel::Info, Some(host), Some(&name), msg);
            });
            self.emit_host(host);
        }
        let placed_here = self.read(|d| d.apps.get(&name).is_some_and(|a| a.host == host));
        if placed_here {
            self.emit_app(&name);
        }
    }

    /// Records an agent event.
    pub fn record_event(&self, host: &str, ev: &odac_protocol::Event) {
        self.write(|d| {
            let mut msg = ev.message.clone();
            if let Some(n) = ev.dropped {
                msg.push_str(&format!(" ({n} earlier events dropped)"));
            }
            let e = d.push_event(ev.level, "agent", Some(host), ev.app.as_deref(), msg);
            self.emit("event", to_value(&e));
        });
        self.mark_dirty();
    }

    /// Records that the agent acknowledged `generation`.
    pub fn record_ack(&self, host: &str, generation: u64) {
        self.touch_host(host, |h| {
            h.acked_generation = Some(h.acked_generation.map_or(generation, |g| g.max(generation)));
        });
        self.emit_host(host);
    }

    /// Records an `error` the agent sent about a control-plane message.
    pub fn record_agent_error(&self, host: &str, message: &str) {
        self.touch_host(host, |h| h.last_error = Some(message.to_owned()));
        self.write(|d| {
            self.log(
                d,
                EventLevel::Error,
                Some(host),
                None,
                format!("agent refused a message: {message}"),
            );
        });
        self.emit_host(host);
    }

    // ---- views -------------------------------------------------------------------------

    /// Every host.
    pub fn hosts(&self) -> Vec<HostView> {
        let connected: HashSet<String> = lock(&self.sessions).keys().cloned().collect();
        self.read(|d| {
            let mut apps: HashMap<&str, Vec<String>> = HashMap::new();
            for (name, a) in &d.apps {
                apps.entry(a.host.as_str()).or_default().push(name.clone());
            }
            d.hosts
                .values()
                .map(|h| {
                    let of_host = apps.remove(h.id.as_str()).unwrap_or_default();
                    host_view(h, connected.contains(&h.id), of_host)
                })
                .collect()
        })
    }

    /// One host, by id or unique host name.
    pub fn host(&self, key: &str) -> Option<HostView> {
        let id = self.read(|d| resolve_host(d, key).ok())?;
        let connected = self.is_connected(&id);
        self.read(|d| {
            d.hosts
                .get(&id)
                .map(|h| host_view(h, connected, apps_of(d, &id)))
        })
    }

    /// Every app.
    pub fn apps(&self) -> Vec<AppView> {
        self.read(|d| {
            d.apps
                .iter()
                .map(|(n, a)| app_view(n, a, d.hosts.get(&a.host)))
                .collect()
        })
    }

    /// One app.
    pub fn app(&self, name: &str) -> Option<AppView> {
        self.read(|d| {
            d.apps
                .get(name)
                .map(|a| app_view(name, a, d.hosts.get(&a.host)))
        })
    }

    /// The latest events, oldest first.
    pub fn events(&self) -> Vec<crate::state::model::EventRecord> {
        self.read(|d| d.events.iter().cloned().collect())
    }

    // ---- desired state -----------------------------------------------------------------

    fn change(&self, host: &str, generation: u64, kind: ChangeKind) {
        let _ = self.changes.send(DesiredChange {
            host: host.to_owned(),
            generation,
            kind,
        });
    }

    /// Creates an app (the spec already validated and resolved) on `host` (id or host name;
    /// optional when exactly one host is connected).
    pub fn create_app(&self, host: Option<&str>, spec: AppSpec) -> Result<AppView, ApiError> {
        let connected = self.connected_hosts();
        let name = spec.name.clone();
        let (host_id, generation) = self.write(|d| {
            let host_id = match host {
                Some(key) => resolve_host(d, key)?,
                None => match connected.as_slice() {
                    [one] => one.clone(),
                    [] => {
                        return Err(ApiError::bad_request(
                            "host",
                            "no host is connected: give host",
                        ));
                    }
                    many => {
                        return Err(ApiError::bad_request(
                            "host",
                            format!("{} hosts are connected: give host", many.len()),
                        ));
                    }
                },
            };
            if d.apps.contains_key(&name) {
                return Err(ApiError {
                    status: axum::http::StatusCode::CONFLICT,
                    error: format!("app {name:?} already exists"),
                    field: Some("name".to_owned()),
                });
            }
            let now = crate::clock::now_ms();
            d.apps.insert(
                name.clone(),
                crate::state::model::AppRecord {
                    host: host_id.clone(),
                    spec: spec.clone(),
                    created_ms: now,
                    updated_ms: now,
                    last_restart_request: None,
                    sealed_secret: None,
                },
            );
            let generation = bump(d, &host_id);
            let msg = format!("app {name} created on {host_id}");
            self.log(d, EventLevel::Info, Some(&host_id), Some(&name), msg);
            Ok((host_id, generation))
        })?;
        self.persist_now();
        self.change(&host_id, generation, ChangeKind::Upsert(spec));
        self.emit_app(&name);
        self.emit_host(&host_id);
        self.app(&name).ok_or_else(|| ApiError::unknown_app(&name))
    }

    /// Replaces an app's spec through `f` (which may refuse); sends the upsert.
    pub fn update_app(
        &self,
        name: &str,
        what: &str,
        f: impl FnOnce(&mut FleetData, &mut AppSpec) -> Result<bool, ApiError>,
    ) -> Result<AppView, ApiError> {
        let changed = self.write(|d| {
            let mut spec = d
                .apps
                .get(name)
                .map(|a| a.spec.clone())
                .ok_or_else(|| ApiError::unknown_app(name))?;
            if !f(d, &mut spec)? {
                return Ok(None);
            }
            let host = {
                let Some(a) = d.apps.get_mut(name) else {
                    return Err(ApiError::unknown_app(name));
                };
                a.spec = spec.clone();
                a.updated_ms = crate::clock::now_ms();
                a.host.clone()
            };
            let generation = bump(d, &host);
            self.log(
                d,
                EventLevel::Info,
                Some(&host),
                Some(name),
                format!("app {name}: {what}"),
            );
            Ok(Some((host, generation, spec)))
        })?;
        if let Some((host, generation, spec)) = changed {
            self.persist_now();
            self.change(&host, generation, ChangeKind::Upsert(spec));
            self.emit_app(name);
        }
        self.app(name).ok_or_else(|| ApiError::unknown_app(name))
    }

    /// Sends again every app whose image names registry `registry` (its login changed).
    pub fn resend_registry_apps(&self, registry: &str) {
        let changed: Vec<(String, u64, AppSpec)> = self.write(|d| {
            let names: Vec<String> = d
                .apps
                .iter()
                .filter(|(_, a)| {
                    a.spec.image.as_deref().map(odac_protocol::registry_host) == Some(registry)
                })
                .map(|(n, _)| n.clone())
                .collect();
            names
                .into_iter()
                .filter_map(|n| {
                    let a = d.apps.get(&n)?;
                    let (host, spec) = (a.host.clone(), a.spec.clone());
                    let generation = bump(d, &host);
                    Some((host, generation, spec))
                })
                .collect()
        });
        if !changed.is_empty() {
            self.persist_now();
        }
        for (host, generation, spec) in changed {
            self.change(&host, generation, ChangeKind::Upsert(spec));
        }
    }

    /// Sets or clears an app's GPU request.
    pub fn set_gpu(&self, name: &str, gpu: Option<GpuRequest>) -> Result<AppView, ApiError> {
        let what = match &gpu {
            Some(g) => format!(
                "gpu request set to {}",
                serde_json::to_string(g).unwrap_or_default()
            ),
            None => "gpu request removed".to_owned(),
        };
        self.update_app(name, &what, |_, spec| {
            spec.gpu = gpu;
            Ok(true)
        })
    }

    /// Bumps an app's restart token. A `request_id` equal to that of the app's previous
    /// restart changes nothing: a client may retry a request whose answer it lost.
    pub fn restart(&self, name: &str, request_id: Option<&str>) -> Result<AppView, ApiError> {
        self.update_app(name, "restart requested", |d, spec| {
            if let Some(id) = request_id {
                let Some(a) = d.apps.get_mut(name) else {
                    return Err(ApiError::unknown_app(name));
                };
                if a.last_restart_request.as_deref() == Some(id) {
                    return Ok(false);
                }
                a.last_restart_request = Some(id.to_owned());
            }
            d.restarts += 1;
            spec.restart_token = Some(format!(
                "{}-{}",
                crate::clock::rfc3339(crate::clock::now_ms()),
                d.restarts
            ));
            Ok(true)
        })
    }

    /// Deletes an app.
    pub fn delete_app(&self, name: &str) -> Result<(), ApiError> {
        let (host, generation) = self.write(|d| {
            let a = d
                .apps
                .remove(name)
                .ok_or_else(|| ApiError::unknown_app(name))?;
            if let Some(h) = d.hosts.get_mut(&a.host) {
                h.statuses.remove(name);
            }
            let generation = bump(d, &a.host);
            self.log(
                d,
                EventLevel::Info,
                Some(&a.host),
                Some(name),
                format!("app {name} removed"),
            );
            Ok::<_, ApiError>((a.host, generation))
        })?;
        self.persist_now();
        self.change(&host, generation, ChangeKind::Delete(name.to_owned()));
        self.emit("app_deleted", serde_json::json!({ "name": name }));
        self.emit_host(&host);
        Ok(())
    }

    // ---- enrollment ---------------------------------------------------------------------

    /// Adds a one-time enrollment code.
    pub fn add_enroll_code(&self, code: &str) {
        self.write(|d| {
            d.enroll_codes.push(Secret {
                sha256: hash_secret(code),
                created_ms: crate::clock::now_ms(),
                agent_id: None,
            });
        });
        self.persist_now();
    }

    /// Trades a one-time code for a new agent token: `Ok(None)` if the code is unknown or
    /// used. With `agent_id` (checked by the caller) the token is bound to that id at once;
    /// an id bound to another credential is refused before the code is spent.
    pub fn redeem(&self, code: &str, agent_id: Option<&str>) -> Result<Option<String>, Refusal> {
        let h = hash_secret(code);
        let token = self.write(|d| {
            let Some(pos) = d.enroll_codes.iter().position(|s| s.sha256 == h) else {
                return Ok(None);
            };
            let token = format!("odac_{}", uuid::Uuid::new_v4().simple());
            let sha256 = hash_secret(&token);
            if let Some(id) = agent_id {
                crate::state::identity::bind_enrolled(d, &sha256, id)?;
            }
            d.enroll_codes.remove(pos);
            d.enrolled_tokens.push(Secret {
                sha256,
                created_ms: crate::clock::now_ms(),
                agent_id: agent_id.map(str::to_owned),
            });
            self.log(
                d,
                EventLevel::Info,
                agent_id,
                None,
                "an agent enrolled".to_owned(),
            );
            Ok(Some(token))
        })?;
        if token.is_some() {
            self.persist_now();
        }
        Ok(token)
    }
}

fn bump(d: &mut FleetData, host: &str) -> u64 {
    match d.hosts.get_mut(host) {
        Some(h) => {
            h.generation += 1;
            h.generation
        }
        None => 0,
    }
}

fn apps_of(d: &FleetData, host: &str) -> Vec<String> {
    d.apps
        .iter()
        .filter(|(_, a)| a.host == host)
        .map(|(n, _)| n.clone())
        .collect()
}

/// A host by id, or by host name when exactly one host has it.
fn resolve_host(d: &FleetData, key: &str) -> Result<String, ApiError> {
    if d.hosts.contains_key(key) {
        return Ok(key.to_owned());
    }
    let named: Vec<&String> = d
        .hosts
        .values()
        .filter(|h| h.hostname == key)
        .map(|h| &h.id)
        .collect();
    match named.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(ApiError::bad_request(
            "host",
            format!("unknown host {key:?}"),
        )),
        many => Err(ApiError::bad_request(
            "host",
            format!("{} hosts are named {key:?}: give the host id", many.len()),
        )),
    }
}
