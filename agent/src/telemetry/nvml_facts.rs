//! NVIDIA facts for the inventory that only NVML has: each GPU's VRAM size (procfs does not
//! tell it), the CUDA driver API version (NVML's figure replaces the one the inventory
//! derived from the driver branch) and, when procfs gave none, the driver version. NVML is loaded on first need, only
//! when the inventory has an NVIDIA GPU bound to `nvidia`; without the library the inventory is
//! left as the scan made it and the reason is logged once.

use odac_protocol::Compute;
use odac_protocol::Inventory;

use odac_host::inventory::HostScan;

use super::nvml::{Nvml, NvmlError, RealNvml};

enum State {
    NotTried,
    Loaded(Box<dyn Nvml>),
    Unavailable,
}

/// Fills NVIDIA VRAM (and a missing driver version) into inventories.
pub struct NvmlFacts {
    state: State,
    loader: Box<dyn FnMut() -> Result<Box<dyn Nvml>, NvmlError> + Send>,
}

impl std::fmt::Debug for NvmlFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NvmlFacts")
    }
}

impl Default for NvmlFacts {
    fn default() -> Self {
        Self::with_loader(Box::new(|| {
            RealNvml::load().map(|n| Box::new(n) as Box<dyn Nvml>)
        }))
    }
}

impl NvmlFacts {
    /// With its own NVML loader (tests hand in a fake).
    pub fn with_loader(
        loader: Box<dyn FnMut() -> Result<Box<dyn Nvml>, NvmlError> + Send>,
    ) -> Self {
        Self {
            state: State::NotTried,
            loader,
        }
    }

    /// NVML, loaded on first need; `None` without the library (logged once).
    fn nvml(&mut self) -> Option<&dyn Nvml> {
        if matches!(self.state, State::NotTried) {
            self.state = match (self.loader)() {
                Ok(n) => State::Loaded(n),
                Err(e) => {
                    tracing::info!("inventory: {e}; nvidia vram is not reported");
                    State::Unavailable
                }
            };
        }
        match &self.state {
            State::Loaded(nvml) => Some(nvml.as_ref()),
            _ => None,
        }
    }

    /// `scan` with NVML's VRAM size of each NVIDIA GPU in its details, so that the GPU
    /// decision (`gpu.min_vram_mib`) knows it as the inventory does.
    pub fn fill_scan(&mut self, scan: &mut HostScan) {
        let nvidia: Vec<String> = scan
            .gpus
            .iter()
            .filter(|g| g.vendor.facts().cuda_with(g.driver.as_deref()))
            .map(|g| g.id())
            .collect();
        if nvidia.is_empty() {
            return;
        }
        let Some(Ok(devices)) = self.nvml().map(|n| n.gpus()) else {
            return;
        };
        for id in nvidia {
            if let Some(d) = devices.iter().find(|d| d.pci_address == id) {
                let details = scan.gpu_details.entry(id).or_default();
                if details.vram_bytes.is_none() {
                    details.vram_bytes = d.vram_total_bytes;
                }
            }
        }
    }

    /// `inventory` with NVML's VRAM sizes and driver version where they were missing.
    pub fn fill(&mut self, mut inventory: Inventory) -> Inventory {
        let wants = inventory
            .gpus
            .iter()
            .any(|g| g.vendor.facts().cuda_with(g.driver.as_deref()));
        if !wants {
            return inventory;
        }
        let Some(nvml) = self.nvml() else {
            return inventory;
        };
        let Ok(devices) = nvml.gpus() else {
            return inventory;
        };
        let driver = nvml.driver_version();
        if let Some(cuda) = nvml.cuda_version() {
            inventory.host.cuda_version = Some(cuda);
        }
        for g in inventory
            .gpus
            .iter_mut()
            .filter(|g| g.vendor.facts().compute == Compute::Cuda)
        {
            if let Some(d) = devices.iter().find(|d| d.pci_address == g.pci_address) {
                if g.vram_bytes.is_none() {
                    g.vram_bytes = d.vram_total_bytes;
                }
                if g.driver_version.is_none() {
                    g.driver_version.clone_from(&driver);
                }
            }
        }
        inventory
    }
}

#[cfg(test)]
mod tests {
    use odac_protocol::{GpuSample, Vendor};

    use super::*;
    use crate::telemetry::nvml::{FakeNvml, NvmlGpu};

    #[test]
    fn nvidia_vram_and_driver_come_from_nvml() {
        let fake = FakeNvml::new(
            vec![NvmlGpu {
                engines: Default::default(),
                pci_address: "0000:3b:00.0".into(),
                uuid: None,
                vram_total_bytes: Some(42_949_672_960),
                sample: GpuSample::default(),
            }],
            Some("550.54.15"),
        )
        .with_cuda("12.5");
        let mut facts = NvmlFacts::with_loader(Box::new(move || Ok(Box::new(fake.clone()))));
        let inv = Inventory {
            gpus: vec![
                crate::telemetry::test_gpu(Vendor::Nvidia, "0000:3b:00.0", "nvidia"),
                crate::telemetry::test_gpu(Vendor::Amd, "0000:19:00.0", "amdgpu"),
            ],
            ..Inventory::default()
        };
        let inv = facts.fill(inv);
        assert_eq!(inv.gpus[0].vram_bytes, Some(42_949_672_960));
        assert_eq!(inv.gpus[0].driver_version.as_deref(), Some("550.54.15"));
        assert_eq!(
            inv.host.cuda_version.as_deref(),
            Some("12.5"),
            "nvml's figure"
        );
        assert_eq!(inv.gpus[1].vram_bytes, None);
    }

    #[test]
    fn nvidia_vram_reaches_the_scan_for_the_gpu_decision() {
        let fake = FakeNvml::new(
            vec![NvmlGpu {
                engines: Default::default(),
                pci_address: "0000:3b:00.0".into(),
                uuid: None,
                vram_total_bytes: Some(17_179_869_184),
                sample: GpuSample::default(),
            }],
            None,
        );
        let mut facts = NvmlFacts::with_loader(Box::new(move || Ok(Box::new(fake.clone()))));
        let gpu = |vendor, addr: &str, driver: &str| odac_host::inventory::Gpu {
            vendor,
            index: 0,
            pci_address: Some(addr.to_owned()),
            pci: Default::default(),
            driver: Some(driver.to_owned()),
            model: None,
            card: None,
            render: None,
            nvidia: None,
            amd: None,
            cdi_ids: Vec::new(),
        };
        let mut scan = HostScan {
            gpus: vec![
                gpu(Vendor::Nvidia, "0000:3b:00.0", "nvidia"),
                gpu(Vendor::Nvidia, "0000:5e:00.0", "nvidia"),
            ],
            ..HostScan::default()
        };
        facts.fill_scan(&mut scan);
        let vram = |id: &str| scan.gpu_details.get(id).and_then(|d| d.vram_bytes);
        assert_eq!(vram("0000:3b:00.0"), Some(17_179_869_184));
        assert_eq!(vram("0000:5e:00.0"), None, "nvml does not know it");
    }

    #[test]
    fn without_nvml_the_inventory_is_unchanged() {
        let mut facts = NvmlFacts::with_loader(Box::new(|| Err(NvmlError::Query("absent".into()))));
        let inv = Inventory {
            gpus: vec![crate::telemetry::test_gpu(
                Vendor::Nvidia,
                "0000:3b:00.0",
                "nvidia",
            )],
            ..Inventory::default()
        };
        assert_eq!(facts.fill(inv.clone()), inv);
    }
}
