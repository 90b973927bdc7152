//! [`FakeEngine`]: an in-memory [`ContainerEngine`] for tests of the app manager and the
//! inventory. It records every call, fails on demand ([`FakeEngine::fail_next`],
//! [`FakeEngine::set_unavailable`]) and, like a real engine, checks devices
//! at **start**, not at create: a device request for a driver it lacks is refused with
//! `could not select device driver ...`, a CDI device it does not know with
//! `CDI device injection failed: unresolvable CDI devices ...`, and a device node it was told
//! is missing with `error gathering device information while adding custom device ...`.
//! Builds succeed (the image appears, labelled, with the next `created` tick) unless a
//! failure is queued for [`Op::BuildImage`]. Pulls take images from an in-memory registry
//! ([`FakeEngine::publish`]): a reference it does not hold fails with the registry's
//! `manifest unknown`, one published with credentials needs them.
//!
//! `mod.rs` holds the state and the knobs tests turn; [`ops`] implements [`ContainerEngine`]
//! on it, [`images`] removes images, [`devices`] refuses device requests as a real engine does, [`calls`] is the record,
//! [`exec`] runs an echoing exec.

mod calls;
mod devices;
mod events;
mod exec;
mod images;
mod ops;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

pub use calls::{EngineCall, Op};

use super::capabilities::EngineCapabilities;
use super::error::EngineError;
use super::types::{
    ContainerDetails, ContainerHealth, ContainerSpec, ContainerState, ContainerSummary,
    ImageSummary,
};
use crate::lock::lock;

#[derive(Debug)]
struct FakeContainer {
    spec: ContainerSpec,
    details: ContainerDetails,
    logs: String,
}

#[derive(Debug, Default)]
struct State {
    capabilities: EngineCapabilities,
    images: BTreeSet<String>,
    /// Built images by id.
    built: BTreeMap<String, ImageSummary>,
    containers: BTreeMap<String, FakeContainer>,
    volumes: BTreeMap<String, BTreeMap<String, String>>,
    calls: Vec<EngineCall>,
    failures: HashMap<Op, VecDeque<EngineError>>,
    unavailable: bool,
    device_drivers: BTreeSet<String>,
    missing_devices: BTreeSet<String>,
    next_id: u64,
    clock: u64,
    /// The fake registry: reference → (digest, required user/password).
    registry: BTreeMap<String, (String, Option<(String, String)>)>,
    /// Repo digests of pulled images, by reference.
    digests: BTreeMap<String, String>,
    /// What `data_root` answers (`None`: the engine names none, so pulls are not prechecked).
    data_root: Option<String>,
    /// Pulls report one progress line, then never another nor an end (a stalled registry).
    stall_pulls: bool,
    /// Environment of images added with [`FakeEngine::add_image_with_env`], by reference.
    image_env: BTreeMap<String, Vec<String>>,
    /// Sizes set with [`FakeEngine::set_image_size`], by reference.
    image_sizes: BTreeMap<String, u64>,
    /// What execs share with the test (resizes, exit code).
    exec: std::sync::Arc<Mutex<exec::ExecRecord>>,
}

/// An in-memory container engine; see the module documentation.
#[derive(Debug, Default)]
pub struct FakeEngine {
    state: Mutex<State>,
    events: Mutex<events::Hub>,
}

impl FakeEngine {
    /// An engine like this project's machine: reachable Docker 20.10 (API 1.41), runtime
    /// `runc`, no CDI, no device drivers; no images, containers or volumes.
    pub fn new() -> Self {
        let info = serde_json::json!({
            "ServerVersion": "20.10.24+dfsg1",
            "Runtimes": {"runc": {"path": "runc"}},
            "DefaultRuntime": "runc",
        });
        let engine = Self::default();
        engine.lock().capabilities = EngineCapabilities::from_info_json(&info, Some("1.41".into()));
        engine
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Replace the capabilities the fake reports (and honours: CDI devices are resolved
    /// against `cdi_devices` when `cdi_enabled()`).
    pub fn set_capabilities(&self, caps: EngineCapabilities) {
        self.lock().capabilities = caps;
    }

    /// Register device drivers (e.g. `nvidia`) so device requests naming them start.
    pub fn add_device_driver(&self, driver: &str) {
        self.lock().device_drivers.insert(driver.to_owned());
    }

    /// Mark a host device path as missing: starting a container mapping it fails.
    pub fn mark_device_missing(&self, host_path: &str) {
        self.lock().missing_devices.insert(host_path.to_owned());
    }

    /// Mark a host device path as present again (the cause of a refusal removed).
    pub fn mark_device_present(&self, host_path: &str) {
        self.lock().missing_devices.remove(host_path);
    }

    /// Add an image as if it had been imported.
    pub fn add_image(&self, image: &str) {
        self.lock().images.insert(image.to_owned());
    }

    /// Add an image whose config sets `env` (`KEY=VALUE`): `image_info` reports it and
    /// containers of the image see it before their own.
    pub fn add_image_with_env(&self, image: &str, env: &[&str]) {
        let mut state = self.lock();
        state.images.insert(image.to_owned());
        let env = env.iter().map(|e| (*e).to_owned()).collect();
        state.image_env.insert(image.to_owned(), env);
    }

    /// A container's environment: the image's, then the spec's.
    fn process_env(state: &State, spec: &ContainerSpec) -> Vec<String> {
        let image = state
            .image_env
            .get(&spec.image)
            .cloned()
            .unwrap_or_default();
        let own = spec.env.iter().map(|(k, v)| format!("{k}={v}"));
        image.into_iter().chain(own).collect()
    }

    /// Put `image` in the fake registry with `digest` (`sha256:…`); with `credentials`
    /// (user, password) a pull needs them. Publishing again replaces the digest.
    pub fn publish(&self, image: &str, digest: &str, credentials: Option<(&str, &str)>) {
        self.lock().registry.insert(
            image.to_owned(),
            (
                digest.to_owned(),
                credentials.map(|(u, p)| (u.to_owned(), p.to_owned())),
            ),
        );
    }

    /// Report `bytes` as the size of image `reference` (default 5 MB).
    pub fn set_image_size(&self, reference: &str, bytes: u64) {
        self.lock().image_sizes.insert(reference.to_owned(), bytes);
    }

    /// The image references on the host (pulled, added or built).
    pub fn image_refs(&self) -> Vec<String> {
        self.lock().images.iter().cloned().collect()
    }

    /// Name a data root, as a real engine does: pulls are then prechecked against the
    /// registry's manifest (its size bound) and the free space there.
    pub fn set_data_root(&self, root: Option<&str>) {
        self.lock().data_root = root.map(str::to_owned);
    }

    /// Make every pull stall after its first progress line, as behind a stalled registry.
    pub fn stall_pulls(&self, stall: bool) {
        self.lock().stall_pulls = stall;
    }

    /// Make the next call of `op` fail with `err` (queued: several calls queue several
    /// failures). The call is still recorded.
    pub fn fail_next(&self, op: Op, err: EngineError) {
        self.lock().failures.entry(op).or_default().push_back(err);
    }

    /// Make every call fail with [`EngineError::Unavailable`] (capabilities: unreachable).
    pub fn set_unavailable(&self, unavailable: bool) {
        self.lock().unavailable = unavailable;
        if unavailable {
            self.break_events();
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<EngineCall> {
        self.lock().calls.clone()
    }

    /// The calls of one operation.
    pub fn calls_of(&self, op: Op) -> Vec<EngineCall> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.op() == op)
            .cloned()
            .collect()
    }

    /// Images made by `build_image` and still present.
    pub fn built_images(&self) -> Vec<ImageSummary> {
        self.lock().built.values().cloned().collect()
    }

    /// Forget the recorded calls.
    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    /// The spec a container was created with.
    pub fn spec_of(&self, id: &str) -> Option<ContainerSpec> {
        self.lock().containers.get(id).map(|c| c.spec.clone())
    }

    /// Ids of all containers, in creation order of their ids.
    pub fn container_ids(&self) -> Vec<String> {
        self.lock().containers.keys().cloned().collect()
    }

    /// Names and labels of the volumes.
    pub fn volumes(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.lock().volumes.clone()
    }

    /// Simulate the container's process exiting with `code`.
    /// The engine emits `die`.
    pub fn exit_container(&self, id: &str, code: i64) {
        self.exit_quietly(id, code, false);
        if let Some(labels) = self.labels_of(id) {
            self.emit_for(super::EventKind::Die, id, events::with_exit(labels, code));
        }
    }

    fn exit_quietly(&self, id: &str, code: i64, oom: bool) {
        let mut state = self.lock();
        state.clock += 1;
        let now = format!("2026-01-01T00:00:{:02}Z", state.clock % 60);
        if let Some(c) = state.containers.get_mut(id) {
            c.details.running = false;
            c.details.status = ContainerState::Exited;
            c.details.exit_code = Some(code);
            c.details.finished_at = Some(now);
            c.details.oom_killed = oom;
        }
    }

    /// Simulate the kernel's OOM killer ending the container's process (exit 137); the
    /// engine emits `oom`, then `die`.
    pub fn oom_kill(&self, id: &str) {
        self.exit_quietly(id, 137, true);
        if let Some(labels) = self.labels_of(id) {
            self.emit_for(super::EventKind::Oom, id, labels.clone());
            self.emit_for(super::EventKind::Die, id, events::with_exit(labels, 137));
        }
    }

    /// Set what the container's health check reports; the engine emits `health_status`
    /// when the verdict changed.
    pub fn set_health(&self, id: &str, health: Option<ContainerHealth>) {
        let changed = self.lock().containers.get_mut(id).and_then(|c| {
            let before = c.details.health.as_ref().map(|h| h.status.clone());
            c.details.health = health;
            let after = c.details.health.as_ref().map(|h| h.status.clone());
            (before != after).then(|| (after, c.details.labels.clone()))
        });
        if let Some((Some(verdict), labels)) = changed {
            self.emit_for(super::EventKind::Health(verdict), id, labels);
        }
    }

    /// Change a container's state as the engine would without emitting anything (an
    /// event lost while the stream was down).
    pub fn exit_silently(&self, id: &str, code: i64) {
        self.exit_quietly(id, code, false);
    }

    fn labels_of(&self, id: &str) -> Option<BTreeMap<String, String>> {
        self.lock()
            .containers
            .get(id)
            .map(|c| c.details.labels.clone())
    }

    /// Append text to a container's logs.
    pub fn push_log(&self, id: &str, text: &str) {
        if let Some(c) = self.lock().containers.get_mut(id) {
            c.logs.push_str(text);
        }
    }

    /// Record the call, then fail it if the engine is down or a failure was queued.
    fn enter(&self, call: EngineCall) -> Result<MutexGuard<'_, State>, EngineError> {
        let mut state = self.lock();
        let op = call.op();
        state.calls.push(call);
        if state.unavailable {
            return Err(EngineError::Unavailable(
                "fake engine: connection refused".into(),
            ));
        }
        if let Some(err) = state.failures.get_mut(&op).and_then(VecDeque::pop_front) {
            return Err(err);
        }
        Ok(state)
    }

    fn container<'a>(
        state: &'a mut State,
        id_or_name: &str,
    ) -> Result<&'a mut FakeContainer, EngineError> {
        let key = state
            .containers
            .iter()
            .find(|(id, c)| *id == id_or_name || c.details.name == id_or_name)
            .map(|(id, _)| id.clone())
            .ok_or_else(|| EngineError::NotFound(format!("No such container: {id_or_name}")))?;
        state
            .containers
            .get_mut(&key)
            .ok_or_else(|| EngineError::NotFound(format!("No such container: {id_or_name}")))
    }
}

/// A container as the engine's listing shows it, with the host binds the listing reports.
fn summary(c: &FakeContainer, binds: Vec<String>) -> ContainerSummary {
    ContainerSummary {
        id: c.details.id.clone(),
        name: c.details.name.clone(),
        image: c.details.image.clone(),
        labels: c.details.labels.clone(),
        state: c.details.status,
        binds,
    }
}

/// A stable fake image id for a reference and its digest.
pub(super) fn fake_image_id(image: &str, digest: Option<&String>) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (image, digest).hash(&mut h);
    format!("sha256:{:064x}", h.finish())
}

/// The image id `image` names: a reference on the host, or (as the engine takes) the id of
/// one. `None` when no image on the host is meant.
fn resolve_image(state: &State, image: &str) -> Option<String> {
    state
        .images
        .iter()
        .map(|r| fake_image_id(r, state.digests.get(r)))
        .find(|id| id == image)
        .or_else(|| {
            state
                .images
                .contains(image)
                .then(|| fake_image_id(image, state.digests.get(image)))
        })
}

/// The paths in a tar archive (an unreadable archive lists what could be read).
pub(super) fn tar_paths(tar_bytes: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(tar_bytes);
    let Ok(entries) = archive.entries() else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.path().ok().map(|p| p.to_string_lossy().into_owned()))
        .collect()
}
