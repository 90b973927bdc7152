//! Live GPU telemetry: per-GPU figures (utilisation, VRAM, temperature, power, clock) sampled every
//! `telemetry.interval_secs` and sent as `gpu_stats` when a figure moved beyond its threshold. AMD
//! ([`amd`]) and Intel ([`intel`], i915 and xe layouts) are read from sysfs under the host root,
//! through the inventory's reader, so fixture trees drive the tests; NVIDIA goes through the
//! [`nvml::Nvml`] trait (the real one loads `libnvidia-ml.so.1` at run time, a fake serves the
//! tests). [`collect`] samples every GPU of the inventory, [`threshold`] decides what is worth
//! sending, `odac_host::app_gpus` maps the apps' attached devices to GPU ids, [`usage`] maps NVML's
//! per-process figures to apps through their containers' cgroups, [`task`] is the loop (the
//! `gpu-stats` command is `crate::cli::gpu_stats`); [`nvml_facts`] adds NVML's VRAM sizes (and a
//! missing driver version) to the inventory.

mod amd;
pub mod collect;
pub mod config;
mod intel;
pub mod nvml;
pub mod nvml_facts;
mod sysfs;
pub mod task;
pub mod threshold;
pub mod usage;

pub use collect::Collector;
pub use config::TelemetryConfig;
pub use nvml::{FakeNvml, Nvml, NvmlGpu, NvmlGpuProcesses, NvmlProcess, RealNvml};
pub use nvml_facts::NvmlFacts;
pub use task::telemetry_loop;
pub use threshold::Threshold;

/// An inventory GPU with only vendor, id and driver set (tests).
#[cfg(test)]
pub(crate) fn test_gpu(
    vendor: odac_protocol::Vendor,
    id: &str,
    driver: &str,
) -> odac_protocol::GpuInfo {
    odac_protocol::GpuInfo {
        vendor,
        pci_address: id.into(),
        vendor_id: String::new(),
        device_id: String::new(),
        model: String::new(),
        driver: Some(driver.into()),
        driver_version: None,
        vram_bytes: None,
        card_node: None,
        render_node: None,
        uuid: None,
        passable: true,
        health: None,
    }
}
