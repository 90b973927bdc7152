//! Domain types of the engine seam: what the app manager asks for ([`ContainerSpec`]) and what
//! it reads back ([`ContainerDetails`], [`ContainerSummary`]). No bollard type appears here, so
//! the rest of the workspace and the fake engine do not depend on the Docker client.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::run_options::{ContainerHealth, HealthProbe, LogRotation};

/// A host device node passed into the container (`docker run --device`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceMapping {
    /// Path of the device node on the host, e.g. `/dev/dri/renderD128`.
    pub host_path: String,
    /// Path inside the container; usually the same as `host_path`.
    pub container_path: String,
    /// cgroup permissions, e.g. `rwm`.
    pub permissions: String,
}

impl DeviceMapping {
    /// The same path on both sides, permissions `rwm`.
    pub fn same_path(path: impl Into<String>) -> Self {
        let path = path.into();
        Self {
            host_path: path.clone(),
            container_path: path,
            permissions: "rwm".into(),
        }
    }
}

/// A request to a device driver of the engine (`docker run --gpus`, CDI devices).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceRequest {
    /// Driver name: `nvidia`, `cdi`, `amd`, or empty for "any driver with these capabilities".
    pub driver: String,
    /// Number of devices (`-1`: all); never together with `device_ids`.
    pub count: Option<i64>,
    /// Explicit device ids: GPU indexes or UUIDs for `nvidia`, fully-qualified names for `cdi`.
    pub device_ids: Vec<String>,
    /// Capability sets, e.g. `[["gpu"]]`; empty for CDI.
    pub capabilities: Vec<Vec<String>>,
    /// Driver options.
    pub options: BTreeMap<String, String>,
}

/// A bind mount or named volume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// An absolute host path, or the name of a named volume.
    pub source: String,
    /// Absolute path inside the container.
    pub target: String,
    /// Mount read-only.
    pub read_only: bool,
}

impl Bind {
    /// Whether the source is a host path (as opposed to a named volume).
    pub fn is_host_path(&self) -> bool {
        self.source.starts_with('/')
    }

    /// The engine's `source:target[:ro]` form of the mount.
    pub fn engine_form(&self) -> String {
        let mode = if self.read_only { ":ro" } else { "" };
        format!("{}:{}{mode}", self.source, self.target)
    }
}

/// A published port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortMapping {
    /// Port inside the container.
    pub container_port: u16,
    /// `tcp` (default when empty) or `udp`.
    pub protocol: String,
    /// Host port; `None` lets the engine choose.
    pub host_port: Option<u16>,
    /// Host address to bind, e.g. `127.0.0.1`; `None` for all addresses.
    pub host_ip: Option<String>,
}

impl PortMapping {
    /// The engine's key for this port, e.g. `8080/tcp`.
    pub fn key(&self) -> String {
        let protocol = if self.protocol.is_empty() {
            "tcp"
        } else {
            self.protocol.as_str()
        };
        format!("{}/{protocol}", self.container_port)
    }
}

/// Everything needed to create a container. Privileged mode, host networking and the host PID
/// namespace cannot be expressed: the seam never asks the engine for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// Container name (unique on the engine).
    pub name: String,
    /// Image reference; it must already be present (the app manager pulls it first).
    pub image: String,
    /// Environment variables.
    pub env: BTreeMap<String, String>,
    /// Command (`CMD`); `None` keeps the image's.
    pub command: Option<Vec<String>>,
    /// Entrypoint; `None` keeps the image's.
    pub entrypoint: Option<Vec<String>>,
    /// Working directory; `None` keeps the image's.
    pub working_dir: Option<String>,
    /// User (`uid[:gid]` or name); `None` keeps the image's.
    pub user: Option<String>,
    /// Container labels.
    pub labels: BTreeMap<String, String>,
    /// Published ports.
    pub ports: Vec<PortMapping>,
    /// Bind mounts and named volumes.
    pub binds: Vec<Bind>,
    /// Device nodes.
    pub devices: Vec<DeviceMapping>,
    /// Device-driver requests (GPUs through the NVIDIA driver or CDI).
    pub device_requests: Vec<DeviceRequest>,
    /// Supplementary groups, preferably numeric GIDs.
    pub group_add: Vec<String>,
    /// Memory limit in bytes.
    pub memory_bytes: Option<i64>,
    /// CPU limit in units of 1e-9 CPUs.
    pub nano_cpus: Option<i64>,
    /// Security options (`no-new-privileges`).
    pub security_opt: Vec<String>,
    /// Most processes (threads included) in the container; `None`: the engine's default.
    pub pids_limit: Option<i64>,
    /// A health check replacing the image's; `None` keeps the image's.
    pub healthcheck: Option<HealthProbe>,
    /// Log rotation of the json-file driver; `None`: the engine's default logging.
    pub log_rotation: Option<LogRotation>,
    /// Size of `/dev/shm` in bytes; `None`: the engine's default (64 MiB).
    pub shm_size: Option<i64>,
    /// Capabilities added to the engine's default set (names without `CAP_`).
    pub cap_add: Vec<String>,
    /// Namespaced sysctls set in the container.
    pub sysctls: BTreeMap<String, String>,
}

/// A container's state as the engine reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerState {
    /// Created, never started (or its start failed).
    Created,
    /// Running.
    Running,
    /// Paused.
    Paused,
    /// Being restarted by the engine's restart policy.
    Restarting,
    /// Being removed.
    Removing,
    /// Exited.
    Exited,
    /// Dead (removal failed half-way).
    Dead,
    /// Anything else the engine says.
    #[default]
    Unknown,
}

impl ContainerState {
    /// Parse the engine's state word (`running`, `exited`, ...).
    pub fn parse(word: &str) -> Self {
        match word {
            "created" => Self::Created,
            "running" => Self::Running,
            "paused" => Self::Paused,
            "restarting" => Self::Restarting,
            "removing" => Self::Removing,
            "exited" => Self::Exited,
            "dead" => Self::Dead,
            _ => Self::Unknown,
        }
    }

    /// The engine's word for this state.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Restarting => "restarting",
            Self::Removing => "removing",
            Self::Exited => "exited",
            Self::Dead => "dead",
            Self::Unknown => "unknown",
        }
    }
}

/// What `inspect` reads back: state plus the devices the engine actually holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDetails {
    /// Full container id.
    pub id: String,
    /// Name without the leading `/`.
    pub name: String,
    /// Container labels.
    pub labels: BTreeMap<String, String>,
    /// The image reference the container was created from.
    pub image: String,
    /// State.
    pub status: ContainerState,
    /// Whether the process is running.
    pub running: bool,
    /// Last exit code (0 while never exited).
    pub exit_code: Option<i64>,
    /// The engine's record of the last start error, if any.
    pub error: Option<String>,
    /// Killed by the OOM killer.
    pub oom_killed: bool,
    /// Restarts done by the engine's restart policy.
    pub restart_count: i64,
    /// RFC 3339 start time; `None` if never started.
    pub started_at: Option<String>,
    /// RFC 3339 exit time; `None` if never exited.
    pub finished_at: Option<String>,
    /// Device requests held by the container.
    pub device_requests: Vec<DeviceRequest>,
    /// Device mappings held by the container.
    pub devices: Vec<DeviceMapping>,
    /// Supplementary groups.
    pub group_add: Vec<String>,
    /// Binds as the engine reports them (`source:target[:ro]`).
    pub binds: Vec<String>,
    /// Security options as the engine reports them.
    pub security_opt: Vec<String>,
    /// The pids limit as the engine reports it (`None` or `0`: unlimited).
    pub pids_limit: Option<i64>,
    /// Health check state, when the container has a health check.
    pub health: Option<ContainerHealth>,
    /// Id (`sha256:…`) of the image the container was created from.
    pub image_id: String,
    /// Size of `/dev/shm` in bytes as the engine reports it.
    pub shm_size: Option<i64>,
    /// Capabilities added, as the engine reports them.
    pub cap_add: Vec<String>,
    /// Sysctls set, as the engine reports them.
    pub sysctls: BTreeMap<String, String>,
    /// The process environment (`KEY=VALUE`): the image's merged with the container's.
    pub env: Vec<String>,
}

/// One line of `list_by_label`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSummary {
    /// Full container id.
    pub id: String,
    /// Name without the leading `/`.
    pub name: String,
    /// Image reference.
    pub image: String,
    /// Container labels.
    pub labels: BTreeMap<String, String>,
    /// State.
    pub state: ContainerState,
    /// Its host bind mounts as `source:target[:ro]` (filled by [`list_all`]; may be empty in
    /// other listings).
    ///
    /// [`list_all`]: super::ContainerEngine::list_all
    pub binds: Vec<String>,
}

/// What a successful image build returns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildOutput {
    /// The built image's id (`sha256:…`).
    pub image_id: String,
    /// The last lines of the build output.
    pub log_tail: String,
}

/// One line of `list_images_by_label`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSummary {
    /// Image id (`sha256:…`).
    pub id: String,
    /// Tags (`repo:tag`).
    pub tags: Vec<String>,
    /// Image labels.
    pub labels: BTreeMap<String, String>,
    /// Creation time, Unix seconds.
    pub created: i64,
}

/// Whether `labels` satisfies a label filter `key` or `key=value` (the engine's syntax).
pub fn label_matches(labels: &BTreeMap<String, String>, filter: &str) -> bool {
    match filter.split_once('=') {
        Some((key, value)) => labels.get(key).is_some_and(|v| v == value),
        None => labels.contains_key(filter),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_filter_syntax() {
        let labels = BTreeMap::from([("odac.app".to_owned(), "web".to_owned())]);
        assert!(label_matches(&labels, "odac.app"));
        assert!(label_matches(&labels, "odac.app=web"));
        assert!(!label_matches(&labels, "odac.app=db"));
        assert!(!label_matches(&labels, "odac.other"));
    }

    #[test]
    fn port_keys_and_states() {
        let port = PortMapping {
            container_port: 80,
            ..PortMapping::default()
        };
        assert_eq!(port.key(), "80/tcp");
        for s in ["created", "running", "exited", "dead", "paused"] {
            assert_eq!(ContainerState::parse(s).as_str(), s);
        }
        assert_eq!(ContainerState::parse("weird"), ContainerState::Unknown);
    }
}
