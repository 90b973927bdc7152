//! The per-vendor verdict: can a GPU of this vendor be passed into a container, by which
//! mechanism, and if not, why. A pure function of the host scan and the engine's
//! capabilities, so every combination can be table-tested.
//!
//! Rules, in order (the first that applies wins):
//! 1. no GPU of the vendor → `no_device` (the verdict map always holds all three vendors, so
//!    a host without any GPU reports `no_device` for each);
//! 2. no GPU of the vendor passes its hardware check → that GPU's reason: `no_driver` (no
//!    driver, the wrong driver such as nouveau or vfio-pci, or AMD without `/dev/kfd`), or
//!    `no_render_node` (AMD/Intel without a `/dev/dri/renderD*` node);
//! 3. engine unreachable → `engine_unavailable` (hardware problems are reported first: they
//!    outlast an engine restart);
//! 4. the engine has CDI enabled and lists a CDI device of this vendor (its `DiscoveredDevices`,
//!    or, for engines that do not report them, a host spec in one of its `CDISpecDirs`) →
//!    mechanism `cdi`;
//! 5. NVIDIA: `nvidia` runtime in `docker info` or `nvidia-container-runtime-hook` installed →
//!    `nvidia_runtime`, else `no_container_runtime`; AMD and Intel → `device_nodes`.

use std::collections::BTreeMap;

use odac_protocol::{Mechanism, Reason};
use serde::Serialize;

use super::cdi::{in_dirs, kind_of};
use super::model::{Gpu, HostScan, Vendor, usable_drivers};
use crate::engine::EngineCapabilities;

/// One vendor's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VendorVerdict {
    pub schedulable: bool,
    /// Why not, when not schedulable.
    pub reason: Option<Reason>,
    /// How, when schedulable.
    pub mechanism: Option<Mechanism>,
    /// The evidence, in a few words.
    pub detail: String,
}

impl VendorVerdict {
    fn yes(mechanism: Mechanism, detail: impl Into<String>) -> Self {
        Self {
            schedulable: true,
            reason: None,
            mechanism: Some(mechanism),
            detail: detail.into(),
        }
    }

    fn no(reason: Reason, detail: impl Into<String>) -> Self {
        Self {
            schedulable: false,
            reason: Some(reason),
            mechanism: None,
            detail: detail.into(),
        }
    }
}

/// A GPU's own hardware problem: the reason and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuProblem {
    pub reason: Reason,
    pub detail: String,
}

/// Verdicts for every vendor (absent vendors get `no_device`).
pub fn verdicts(scan: &HostScan, engine: &EngineCapabilities) -> BTreeMap<Vendor, VendorVerdict> {
    Vendor::ALL
        .into_iter()
        .map(|v| (v, vendor_verdict(scan, engine, v)))
        .collect()
}

/// One vendor's verdict.
pub fn vendor_verdict(
    scan: &HostScan,
    engine: &EngineCapabilities,
    vendor: Vendor,
) -> VendorVerdict {
    let gpus: Vec<&Gpu> = scan.gpus.iter().filter(|g| g.vendor == vendor).collect();
    if gpus.is_empty() {
        let detail = if scan.other_devices.is_empty() {
            format!("no {vendor} gpu on the pci bus")
        } else {
            let others: Vec<String> = scan.other_devices.iter().map(|d| d.why.clone()).collect();
            format!(
                "no {vendor} gpu on the pci bus (only: {})",
                others.join("; ")
            )
        };
        return VendorVerdict::no(Reason::NoDevice, detail);
    }
    let problems: Vec<Option<GpuProblem>> = gpus.iter().map(|g| gpu_problem(scan, g)).collect();
    let usable = problems.iter().filter(|p| p.is_none()).count();
    if usable == 0 {
        let first = problems.into_iter().flatten().next();
        return match first {
            Some(p) => VendorVerdict::no(p.reason, p.detail),
            None => VendorVerdict::no(Reason::NoDriver, format!("no usable {vendor} gpu")),
        };
    }
    if !engine.reachable {
        let why = engine.error.as_deref().unwrap_or("not asked");
        return VendorVerdict::no(
            Reason::EngineUnavailable,
            format!("container engine unreachable: {why}"),
        );
    }
    let usable_of = format!("{usable} of {} {vendor} gpu(s) usable", gpus.len());
    if let Some(id) = cdi_device_for(scan, engine, vendor) {
        return VendorVerdict::yes(
            Mechanism::Cdi,
            format!("{usable_of}; engine cdi device {id}"),
        );
    }
    match vendor {
        Vendor::Nvidia => {
            if engine.has_runtime("nvidia") {
                VendorVerdict::yes(
                    Mechanism::NvidiaRuntime,
                    format!("{usable_of}; nvidia runtime registered with the engine"),
                )
            } else if scan.nvidia.has_runtime_hook() {
                VendorVerdict::yes(
                    Mechanism::NvidiaRuntime,
                    format!("{usable_of}; nvidia-container-runtime-hook installed"),
                )
            } else if scan.nvidia.has_ctk() {
                VendorVerdict::no(
                    Reason::NoContainerRuntime,
                    "nvidia-ctk is installed but the engine has no nvidia runtime and no \
                     nvidia-container-runtime-hook is on the path",
                )
            } else {
                VendorVerdict::no(
                    Reason::NoContainerRuntime,
                    "no nvidia runtime in docker info and no nvidia container toolkit installed",
                )
            }
        }
        Vendor::Amd => VendorVerdict::yes(
            Mechanism::DeviceNodes,
            format!("{usable_of}; /dev/kfd and render nodes present"),
        ),
        Vendor::Intel => VendorVerdict::yes(
            Mechanism::DeviceNodes,
            format!("{usable_of}; render nodes present"),
        ),
    }
}

/// What keeps this GPU from being passed into a container, host-side (engine aside).
pub fn gpu_problem(scan: &HostScan, gpu: &Gpu) -> Option<GpuProblem> {
    let id = gpu.id();
    if !gpu.driver_usable() {
        let detail = match &gpu.driver {
            None => format!("{id}: no kernel driver bound"),
            Some(d) => format!(
                "{id}: bound to {d}, needs {}",
                usable_drivers(gpu.vendor).join(" or ")
            ),
        };
        return Some(GpuProblem {
            reason: Reason::NoDriver,
            detail,
        });
    }
    let render_present = gpu.render.as_ref().is_some_and(|n| n.present);
    match gpu.vendor {
        Vendor::Nvidia => None,
        Vendor::Amd if !scan.amd.kfd_node.present => Some(GpuProblem {
            reason: Reason::NoDriver,
            detail: format!(
                "{id}: amdgpu is loaded but /dev/kfd is missing (no rocm compute support)"
            ),
        }),
        Vendor::Amd | Vendor::Intel if !render_present => Some(GpuProblem {
            reason: Reason::NoRenderNode,
            detail: match &gpu.render {
                Some(n) => format!("{id}: {} is missing", n.path),
                None => format!("{id}: no renderD* node in sysfs"),
            },
        }),
        Vendor::Amd | Vendor::Intel => None,
    }
}

/// Whether this GPU can be passed into a container under this vendor verdict.
pub fn gpu_passable(scan: &HostScan, gpu: &Gpu, verdict: &VendorVerdict) -> bool {
    verdict.schedulable && gpu_problem(scan, gpu).is_none()
}

/// The vendor a CDI device id belongs to: the GPU it refers to, else its kind.
pub fn cdi_vendor(scan: &HostScan, id: &str) -> Option<Vendor> {
    if let Some(gpu) = scan.gpus.iter().find(|g| g.cdi_ids.iter().any(|c| c == id)) {
        return Some(gpu.vendor);
    }
    let kind = kind_of(id);
    Vendor::ALL.into_iter().find(|v| v.cdi_kind() == kind)
}

/// A CDI device of this vendor the engine can inject, if CDI is the way.
fn cdi_device_for(scan: &HostScan, engine: &EngineCapabilities, vendor: Vendor) -> Option<String> {
    if !engine.cdi_enabled() {
        return None;
    }
    if !engine.cdi_devices.is_empty() {
        return engine
            .cdi_devices
            .iter()
            .find(|id| cdi_vendor(scan, id) == Some(vendor))
            .cloned();
    }
    scan.cdi
        .specs
        .iter()
        .filter(|s| in_dirs(&s.dir, &engine.cdi_spec_dirs))
        .flat_map(|s| s.devices.iter())
        .find(|d| cdi_vendor(scan, &d.id) == Some(vendor))
        .map(|d| d.id.clone())
}
