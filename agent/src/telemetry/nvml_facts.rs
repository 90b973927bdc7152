//! NVIDIA facts for the inventory that only NVML has: each GPU's VRAM size (procfs does not
//! tell it), the CUDA driver API version (NVML's figure replaces the one the inventory
//! derived from the driver branch) and, when procfs gave none, the driver version. NVML is loaded on first need, only
//! when the inventory has an NVIDIA GPU bound to `nvidia`; without the library the inventory is
//! left as the scan made it and the reason is logged once.

use odac_protocol::{Inventory, Vendor};

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

    /// `inventory` with NVML's VRAM sizes and driver version where they were missing.
    pub fn fill(&mut self, mut inventory: Inventory) -> Inventory {
        let wants = inventory
            .gpus
            .iter()
            .any(|g| g.vendor == Vendor::Nvidia && g.driver.as_deref() == Some("nvidia"));
        if !wants {
            return inventory;
        }
        if matches!(self.state, State::NotTried) {
            self.state = match (self.loader)() {
                Ok(n) => State::Loaded(n),
                Err(e) => {
                    tracing::info!("inventory: {e}; nvidia vram is not reported");
                    State::Unavailable
                }
            };
        }
        let State::Loaded(nvml) = &self.state else {
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
            .filter(|g| g.vendor == Vendor::Nvidia)
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
    use odac_protocol::GpuSample;

    use super::*;
    use crate::telemetry::nvml::{FakeNvml, NvmlGpu};

    #[test]
    fn nvidia_vram_and_driver_come_from_nvml() {
        let fake = FakeNvml::new(
            vec![NvmlGpu {
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
