//! The vendor table: every fact the workspace knows of a GPU vendor, in one place. PCI id,
//! CDI kind, the kernel drivers that make its GPUs usable, its container runtime, its compute
//! stack, the device-node rule, where its VRAM size is read, and the GPU the lab simulates.
//!
//! Code that behaves differently per vendor asks this table (`vendor.facts().runtime`), never
//! compares vendors: a new vendor is a row here (the exhaustive match in [`Vendor::facts`]
//! makes the compiler point at it) plus its scanner.

use crate::Vendor;

/// What the workspace knows of one vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VendorFacts {
    /// The vendor this row describes.
    pub vendor: Vendor,
    /// The name people know it by, as model names begin (`NVIDIA`).
    pub display_name: &'static str,
    /// The PCI vendor id (`0x10de`).
    pub pci_id: u16,
    /// The CDI kind its GPUs are named by (`nvidia.com/gpu`).
    pub cdi_kind: &'static str,
    /// Kernel drivers that make its GPUs usable from containers; the first is the one the lab
    /// binds.
    pub drivers: &'static [&'static str],
    /// The engine runtime (and device-request driver) its container toolkit registers
    /// (`nvidia`); `None` where GPUs reach containers as plain device nodes or CDI only.
    pub runtime: Option<&'static str>,
    /// Its compute stack: what images of this vendor declare and what reports on its GPUs.
    pub compute: Compute,
    /// How its GPUs' device nodes are passed.
    pub nodes: NodeRule,
    /// Where the size of a GPU's VRAM is read.
    pub vram: VramSource,
    /// The GPU the lab simulates for this vendor.
    pub lab: LabModel,
}

/// A vendor's compute stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compute {
    /// CUDA: images declare `NVIDIA_REQUIRE_CUDA` and `NVIDIA_DRIVER_CAPABILITIES`, NVML reports
    /// on the GPUs (utilisation, memory, driver and CUDA versions).
    Cuda,
    /// ROCm: the kfd topology lists the GPUs; sysfs reports on them.
    Rocm,
    /// oneAPI / VA-API over DRM: sysfs reports on the GPUs.
    OneApi,
}

/// The device nodes a container of this vendor's GPUs gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRule {
    /// One `/dev/nvidiaN` per GPU plus the control nodes (`/dev/nvidiactl`, `/dev/nvidia-uvm`).
    PerGpuControl,
    /// Each GPU's DRM card and render nodes, plus `shared` once when it is set (`/dev/kfd`).
    Dri {
        /// A node every container of this vendor's GPUs needs besides each GPU's own.
        shared: Option<&'static str>,
    },
}

/// Where a GPU's VRAM size is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VramSource {
    /// The vendor's management library (NVML).
    ManagementLibrary,
    /// The kfd topology's memory banks (`mem_info_vram_total` beside it).
    KfdTopology,
    /// The DRM sysfs (`tile0/physical_vram_size_bytes`, `lmem_total_bytes`).
    DrmSysfs,
}

/// The GPU the lab simulates for a vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabModel {
    /// Its PCI device id.
    pub device_id: u16,
    /// Its PCI class (`0x030200`: 3D controller).
    pub class: u32,
    /// The PCI bus of its first GPU; the next ones count up from it.
    pub first_bus: u8,
}

const NVIDIA: VendorFacts = VendorFacts {
    vendor: Vendor::Nvidia,
    display_name: "NVIDIA",
    pci_id: 0x10de,
    cdi_kind: "nvidia.com/gpu",
    drivers: &["nvidia"],
    runtime: Some("nvidia"),
    compute: Compute::Cuda,
    nodes: NodeRule::PerGpuControl,
    vram: VramSource::ManagementLibrary,
    lab: LabModel {
        device_id: 0x20b0,
        class: 0x030200,
        first_bus: 0x10,
    },
};

const AMD: VendorFacts = VendorFacts {
    vendor: Vendor::Amd,
    display_name: "AMD",
    pci_id: 0x1002,
    cdi_kind: "amd.com/gpu",
    drivers: &["amdgpu"],
    runtime: None,
    compute: Compute::Rocm,
    nodes: NodeRule::Dri {
        shared: Some("/dev/kfd"),
    },
    vram: VramSource::KfdTopology,
    lab: LabModel {
        device_id: 0x740f,
        class: 0x038000,
        first_bus: 0x40,
    },
};

const INTEL: VendorFacts = VendorFacts {
    vendor: Vendor::Intel,
    display_name: "Intel",
    pci_id: 0x8086,
    cdi_kind: "intel.com/gpu",
    drivers: &["i915", "xe"],
    runtime: None,
    compute: Compute::OneApi,
    nodes: NodeRule::Dri { shared: None },
    vram: VramSource::DrmSysfs,
    lab: LabModel {
        device_id: 0x56a0,
        class: 0x030000,
        first_bus: 0x70,
    },
};

impl Vendor {
    /// This vendor's row of the vendor table.
    pub fn facts(self) -> &'static VendorFacts {
        match self {
            Vendor::Nvidia => &NVIDIA,
            Vendor::Amd => &AMD,
            Vendor::Intel => &INTEL,
        }
    }
}

impl VendorFacts {
    /// Whether `driver` is one of the kernel drivers that make this vendor's GPUs usable.
    pub fn usable_driver(&self, driver: Option<&str>) -> bool {
        driver.is_some_and(|d| self.drivers.contains(&d))
    }

    /// Whether the CUDA stack (NVML, `NVIDIA_*` image variables) applies to a GPU of this
    /// vendor bound to `driver`.
    pub fn cuda_with(&self, driver: Option<&str>) -> bool {
        self.compute == Compute::Cuda && self.usable_driver(driver)
    }

    /// The node every container of this vendor's GPUs needs besides each GPU's own
    /// (`/dev/kfd`), if any.
    pub fn shared_node(&self) -> Option<&'static str> {
        match self.nodes {
            NodeRule::Dri { shared } => shared,
            NodeRule::PerGpuControl => None,
        }
    }

    /// The vendor's bus address of the lab's GPU number `index`: `0000:bb:00.0`.
    pub fn lab_pci_address(&self, index: u32) -> String {
        format!("0000:{:02x}:00.0", u32::from(self.lab.first_bus) + index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_describes_its_own_vendor_and_no_two_rows_share_an_id() {
        for v in Vendor::ALL {
            let f = v.facts();
            assert_eq!(f.vendor, v);
            assert!(!f.drivers.is_empty(), "{v}: no usable driver");
            assert!(f.cdi_kind.starts_with(v.as_str()), "{v}: {}", f.cdi_kind);
        }
        for a in Vendor::ALL {
            for b in Vendor::ALL.into_iter().filter(|b| *b != a) {
                assert_ne!(a.facts().pci_id, b.facts().pci_id);
                assert_ne!(a.facts().lab.first_bus, b.facts().lab.first_bus);
                assert!(
                    a.facts()
                        .drivers
                        .iter()
                        .all(|d| !b.facts().drivers.contains(d))
                );
            }
        }
    }

    #[test]
    fn the_cuda_stack_needs_the_vendors_own_driver() {
        assert!(Vendor::Nvidia.facts().cuda_with(Some("nvidia")));
        assert!(!Vendor::Nvidia.facts().cuda_with(Some("nouveau")));
        assert!(!Vendor::Nvidia.facts().cuda_with(None));
        assert!(!Vendor::Amd.facts().cuda_with(Some("amdgpu")));
        assert_eq!(Vendor::Amd.facts().shared_node(), Some("/dev/kfd"));
        assert_eq!(Vendor::Intel.facts().shared_node(), None);
        assert_eq!(Vendor::Amd.facts().lab_pci_address(2), "0000:42:00.0");
    }
}
