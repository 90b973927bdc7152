//! `Inventory`: what the agent found on its host — host facts, GPUs, a per-vendor verdict on
//! whether a GPU can be passed into a container (and if not, why), and the container engine's
//! capabilities. Maps are `BTreeMap`s so serialisation is deterministic and the agent can hash
//! an inventory to detect changes.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gpu_health::GpuHealth;
use crate::limits::{MAX_GPU_COUNT, MAX_LIST};
use crate::reason::Reason;
use crate::validation::{ValidationError, check_opt_string, check_string, check_string_list};
use crate::vendor::{Mechanism, Vendor};

/// The host's hardware and engine inventory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Inventory {
    /// Host facts.
    pub host: HostInfo,
    /// GPUs found on the PCI bus (NVIDIA, AMD, Intel; BMC/virtual display adapters excluded).
    #[serde(default)]
    pub gpus: Vec<GpuInfo>,
    /// Per vendor: can a GPU be passed into a container, and if not, why.
    #[serde(default)]
    #[schemars(extend("propertyNames" = { "enum": ["nvidia", "amd", "intel"] }))]
    pub accelerators: BTreeMap<Vendor, AcceleratorVerdict>,
    /// The container engine.
    pub engine: EngineInfo,
}

/// Host facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// Operating system, e.g. `Debian GNU/Linux 12 (bookworm)` (PRETTY_NAME of os-release).
    pub os: String,
    /// Kernel release, e.g. `6.1.0-28-amd64`.
    pub kernel: String,
    /// CPU architecture, e.g. `x86_64`.
    pub arch: String,
    /// Logical CPUs.
    pub cpus: u32,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// The CUDA driver API version the host's NVIDIA driver supports, e.g. `12.4` (what
    /// `nvidia-smi` prints as "CUDA Version"); absent without an NVIDIA driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuInfo {
    /// Vendor.
    pub vendor: Vendor,
    /// PCI address, e.g. `0000:01:00.0`.
    pub pci_address: String,
    /// PCI vendor id as in sysfs, e.g. `0x10de`.
    pub vendor_id: String,
    /// PCI device id as in sysfs, e.g. `0x2204`.
    pub device_id: String,
    /// Model name when known, else a description built from the ids.
    pub model: String,
    /// Bound kernel driver, e.g. `nvidia`, `amdgpu`, `i915`, `xe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Driver version, e.g. `550.54.14`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// Video memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_bytes: Option<u64>,
    /// DRM card node, e.g. `/dev/dri/card1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_node: Option<String>,
    /// DRM render node, e.g. `/dev/dri/renderD128`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_node: Option<String>,
    /// Vendor UUID, e.g. NVIDIA's `GPU-…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Whether this GPU can be passed into a container now.
    #[serde(default)]
    pub passable: bool,
    /// Whether the agent trusts this GPU (kernel-reported errors); absent from agents that
    /// do not watch GPU health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<GpuHealth>,
}

/// Whether a vendor's GPUs can be scheduled into containers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AcceleratorVerdict {
    /// True when at least one GPU of the vendor can be passed into a container.
    pub schedulable: bool,
    /// Why not, when not schedulable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// How GPUs would be passed, when schedulable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<Mechanism>,
    /// Human-readable evidence, e.g. `nvidia runtime missing from docker info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The container engine's reachability and capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct EngineInfo {
    /// Whether the engine answered.
    pub reachable: bool,
    /// Engine version, e.g. `28.2.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Engine API version, e.g. `1.50`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Registered OCI runtimes (`docker info` Runtimes), e.g. `["nvidia", "runc"]`.
    #[serde(default)]
    pub runtimes: Vec<String>,
    /// Default runtime, e.g. `runc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_runtime: Option<String>,
    /// CDI spec directories the engine reads (empty when CDI is off or unsupported).
    #[serde(default)]
    pub cdi_spec_dirs: Vec<String>,
    /// Fully qualified CDI device names the engine discovered, e.g. `nvidia.com/gpu=0`.
    #[serde(default)]
    pub cdi_devices: Vec<String>,
}

impl Inventory {
    /// Checks string lengths and list sizes.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let h = &self.host;
        for (f, v) in [
            ("host.hostname", &h.hostname),
            ("host.os", &h.os),
            ("host.kernel", &h.kernel),
            ("host.arch", &h.arch),
        ] {
            check_string(f, v)?;
        }
        check_opt_string("host.cuda_version", h.cuda_version.as_ref())?;
        let max_gpus = usize::try_from(MAX_GPU_COUNT).unwrap_or(usize::MAX);
        if self.gpus.len() > max_gpus {
            return Err(ValidationError::new(
                "gpus",
                format!("has {} entries, the limit is {max_gpus}", self.gpus.len()),
            ));
        }
        for (i, g) in self.gpus.iter().enumerate() {
            g.validate().map_err(|e| e.under(&format!("gpus[{i}]")))?;
        }
        for (vendor, verdict) in &self.accelerators {
            check_opt_string(
                &format!("accelerators.{vendor}.detail"),
                verdict.detail.as_ref(),
            )?;
        }
        let e = &self.engine;
        check_opt_string("engine.version", e.version.as_ref())?;
        check_opt_string("engine.api_version", e.api_version.as_ref())?;
        check_opt_string("engine.default_runtime", e.default_runtime.as_ref())?;
        check_string_list("engine.runtimes", &e.runtimes, MAX_LIST)?;
        check_string_list("engine.cdi_spec_dirs", &e.cdi_spec_dirs, MAX_LIST)?;
        check_string_list("engine.cdi_devices", &e.cdi_devices, MAX_LIST)?;
        Ok(())
    }
}

impl GpuInfo {
    /// Checks string lengths.
    pub fn validate(&self) -> Result<(), ValidationError> {
        for (f, v) in [
            ("pci_address", &self.pci_address),
            ("vendor_id", &self.vendor_id),
            ("device_id", &self.device_id),
            ("model", &self.model),
        ] {
            check_string(f, v)?;
        }
        for (f, v) in [
            ("driver", &self.driver),
            ("driver_version", &self.driver_version),
            ("card_node", &self.card_node),
            ("render_node", &self.render_node),
            ("uuid", &self.uuid),
        ] {
            check_opt_string(f, v.as_ref())?;
        }
        if let Some(h) = &self.health {
            h.validate()?;
        }
        Ok(())
    }
}
