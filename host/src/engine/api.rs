//! The [`ContainerEngine`] trait: the operations the app manager and the inventory need from a
//! container engine. It is object safe (`Arc<dyn ContainerEngine>`), implemented by
//! [`super::DockerEngine`] (bollard) and `FakeEngine` (in memory, for tests; feature `test-support`).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::capabilities::EngineCapabilities;
use super::error::EngineError;
use super::events::{EngineEvents, EventFilter};
use super::exec::{ExecProcess, ExecSpec};
use super::log_stream::{LogLines, LogStreamOptions};
use super::pull::{ImageInfo, PullProgress, RegistryAuth};
use super::tail::cut_tail;
use super::types::{BuildOutput, ContainerDetails, ContainerSpec, ContainerSummary, ImageSummary};

/// The default answer of an operation this engine does not offer, naming what was asked for.
fn cannot(operation: &str, subject: Option<&str>) -> EngineError {
    let message = format!("this container engine cannot {operation}");
    EngineError::Other(match subject {
        Some(subject) => format!("{message} (asked for {subject:?})"),
        None => message,
    })
}

/// A container engine. Create and start are separate calls because real engines refuse
/// devices at either step; callers must handle both (as `appmgr::gpu::fallback` does).
#[async_trait]
pub trait ContainerEngine: Send + Sync {
    /// What the engine can do for GPUs (`GET /info`); never fails, an unreachable engine
    /// yields [`EngineCapabilities::unreachable`].
    async fn capabilities(&self) -> EngineCapabilities;

    /// Whether an image with this reference is present locally.
    async fn image_exists(&self, image: &str) -> Result<bool, EngineError>;

    /// Import a root filesystem tarball as image `tag` (`docker import`), applying Dockerfile
    /// instructions such as `CMD ["sh"]` or `LABEL k=v` from `changes`.
    async fn import_image(
        &self,
        tag: &str,
        rootfs_tar: Vec<u8>,
        changes: &[String],
    ) -> Result<(), EngineError>;

    /// Create (not start) a container; returns its id.
    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError>;

    /// Start a created or stopped container. Starting a running one succeeds.
    async fn start(&self, id: &str) -> Result<(), EngineError>;

    /// Stop a container, killing it after `timeout`. Stopping a stopped one succeeds.
    async fn stop(&self, id: &str, timeout: Duration) -> Result<(), EngineError>;

    /// Remove a container (with `force`, even a running one). Its anonymous volumes go too;
    /// named volumes stay.
    async fn remove(&self, id: &str, force: bool) -> Result<(), EngineError>;

    /// Give a container another name (`docker rename`); its id, state and labels stay. A name
    /// another container has is [`EngineError::Conflict`]. The default refuses: engines that
    /// cannot rename say so.
    async fn rename(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let _ = name;
        Err(cannot("rename containers", Some(id)))
    }

    /// Read a container's state and the devices it holds.
    async fn inspect(&self, id: &str) -> Result<ContainerDetails, EngineError>;

    /// Containers in any state carrying a label `key` or `key=value`.
    async fn list_by_label(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError>;

    /// Every container of the engine in any state, whoever made it, with its host bind
    /// mounts: the bind policy reads which host directories containers can write. It never
    /// changes anything. The default refuses, so a policy check through an engine that cannot
    /// list fails closed.
    async fn list_all(&self) -> Result<Vec<ContainerSummary>, EngineError> {
        Err(cannot("list all containers", None))
    }

    /// Create a named volume unless it exists; an existing one is left as is.
    async fn ensure_volume(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError>;

    /// The labels of a named volume; `None` when there is no volume of that name.
    async fn volume_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, EngineError>;

    /// Remove a named volume.
    async fn remove_volume(&self, name: &str) -> Result<(), EngineError>;

    /// The last `lines` lines of the container's stdout and stderr, interleaved.
    async fn logs_tail(&self, id: &str, lines: usize) -> Result<String, EngineError>;

    /// The output of the container's last run, bounded: at most `max_lines` lines and
    /// `max_bytes` bytes, cut at a line boundary ([`cut_tail`]). `runs` is the end of the
    /// previous run (its `State.FinishedAt` as read then) and the start of the last one (its
    /// `State.StartedAt`), so the output of earlier runs is left out; `None`: the container
    /// ran once, all its output. The default trims [`Self::logs_tail`] (an engine that keeps
    /// one run's output per container); the Docker engine reads with timestamps and streams
    /// into a bounded buffer.
    async fn output_tail(
        &self,
        id: &str,
        runs: Option<(&str, &str)>,
        max_lines: usize,
        max_bytes: usize,
    ) -> Result<String, EngineError> {
        let _ = runs;
        let text = self.logs_tail(id, max_lines).await?;
        Ok(cut_tail(&text, max_lines, max_bytes))
    }

    /// Stream the container's stdout and stderr as lines (live when `options.follow`);
    /// dropping the stream stops it. The default refuses: engines that cannot stream say so.
    async fn log_stream(
        &self,
        id: &str,
        options: LogStreamOptions,
    ) -> Result<LogLines, EngineError> {
        let _ = options;
        Err(cannot("stream logs", Some(id)))
    }

    /// Build image `tag` from a tar build context with the classic builder (no BuildKit, no
    /// pulls), `dockerfile` being a path inside the context, and put `labels` on the image.
    /// A build that runs and fails is [`EngineError::BuildFailed`] with the output's tail.
    /// The default refuses: engines that cannot build say so.
    async fn build_image(
        &self,
        tag: &str,
        context_tar: Vec<u8>,
        dockerfile: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<BuildOutput, EngineError> {
        let _ = (context_tar, dockerfile, labels);
        Err(cannot("build images", Some(tag)))
    }

    /// Images (tagged or not) carrying a label `key` or `key=value`.
    async fn list_images_by_label(&self, label: &str) -> Result<Vec<ImageSummary>, EngineError> {
        let _ = label;
        Ok(Vec::new())
    }

    /// Remove an image by id or tag (with `force`, even one a stopped container uses).
    async fn remove_image(&self, image: &str, force: bool) -> Result<(), EngineError> {
        let _ = force;
        Err(cannot("remove images", Some(image)))
    }

    /// Pull `image` (one tag, `latest` when none is given) from its registry with `auth`,
    /// calling `progress` with the layer totals as the engine streams them. The registry's
    /// refusal (unauthorized, manifest unknown, unreachable) is [`EngineError::Rejected`]
    /// with its words. The default refuses: engines that cannot pull say so.
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&RegistryAuth>,
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<(), EngineError> {
        let _ = (auth, progress);
        Err(cannot("pull images", Some(image)))
    }

    /// The id and repo digests of a local image (by reference or id).
    async fn image_info(&self, image: &str) -> Result<ImageInfo, EngineError> {
        Err(EngineError::NotFound(format!("No such image: {image}")))
    }

    /// Subscribe to the engine's events: the containers `filter` picks (`start`, `die`,
    /// `oom`, `kill`, `destroy`, `health_status`) and the daemon's `reload`, from
    /// `filter.since_nanos` (or now) on. The stream ends when the connection does. The
    /// default refuses: engines that cannot stream events say so, and are polled.
    async fn events(&self, filter: &EventFilter) -> Result<EngineEvents, EngineError> {
        let _ = filter;
        Err(cannot("stream events", None))
    }

    /// Whether the engine answers (`GET /_ping`): tells a hung event stream from an engine
    /// that is gone. The default asks for the capabilities.
    async fn ping(&self) -> Result<(), EngineError> {
        let caps = self.capabilities().await;
        if caps.reachable {
            Ok(())
        } else {
            Err(EngineError::Unavailable(
                caps.error.unwrap_or_else(|| "engine did not answer".into()),
            ))
        }
    }

    /// Run a command in the running container `container` (`docker exec`), never privileged.
    /// The default refuses: engines that cannot exec say so.
    async fn exec(&self, container: &str, spec: &ExecSpec) -> Result<ExecProcess, EngineError> {
        let _ = spec;
        Err(cannot("exec", Some(container)))
    }

    /// The engine's data root (`DockerRootDir`: where images and layers are stored);
    /// `None` when the engine does not say.
    async fn data_root(&self) -> Result<Option<String>, EngineError> {
        Ok(None)
    }
}
