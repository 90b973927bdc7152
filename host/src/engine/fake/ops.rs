//! [`ContainerEngine`] on the fake's in-memory state: every call recorded, failed on demand,
//! then answered as a real engine would (containers, volumes, builds, the in-memory registry,
//! logs).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;

use super::devices::refuse_request;
use super::{
    EngineCall, FakeContainer, FakeEngine, fake_image_id, resolve_image, summary, tar_paths,
};
use crate::engine::api::ContainerEngine;
use crate::engine::capabilities::EngineCapabilities;
use crate::engine::error::EngineError;
use crate::engine::events::{EngineEvents, EventFilter, EventKind};
use crate::engine::exec::{ExecProcess, ExecSpec};
use crate::engine::pull::{ImageInfo, PullProgress, RegistryAuth};
use crate::engine::types::{
    BuildOutput, ContainerDetails, ContainerSpec, ContainerState, ContainerSummary, ImageSummary,
    label_matches,
};

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
        Ok(resolve_image(&state, image).is_some())
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
        if resolve_image(&state, &spec.image).is_none() {
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
            shm_size: spec.shm_size,
            cap_add: spec.cap_add.clone(),
            sysctls: spec.sysctls.clone(),
            env: Self::process_env(&state, spec),
            image_id: resolve_image(&state, &spec.image)
                .unwrap_or_else(|| fake_image_id(&spec.image, state.digests.get(&spec.image))),
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
            self.emit_for(EventKind::Start, id, container.details.labels.clone());
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
            let labels = container.details.labels.clone();
            self.emit_for(EventKind::Die, id, super::events::with_exit(labels, 137));
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
        let labels = state.containers.remove(&key).map(|c| c.details.labels);
        self.emit_for(EventKind::Destroy, &key, labels.unwrap_or_default());
        Ok(())
    }

    async fn rename(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let mut state = self.enter(EngineCall::Rename(id.to_owned(), name.to_owned()))?;
        let key = Self::container(&mut state, id)?.details.id.clone();
        if let Some(other) = state.containers.values().find(|c| c.details.name == name) {
            return Err(EngineError::Conflict(format!(
                "Conflict. The container name \"/{name}\" is already in use by container \"{}\". You have to remove (or rename) that container to be able to reuse that name.",
                other.details.id
            )));
        }
        if let Some(c) = state.containers.get_mut(&key) {
            c.details.name = name.to_owned();
            c.spec.name = name.to_owned();
        }
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
            .map(|c| summary(c, Vec::new()))
            .collect())
    }

    async fn list_all(&self) -> Result<Vec<ContainerSummary>, EngineError> {
        let state = self.enter(EngineCall::ListAll)?;
        Ok(state
            .containers
            .values()
            .map(|c| {
                let host_binds = c.details.binds.iter().filter(|b| b.starts_with('/'));
                summary(c, host_binds.cloned().collect())
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
        super::images::remove(&mut state, image, force)
    }

    async fn log_stream(
        &self,
        id: &str,
        options: crate::engine::log_stream::LogStreamOptions,
    ) -> Result<crate::engine::log_stream::LogLines, EngineError> {
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
                    crate::engine::pull::registry_host(image)
                ),
            });
        }
        progress(PullProgress {
            layers_done: 0,
            layers_total: 1,
            bytes_done: 0,
            bytes_total: 1000,
        });
        if self.lock().stall_pulls {
            std::future::pending::<()>().await;
        }
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
        if let Some(info) = super::images::built_info(&state, image) {
            return Ok(info);
        }
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
                .map(|d| {
                    vec![format!(
                        "{}@{d}",
                        crate::engine::pull::split_reference(image).0
                    )]
                })
                .unwrap_or_default(),
            env: state.image_env.get(reference).cloned().unwrap_or_default(),
            size: super::images::size_of(&state, reference),
        })
    }

    async fn data_root(&self) -> Result<Option<String>, EngineError> {
        Ok(self.lock().data_root.clone())
    }

    async fn exec(&self, container: &str, spec: &ExecSpec) -> Result<ExecProcess, EngineError> {
        self.fake_exec(container, spec)
    }

    async fn events(&self, filter: &EventFilter) -> Result<EngineEvents, EngineError> {
        self.subscribe(filter)
    }

    async fn ping(&self) -> Result<(), EngineError> {
        self.answer_ping()
    }
}
