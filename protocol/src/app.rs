//! `AppSpec`: one app of the desired state — what to run (an image, a git source, or an ODAC
//! catalog app), with env, command, ports, volumes, resources, a restart token and a GPU
//! intent. Unknown fields are ignored so newer control planes can add fields.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::git_source::GitSource;
use crate::gpu::{GpuRequest, deserialize_opt_gpu};
use crate::host_access::{
    HostAccess, ShmSize, SysctlValue, check_caps, check_devices, check_shm_size, check_sysctls,
};
use crate::image_ref::check_image_ref;
use crate::limits::{
    MAX_CPUS, MAX_ENV, MAX_MEMORY_BYTES, MAX_PORTS, MAX_VOLUMES, MIN_CPUS, MIN_MEMORY_BYTES,
};
use crate::pull::PullPolicy;
use crate::registry_auth::{RegistryAuth, registry_host};
use crate::rollout::UpdatePolicy;
use crate::runtime::{HealthCheck, LogLimits, RestartPolicy};
use crate::validation::{
    ValidationError, check_bytes, check_command, check_dns_label, check_opt_string, check_required,
    check_string,
};

/// One app the agent should run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AppSpec {
    /// App name: a lowercase DNS label of at most 63 characters, unique per host.
    pub name: String,
    /// ODAC's kind of deployment (`"app"`); kept as sent.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// ODAC catalog app name (e.g. `ollama`), resolved to an image by the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Container image reference, e.g. `ollama/ollama:0.6.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Git source to build the image from, instead of `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<GitSource>,
    /// Environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Command and arguments, replacing the image's default command when non-empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Published ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortMapping>,
    /// Volume mounts: named volumes, or host bind mounts (source starting with `/`) that the
    /// agent's local policy must allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeMount>,
    /// Resource limits.
    #[serde(default, skip_serializing_if = "Resources::is_empty")]
    pub resources: Resources,
    /// Changing this token restarts the app (idempotent, like Kubernetes' restartedAt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_token: Option<String>,
    /// GPU intent; `null`, `{}` and absent all mean "no GPU".
    #[serde(
        default,
        deserialize_with = "deserialize_opt_gpu",
        skip_serializing_if = "Option::is_none"
    )]
    pub gpu: Option<GpuRequest>,
    /// What to do when the container exits: `always` (default), `on_failure` or `never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartPolicy>,
    /// A health check replacing the image's `HEALTHCHECK`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<HealthCheck>,
    /// Lower log limits than the agent's defaults (never higher).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<LogLimits>,
    /// When the agent pulls the image: `if_not_present` (default), `always`, `never`.
    #[serde(default, skip_serializing_if = "PullPolicy::is_default")]
    pub pull: PullPolicy,
    /// Credentials for the registry host `image` names, sent by the control plane; a secret
    /// (never logged, not part of the spec hash or of any view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_auth: Option<RegistryAuth>,
    /// Size of `/dev/shm` (ODAC's `shmSize`): bytes, or `"512m"`, `"1.5GiB"`; 1 MiB to 64 GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_size: Option<ShmSize>,
    /// Capabilities to add, from an allowlist (`NET_ADMIN`, `NET_RAW`, `NET_BIND_SERVICE`,
    /// `IPC_LOCK`, `SYS_NICE`); `CAP_` optional, any case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caps: Vec<String>,
    /// Namespaced sysctls (`net.*`, `kernel.msg*`, `kernel.sem`, `kernel.shm*`,
    /// `fs.mqueue.*`); values a string, a whole number or a boolean.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctls: BTreeMap<String, SysctlValue>,
    /// Extra host device paths (`/dev/apex_0`), mapped at the same path; each must lie under
    /// the agent's `[apps.policy] allowed_device_prefixes`; never a GPU device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// How a change of this spec is rolled out (and rolled back); not part of what the
    /// container is made of: changing only this recreates nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdatePolicy>,
}

/// A published port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct PortMapping {
    /// Host port (1..=65535); absent means an ephemeral port chosen by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<u32>,
    /// Container port (1..=65535).
    pub container: u32,
    /// `tcp` (default) or `udp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<PortProtocol>,
}

/// Transport protocol of a published port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PortProtocol {
    /// TCP.
    #[default]
    Tcp,
    /// UDP.
    Udp,
}

/// A volume mount.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct VolumeMount {
    /// A named volume, or a host path (starting with `/`) for a bind mount.
    pub source: String,
    /// Absolute path inside the container.
    pub target: String,
    /// Mount read-only.
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
}

impl VolumeMount {
    /// True when the source is a host path (a bind mount), false for a named volume.
    pub fn is_bind(&self) -> bool {
        self.source.starts_with('/')
    }
}

/// Resource limits.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
pub struct Resources {
    /// Memory limit in bytes (at least 6 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// CPU limit in CPUs, e.g. `1.5` (more than 0, at most 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
}

impl Resources {
    /// True when no limit is set.
    pub fn is_empty(&self) -> bool {
        self.memory_bytes.is_none() && self.cpus.is_none()
    }
}

// `cpus` is compared and hashed by its bits so specs can be hashed for change detection;
// JSON cannot carry NaN, so bitwise equality is numeric equality here.
impl PartialEq for Resources {
    fn eq(&self, other: &Self) -> bool {
        self.memory_bytes == other.memory_bytes
            && self.cpus.map(f64::to_bits) == other.cpus.map(f64::to_bits)
    }
}

impl Eq for Resources {}

impl Hash for Resources {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.memory_bytes.hash(state);
        self.cpus.map(f64::to_bits).hash(state);
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl AppSpec {
    /// A spec with just a name and an image.
    pub fn new(name: impl Into<String>, image: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            image: Some(image.into()),
            ..Self::default()
        }
    }

    /// The spec without secrets (a git source's access token removed), for views and logs
    /// that show specs back to people.
    #[must_use]
    pub fn without_secrets(&self) -> AppSpec {
        let mut spec = self.clone();
        if let Some(source) = &mut spec.source {
            source.secret = None;
        }
        spec.registry_auth = None;
        spec
    }

    /// Checks every field; the error names the field relative to the app (e.g. `gpu.count`,
    /// `ports[1].container`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_dns_label("name", &self.name)?;
        if let Some(image) = &self.image {
            check_required("image", image)?;
            if let Some(c) = image.chars().find(|c| c.is_control() || c.is_whitespace()) {
                return Err(ValidationError::new(
                    "image",
                    format!(
                        "{image:?} must not contain {c:?} (no whitespace or control characters)"
                    ),
                ));
            }
        }
        if let Some(source) = &self.source {
            if self.image.is_some() {
                return Err(ValidationError::new(
                    "source",
                    "give either image or source, not both",
                ));
            }
            source.validate().map_err(|e| e.under("source"))?;
        }
        if let Some(app) = &self.app {
            check_required("app", app)?;
        }
        if let Some(auth) = &self.registry_auth {
            auth.validate().map_err(|e| e.under("registry_auth"))?;
            let host = self.image.as_deref().map(registry_host);
            if host != Some(auth.server.as_str()) {
                return Err(ValidationError::new(
                    "registry_auth.server",
                    format!("{:?} is not the registry of the app's image", auth.server),
                ));
            }
        }
        if self.image.is_none() && self.source.is_none() && self.app.is_none() {
            return Err(ValidationError::new(
                "image",
                "an app needs an image, a git source or a catalog app",
            ));
        }
        check_opt_string("type", self.kind.as_ref())?;
        self.validate_env()?;
        check_command("command", &self.command)?;
        if self.ports.len() > MAX_PORTS {
            return Err(ValidationError::new(
                "ports",
                format!("has {} entries, the limit is {MAX_PORTS}", self.ports.len()),
            ));
        }
        for (i, p) in self.ports.iter().enumerate() {
            p.validate().map_err(|e| e.under(&format!("ports[{i}]")))?;
        }
        if self.volumes.len() > MAX_VOLUMES {
            return Err(ValidationError::new(
                "volumes",
                format!(
                    "has {} entries, the limit is {MAX_VOLUMES}",
                    self.volumes.len()
                ),
            ));
        }
        for (i, v) in self.volumes.iter().enumerate() {
            v.validate()
                .map_err(|e| e.under(&format!("volumes[{i}]")))?;
        }
        self.resources
            .validate()
            .map_err(|e| e.under("resources"))?;
        check_opt_string("restart_token", self.restart_token.as_ref())?;
        if let Some(gpu) = &self.gpu {
            gpu.validate()?;
        }
        if let Some(h) = &self.healthcheck {
            h.validate().map_err(|e| e.under("healthcheck"))?;
        }
        if let Some(l) = &self.logs {
            l.validate().map_err(|e| e.under("logs"))?;
        }
        if let Some(u) = &self.update {
            u.validate().map_err(|e| e.under("update"))?;
        }
        Ok(())
    }

    /// Checks the image reference against the registry grammar (lowercase repository,
    /// `host[:port]/`, tag or digest; [`IMAGE_PATTERN`](crate::IMAGE_PATTERN)). Not part of
    /// [`validate`](Self::validate): a frame carrying a malformed reference is decoded and the
    /// agent fails that app alone (`policy_denied` naming `image`), never its host's other
    /// apps; a control plane calls both and answers 400.
    pub fn check_image(&self) -> Result<(), ValidationError> {
        self.image
            .as_deref()
            .map_or(Ok(()), |image| check_image_ref("image", image))
    }

    /// Checks the host-access fields (`shm_size`, `caps`, `sysctls`, `devices`) and gives them
    /// normalised. Not part of [`validate`](Self::validate): a frame carrying a bad one is
    /// decoded, and the agent fails that app alone; a control plane calls both.
    pub fn host_access(&self) -> Result<HostAccess, ValidationError> {
        Ok(HostAccess {
            shm_size_bytes: self.shm_size.as_ref().map(check_shm_size).transpose()?,
            caps: check_caps(&self.caps)?,
            sysctls: check_sysctls(&self.sysctls)?,
            devices: check_devices(&self.devices)?,
        })
    }

    fn validate_env(&self) -> Result<(), ValidationError> {
        if self.env.len() > MAX_ENV {
            return Err(ValidationError::new(
                "env",
                format!("has {} entries, the limit is {MAX_ENV}", self.env.len()),
            ));
        }
        for (key, value) in &self.env {
            let field = format!("env.{key}");
            if key.is_empty() || key.contains('=') || key.chars().any(char::is_control) {
                return Err(ValidationError::new(
                    "env",
                    format!(
                        "{key:?} is not a valid variable name (empty, or contains '=' or a control character)"
                    ),
                ));
            }
            check_string(&field, key)?;
            check_string(&field, value)?;
            if value.contains('\0') {
                return Err(ValidationError::new(field, "must not contain NUL"));
            }
        }
        Ok(())
    }
}

impl PortMapping {
    /// Checks both ports are in 1..=65535.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let check = |field: &str, p: u32| {
            if (1..=65535).contains(&p) {
                Ok(())
            } else {
                Err(ValidationError::new(
                    field,
                    format!("{p} is out of range 1..=65535"),
                ))
            }
        };
        check("container", self.container)?;
        if let Some(h) = self.host {
            check("host", h)?;
        }
        Ok(())
    }
}

impl VolumeMount {
    /// Checks the source (named volume or absolute host path) and the absolute target.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_required("source", &self.source)?;
        check_required("target", &self.target)?;
        if self.is_bind() {
            if self.source.split('/').any(|c| c == "..") {
                return Err(ValidationError::new(
                    "source",
                    format!("{:?} must not contain '..'", self.source),
                ));
            }
        } else {
            let mut chars = self.source.chars();
            let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
            let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            if !first_ok || !rest_ok {
                return Err(ValidationError::new(
                    "source",
                    format!(
                        "{:?} is neither an absolute host path nor a volume name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)",
                        self.source
                    ),
                ));
            }
        }
        if !self.target.starts_with('/') || self.target.split('/').any(|c| c == "..") {
            return Err(ValidationError::new(
                "target",
                format!(
                    "{:?} must be an absolute container path without '..'",
                    self.target
                ),
            ));
        }
        Ok(())
    }
}

impl Resources {
    /// Checks 6 MiB ≤ memory ≤ 1 PiB and 1e-9 ≤ cpus ≤ 1024.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_bytes(
            "memory_bytes",
            self.memory_bytes,
            MIN_MEMORY_BYTES,
            MAX_MEMORY_BYTES,
        )?;
        if let Some(c) = self.cpus
            && !(c.is_finite() && (MIN_CPUS..=MAX_CPUS).contains(&c))
        {
            return Err(ValidationError::new(
                "cpus",
                format!(
                    "{c} is out of range [{MIN_CPUS:e}, {MAX_CPUS}] (one nano-cpu is the engine's smallest unit; less would mean no limit)"
                ),
            ));
        }
        Ok(())
    }
}
