//! [`AppManager`]: the handle the uplink (and `odac-agent apply`) drives. Cheap to clone;
//! all clones share one state. Desired-state changes are validated as a whole, persisted
//! atomically before the call returns, then reconciled by the loop ([`AppManager::run`]) or
//! by [`AppManager::reconcile_once`]. Every status change is broadcast and persisted in the
//! state directory for `odac-agent status`. Diagnostic events (build progress, GPU
//! fallbacks) go to [`AppManager::subscribe_events`].
//!
//! A change whose generation is not above the applied one is stale ([`Applied::Stale`]):
//! nothing changes. A snapshot is authoritative and applied whatever its generation. When an
//! app leaves the desired state, its last status is `removed`, sent once its container is
//! gone ([`super::reconcile::removal`]); no status of it is published after that.
//!
//! The folder is the handle and what drives it: this module, its loop (`reconcile_loop.rs`),
//! engine outages (`outage.rs`) and the engine's event stream that wakes the loop ([`watch`]).
//!
//! Engine outage: a pass that finds the engine unreachable leaves every app at its last
//! status with `last_error` starting `engine_unavailable: `, and the loop retries with an
//! exponential backoff (1 s to 30 s, jittered) until the engine answers again. An engine
//! refusal of one app's request (a 4xx, or a 5xx while the engine still answers its ping) is
//! no outage: that app alone fails, with its own error and retry, and the pass goes on.

use odac_host::lock::lock;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use odac_protocol::{AppSpec, AppStatus, DesiredState};
use tokio::sync::{Notify, broadcast};

use self::watch::Watch;
use super::error::AppMgrError;
use super::gpu::facts::Facts;
use super::gpu::host::HostSource;
use super::images::build::Builds;
use super::images::pull::Pulls;
use super::images::registry_auth::Credentials;
use super::reconcile::reconciler::{PassInput, Reconciler};
use super::reconcile::removal::Removals;
use super::settings::AppManagerConfig;
use super::state::events::{AppEvent, EventTx};
use super::state::store::Store;
use odac_host::engine::ContainerEngine;
use odac_host::inventory::Assessment;

/// Capacity of the status broadcast; a subscriber that lags this far behind misses changes
/// (it can always read [`AppManager::statuses`]). The channel allocates every slot up front,
/// so a slot holds an `Arc` (a pointer), not a whole status (about 0.8 KiB: 200 KiB resident
/// for the life of the agent).
const STATUS_CAPACITY: usize = 256;

/// The app manager; see the module documentation.
#[derive(Clone)]
pub struct AppManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AppManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppManager")
            .field("instance", &self.inner.config.instance)
            .field("state_dir", &self.inner.config.state_dir)
            .field("host", &self.inner.host)
            .finish_non_exhaustive()
    }
}

/// What a desired-state change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Persisted and installed; the loop reconciles it.
    Changed,
    /// An `upsert` or `delete` whose generation is not above the applied one: nothing
    /// changed (the uplink still acks it).
    Stale {
        /// The generation applied.
        current: u64,
    },
}

use outage::Outage;

struct Inner {
    config: AppManagerConfig,
    engine: Arc<dyn ContainerEngine>,
    host: HostSource,
    store: Store,
    desired: Mutex<Option<DesiredState>>,
    statuses: Mutex<BTreeMap<String, AppStatus>>,
    outage: Mutex<Option<Outage>>,
    reconciler: tokio::sync::Mutex<Reconciler>,
    facts: Facts,
    /// Status changes, to [`AppManager::subscribe`]rs.
    status_changes: broadcast::Sender<Arc<AppStatus>>,
    /// Diagnostic events (build progress, GPU fallbacks).
    events: EventTx,
    builds: Builds,
    wake: Arc<Notify>,
    pulls: Pulls,
    problems: Mutex<Vec<String>>,
    removals: Removals,
    /// The engine's event stream: what it woke, whether it is up.
    watch: Watch,
}

impl AppManager {
    /// Open the manager: create the state directory and load the persisted desired state and
    /// statuses. Without `config.owner`, the owner recorded on containers is the agent id in
    /// `<state_dir>/agent_id` (created if missing). A corrupt state file is moved aside, logged and listed in
    /// [`AppManager::problems`]; the manager goes on empty. Host facts are read under
    /// `host_root` (`/` in production).
    pub fn open(
        config: AppManagerConfig,
        engine: Arc<dyn ContainerEngine>,
        host_root: PathBuf,
    ) -> Result<AppManager, AppMgrError> {
        Self::open_with_host(config, engine, HostSource::Root(host_root))
    }

    /// [`AppManager::open`] with host facts from any [`HostSource`].
    pub fn open_with_host(
        config: AppManagerConfig,
        engine: Arc<dyn ContainerEngine>,
        host: HostSource,
    ) -> Result<AppManager, AppMgrError> {
        let store = Store::open(&config.state_dir)?;
        let mut config = config;
        if config.owner.is_empty() {
            config.owner = crate::identity::load_or_create(&config.state_dir)?;
        }
        let mut problems = Vec::new();
        let desired = store.load_desired().unwrap_or_else(|e| {
            tracing::error!(error = %e, "desired state not loaded; starting with none");
            problems.push(e.to_string());
            None
        });
        let statuses: BTreeMap<String, AppStatus> = store
            .load_statuses()
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "statuses not loaded");
                problems.push(e.to_string());
                Vec::new()
            })
            .into_iter()
            .filter(|s| desired.as_ref().is_some_and(|d| d.app(&s.name).is_some()))
            .map(|s| (s.name.clone(), s))
            .collect();
        let (status_changes, _) = broadcast::channel(STATUS_CAPACITY);
        let events = EventTx::default();
        let wake = Arc::new(Notify::new());
        let builds = Builds::new(
            Arc::clone(&engine),
            events.clone(),
            Arc::clone(&wake),
            config.state_dir.clone(),
            config.build.max_parallel,
        );
        builds.clear_leftovers();
        let pulls = Pulls::new(
            Arc::clone(&engine),
            events.clone(),
            Arc::clone(&wake),
            Credentials::new(Some(config.docker_config.clone())),
            config.pull_disk_reserve_mb,
            std::time::Duration::from_secs(config.pull_stall_secs),
        );
        Ok(AppManager {
            inner: Arc::new(Inner {
                config,
                engine,
                host,
                store,
                desired: Mutex::new(desired),
                statuses: Mutex::new(statuses),
                outage: Mutex::new(None),
                reconciler: tokio::sync::Mutex::new(Reconciler::default()),
                facts: Facts::default(),
                status_changes,
                events,
                builds,
                wake,
                pulls,
                problems: Mutex::new(problems),
                removals: Removals::default(),
                watch: Watch::default(),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AppManagerConfig {
        &self.inner.config
    }

    /// The registry credentials pulls use; the control plane's are set through it.
    pub fn registry_credentials(&self) -> &Credentials {
        self.inner.pulls.credentials()
    }

    /// Problems met while opening (a corrupt state file moved aside, ...).
    pub fn problems(&self) -> Vec<String> {
        lock(&self.inner.problems).clone()
    }

    /// Replace the desired state. Validated as a whole (on error the previous state stays),
    /// persisted atomically before this returns, then reconciled. A snapshot is
    /// authoritative: one whose generation is lower than the applied one (a control plane
    /// that lost its counter, a host back under a new id) is applied too, and logged.
    pub async fn set_desired(&self, state: DesiredState) -> Result<Applied, AppMgrError> {
        state.validate()?;
        self.commit(|current| {
            if let Some(cur) = current
                && state.generation < cur.generation
            {
                tracing::warn!(
                    generation = state.generation,
                    applied = cur.generation,
                    "applying a desired-state snapshot older than the applied one: the control plane is authoritative"
                );
            }
            Ok(Some(state))
        })
    }

    /// Add or replace one app, moving to `generation`. Stale when `generation` is not above
    /// the applied one: nothing changes ([`Applied::Stale`]).
    pub async fn upsert(&self, generation: u64, spec: AppSpec) -> Result<Applied, AppMgrError> {
        spec.validate()?;
        self.commit(|current| {
            if is_stale(current, generation) {
                return Ok(None);
            }
            let mut next = current.cloned().unwrap_or_default();
            next.generation = generation;
            match next.apps.iter_mut().find(|a| a.name == spec.name) {
                Some(slot) => *slot = spec,
                None => next.apps.push(spec),
            }
            next.validate()?;
            Ok(Some(next))
        })
    }

    /// Remove one app (unknown names are fine), moving to `generation`. Stale when
    /// `generation` is not above the applied one: nothing changes ([`Applied::Stale`]).
    pub async fn delete(&self, generation: u64, name: &str) -> Result<Applied, AppMgrError> {
        self.commit(|current| {
            if is_stale(current, generation) {
                return Ok(None);
            }
            let mut next = current.cloned().unwrap_or_default();
            next.generation = generation;
            next.apps.retain(|a| a.name != name);
            Ok(Some(next))
        })
    }

    /// Compute the next state from the current one (`None`: stale, keep it), persist it,
    /// install it, note the apps it removes, wake the loop.
    fn commit(
        &self,
        next: impl FnOnce(Option<&DesiredState>) -> Result<Option<DesiredState>, AppMgrError>,
    ) -> Result<Applied, AppMgrError> {
        let mut desired = lock(&self.inner.desired);
        let Some(state) = next(desired.as_ref())? else {
            let current = d_generation(desired.as_ref());
            return Ok(Applied::Stale { current });
        };
        self.inner.store.save_desired(&state)?;
        let names: Vec<String> = state.apps.iter().map(|a| a.name.clone()).collect();
        let before: Vec<String> = desired
            .as_ref()
            .map(|d| d.apps.iter().map(|a| a.name.clone()).collect())
            .unwrap_or_default();
        let generation = state.generation;
        *desired = Some(state);
        drop(desired);
        self.inner.removals.left(&before, &names, generation);
        lock(&self.inner.statuses).retain(|name, _| names.contains(name));
        self.inner.wake.notify_one();
        Ok(Applied::Changed)
    }

    /// The generation of the desired state applied, if any.
    pub fn generation(&self) -> Option<u64> {
        lock(&self.inner.desired).as_ref().map(|d| d.generation)
    }

    /// The desired state applied, if any.
    pub fn desired(&self) -> Option<DesiredState> {
        lock(&self.inner.desired).clone()
    }

    /// Host and engine facts just read elsewhere (the agent's inventory loop): quiet passes
    /// use them instead of reading the same again. Facts of an unreachable engine are ignored.
    pub fn offer_facts(&self, assessment: Assessment) {
        self.inner.facts.offer(assessment);
    }

    /// Hands the app manager a telemetry reading of free VRAM in MiB per GPU id (the PCI
    /// address): for 30 s, `gpu.min_vram_mib` is checked against it instead of the total.
    pub fn offer_free_vram(&self, free: std::collections::BTreeMap<String, u64>) {
        self.inner.facts.offer_free_vram(free);
    }

    /// The GPUs the health watch finds unhealthy now (id → error): every later pass gives
    /// them to no new container (`gpu_unhealthy`).
    pub fn offer_unhealthy_gpus(&self, unhealthy: std::collections::BTreeMap<String, String>) {
        self.inner.facts.offer_unhealthy(unhealthy);
    }

    /// The latest status of every desired app, sorted by name.
    pub fn statuses(&self) -> Vec<AppStatus> {
        lock(&self.inner.statuses).values().cloned().collect()
    }

    /// Every status change from now on (diagnostic events are
    /// [`AppManager::subscribe_events`]).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<AppStatus>> {
        self.inner.status_changes.subscribe()
    }

    /// Diagnostic events from now on: build progress and failures, GPU fallbacks.
    pub fn subscribe_events(&self) -> broadcast::Receiver<AppEvent> {
        self.inner.events.subscribe()
    }

    /// Why the engine is not reachable, while it is not.
    pub fn engine_problem(&self) -> Option<String> {
        lock(&self.inner.outage).as_ref().map(|o| o.message.clone())
    }

    /// Run one reconcile pass now; the resulting statuses.
    pub async fn reconcile_once(&self) -> Vec<AppStatus> {
        self.reconcile(false).await
    }

    /// One pass; `quiet` lets it reuse recent host and engine facts (a plain poll tick).
    async fn reconcile(&self, quiet: bool) -> Vec<AppStatus> {
        let mut reconciler = self.inner.reconciler.lock().await;
        let desired = lock(&self.inner.desired).clone();
        let input = PassInput {
            config: &self.inner.config,
            engine: self.inner.engine.as_ref(),
            host: &self.inner.host,
            desired: desired.as_ref(),
            builds: &self.inner.builds,
            pulls: &self.inner.pulls,
            events: &self.inner.events,
            facts: &self.inner.facts,
            quiet,
            fresh: self.inner.watch.take_dirty(),
            events_live: self.inner.watch.live(),
        };
        match reconciler.pass(&input).await {
            Ok(statuses) => {
                if lock(&self.inner.outage).take().is_some() {
                    tracing::info!("container engine reachable again");
                }
                self.publish(statuses);
                let removed = self
                    .inner
                    .removals
                    .settle(
                        self.inner.engine.as_ref(),
                        &self.inner.config.instance,
                        &self.inner.config.owner,
                    )
                    .await;
                for status in removed {
                    // No subscriber is fine.
                    let _ = self.inner.status_changes.send(Arc::new(status));
                }
            }
            Err(e) => self.engine_down(desired.as_ref(), &e.to_string()),
        }
        self.statuses()
    }

    /// Install new statuses; broadcast and persist the ones that changed. Statuses of apps
    /// no longer desired (a pass that began before the change that removed them) are dropped.
    fn publish(&self, statuses: Vec<AppStatus>) {
        let desired: Vec<String> = lock(&self.inner.desired)
            .as_ref()
            .map(|d| d.apps.iter().map(|a| a.name.clone()).collect())
            .unwrap_or_default();
        let statuses: Vec<AppStatus> = statuses
            .into_iter()
            .filter(|s| desired.contains(&s.name) && !self.inner.removals.contains(&s.name))
            .collect();
        let mut current = lock(&self.inner.statuses);
        let mut changed = Vec::new();
        let mut next = BTreeMap::new();
        for status in statuses {
            if current.get(&status.name) != Some(&status) {
                changed.push(status.clone());
            }
            next.insert(status.name.clone(), status);
        }
        let removed = current.keys().any(|k| !next.contains_key(k));
        *current = next;
        let all: Vec<AppStatus> = current.values().cloned().collect();
        drop(current);
        if changed.is_empty() && !removed {
            return;
        }
        if let Err(e) = self.inner.store.save_statuses(&all) {
            tracing::warn!(error = %e, "could not persist statuses");
        }
        for status in changed {
            // No subscriber is fine.
            let _ = self.inner.status_changes.send(Arc::new(status));
        }
    }
}

/// Whether a change to `generation` is stale: not above the applied one (logged).
fn is_stale(current: Option<&DesiredState>, generation: u64) -> bool {
    let Some(c) = current.filter(|c| generation <= c.generation) else {
        return false;
    };
    tracing::info!(
        generation,
        applied = c.generation,
        "stale desired-state change (generation not above the applied one): nothing changed"
    );
    true
}

fn d_generation(desired: Option<&DesiredState>) -> u64 {
    desired.map_or(0, |d| d.generation)
}

mod outage;
mod reconcile_loop;
#[cfg(test)]
mod tests;
pub mod watch;
