//! Per-GPU inventory details beyond what identifies a GPU: the driver version of every
//! vendor (NVIDIA from `/proc/driver/nvidia/version`; amdgpu, i915 and xe from
//! `/sys/module/<driver>/version` when the module is out of tree, else the kernel release
//! they ship with) and the VRAM size where the host exposes it (AMD `mem_info_vram_total`,
//! Intel xe `tile0/physical_vram_size_bytes` and i915 `lmem_total_bytes`).

use odac_protocol::VramSource;
use std::collections::BTreeMap;
use std::path::Path;

use super::fsread::Reader;
use super::model::{Gpu, HostScan};

pub use super::model::GpuDetails;

/// Details of every GPU of the scan, by [`Gpu::id`].
pub(crate) fn scan(r: &mut Reader, scan: &HostScan) -> BTreeMap<String, GpuDetails> {
    let mut modules: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for g in &scan.gpus {
        let driver_version = match g.driver.as_deref() {
            drv if g.vendor.facts().cuda_with(drv) => scan.nvidia.driver_version.clone(),
            Some(drv) if g.driver_usable() => modules
                .entry(drv.to_owned())
                .or_insert_with(|| {
                    r.text(&r.host(&format!("/sys/module/{drv}/version")))
                        .filter(|v| !v.is_empty())
                        .or_else(|| scan.host.kernel.clone())
                })
                .clone(),
            _ => None,
        };
        out.insert(
            g.id(),
            GpuDetails {
                driver_version,
                vram_bytes: vram(r, g),
            },
        );
    }
    out
}

fn vram(r: &mut Reader, g: &Gpu) -> Option<u64> {
    if let Some(v) = g.amd.as_ref().and_then(|a| a.vram_bytes) {
        return Some(v);
    }
    if g.vendor.facts().vram != VramSource::DrmSysfs {
        return None;
    }
    let dev = r.host(&format!(
        "/sys/bus/pci/devices/{}",
        g.pci_address.as_deref()?
    ));
    let card = g
        .card
        .as_ref()
        .and_then(|c| c.path.rsplit('/').next())
        .map(|name| r.host(&format!("/sys/class/drm/{name}")));
    let mut candidates = vec![dev.join("tile0/physical_vram_size_bytes")];
    if let Some(card) = &card {
        candidates.push(card.join("lmem_total_bytes"));
    }
    candidates
        .iter()
        .find_map(|p| bytes(r, p))
        .filter(|b| *b > 0)
}

fn bytes(r: &mut Reader, path: &Path) -> Option<u64> {
    let text = r.text(path)?;
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}
