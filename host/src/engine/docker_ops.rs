//! [`ContainerEngine`] for [`DockerEngine`]: each operation is one bollard call, its answer
//! converted to the seam's types and its error mapped by `convert::map_error`. Every call
//! goes through `DockerEngine::docker` (connect on demand) and `DockerEngine::observe`
//! (forget the client after an outage).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use bollard::models::VolumeCreateRequest;
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, ListContainersOptions, LogsOptions,
    RemoveContainerOptions, RemoveVolumeOptions, RenameContainerOptions, StopContainerOptions,
};
use futures_util::StreamExt;

use super::api::ContainerEngine;
use super::capabilities::EngineCapabilities;
use super::convert::{create_body, details, map_error, summary};
use super::docker::{DockerEngine, label_filter, label_map};
use super::error::EngineError;
use super::pull::{ImageInfo, PullProgress, RegistryAuth};
use super::tail::{TailBuffer, frame_after, run_boundary};
use super::types::{BuildOutput, ContainerDetails, ContainerSpec, ContainerSummary, ImageSummary};

/// Split `repo[:tag]` at the tag colon (a colon after the last `/`, so registry ports stay).
fn split_tag(reference: &str) -> (&str, &str) {
    let slash = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[slash..].rfind(':') {
        Some(i) => (&reference[..slash + i], &reference[slash + i + 1..]),
        None => (reference, "latest"),
    }
}

impl DockerEngine {
    /// Every container (running or not), those matching `filters` when given.
    async fn containers(
        &self,
        filters: Option<HashMap<String, Vec<String>>>,
    ) -> Result<Vec<ContainerSummary>, EngineError> {
        let docker = self.docker().await?;
        let options = ListContainersOptions {
            all: true,
            filters,
            ..ListContainersOptions::default()
        };
        let list = docker
            .list_containers(Some(options))
            .await
            .map_err(map_error);
        Ok(self.observe(list)?.into_iter().map(summary).collect())
    }

    /// Hands the last `lines` lines of `id`'s stdout and stderr to `sink`, frame by frame
    /// (one log message each), each prefixed with its timestamp when `timestamps`.
    async fn last_output(
        &self,
        id: &str,
        lines: usize,
        timestamps: bool,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let options = LogsOptions {
            stdout: true,
            stderr: true,
            timestamps,
            tail: lines.to_string(),
            ..LogsOptions::default()
        };
        let mut stream = docker.logs(id, Some(options));
        while let Some(item) = stream.next().await {
            let chunk = self.observe(item.map_err(map_error))?;
            sink(&chunk.into_bytes());
        }
        Ok(())
    }
}

#[async_trait]
impl ContainerEngine for DockerEngine {
    async fn capabilities(&self) -> EngineCapabilities {
        self.probe().await
    }

    async fn image_exists(&self, image: &str) -> Result<bool, EngineError> {
        let docker = self.docker().await?;
        match self.observe(docker.inspect_image(image).await.map_err(map_error)) {
            Ok(_) => Ok(true),
            Err(EngineError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn import_image(
        &self,
        tag: &str,
        rootfs_tar: Vec<u8>,
        changes: &[String],
    ) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let (repo, version) = split_tag(tag);
        let options = CreateImageOptions {
            from_src: Some("-".into()),
            repo: Some(repo.into()),
            tag: Some(version.into()),
            changes: changes.to_vec(),
            ..CreateImageOptions::default()
        };
        let body = bollard::body_full(bytes::Bytes::from(rootfs_tar));
        let mut stream = docker.create_image(Some(options), Some(body), None);
        while let Some(item) = stream.next().await {
            self.observe(item.map(|_| ()).map_err(map_error))?;
        }
        if self.image_exists(tag).await? {
            Ok(())
        } else {
            Err(EngineError::Other(format!(
                "image import of {tag:?} finished but the image is not present"
            )))
        }
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        let docker = self.docker().await?;
        let options = CreateContainerOptions {
            name: Some(spec.name.clone()),
            ..CreateContainerOptions::default()
        };
        let created = docker
            .create_container(Some(options), create_body(spec))
            .await
            .map_err(map_error);
        Ok(self.observe(created)?.id)
    }

    async fn start(&self, id: &str) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        self.observe(docker.start_container(id, None).await.map_err(map_error))
    }

    async fn stop(&self, id: &str, timeout: Duration) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let secs = i32::try_from(timeout.as_secs()).unwrap_or(i32::MAX);
        // The request must outlive the engine's grace period.
        let docker = docker.with_timeout(timeout + Duration::from_secs(60));
        let options = StopContainerOptions {
            t: Some(secs),
            ..StopContainerOptions::default()
        };
        self.observe(
            docker
                .stop_container(id, Some(options))
                .await
                .map_err(map_error),
        )
    }

    async fn remove(&self, id: &str, force: bool) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let options = RemoveContainerOptions {
            force,
            v: true,
            ..RemoveContainerOptions::default()
        };
        self.observe(
            docker
                .remove_container(id, Some(options))
                .await
                .map_err(map_error),
        )
    }

    async fn rename(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let options = RenameContainerOptions { name: name.into() };
        self.observe(
            docker
                .rename_container(id, options)
                .await
                .map_err(map_error),
        )
    }

    async fn inspect(&self, id: &str) -> Result<ContainerDetails, EngineError> {
        let docker = self.docker().await?;
        let resp = docker.inspect_container(id, None).await.map_err(map_error);
        Ok(details(self.observe(resp)?))
    }

    async fn list_by_label(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        self.containers(Some(label_filter(label))).await
    }

    async fn list_all(&self) -> Result<Vec<ContainerSummary>, EngineError> {
        self.containers(None).await
    }

    async fn ensure_volume(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        if self.volume_labels(name).await?.is_some() {
            return Ok(());
        }
        let docker = self.docker().await?;
        let request = VolumeCreateRequest {
            name: Some(name.to_owned()),
            labels: Some(label_map(labels)),
            ..VolumeCreateRequest::default()
        };
        self.observe(
            docker
                .create_volume(request)
                .await
                .map(|_| ())
                .map_err(map_error),
        )
    }

    async fn volume_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, EngineError> {
        let docker = self.docker().await?;
        match self.observe(docker.inspect_volume(name).await.map_err(map_error)) {
            Ok(v) => Ok(Some(v.labels.into_iter().collect())),
            Err(EngineError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let removed = docker
            .remove_volume(name, None::<RemoveVolumeOptions>)
            .await
            .map_err(map_error);
        self.observe(removed)
    }

    async fn logs_tail(&self, id: &str, lines: usize) -> Result<String, EngineError> {
        let mut text = Vec::new();
        self.last_output(id, lines, false, |chunk| text.extend_from_slice(chunk))
            .await?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    async fn output_tail(
        &self,
        id: &str,
        runs: Option<(&str, &str)>,
        max_lines: usize,
        max_bytes: usize,
    ) -> Result<String, EngineError> {
        let mut buffer = TailBuffer::new(max_bytes);
        match runs.and_then(|(end, start)| run_boundary(end, start)) {
            // the log holds every run of the container: keep the last run's lines
            Some(after) => {
                self.last_output(id, max_lines, true, |frame| {
                    if let Some(line) = frame_after(frame, after) {
                        buffer.push(line);
                    }
                })
                .await?;
            }
            None => {
                self.last_output(id, max_lines, false, |chunk| buffer.push(chunk))
                    .await?;
            }
        }
        Ok(buffer.finish(max_lines))
    }

    async fn log_stream(
        &self,
        id: &str,
        options: super::log_stream::LogStreamOptions,
    ) -> Result<super::log_stream::LogLines, EngineError> {
        let result = self.stream_logs(id, options).await;
        self.observe(result)
    }

    async fn build_image(
        &self,
        tag: &str,
        context_tar: Vec<u8>,
        dockerfile: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<BuildOutput, EngineError> {
        self.build(tag, context_tar, dockerfile, labels).await
    }

    async fn list_images_by_label(&self, label: &str) -> Result<Vec<ImageSummary>, EngineError> {
        self.images_by_label(label).await
    }

    async fn remove_image(&self, image: &str, force: bool) -> Result<(), EngineError> {
        self.delete_image(image, force).await
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&RegistryAuth>,
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<(), EngineError> {
        self.pull(image, auth, progress).await
    }

    async fn image_info(&self, image: &str) -> Result<ImageInfo, EngineError> {
        self.image_info_of(image).await
    }

    async fn data_root(&self) -> Result<Option<String>, EngineError> {
        self.docker_root_dir().await
    }

    async fn exec(
        &self,
        container: &str,
        spec: &super::exec::ExecSpec,
    ) -> Result<super::exec::ExecProcess, EngineError> {
        self.start_exec(container, spec).await
    }

    async fn events(
        &self,
        filter: &super::events::EventFilter,
    ) -> Result<super::events::EngineEvents, EngineError> {
        let result = self.stream_events(filter).await;
        self.observe(result)
    }

    async fn ping(&self) -> Result<(), EngineError> {
        self.ping_engine().await
    }
}

#[cfg(test)]
mod tests {
    use super::split_tag;

    #[test]
    fn tags_split_after_the_last_slash() {
        assert_eq!(split_tag("odac/busybox:test"), ("odac/busybox", "test"));
        assert_eq!(split_tag("busybox"), ("busybox", "latest"));
        assert_eq!(
            split_tag("localhost:5000/x"),
            ("localhost:5000/x", "latest")
        );
        assert_eq!(split_tag("localhost:5000/x:1"), ("localhost:5000/x", "1"));
    }
}
