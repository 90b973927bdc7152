//! The one place where the scan's domain types become the protocol's `Inventory`. Device
//! paths stay host paths; a GPU without a PCI address (only in partial sysfs trees) is named
//! by its DRM card (`drm:card0`).

use std::collections::BTreeMap;

use odac_protocol::{AcceleratorVerdict, EngineInfo, GpuHealth, GpuInfo, HostInfo, Inventory};

use super::cuda::cuda_for_driver;
use super::model::{HostScan, Vendor};
use super::verdict::{VendorVerdict, gpu_passable};
use crate::engine::EngineCapabilities;

/// Build the wire inventory from a scan, the engine's capabilities and the verdicts.
pub fn to_inventory(
    scan: &HostScan,
    engine: &EngineCapabilities,
    verdicts: &BTreeMap<Vendor, VendorVerdict>,
) -> Inventory {
    let h = &scan.host;
    let host = HostInfo {
        hostname: h.hostname.clone().unwrap_or_default(),
        os: h.os.clone().unwrap_or_default(),
        kernel: h.kernel.clone().unwrap_or_default(),
        arch: h.arch.clone(),
        cpus: h.cpus.unwrap_or(0),
        memory_bytes: h.memory_bytes.unwrap_or(0),
        cuda_version: scan
            .nvidia
            .driver_version
            .as_deref()
            .and_then(cuda_for_driver)
            .map(|c| c.to_string()),
    };
    let gpus = scan
        .gpus
        .iter()
        .map(|g| {
            let device_id = g
                .pci
                .device_id
                .map_or_else(|| "unknown".to_owned(), |d| format!("0x{d:04x}"));
            let vendor_id = format!("0x{:04x}", g.pci.vendor_id);
            let model = g
                .model
                .clone()
                .unwrap_or_else(|| format!("{} gpu {vendor_id}:{device_id}", g.vendor));
            let details = scan.gpu_details.get(&g.id());
            let driver_version = details.and_then(|d| d.driver_version.clone());
            let passable = verdicts
                .get(&g.vendor)
                .is_some_and(|v| gpu_passable(scan, g, v));
            GpuInfo {
                vendor: g.vendor,
                pci_address: g.id(),
                vendor_id,
                device_id,
                model,
                driver: g.driver.clone(),
                driver_version,
                vram_bytes: details.and_then(|d| d.vram_bytes),
                card_node: g.card.as_ref().map(|n| n.path.clone()),
                render_node: g.render.as_ref().map(|n| n.path.clone()),
                uuid: g.nvidia.as_ref().and_then(|n| n.uuid.clone()),
                passable,
                health: None,
            }
        })
        .collect();
    let accelerators = verdicts
        .iter()
        .map(|(v, verdict)| {
            (
                *v,
                AcceleratorVerdict {
                    schedulable: verdict.schedulable,
                    reason: verdict.reason,
                    mechanism: verdict.mechanism,
                    detail: (!verdict.detail.is_empty()).then(|| verdict.detail.clone()),
                },
            )
        })
        .collect();
    let engine = EngineInfo {
        reachable: engine.reachable,
        version: engine.server_version.clone(),
        api_version: engine.api_version.clone(),
        runtimes: engine.runtimes.clone(),
        default_runtime: engine.default_runtime.clone(),
        cdi_spec_dirs: engine.cdi_spec_dirs.clone(),
        cdi_devices: engine.cdi_devices.clone(),
    };
    Inventory {
        host,
        gpus,
        accelerators,
        engine,
    }
}

/// Gives each GPU of `inventory` its health (GPUs without an entry are healthy and stay
/// without one); an unhealthy GPU is not passable.
pub fn with_health(inventory: &mut Inventory, health: &BTreeMap<String, GpuHealth>) {
    for gpu in &mut inventory.gpus {
        gpu.health = health.get(&gpu.pci_address).cloned();
        if gpu.health.as_ref().is_some_and(|h| !h.is_healthy()) {
            gpu.passable = false;
        }
    }
}
