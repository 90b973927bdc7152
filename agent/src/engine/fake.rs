//! [`FakeEngine`]: an in-memory [`ContainerEngine`] for tests of the app manager and the
//! inventory. It records every call, fails on demand ([`FakeEngine::fail_next`],
//! [`FakeEngine::set_unavailable`]) and, like a real engine (DESIGN.md §4), checks devices
//! at **start**, not at create: a device request for a driver it lacks is refused with
//! `could not select device driver ...`, a CDI device it does not know with
//! `CDI device injection failed: unresolvable CDI devices ...`, and a device node it was told
//! is missing with `error gathering device information while adding custom device ...`.
//! Builds succeed (the image appears, labelled, with the next `created` tick) unless a
//! failure is queued for [`Op::BuildImage`]. Pulls take images from an in-memory registry
//! ([`FakeEngine::publish`]): a reference it does not hold fails with the registry's
//! `manifest unknown`, one published with credentials needs them.

use crate::lock::lock;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;

use super::api::ContainerEngine;
use super::capabilities::EngineCapabilities;
use super::error::EngineError;
pub use super::fake_calls::{EngineCall, Op};
use super::pull::{ImageInfo, PullProgress, RegistryAuth};
use super::types::{
    BuildOutput, ContainerDetails, ContainerHealth, ContainerSpec, ContainerState,
    ContainerSummary, DeviceRequest, ImageSummary, label_matches,
};

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
}

/// An in-memory container engine; see the module documentation.
#[derive(Debug, Default)]
pub struct FakeEngine {
    state: Mutex<State>,
}

/// A stable fake image id for a reference and its digest.
fn fake_image_id(image: &str, digest: Option<&String>) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (image, digest).hash(&mut h);
    format!("sha256:{:064x}", h.finish())
}

/// Format capability sets as Go's `%v` does: `[[gpu]]`.
fn go_caps(caps: &[Vec<String>]) -> String {
    let sets: Vec<String> = caps
        .iter()
        .map(|set| format!("[{}]", set.join(" ")))
        .collect();
    format!("[{}]", sets.join(" "))
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

    /// Add an image as if it had been imported.
    pub fn add_image(&self, image: &str) {
        self.lock().images.insert(image.to_owned());
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

    /// Make the next call of `op` fail with `err` (queued: several calls queue several
    /// failures). The call is still recorded.
    pub fn fail_next(&self, op: Op, err: EngineError) {
        self.lock().failures.entry(op).or_default().push_back(err);
    }

    /// Make every call fail with [`EngineError::Unavailable`] (capabilities: unreachable).
    pub fn set_unavailable(&self, unavailable: bool) {
        self.lock().unavailable = unavailable;
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
    pub fn exit_container(&self, id: &str, code: i64) {
        let mut state = self.lock();
        state.clock += 1;
        let now = format!("2026-01-01T00:00:{:02}Z", state.clock % 60);
        if let Some(c) = state.containers.get_mut(id) {
            c.details.running = false;
            c.details.status = ContainerState::Exited;
            c.details.exit_code = Some(code);
            c.details.finished_at = Some(now);
        }
    }

    /// Simulate the kernel's OOM killer ending the container's process (exit 137).
    pub fn oom_kill(&self, id: &str) {
        self.exit_container(id, 137);
        if let Some(c) = self.lock().containers.get_mut(id) {
            c.details.oom_killed = true;
        }
    }

    /// Set what the container's health check reports.
    pub fn set_health(&self, id: &str, health: Option<ContainerHealth>) {
        if let Some(c) = self.lock().containers.get_mut(id) {
            c.details.health = health;
        }
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

/// The paths in a tar archive (an unreadable archive lists what could be read).
fn tar_paths(tar_bytes: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(tar_bytes);
    let Ok(entries) = archive.entries() else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.path().ok().map(|p| p.to_string_lossy().into_owned()))
        .collect()
}

/// What a real engine says when it cannot deliver this request (checked at start).
fn refuse_request(state: &State, request: &DeviceRequest) -> Option<EngineError> {
    if request.driver == "cdi" {
        if !state.capabilities.cdi_enabled() {
            return Some(EngineError::Rejected {
                status: 400,
                message: format!(
                    "could not select device driver \"cdi\" with capabilities: {}",
                    go_caps(&request.capabilities)
                ),
            });
        }
        let unknown: Vec<&str> = request
            .device_ids
            .iter()
            .filter(|id| !state.capabilities.cdi_devices.contains(id))
            .map(String::as_str)
            .collect();
        return (!unknown.is_empty()).then(|| EngineError::Rejected {
            status: 500,
            message: format!(
                "CDI device injection failed: unresolvable CDI devices {}",
                unknown.join(", ")
            ),
        });
    }
    (!state.device_drivers.contains(&request.driver)).then(|| EngineError::Rejected {
        status: 400,
        message: format!(
            "could not select device driver {:?} with capabilities: {}",
            request.driver,
            go_caps(&request.capabilities)
        ),
    })
}

#[async_trait]
impl ContainerEngine for FakeEngine {
    async fn capabilities(&self) -> EngineCapabilities {
        match self.enter(EngineCall::Capabilities) {
            Ok(state) => state.capabilities.clone(),
            Err(e) => EngineCapabilities::unreachable(e.to_string()),
        }
    }

    async fn image_exists(&self, image: &str) -> Result<bool, EngineError> {
        let state = self.enter(EngineCall::ImageExists(image.to_owned()))?;
        Ok(state.images.contains(image))
    }

    async fn import_image(
        &self,
        tag: &str,
        rootfs_tar: Vec<u8>,
        changes: &[String],
    ) -> Result<(), EngineError> {
        let mut state = self.enter(EngineCall::ImportImage {
            tag: tag.to_owned(),
            bytes: rootfs_tar.len(),
            changes: changes.to_vec(),
        })?;
        state.images.insert(tag.to_owned());
        Ok(())
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        let mut state = self.enter(EngineCall::Create(Box::new(spec.clone())))?;
        if !state.images.contains(&spec.image) {
            return Err(EngineError::NotFound(format!(
                "No such image: {}",
                spec.image
            )));
        }
        if let Some((id, _)) = state
            .containers
            .iter()
            .find(|(_, c)| c.details.name == spec.name)
        {
            return Err(EngineError::Conflict(format!(
                "Conflict. The container name \"/{}\" is already in use by container \"{id}\". You have to remove (or rename) that container to be able to reuse that name.",
                spec.name
            )));
        }
        state.next_id += 1;
        let id = format!("{:064x}", state.next_id);
        let details = ContainerDetails {
            id: id.clone(),
            name: spec.name.clone(),
            labels: spec.labels.clone(),
            image: spec.image.clone(),
            status: ContainerState::Created,
            exit_code: Some(0),
            device_requests: spec.device_requests.clone(),
            devices: spec.devices.clone(),
            group_add: spec.group_add.clone(),
            binds: spec
                .binds
                .iter()
                .map(|b| {
                    let mode = if b.read_only { ":ro" } else { "" };
                    format!("{}:{}{mode}", b.source, b.target)
                })
                .collect(),
            security_opt: spec.security_opt.clone(),
            pids_limit: spec.pids_limit,
            image_id: fake_image_id(&spec.image, state.digests.get(&spec.image)),
            ..ContainerDetails::default()
        };
        let container = FakeContainer {
            spec: spec.clone(),
            details,
            logs: String::new(),
        };
        state.containers.insert(id.clone(), container);
        Ok(id)
    }

    async fn start(&self, id: &str) -> Result<(), EngineError> {
        let mut guard = self.enter(EngineCall::Start(id.to_owned()))?;
        let state = &mut *guard;
        let spec = Self::container(state, id)?.spec.clone();
        let refusal = spec
            .devices
            .iter()
            .find(|d| state.missing_devices.contains(&d.host_path))
            .map(|d| EngineError::Rejected {
                status: 500,
                message: format!(
                    "error gathering device information while adding custom device {:?}: no such file or directory",
                    d.host_path
                ),
            })
            .or_else(|| spec.device_requests.iter().find_map(|r| refuse_request(state, r)));
        state.clock += 1;
        let now = format!("2026-01-01T00:00:{:02}Z", state.clock % 60);
        let container = Self::container(state, id)?;
        if let Some(err) = refusal {
            container.details.exit_code = Some(128);
            container.details.error = Some(err.engine_message());
            return Err(err);
        }
        if !container.details.running {
            container.details.running = true;
            container.details.status = ContainerState::Running;
            container.details.started_at = Some(now);
            container.details.error = None;
            container.details.oom_killed = false;
        }
        Ok(())
    }

    async fn stop(&self, id: &str, timeout: Duration) -> Result<(), EngineError> {
        let mut state = self.enter(EngineCall::Stop(id.to_owned(), timeout))?;
        let container = Self::container(&mut state, id)?;
        if container.details.running {
            container.details.running = false;
            container.details.status = ContainerState::Exited;
            container.details.exit_code = Some(137);
        }
        Ok(())
    }

    async fn remove(&self, id: &str, force: bool) -> Result<(), EngineError> {
        let mut state = self.enter(EngineCall::Remove(id.to_owned(), force))?;
        let container = Self::container(&mut state, id)?;
        if container.details.running && !force {
            return Err(EngineError::Conflict(format!(
                "You cannot remove a running container {}. Stop the container before attempting removal or force remove",
                container.details.id
            )));
        }
        let key = container.details.id.clone();
        state.containers.remove(&key);
        Ok(())
    }

    async fn inspect(&self, id: &str) -> Result<ContainerDetails, EngineError> {
        let mut state = self.enter(EngineCall::Inspect(id.to_owned()))?;
        Ok(Self::container(&mut state, id)?.details.clone())
    }

    async fn list_by_label(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        let state = self.enter(EngineCall::ListByLabel(label.to_owned()))?;
        Ok(state
            .containers
            .values()
            .filter(|c| label_matches(&c.details.labels, label))
            .map(|c| ContainerSummary {
                id: c.details.id.clone(),
                name: c.details.name.clone(),
                image: c.details.image.clone(),
                labels: c.details.labels.clone(),
                state: c.details.status,
                binds: Vec::new(),
            })
            .collect())
    }

    async fn list_all(&self) -> Result<Vec<ContainerSummary>, EngineError> {
        let state = self.enter(EngineCall::ListAll)?;
        Ok(state
            .containers
            .values()
            .map(|c| ContainerSummary {
                id: c.details.id.clone(),
                name: c.details.name.clone(),
                image: c.details.image.clone(),
                labels: c.details.labels.clone(),
                state: c.details.status,
                binds: c
                    .details
                    .binds
                    .iter()
                    .filter(|b| b.starts_with('/'))
                    .cloned()
                    .collect(),
            })
            .collect())
    }

    async fn ensure_volume(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        let mut state = self.enter(EngineCall::EnsureVolume(name.to_owned(), labels.clone()))?;
        state
            .volumes
            .entry(name.to_owned())
            .or_insert_with(|| labels.clone());
        Ok(())
    }

    async fn volume_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, EngineError> {
        let state = self.enter(EngineCall::InspectVolume(name.to_owned()))?;
        Ok(state.volumes.get(name).cloned())
    }

    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        let mut state = self.enter(EngineCall::RemoveVolume(name.to_owned()))?;
        state
            .volumes
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| EngineError::NotFound(format!("get {name}: no such volume")))
    }

    async fn build_image(
        &self,
        tag: &str,
        context_tar: Vec<u8>,
        dockerfile: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<BuildOutput, EngineError> {
        let files = tar_paths(&context_tar);
        let mut state = self.enter(EngineCall::BuildImage {
            tag: tag.to_owned(),
            files: files.clone(),
            dockerfile: dockerfile.to_owned(),
            labels: labels.clone(),
        })?;
        if !files.iter().any(|f| f == dockerfile) {
            return Err(EngineError::Rejected {
                status: 500,
                message: format!("Cannot locate specified Dockerfile: {dockerfile}"),
            });
        }
        state.clock += 1;
        let created = i64::try_from(state.clock).unwrap_or(i64::MAX);
        let id = format!("sha256:{:064x}", 0xb000_0000 + state.clock);
        // the tag moves to the new image
        for image in state.built.values_mut() {
            image.tags.retain(|t| t != tag);
        }
        state.built.insert(
            id.clone(),
            ImageSummary {
                id: id.clone(),
                tags: vec![tag.to_owned()],
                labels: labels.clone(),
                created,
            },
        );
        state.images.insert(tag.to_owned());
        Ok(BuildOutput {
            image_id: id,
            log_tail: format!("Step 1/1 : built by the fake engine\nSuccessfully tagged {tag}"),
        })
    }

    async fn list_images_by_label(&self, label: &str) -> Result<Vec<ImageSummary>, EngineError> {
        let state = self.enter(EngineCall::ListImagesByLabel(label.to_owned()))?;
        Ok(state
            .built
            .values()
            .filter(|i| label_matches(&i.labels, label))
            .cloned()
            .collect())
    }

    async fn remove_image(&self, image: &str, force: bool) -> Result<(), EngineError> {
        let mut state = self.enter(EngineCall::RemoveImage(image.to_owned(), force))?;
        let id = state
            .built
            .values()
            .find(|i| i.id == image || i.tags.iter().any(|t| t == image))
            .map(|i| i.id.clone());
        let tags: Vec<String> = match &id {
            Some(id) => state
                .built
                .get(id)
                .map(|i| i.tags.clone())
                .unwrap_or_default(),
            None if state.images.contains(image) => vec![image.to_owned()],
            None => return Err(EngineError::NotFound(format!("No such image: {image}"))),
        };
        let in_use = state
            .containers
            .values()
            .any(|c| tags.contains(&c.spec.image) || id.as_deref() == Some(c.spec.image.as_str()));
        if in_use && !force {
            return Err(EngineError::Conflict(format!(
                "conflict: unable to remove repository reference \"{image}\" (must force) - container is using its referenced image"
            )));
        }
        if let Some(id) = id {
            state.built.remove(&id);
        }
        for tag in tags {
            state.images.remove(&tag);
        }
        Ok(())
    }

    async fn log_stream(
        &self,
        id: &str,
        options: super::log_stream::LogStreamOptions,
    ) -> Result<super::log_stream::LogLines, EngineError> {
        let mut state = self.enter(EngineCall::LogStream(id.to_owned(), options))?;
        let logs = &Self::container(&mut state, id)?.logs;
        let all: Vec<String> = logs.lines().map(str::to_owned).collect();
        let skip = options
            .tail
            .map_or(0, |t| all.len().saturating_sub(t as usize));
        let lines = all.into_iter().skip(skip).map(Ok);
        // what exists, then (following) nothing more until the stream is dropped
        let rest = if options.follow {
            futures_util::stream::pending().boxed()
        } else {
            futures_util::stream::empty().boxed()
        };
        Ok(Box::pin(futures_util::stream::iter(lines).chain(rest)))
    }

    async fn logs_tail(&self, id: &str, lines: usize) -> Result<String, EngineError> {
        let mut state = self.enter(EngineCall::LogsTail(id.to_owned(), lines))?;
        let logs = &Self::container(&mut state, id)?.logs;
        let all: Vec<&str> = logs.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        Ok(tail.iter().map(|l| format!("{l}\n")).collect())
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&RegistryAuth>,
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<(), EngineError> {
        let published = {
            let state = self.enter(EngineCall::PullImage {
                image: image.to_owned(),
                username: auth.map(|a| a.username.clone()),
            })?;
            state.registry.get(image).cloned()
        };
        let Some((digest, needs)) = published else {
            return Err(EngineError::Rejected {
                status: 500,
                message: format!(
                    "manifest for {image} not found: manifest unknown: manifest unknown"
                ),
            });
        };
        if let Some((user, password)) = needs
            && auth.is_none_or(|a| a.username != user || a.password != password)
        {
            return Err(EngineError::Rejected {
                status: 500,
                message: format!(
                    "Head \"https://{}/v2/\": unauthorized: authentication required",
                    super::pull::registry_host(image)
                ),
            });
        }
        progress(PullProgress {
            layers_done: 0,
            layers_total: 1,
            bytes_done: 0,
            bytes_total: 1000,
        });
        progress(PullProgress {
            layers_done: 1,
            layers_total: 1,
            bytes_done: 1000,
            bytes_total: 1000,
        });
        let mut state = self.lock();
        state.images.insert(image.to_owned());
        state.digests.insert(image.to_owned(), digest);
        Ok(())
    }

    async fn image_info(&self, image: &str) -> Result<ImageInfo, EngineError> {
        let state = self.enter(EngineCall::ImageInfo(image.to_owned()))?;
        let Some(reference) = state
            .images
            .iter()
            .find(|r| *r == image || fake_image_id(r, state.digests.get(*r)) == image)
        else {
            return Err(EngineError::NotFound(format!("No such image: {image}")));
        };
        let (image, digest) = (reference.as_str(), state.digests.get(reference));
        Ok(ImageInfo {
            id: fake_image_id(image, digest),
            repo_digests: digest
                .map(|d| vec![format!("{}@{d}", super::pull::split_reference(image).0)])
                .unwrap_or_default(),
        })
    }
}
