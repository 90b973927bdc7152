//! The way back from a wire [`Inventory`] to an [`Assessment`]: what a host that reported this
//! inventory would have assessed, so that a process that only holds the inventory (the
//! simulator's fake agents) decides GPU placement with [`resolve()`](super::resolve()) itself
//! instead of a copy that could drift from it.
//!
//! The inventory is the assessment's summary, so the way back keeps what the resolver reads:
//! the verdicts as reported, each GPU with its vendor index, device nodes and UUID, the engine's
//! runtimes and CDI devices (a GPU's own CDI ids are those the engine lists under its index,
//! UUID or PCI address). A GPU the inventory marks not passable gets no driver (the
//! resolver then never picks it); `/dev/kfd` is present when an AMD GPU is passable; an NVIDIA
//! verdict of `nvidia_runtime` on an engine without that runtime stands for the runtime hook.
//! The inventory does not carry the extra render nodes of a partitioned AMD GPU, so there the
//! rebuilt attachment holds each GPU's first node only.

use odac_protocol::Compute;
use std::collections::BTreeMap;

use odac_protocol::{GpuInfo, Inventory, Mechanism};

use crate::engine::EngineCapabilities;
use crate::inventory::cdi::kind_of;
use crate::inventory::{
    Assessment, DeviceNode, Gpu, HostFacts, HostScan, NvidiaGpu, PciIds, ToolkitBinary, Vendor,
    VendorVerdict,
};

/// The hook that stands for an NVIDIA runtime the engine does not list.
const RUNTIME_HOOK: &str = "nvidia-container-runtime-hook";

/// The assessment of a host that reported `inv`; see the module documentation.
pub fn assessment_from_inventory(inv: &Inventory) -> Assessment {
    let engine = engine(inv);
    let mut scan = HostScan {
        host: host(inv),
        ..HostScan::default()
    };
    let mut per_vendor: BTreeMap<Vendor, u32> = BTreeMap::new();
    let mut unhealthy = BTreeMap::new();
    for info in &inv.gpus {
        if let Some(error) = unhealthy_error(info) {
            unhealthy.insert(info.pci_address.clone(), error);
        }
        let vendor = info.vendor;
        let index = per_vendor.entry(vendor).or_default();
        let g = gpu(info, vendor, *index, &engine);
        if info.vram_bytes.is_some() || info.driver_version.is_some() {
            let details = crate::inventory::details::GpuDetails {
                driver_version: info.driver_version.clone(),
                vram_bytes: info.vram_bytes,
            };
            scan.gpu_details.insert(g.id(), details);
        }
        scan.gpus.push(g);
        *index += 1;
    }
    let amd_passable = scan
        .gpus
        .iter()
        .any(|g| g.vendor.facts().shared_node().is_some() && g.driver.is_some());
    scan.amd.kfd_node = node("/dev/kfd", amd_passable);
    let verdicts: BTreeMap<Vendor, VendorVerdict> = inv
        .accelerators
        .iter()
        .map(|(v, a)| {
            let verdict = VendorVerdict {
                schedulable: a.schedulable,
                reason: a.reason,
                mechanism: a.mechanism,
                detail: a.detail.clone().unwrap_or_default(),
            };
            (*v, verdict)
        })
        .collect();
    let nvidia_runtime = verdicts
        .get(&Vendor::Nvidia)
        .is_some_and(|v| v.mechanism == Some(Mechanism::NvidiaRuntime));
    if nvidia_runtime && !engine.has_runtime("nvidia") {
        scan.nvidia.toolkit.push(ToolkitBinary {
            name: RUNTIME_HOOK.to_owned(),
            path: format!("/usr/bin/{RUNTIME_HOOK}"),
        });
    }
    Assessment {
        scan,
        engine,
        verdicts,
        free_vram_mib: BTreeMap::new(),
        unhealthy,
    }
}

fn host(inv: &Inventory) -> HostFacts {
    let h = &inv.host;
    let some = |s: &String| (!s.is_empty()).then(|| s.clone());
    HostFacts {
        hostname: some(&h.hostname),
        os: some(&h.os),
        kernel: some(&h.kernel),
        arch: h.arch.clone(),
        cpus: Some(h.cpus),
        memory_bytes: Some(h.memory_bytes),
    }
}

fn engine(inv: &Inventory) -> EngineCapabilities {
    let e = &inv.engine;
    EngineCapabilities {
        reachable: e.reachable,
        error: None,
        server_version: e.version.clone(),
        api_version: e.api_version.clone(),
        runtimes: e.runtimes.clone(),
        default_runtime: e.default_runtime.clone(),
        cdi_spec_dirs: e.cdi_spec_dirs.clone(),
        cdi_devices: e.cdi_devices.clone(),
        warnings: Vec::new(),
    }
}

/// A present device node at `path` (owner and mode unknown).
fn node(path: &str, present: bool) -> DeviceNode {
    DeviceNode {
        path: path.to_owned(),
        present,
        char_device: present,
        gid: None,
        mode: None,
    }
}

fn hex(s: &str) -> Option<u32> {
    u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// The error of a GPU the agent reports unhealthy (an unhealthy GPU is reported not
/// passable, yet it is there: the decision names it as `gpu_unhealthy`).
fn unhealthy_error(info: &GpuInfo) -> Option<String> {
    let health = info.health.as_ref().filter(|h| !h.is_healthy())?;
    Some(
        health
            .last_error
            .as_ref()
            .map_or_else(|| "unhealthy".to_owned(), |e| e.summary.clone()),
    )
}

/// The `index`-th GPU of `vendor`, from its inventory entry.
fn gpu(info: &GpuInfo, vendor: Vendor, index: u32, engine: &EngineCapabilities) -> Gpu {
    let usable = crate::inventory::model::usable_drivers(vendor);
    let driver = if info.passable || unhealthy_error(info).is_some() {
        info.driver
            .clone()
            .filter(|d| usable.contains(&d.as_str()))
            .or_else(|| usable.first().map(|d| (*d).to_owned()))
    } else {
        None
    };
    // the engine's CDI devices that name this GPU by index, UUID or PCI address, of its
    // vendor's kind or of a kind no vendor uses (`example.com/device=0`)
    let names = [
        Some(index.to_string()),
        info.uuid.clone(),
        Some(info.pci_address.clone()),
    ];
    let cdi_ids = engine
        .cdi_devices
        .iter()
        .filter(|id| {
            Vendor::ALL
                .into_iter()
                .find(|v| v.cdi_kind() == kind_of(id))
                .is_none_or(|v| v == vendor)
        })
        .filter(|id| {
            let name = id.split_once('=').map_or("", |(_, n)| n);
            names.iter().flatten().any(|n| n == name)
        })
        .cloned()
        .collect();
    Gpu {
        vendor,
        index,
        pci_address: Some(info.pci_address.clone()),
        pci: PciIds {
            vendor_id: hex(&info.vendor_id).unwrap_or(0),
            device_id: hex(&info.device_id),
            ..PciIds::default()
        },
        driver,
        model: Some(info.model.clone()),
        card: info.card_node.as_deref().map(|p| node(p, true)),
        render: info.render_node.as_deref().map(|p| node(p, true)),
        nvidia: (vendor.facts().compute == Compute::Cuda).then(|| NvidiaGpu {
            uuid: info.uuid.clone(),
            proc_info: true,
            ..NvidiaGpu::default()
        }),
        amd: None,
        cdi_ids,
    }
}
