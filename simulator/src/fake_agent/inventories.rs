//! Realistic inventories for simulated hosts, one of five profiles by index: an NVIDIA box
//! with the container toolkit, an AMD/ROCm box, an Intel Arc box, a CPU-only box, and an
//! NVIDIA box whose toolkit is missing (`no_container_runtime`).

use odac_protocol::Compute;
use std::collections::BTreeMap;

use odac_protocol::{
    AcceleratorVerdict, EngineInfo, GpuInfo, HostInfo, Inventory, Mechanism, Reason, Vendor,
};

const GIB: u64 = 1024 * 1024 * 1024;

fn host(hostname: &str, cpus: u32, mem_gib: u64) -> HostInfo {
    HostInfo {
        hostname: hostname.to_owned(),
        os: "Debian GNU/Linux 12 (bookworm)".to_owned(),
        kernel: "6.1.0-28-amd64".to_owned(),
        arch: "x86_64".to_owned(),
        cpus,
        memory_bytes: mem_gib * GIB,
        cuda_version: None,
    }
}

fn engine(runtimes: &[&str]) -> EngineInfo {
    EngineInfo {
        reachable: true,
        version: Some("27.5.1".to_owned()),
        api_version: Some("1.47".to_owned()),
        runtimes: runtimes.iter().map(|s| (*s).to_owned()).collect(),
        default_runtime: Some("runc".to_owned()),
        cdi_spec_dirs: vec!["/etc/cdi".to_owned(), "/var/run/cdi".to_owned()],
        cdi_devices: Vec::new(),
    }
}

fn verdict(ok: Option<Mechanism>, reason: Reason, detail: Option<&str>) -> AcceleratorVerdict {
    match ok {
        Some(m) => AcceleratorVerdict {
            schedulable: true,
            reason: None,
            mechanism: Some(m),
            detail: None,
        },
        None => AcceleratorVerdict {
            schedulable: false,
            reason: Some(reason),
            mechanism: None,
            detail: detail.map(str::to_owned),
        },
    }
}

#[allow(clippy::too_many_arguments)]
fn gpu(
    vendor: Vendor,
    bus: usize,
    device_id: &str,
    model: &str,
    driver: &str,
    vram_gib: u64,
    render: usize,
    uuid: Option<String>,
    passable: bool,
) -> GpuInfo {
    GpuInfo {
        vendor,
        pci_address: format!("0000:{bus:02x}:00.0"),
        vendor_id: format!("0x{:04x}", vendor.pci_id()),
        device_id: device_id.to_owned(),
        model: model.to_owned(),
        driver: Some(driver.to_owned()),
        driver_version: (vendor.facts().compute == Compute::Cuda).then(|| "550.54.14".to_owned()),
        vram_bytes: Some(vram_gib * GIB),
        card_node: Some(format!("/dev/dri/card{}", render - 127)),
        render_node: Some(format!("/dev/dri/renderD{render}")),
        uuid,
        passable,
        health: None,
    }
}

/// The inventory of simulated host number `i` called `hostname`.
pub fn profile(i: usize, hostname: &str) -> Inventory {
    let mut acc = BTreeMap::new();
    let none = |_: Vendor| verdict(None, Reason::NoDevice, None);
    match i % 5 {
        0 => {
            let n = [1, 2, 4, 8][(i / 5) % 4];
            let gpus = (0..n)
                .map(|k| {
                    gpu(
                        Vendor::Nvidia,
                        k + 1,
                        "0x20b5",
                        "NVIDIA A100 80GB PCIe",
                        "nvidia",
                        80,
                        128 + k,
                        Some(format!("GPU-{:08x}-0000-4000-8000-{:012x}", i, k)),
                        true,
                    )
                })
                .collect();
            acc.insert(
                Vendor::Nvidia,
                verdict(Some(Mechanism::NvidiaRuntime), Reason::NoDevice, None),
            );
            acc.insert(Vendor::Amd, none(Vendor::Amd));
            acc.insert(Vendor::Intel, none(Vendor::Intel));
            Inventory {
                host: host(hostname, 64, 512),
                gpus,
                accelerators: acc,
                engine: engine(&["io.containerd.runc.v2", "nvidia", "runc"]),
            }
        }
        1 => {
            acc.insert(Vendor::Nvidia, none(Vendor::Nvidia));
            acc.insert(
                Vendor::Amd,
                verdict(Some(Mechanism::DeviceNodes), Reason::NoDevice, None),
            );
            acc.insert(Vendor::Intel, none(Vendor::Intel));
            Inventory {
                host: host(hostname, 48, 256),
                gpus: (0..2)
                    .map(|k| {
                        gpu(
                            Vendor::Amd,
                            k + 3,
                            "0x740f",
                            "AMD Instinct MI210",
                            "amdgpu",
                            64,
                            128 + k,
                            None,
                            true,
                        )
                    })
                    .collect(),
                accelerators: acc,
                engine: engine(&["io.containerd.runc.v2", "runc"]),
            }
        }
        2 => {
            acc.insert(Vendor::Nvidia, none(Vendor::Nvidia));
            acc.insert(Vendor::Amd, none(Vendor::Amd));
            acc.insert(
                Vendor::Intel,
                verdict(Some(Mechanism::DeviceNodes), Reason::NoDevice, None),
            );
            Inventory {
                host: host(hostname, 16, 64),
                gpus: vec![gpu(
                    Vendor::Intel,
                    3,
                    "0x56a0",
                    "Intel Arc A770",
                    "i915",
                    16,
                    128,
                    None,
                    true,
                )],
                accelerators: acc,
                engine: engine(&["io.containerd.runc.v2", "runc"]),
            }
        }
        3 => {
            for v in Vendor::ALL {
                acc.insert(v, none(v));
            }
            Inventory {
                host: host(hostname, 8, 32),
                gpus: Vec::new(),
                accelerators: acc,
                engine: engine(&["io.containerd.runc.v2", "runc"]),
            }
        }
        _ => {
            acc.insert(
                Vendor::Nvidia,
                verdict(
                    None,
                    Reason::NoContainerRuntime,
                    Some("nvidia runtime missing from docker info"),
                ),
            );
            acc.insert(Vendor::Amd, none(Vendor::Amd));
            acc.insert(Vendor::Intel, none(Vendor::Intel));
            Inventory {
                host: host(hostname, 32, 128),
                gpus: vec![gpu(
                    Vendor::Nvidia,
                    1,
                    "0x2684",
                    "NVIDIA GeForce RTX 4090",
                    "nvidia",
                    24,
                    128,
                    Some(format!("GPU-{i:08x}-4090-4000-8000-000000000000")),
                    false,
                )],
                accelerators: acc,
                engine: engine(&["io.containerd.runc.v2", "runc"]),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_valid_and_varied() {
        let mut schedulable = Vec::new();
        for i in 0..5 {
            let inv = profile(i, &format!("sim-{i}"));
            assert!(inv.validate().is_ok(), "profile {i}");
            assert_eq!(inv.accelerators.len(), 3);
            schedulable.push(
                inv.accelerators
                    .iter()
                    .filter(|(_, v)| v.schedulable)
                    .map(|(k, _)| *k)
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(schedulable[0], vec![Vendor::Nvidia]);
        assert_eq!(schedulable[1], vec![Vendor::Amd]);
        assert_eq!(schedulable[2], vec![Vendor::Intel]);
        assert!(schedulable[3].is_empty() && schedulable[4].is_empty());
        assert_eq!(
            profile(4, "x").accelerators[&Vendor::Nvidia].reason,
            Some(Reason::NoContainerRuntime)
        );
    }
}
