//! The scan: reads every host path under a root and assembles a [`HostScan`]. It never fails:
//! what cannot be read is absent, and what looks wrong is listed in `problems`.
//!
//! The inventory lists at most [`MAX_GPU_COUNT`] GPUs (the protocol's limit): on a host with
//! more GPU PCI functions (SR-IOV virtual functions, each a PCI device) the physical functions
//! come first, the rest is left out, and a scan problem says how many and which; the inventory
//! is never refused for it.

use odac_protocol::Compute;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use odac_protocol::MAX_GPU_COUNT;

use super::fsread::Reader;
use super::model::{AmdGpu, Gpu, HostScan, NvidiaGpu, OtherDevice, Vendor};
use super::nvidia::ProcGpu;
use super::pci::{PciDevice, first_minor, not_passable_vendor};
use super::{amd, cdi, host, nvidia, pci};

/// Scan the host whose filesystem is mounted at `root` (`/` in production).
pub fn scan(root: &Path) -> HostScan {
    let mut r = Reader::new(root);
    let host = host::scan(&mut r);
    let nvidia_host = nvidia::scan_host(&mut r);
    let proc_gpus = nvidia::proc_gpus(&mut r);
    let amd_host = amd::scan_host(&mut r);

    let mut gpus = Vec::new();
    let mut other_devices = Vec::new();
    let mut virtual_functions = BTreeSet::new();
    for dev in pci::display_devices(&mut r) {
        let vendor_id = dev.ids.vendor_id;
        let accelerator_class = dev.ids.class.is_some_and(|c| c >> 16 == 0x12);
        let why = match (
            not_passable_vendor(vendor_id),
            Vendor::from_pci_id(vendor_id),
        ) {
            (Some(name), _) => Some(format!("{name} bmc or virtual display, not a gpu")),
            (None, None) => Some(format!("unsupported vendor 0x{vendor_id:04x}")),
            (None, Some(Vendor::Intel)) if accelerator_class => {
                Some("intel processing accelerator, not a gpu".to_owned())
            }
            (None, Some(vendor)) => {
                if r.exists(&dev.dir.join("physfn"))
                    && let Some(address) = &dev.pci_address
                {
                    virtual_functions.insert(address.clone());
                }
                gpus.push(build_gpu(&mut r, vendor, &dev, &proc_gpus));
                None
            }
        };
        if let Some(why) = why {
            other_devices.push(OtherDevice {
                pci_address: dev.pci_address,
                pci: dev.ids,
                driver: dev.driver,
                why,
            });
        }
    }

    add_proc_only_nvidia(&mut r, &mut gpus, &proc_gpus);
    attach_kfd(&mut r, &mut gpus, &amd_host);

    gpus.sort_by(|a, b| (a.vendor, &a.pci_address).cmp(&(b.vendor, &b.pci_address)));
    cap_gpus(&mut r, &mut gpus, &virtual_functions);
    let mut counters: BTreeMap<Vendor, u32> = BTreeMap::new();
    for gpu in &mut gpus {
        let counter = counters.entry(gpu.vendor).or_default();
        gpu.index = *counter;
        *counter += 1;
    }

    let cdi = cdi::scan(&mut r);
    attach_cdi(&mut gpus, &cdi);

    let unnamed: Vec<super::pciids::Id> = gpus
        .iter()
        .filter(|g| g.model.is_none())
        .filter_map(|g| Some((g.pci.vendor_id, g.pci.device_id?)))
        .collect();
    let names = super::pciids::names(&mut r, &unnamed);
    for g in gpus.iter_mut().filter(|g| g.model.is_none()) {
        if let Some(device) = g.pci.device_id {
            g.model = super::pciids::model(&names, g.vendor, g.pci.vendor_id, device);
        }
    }

    let mut scan = HostScan {
        host,
        gpus,
        other_devices,
        nvidia: nvidia_host,
        amd: amd_host,
        cdi,
        problems: Vec::new(),
        gpu_details: Default::default(),
    };
    scan.gpu_details = super::details::scan(&mut r, &scan);
    scan.problems = r.into_problems();
    scan
}

/// At most [`MAX_GPU_COUNT`] GPUs, physical functions first (in PCI order), with a scan
/// problem naming what was left out.
fn cap_gpus(r: &mut Reader, gpus: &mut Vec<Gpu>, virtual_functions: &BTreeSet<String>) {
    let max = usize::try_from(MAX_GPU_COUNT).unwrap_or(usize::MAX);
    if gpus.len() <= max {
        return;
    }
    let is_vf = |g: &Gpu| {
        g.pci_address
            .as_ref()
            .is_some_and(|a| virtual_functions.contains(a))
    };
    let total = gpus.len();
    let vfs = gpus.iter().filter(|g| is_vf(g)).count();
    // stable: physical functions keep their order, then the virtual ones
    gpus.sort_by_key(|g| is_vf(g));
    let left: Vec<Gpu> = gpus.split_off(max);
    gpus.sort_by(|a, b| (a.vendor, &a.pci_address).cmp(&(b.vendor, &b.pci_address)));
    let left_vfs = left.iter().filter(|g| is_vf(g)).count();
    let mut named: Vec<String> = left.iter().take(8).map(Gpu::id).collect();
    if left.len() > named.len() {
        named.push(format!("and {} more", left.len() - named.len()));
    }
    let bus = r.host("sys/bus/pci/devices");
    r.problem(
        &bus,
        format!(
            "{total} gpu pci functions ({vfs} sr-iov virtual functions), the inventory lists at most {max}: left out {} ({left_vfs} virtual functions): {}",
            left.len(),
            named.join(", ")
        ),
    );
}

fn build_gpu(
    r: &mut Reader,
    vendor: Vendor,
    dev: &PciDevice,
    proc_gpus: &BTreeMap<String, ProcGpu>,
) -> Gpu {
    let card = first_minor(&dev.drm, "card").map(|n| r.node(&format!("/dev/dri/{n}")));
    let render = first_minor(&dev.drm, "renderD").map(|n| r.node(&format!("/dev/dri/{n}")));
    let mut gpu = Gpu {
        vendor,
        index: 0,
        pci_address: dev.pci_address.clone(),
        pci: dev.ids.clone(),
        driver: dev.driver.clone(),
        model: None,
        card,
        render,
        nvidia: None,
        amd: None,
        cdi_ids: Vec::new(),
    };
    match vendor {
        Vendor::Nvidia => {
            let proc = dev.pci_address.as_ref().and_then(|a| proc_gpus.get(a));
            if gpu.driver.is_none() && proc.is_some() {
                gpu.driver = Some("nvidia".to_owned());
            }
            gpu.model = proc.and_then(|p| p.model.clone());
            gpu.nvidia = Some(nvidia_gpu(r, proc));
        }
        Vendor::Amd => {
            let vram_path = dev.dir.join("mem_info_vram_total");
            let vram_bytes = r.text(&vram_path).and_then(|t| {
                let v = t.parse::<u64>().ok();
                if v.is_none() {
                    r.problem(&vram_path, format!("not a byte count: {t:?}"));
                }
                v
            });
            gpu.model = r
                .text(&dev.dir.join("product_name"))
                .filter(|n| !n.is_empty());
            gpu.amd = Some(AmdGpu {
                vram_bytes,
                ..AmdGpu::default()
            });
        }
        Vendor::Intel => {}
    }
    gpu
}

fn nvidia_gpu(r: &mut Reader, proc: Option<&ProcGpu>) -> NvidiaGpu {
    let minor = proc.and_then(|p| p.minor);
    NvidiaGpu {
        minor,
        uuid: proc.and_then(|p| p.uuid.clone()),
        device_node: minor.map(|m| r.node(&format!("/dev/nvidia{m}"))),
        proc_info: proc.is_some(),
    }
}

/// GPUs the NVIDIA driver lists in procfs but sysfs did not show (partial trees).
fn add_proc_only_nvidia(
    r: &mut Reader,
    gpus: &mut Vec<Gpu>,
    proc_gpus: &BTreeMap<String, ProcGpu>,
) {
    for (addr, proc) in proc_gpus {
        if gpus.iter().any(|g| g.pci_address.as_deref() == Some(addr)) {
            continue;
        }
        let mut gpu = Gpu {
            vendor: Vendor::Nvidia,
            index: 0,
            pci_address: Some(addr.clone()),
            pci: super::model::PciIds {
                vendor_id: 0x10de,
                ..Default::default()
            },
            driver: Some("nvidia".to_owned()),
            model: proc.model.clone(),
            card: None,
            render: None,
            nvidia: None,
            amd: None,
            cdi_ids: Vec::new(),
        };
        gpu.nvidia = Some(nvidia_gpu(r, Some(proc)));
        gpus.push(gpu);
    }
}

/// Tie kfd topology nodes to AMD GPUs by PCI slot (partitions differ only in the function);
/// nodes with no PCI device in sysfs become GPUs of their own, one per slot.
fn attach_kfd(r: &mut Reader, gpus: &mut Vec<Gpu>, amd_host: &super::model::AmdHost) {
    for node in &amd_host.kfd_gpu_nodes {
        let Some(addr) = node.pci_address.as_deref() else {
            continue;
        };
        let slot = amd::slot_of(addr);
        let existing = gpus.iter().position(|g| {
            g.vendor.facts().compute == Compute::Rocm
                && g.pci_address
                    .as_deref()
                    .is_some_and(|a| amd::slot_of(a) == slot)
        });
        let idx = match existing {
            Some(idx) => idx,
            None => {
                gpus.push(Gpu {
                    vendor: Vendor::Amd,
                    index: 0,
                    pci_address: Some(addr.to_owned()),
                    pci: super::model::PciIds {
                        vendor_id: 0x1002,
                        device_id: node.device_id,
                        ..Default::default()
                    },
                    driver: Some("amdgpu".to_owned()),
                    model: None,
                    card: None,
                    render: None,
                    nvidia: None,
                    amd: Some(AmdGpu::default()),
                    cdi_ids: Vec::new(),
                });
                gpus.len() - 1
            }
        };
        let render = node
            .render_minor
            .map(|m| r.node(&format!("/dev/dri/renderD{m}")));
        let Some(gpu) = gpus.get_mut(idx) else {
            continue;
        };
        let amd = gpu.amd.get_or_insert_with(AmdGpu::default);
        amd.kfd_nodes.push(node.node);
        if amd.unique_id.is_none() {
            amd.unique_id = node.unique_id.clone();
        }
        if let Some(render) = render {
            match &gpu.render {
                None => gpu.render = Some(render),
                Some(own) if own.path == render.path => {}
                Some(_) => amd.partition_render_nodes.push(render),
            }
        }
    }
}

/// Record on each GPU the CDI device ids that refer to it alone: by the device nodes the CDI
/// device injects, or (for a vendor's own `*/gpu` kind without GPU nodes) by index or UUID.
fn attach_cdi(gpus: &mut [Gpu], cdi: &super::model::CdiScan) {
    for spec in &cdi.specs {
        for device in &spec.devices {
            let by_node: Vec<usize> = gpus
                .iter()
                .enumerate()
                .filter(|(_, g)| g.own_nodes().any(|n| device.nodes.contains(&n.path)))
                .map(|(i, _)| i)
                .collect();
            let target = match by_node.as_slice() {
                [one] => Some(*one),
                [] => gpus.iter().position(|g| {
                    spec.kind == g.vendor.cdi_kind()
                        && (device.name == g.index.to_string()
                            || g.nvidia
                                .as_ref()
                                .and_then(|n| n.uuid.as_deref())
                                .is_some_and(|u| u == device.name))
                }),
                _ => None,
            };
            if let Some(gpu) = target.and_then(|i| gpus.get_mut(i))
                && !gpu.cdi_ids.contains(&device.id)
            {
                gpu.cdi_ids.push(device.id.clone());
            }
        }
    }
}
