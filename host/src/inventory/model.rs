//! The scan result: what this host has, as plain data. Produced by [`super::scan`], read by
//! the verdict, the CLI and the GPU decision (`gpu/`). Device-node paths are always host
//! paths (`/dev/dri/renderD128`), never paths under the scan root.

use serde::Serialize;

/// GPU vendors the agent can pass into containers: the protocol's, one type from scan to wire.
pub use odac_protocol::Vendor;

/// Kernel drivers that make this vendor's GPU usable from containers.
pub fn usable_drivers(vendor: Vendor) -> &'static [&'static str] {
    vendor.facts().drivers
}

/// Everything one scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostScan {
    pub host: HostFacts,
    /// GPUs of supported vendors, ordered by vendor, then PCI address.
    pub gpus: Vec<Gpu>,
    /// Display/accelerator-class devices that are not passable GPUs (BMC and virtual VGA,
    /// unsupported vendors), with why.
    pub other_devices: Vec<OtherDevice>,
    pub nvidia: NvidiaHost,
    pub amd: AmdHost,
    pub cdi: CdiScan,
    /// What could not be read or made sense of; the scan carried on regardless.
    pub problems: Vec<ScanProblem>,
    /// Driver version and VRAM per GPU id, where the host exposes them.
    pub gpu_details: std::collections::BTreeMap<String, GpuDetails>,
}

/// Host facts for the inventory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostFacts {
    pub hostname: Option<String>,
    /// `PRETTY_NAME` from `/etc/os-release`.
    pub os: Option<String>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: Option<String>,
    /// Architecture of this agent build (`x86_64`, `aarch64`).
    pub arch: String,
    pub cpus: Option<u32>,
    pub memory_bytes: Option<u64>,
}

/// PCI identity of a device, as far as sysfs tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PciIds {
    pub vendor_id: u32,
    pub device_id: Option<u32>,
    pub subsystem_vendor_id: Option<u32>,
    pub subsystem_device_id: Option<u32>,
    /// Full class code (`0x030200`); absent when sysfs had none.
    pub class: Option<u32>,
}

/// A device node on the host, with the numeric owner group and permission bits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceNode {
    /// Host path, e.g. `/dev/dri/renderD128`.
    pub path: String,
    /// Whether the node exists on the host.
    pub present: bool,
    /// Whether it is a real character device (fixture trees use empty files).
    pub char_device: bool,
    /// Owning group id (numeric: names resolve against the container's /etc/group).
    pub gid: Option<u32>,
    /// Permission bits (`0o660`).
    pub mode: Option<u32>,
}

/// One GPU of a supported vendor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    pub vendor: Vendor,
    /// Position among this vendor's GPUs (PCI address order), the NVIDIA/NVML index.
    pub index: u32,
    /// `dddd:bb:dd.f`; absent only when sysfs gave no address at all.
    pub pci_address: Option<String>,
    pub pci: PciIds,
    /// Bound kernel driver (`nvidia`, `nouveau`, `amdgpu`, `i915`, `xe`, `vfio-pci`).
    pub driver: Option<String>,
    pub model: Option<String>,
    /// `/dev/dri/cardN` of this GPU.
    pub card: Option<DeviceNode>,
    /// `/dev/dri/renderDN` of this GPU.
    pub render: Option<DeviceNode>,
    pub nvidia: Option<NvidiaGpu>,
    pub amd: Option<AmdGpu>,
    /// Fully-qualified CDI device ids that refer to exactly this GPU.
    pub cdi_ids: Vec<String>,
}

impl Gpu {
    /// Whether the GPU is bound to a driver that containers can use.
    pub fn driver_usable(&self) -> bool {
        self.driver
            .as_deref()
            .is_some_and(|d| usable_drivers(self.vendor).contains(&d))
    }

    /// Stable identifier: the PCI address, or the DRM card name when sysfs had no address.
    pub fn id(&self) -> String {
        if let Some(addr) = &self.pci_address {
            return addr.clone();
        }
        match &self.card {
            Some(card) => format!("drm:{}", card.path.rsplit('/').next().unwrap_or_default()),
            None => format!("{}:{}", self.vendor, self.index),
        }
    }

    /// The device nodes that are this GPU's own (card, render, `/dev/nvidiaN`).
    pub fn own_nodes(&self) -> impl Iterator<Item = &DeviceNode> {
        self.card
            .iter()
            .chain(self.render.iter())
            .chain(self.nvidia.iter().filter_map(|n| n.device_node.as_ref()))
            .chain(
                self.amd
                    .iter()
                    .flat_map(|a| a.partition_render_nodes.iter()),
            )
    }
}

/// NVIDIA-specific per-GPU facts, from `/proc/driver/nvidia/gpus/<bdf>/information`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NvidiaGpu {
    /// `Device Minor`: the N of `/dev/nvidiaN`.
    pub minor: Option<u32>,
    pub uuid: Option<String>,
    /// `/dev/nvidiaN`, when the minor is known.
    pub device_node: Option<DeviceNode>,
    /// Whether the driver's procfs entry for this GPU exists.
    pub proc_info: bool,
}

/// AMD-specific per-GPU facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AmdGpu {
    /// `mem_info_vram_total` in bytes.
    pub vram_bytes: Option<u64>,
    /// kfd topology node ids that belong to this GPU (several when it is partitioned).
    pub kfd_nodes: Vec<u32>,
    /// kfd `unique_id`, shared by all partitions of one GPU.
    pub unique_id: Option<String>,
    /// Render nodes of every partition beyond the first (from the kfd topology); a
    /// partitioned GPU is passed with all of them.
    pub partition_render_nodes: Vec<DeviceNode>,
}

/// A display/accelerator-class device that is not a passable GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OtherDevice {
    pub pci_address: Option<String>,
    pub pci: PciIds,
    pub driver: Option<String>,
    /// Why it is not passable (`bmc or virtual display`, `unsupported vendor`).
    pub why: String,
}

/// Host-wide NVIDIA driver and toolkit state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NvidiaHost {
    /// `/sys/module/nvidia` exists.
    pub module_loaded: bool,
    /// From `/proc/driver/nvidia/version` or `/sys/module/nvidia/version`.
    pub driver_version: Option<String>,
    /// `/dev/nvidiactl`.
    pub control_node: DeviceNode,
    /// `/dev/nvidia-uvm`.
    pub uvm_node: DeviceNode,
    /// Toolkit binaries found on the host's PATH, as host paths.
    pub toolkit: Vec<ToolkitBinary>,
}

impl NvidiaHost {
    /// Whether `nvidia-container-runtime-hook` is installed (Docker's `nvidia` device driver
    /// needs it on dockerd's PATH).
    pub fn has_runtime_hook(&self) -> bool {
        self.toolkit
            .iter()
            .any(|b| b.name == "nvidia-container-runtime-hook")
    }

    /// Whether `nvidia-ctk` is installed.
    pub fn has_ctk(&self) -> bool {
        self.toolkit.iter().any(|b| b.name == "nvidia-ctk")
    }
}

/// A container-toolkit binary found on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolkitBinary {
    pub name: String,
    pub path: String,
}

/// Host-wide AMD ROCm state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AmdHost {
    /// `/sys/class/kfd/kfd/topology` exists.
    pub kfd_topology: bool,
    /// `/dev/kfd`.
    pub kfd_node: DeviceNode,
    /// GPU nodes of the kfd topology (CPU nodes left out).
    pub kfd_gpu_nodes: Vec<KfdNode>,
}

/// One GPU node of the kfd topology.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KfdNode {
    pub node: u32,
    pub device_id: Option<u32>,
    /// PCI address decoded from `domain` + `location_id`.
    pub pci_address: Option<String>,
    pub render_minor: Option<u32>,
    pub unique_id: Option<String>,
}

/// CDI specs found in the host's spec directories.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CdiScan {
    /// Directories that were read (host paths).
    pub spec_dirs: Vec<String>,
    pub specs: Vec<CdiSpec>,
}

impl CdiScan {
    /// Every fully-qualified device id, sorted.
    pub fn device_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .specs
            .iter()
            .flat_map(|s| s.devices.iter().map(|d| d.id.clone()))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// One parsed CDI spec file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CdiSpec {
    /// Host path of the spec file.
    pub path: String,
    /// The spec directory it was found in (host path).
    pub dir: String,
    pub cdi_version: String,
    /// `vendor.com/class`.
    pub kind: String,
    pub devices: Vec<CdiDevice>,
}

/// One device of a CDI spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CdiDevice {
    pub name: String,
    /// Fully-qualified id `vendor.com/class=name`.
    pub id: String,
    /// Host paths of the device nodes the device injects.
    pub nodes: Vec<String>,
}

/// Something the scan could not read or understand.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScanProblem {
    /// Host path.
    pub path: String,
    pub problem: String,
}

/// What the inventory adds to one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GpuDetails {
    /// Version of the bound driver.
    pub driver_version: Option<String>,
    /// VRAM size, bytes.
    pub vram_bytes: Option<u64>,
}
