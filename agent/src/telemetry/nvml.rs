//! NVIDIA figures through NVML, behind the [`Nvml`] trait: [`RealNvml`] loads
//! `libnvidia-ml.so.1` at run time with `nvml-wrapper` (no link-time dependency, so the agent
//! runs on hosts without the driver; a missing library is an [`NvmlError`] that says why),
//! [`FakeNvml`] serves tests with figures they change over time. Besides the per-GPU figures
//! the trait lists the processes running on each GPU ([`Nvml::processes`]), which
//! [`super::usage`] maps to apps.

use odac_host::lock::lock;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use odac_protocol::GpuSample;

use super::sysfs::mib;

/// The library the real loader opens (the driver's runtime soname).
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// Why NVML gave nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlError {
    /// The library could not be loaded or initialised.
    #[error("cannot load nvml from {library}: {message}")]
    Unavailable { library: String, message: String },
    /// Listing the devices failed.
    #[error("nvml device query failed: {0}")]
    Query(String),
}

/// One NVIDIA GPU as NVML sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmlGpu {
    /// PCI address `dddd:bb:dd.f`, lowercase (the inventory's id).
    pub pci_address: String,
    pub uuid: Option<String>,
    /// VRAM size, bytes (exact, for the inventory).
    pub vram_total_bytes: Option<u64>,
    /// Figures (`id` = `pci_address`).
    pub sample: GpuSample,
    /// Memory-copy, encoder and decoder utilisation (metrics only, not sent).
    pub engines: crate::metrics::EngineUtil,
}

/// One process on a GPU, as NVML lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmlProcess {
    /// Host process id.
    pub pid: u32,
    /// GPU memory it holds, bytes (absent where NVML cannot tell).
    pub used_bytes: Option<u64>,
    /// Its share of the GPU's busy time, % (SM utilisation of its latest sample; 0 when it
    /// had no sample). Absent where the GPU does not account utilisation per process.
    pub util: Option<u8>,
}

/// The processes running on one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmlGpuProcesses {
    /// PCI address `dddd:bb:dd.f`, lowercase (the inventory's id).
    pub pci_address: String,
    /// Compute and graphics processes, one entry per pid.
    pub processes: Vec<NvmlProcess>,
    /// Whether the GPU accounts utilisation per process.
    pub util_known: bool,
}

/// What the telemetry needs from NVML.
pub trait Nvml: Send {
    /// Every device with its current figures.
    fn gpus(&self) -> Result<Vec<NvmlGpu>, NvmlError>;
    /// Every device with the processes running on it.
    fn processes(&self) -> Result<Vec<NvmlGpuProcesses>, NvmlError>;
    /// The driver version NVML reports.
    fn driver_version(&self) -> Option<String>;
    /// Every device's memory-copy, encoder and decoder utilisation, by PCI address.
    fn engine_utils(&self) -> crate::metrics::EngineUtils {
        let gpus = self.gpus().unwrap_or_default();
        gpus.into_iter()
            .map(|g| (g.pci_address, g.engines))
            .collect()
    }
    /// The CUDA driver API version NVML reports (`12.4`); `None` when it cannot tell.
    fn cuda_version(&self) -> Option<String> {
        None
    }
}

/// NVML loaded from the driver's shared library.
pub struct RealNvml {
    nvml: nvml_wrapper::Nvml,
}

impl std::fmt::Debug for RealNvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RealNvml")
    }
}

impl RealNvml {
    /// Loads [`NVML_LIBRARY`] through the dynamic loader's search path.
    pub fn load() -> Result<Self, NvmlError> {
        Self::load_from(NVML_LIBRARY)
    }

    /// Loads NVML from `library` (a soname or a path).
    pub fn load_from(library: &str) -> Result<Self, NvmlError> {
        nvml_wrapper::Nvml::builder()
            .lib_path(OsStr::new(library))
            .init()
            .map(|nvml| Self { nvml })
            .map_err(|e| NvmlError::Unavailable {
                library: library.to_owned(),
                message: e.to_string(),
            })
    }

    /// `read` applied to every device NVML can open and name by PCI address; a device that
    /// cannot be opened or has no readable bus id is skipped.
    fn each_device<T>(
        &self,
        mut read: impl FnMut(&nvml_wrapper::Device<'_>, String) -> T,
    ) -> Result<Vec<T>, NvmlError> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| NvmlError::Query(e.to_string()))?;
        let mut out = Vec::new();
        for index in 0..count {
            let Ok(device) = self.nvml.device_by_index(index) else {
                continue;
            };
            let Some(pci_address) = device.pci_info().ok().and_then(|p| bus_id(&p.bus_id)) else {
                continue;
            };
            out.push(read(&device, pci_address));
        }
        Ok(out)
    }
}

impl Nvml for RealNvml {
    fn gpus(&self) -> Result<Vec<NvmlGpu>, NvmlError> {
        self.each_device(|device, pci_address| {
            let memory = device.memory_info().ok();
            let rates = device.utilization_rates().ok();
            let percent = |u: u32| u.min(100) as u8;
            let sample = GpuSample {
                id: pci_address.clone(),
                util: rates.as_ref().map(|u| percent(u.gpu)),
                vram_used_mib: memory.as_ref().map(|m| mib(m.used)),
                vram_total_mib: memory.as_ref().map(|m| mib(m.total)),
                temp_c: device
                    .temperature(TemperatureSensor::Gpu)
                    .ok()
                    .and_then(|t| i32::try_from(t).ok()),
                power_w: device.power_usage().ok().map(|mw| mw / 1000),
                clock_mhz: device.clock_info(Clock::Graphics).ok(),
            };
            NvmlGpu {
                pci_address,
                uuid: device.uuid().ok(),
                vram_total_bytes: memory.as_ref().map(|m| m.total),
                sample,
                engines: crate::metrics::EngineUtil {
                    mem_copy: rates.as_ref().map(|u| percent(u.memory)),
                    encoder: device
                        .encoder_utilization()
                        .ok()
                        .map(|u| percent(u.utilization)),
                    decoder: device
                        .decoder_utilization()
                        .ok()
                        .map(|u| percent(u.utilization)),
                },
            }
        })
    }

    fn processes(&self) -> Result<Vec<NvmlGpuProcesses>, NvmlError> {
        self.each_device(|device, pci_address| {
            let listed: Vec<ProcessInfo> = [
                device.running_compute_processes(),
                device.running_graphics_processes(),
            ]
            .into_iter()
            .filter_map(Result::ok)
            .flatten()
            .collect();
            // no process had a non-zero sample in the driver's buffer: NVML says "not found"
            let samples = match device.process_utilization_stats(None) {
                Ok(s) => Some(s),
                Err(nvml_wrapper::error::NvmlError::NotFound) => Some(Vec::new()),
                Err(_) => None,
            };
            NvmlGpuProcesses {
                pci_address,
                processes: merge_processes(&listed, samples.as_deref()),
                util_known: samples.is_some(),
            }
        })
    }

    fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }

    fn cuda_version(&self) -> Option<String> {
        let v = self.nvml.sys_cuda_driver_version().ok()?;
        Some(format!(
            "{}.{}",
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v)
        ))
    }
}

/// One entry per pid (a process can be both a compute and a graphics user: its memory is
/// counted once, the larger figure), with the SM utilisation of its latest sample.
fn merge_processes(
    listed: &[ProcessInfo],
    samples: Option<&[ProcessUtilizationSample]>,
) -> Vec<NvmlProcess> {
    let mut out: Vec<NvmlProcess> = Vec::new();
    for p in listed {
        let used = match p.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Some(bytes),
            UsedGpuMemory::Unavailable => None,
        };
        match out.iter_mut().find(|o| o.pid == p.pid) {
            Some(o) => o.used_bytes = o.used_bytes.max(used),
            None => out.push(NvmlProcess {
                pid: p.pid,
                used_bytes: used,
                util: None,
            }),
        }
    }
    if let Some(samples) = samples {
        for o in &mut out {
            let latest = samples
                .iter()
                .filter(|s| s.pid == o.pid)
                .max_by_key(|s| s.timestamp);
            o.util = Some(latest.map_or(0, |s| s.sm_util.min(100) as u8));
        }
    }
    out
}

/// NVML's `00000000:19:00.0` → `0000:19:00.0`.
pub fn bus_id(raw: &str) -> Option<String> {
    let raw = raw.trim().trim_end_matches('\0').to_ascii_lowercase();
    let (domain, rest) = raw.split_once(':')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let addr = format!("{domain:04x}:{rest}");
    odac_host::inventory::fsread::is_pci_address(&addr).then_some(addr)
}

/// An in-memory NVML for tests: clones share the devices, so a test changes figures while the
/// collector holds its copy.
#[derive(Debug, Clone, Default)]
pub struct FakeNvml {
    gpus: Arc<Mutex<Vec<NvmlGpu>>>,
    driver: Option<String>,
    cuda: Option<String>,
    processes: Arc<Mutex<Vec<NvmlGpuProcesses>>>,
}

impl FakeNvml {
    /// A fake with these devices and driver version.
    pub fn new(gpus: Vec<NvmlGpu>, driver: Option<&str>) -> Self {
        Self {
            gpus: Arc::new(Mutex::new(gpus)),
            driver: driver.map(str::to_owned),
            cuda: None,
            processes: Arc::default(),
        }
    }

    /// The fake with this CUDA driver API version (`12.5`).
    #[must_use]
    pub fn with_cuda(mut self, cuda: &str) -> Self {
        self.cuda = Some(cuda.to_owned());
        self
    }

    /// Sets the processes running on one device (by PCI address); `util_known` says whether
    /// it accounts utilisation per process.
    pub fn set_processes(&self, pci_address: &str, processes: Vec<NvmlProcess>, util_known: bool) {
        let mut all = lock(&self.processes);
        all.retain(|g| g.pci_address != pci_address);
        all.push(NvmlGpuProcesses {
            pci_address: pci_address.to_owned(),
            processes,
            util_known,
        });
    }

    /// Changes one device's figures (by PCI address).
    pub fn set(&self, pci_address: &str, change: impl FnOnce(&mut GpuSample)) {
        let mut gpus = lock(&self.gpus);
        if let Some(g) = gpus.iter_mut().find(|g| g.pci_address == pci_address) {
            change(&mut g.sample);
        }
    }
}

impl Nvml for FakeNvml {
    fn gpus(&self) -> Result<Vec<NvmlGpu>, NvmlError> {
        Ok(lock(&self.gpus).clone())
    }

    fn processes(&self) -> Result<Vec<NvmlGpuProcesses>, NvmlError> {
        Ok(lock(&self.processes).clone())
    }

    fn driver_version(&self) -> Option<String> {
        self.driver.clone()
    }

    fn cuda_version(&self) -> Option<String> {
        self.cuda.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_bus_ids() {
        assert_eq!(bus_id("00000000:19:00.0").as_deref(), Some("0000:19:00.0"));
        assert_eq!(bus_id("0000:3B:00.0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(bus_id("garbage"), None);
    }

    #[test]
    fn an_absent_library_is_reported_not_fatal() {
        // the real loader, for real: dlopen of a library that is not there
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join(NVML_LIBRARY);
        let err = RealNvml::load_from(missing.to_str().unwrap()).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("cannot load nvml from "), "{text}");
        assert!(text.contains(NVML_LIBRARY), "{text}");
    }

    #[test]
    fn a_file_that_is_not_a_library_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let bogus = dir.path().join(NVML_LIBRARY);
        std::fs::write(&bogus, "not an elf file").unwrap();
        let err = RealNvml::load_from(bogus.to_str().unwrap()).unwrap_err();
        assert!(matches!(err, NvmlError::Unavailable { .. }), "{err}");
    }

    #[test]
    fn engine_utilisations_are_listed_by_pci_address() {
        let mut gpu = NvmlGpu {
            pci_address: "0000:3b:00.0".into(),
            ..NvmlGpu::default()
        };
        (gpu.engines.mem_copy, gpu.engines.encoder) = (Some(21), Some(3));
        let listed = FakeNvml::new(vec![gpu.clone()], None).engine_utils();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed["0000:3b:00.0"], gpu.engines);
    }

    #[test]
    fn the_fake_changes_figures_seen_through_clones() {
        let fake = FakeNvml::new(
            vec![NvmlGpu {
                engines: Default::default(),
                pci_address: "0000:19:00.0".into(),
                uuid: Some("GPU-1".into()),
                vram_total_bytes: None,
                sample: GpuSample {
                    id: "0000:19:00.0".into(),
                    util: Some(0),
                    ..GpuSample::default()
                },
            }],
            Some("550.54.15"),
        );
        let held: Box<dyn Nvml> = Box::new(fake.clone());
        fake.set("0000:19:00.0", |s| s.util = Some(90));
        assert_eq!(held.gpus().unwrap()[0].sample.util, Some(90));
        assert_eq!(held.driver_version().as_deref(), Some("550.54.15"));
    }

    #[test]
    fn processes_merge_by_pid_with_their_latest_sample() {
        let info = |pid, used| ProcessInfo {
            pid,
            used_gpu_memory: used,
            gpu_instance_id: None,
            compute_instance_id: None,
        };
        let sample = |pid, timestamp, sm_util| ProcessUtilizationSample {
            pid,
            timestamp,
            sm_util,
            mem_util: 0,
            enc_util: 0,
            dec_util: 0,
        };
        let listed = [
            info(10, UsedGpuMemory::Used(1 << 20)),
            info(11, UsedGpuMemory::Unavailable),
            info(10, UsedGpuMemory::Used(2 << 20)),
        ];
        let samples = [sample(10, 1, 30), sample(10, 2, 40), sample(12, 2, 99)];
        let merged = merge_processes(&listed, Some(&samples));
        assert_eq!(
            merged,
            [
                NvmlProcess {
                    pid: 10,
                    used_bytes: Some(2 << 20),
                    util: Some(40),
                },
                NvmlProcess {
                    pid: 11,
                    used_bytes: None,
                    util: Some(0),
                },
            ]
        );
        assert!(
            merge_processes(&listed, None)
                .iter()
                .all(|p| p.util.is_none())
        );
    }
}
