//! One sample of every GPU of the inventory. AMD and Intel GPUs are read from sysfs under the
//! host root (the PCI device directory `/sys/bus/pci/devices/<id>`, the DRM card directory
//! `/sys/class/drm/cardN`); NVIDIA GPUs from NVML, loaded on first need and only when the
//! inventory has an NVIDIA GPU bound to the `nvidia` driver. When NVML cannot be loaded the
//! collector says why once ([`Collector::nvml_problem`]) and keeps sampling the others; the
//! NVIDIA GPUs then appear with no figures.
//!
//! A figure no GPU can show (a sensor's error value read as a number: −273150 °C, 4294967295 W)
//! is dropped, not sent: see [`plausible`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use odac_protocol::{AppGpuUsage, AppGpus, AppStatus, GpuInfo, GpuSample, Vendor};

use super::intel::EnergyMark;
use super::nvml::{Nvml, NvmlError, RealNvml};
use odac_host::inventory::fsread::Reader;

/// Highest temperature kept, °C (GPUs shut down near 100; a sensor error reads far above).
pub const MAX_TEMP_C: i32 = 250;
/// Lowest temperature kept, °C (absolute zero).
pub const MIN_TEMP_C: i32 = -273;
/// Highest power kept per GPU, W (the largest GPU modules draw about 1.5 kW).
pub const MAX_POWER_W: u32 = 10_000;
/// Highest clock kept, MHz.
pub const MAX_CLOCK_MHZ: u32 = 100_000;
/// Largest VRAM kept, MiB (64 TiB).
pub const MAX_VRAM_MIB: u64 = 64 << 20;

/// `s` without the figures no GPU can show: a temperature outside
/// [`MIN_TEMP_C`]..=[`MAX_TEMP_C`], power over [`MAX_POWER_W`], a clock over
/// [`MAX_CLOCK_MHZ`], utilisation over 100 %, VRAM over [`MAX_VRAM_MIB`] or in use beyond the
/// total. Each becomes absent, as a figure the platform does not expose.
pub fn plausible(mut s: GpuSample) -> GpuSample {
    s.util = s.util.filter(|u| *u <= 100);
    s.temp_c = s.temp_c.filter(|t| (MIN_TEMP_C..=MAX_TEMP_C).contains(t));
    s.power_w = s.power_w.filter(|w| *w <= MAX_POWER_W);
    s.clock_mhz = s.clock_mhz.filter(|c| *c <= MAX_CLOCK_MHZ);
    s.vram_total_mib = s.vram_total_mib.filter(|v| *v <= MAX_VRAM_MIB);
    s.vram_used_mib = s
        .vram_used_mib
        .filter(|v| *v <= s.vram_total_mib.unwrap_or(MAX_VRAM_MIB));
    s
}

/// Opens NVML when the first NVIDIA GPU needs it.
pub type NvmlLoader = Box<dyn FnMut() -> Result<Box<dyn Nvml>, NvmlError> + Send>;

enum NvmlState {
    NotTried(NvmlLoader),
    Loaded(Box<dyn Nvml>),
    Unavailable(NvmlError),
}

/// Samples GPUs; keeps the state between samples (Intel energy counters, NVML).
pub struct Collector {
    root: PathBuf,
    nvml: NvmlState,
    energy: HashMap<String, EnergyMark>,
    /// PCI device directory of each GPU id, found once.
    dirs: HashMap<String, PathBuf>,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("root", &self.root)
            .field("nvml_problem", &self.nvml_problem())
            .finish_non_exhaustive()
    }
}

impl Collector {
    /// A collector reading under `root` that loads the real NVML when needed.
    pub fn new(root: &Path) -> Self {
        Self::with_nvml(
            root,
            Box::new(|| RealNvml::load().map(|n| Box::new(n) as Box<dyn Nvml>)),
        )
    }

    /// A collector with its own NVML loader (tests hand in a fake).
    pub fn with_nvml(root: &Path, loader: NvmlLoader) -> Self {
        Self {
            root: root.to_path_buf(),
            nvml: NvmlState::NotTried(loader),
            energy: HashMap::new(),
            dirs: HashMap::new(),
        }
    }

    /// Why NVML is not available, once loading it was tried and failed.
    pub fn nvml_problem(&self) -> Option<String> {
        match &self.nvml {
            NvmlState::Unavailable(e) => Some(e.to_string()),
            _ => None,
        }
    }

    /// The NVIDIA driver version NVML reports, when it is loaded.
    pub fn nvml_driver_version(&self) -> Option<String> {
        match &self.nvml {
            NvmlState::Loaded(n) => n.driver_version(),
            _ => None,
        }
    }

    /// One sample per GPU of `gpus`, in the same order; figures a platform does not expose
    /// are absent.
    pub fn sample(&mut self, gpus: &[GpuInfo], now: Instant) -> Vec<GpuSample> {
        let mut r = Reader::new(&self.root);
        let wants_nvml = gpus
            .iter()
            .any(|g| g.vendor.facts().cuda_with(g.driver.as_deref()));
        let nvml_gpus = if wants_nvml {
            self.nvml_gpus()
        } else {
            HashMap::new()
        };
        let mut seen = Vec::with_capacity(gpus.len());
        let out = gpus
            .iter()
            .map(|g| {
                let id = g.pci_address.as_str();
                let card_name = g.card_node.as_deref().and_then(|c| c.rsplit('/').next());
                let dev = match self.dirs.get(id) {
                    Some(dir) => dir.clone(),
                    None => {
                        let dir = device_dir(&mut r, id, card_name);
                        self.dirs.insert(id.to_owned(), dir.clone());
                        dir
                    }
                };
                let card = card_name.map(|name| dev.join("drm").join(name));
                let sample = match g.vendor {
                    Vendor::Amd => super::amd::sample(&mut r, id, &dev),
                    Vendor::Intel => {
                        let last = self.energy.get(id).copied();
                        let (s, mark) =
                            super::intel::sample(&mut r, id, &dev, card.as_deref(), last, now);
                        if let Some(mark) = mark {
                            self.energy.insert(id.to_owned(), mark);
                            seen.push(id.to_owned());
                        }
                        s
                    }
                    Vendor::Nvidia => nvml_gpus.get(id).cloned().unwrap_or_else(|| GpuSample {
                        id: id.to_owned(),
                        ..GpuSample::default()
                    }),
                };
                plausible(sample)
            })
            .collect();
        self.energy.retain(|id, _| seen.contains(id));
        out
    }

    /// NVML's memory-copy, encoder and decoder utilisations (empty while it is not loaded).
    pub fn engine_utils(&self) -> crate::metrics::EngineUtils {
        match &self.nvml {
            NvmlState::Loaded(nvml) => nvml.engine_utils(),
            _ => Default::default(),
        }
    }

    /// What each app uses of each NVIDIA GPU ([`super::usage::app_usage`]); empty while NVML
    /// is not loaded (the sample loads it when the inventory has an NVIDIA GPU).
    pub fn app_usage(&mut self, statuses: &[AppStatus], held: &[AppGpus]) -> Vec<AppGpuUsage> {
        let NvmlState::Loaded(nvml) = &self.nvml else {
            return Vec::new();
        };
        match nvml.processes() {
            Ok(gpus) => {
                super::usage::app_usage(&mut Reader::new(&self.root), &gpus, statuses, held)
            }
            Err(e) => {
                tracing::debug!("gpu telemetry: {e}");
                Vec::new()
            }
        }
    }

    fn nvml_gpus(&mut self) -> HashMap<String, GpuSample> {
        if let NvmlState::NotTried(loader) = &mut self.nvml {
            self.nvml = match loader() {
                Ok(n) => NvmlState::Loaded(n),
                Err(e) => {
                    tracing::warn!("gpu telemetry: {e}; nvidia gpus are reported without figures");
                    NvmlState::Unavailable(e)
                }
            };
        }
        let NvmlState::Loaded(nvml) = &self.nvml else {
            return HashMap::new();
        };
        match nvml.gpus() {
            Ok(gpus) => gpus
                .into_iter()
                .map(|g| {
                    let mut s = g.sample;
                    s.id.clone_from(&g.pci_address);
                    (g.pci_address, s)
                })
                .collect(),
            Err(e) => {
                tracing::debug!("gpu telemetry: {e}");
                HashMap::new()
            }
        }
    }
}

/// Walking `/sys/devices` for a device stops this deep.
const MAX_WALK_DEPTH: usize = 8;

/// The PCI device directory of GPU `id`: `/sys/class/drm/<card>/device`, else
/// `/sys/bus/pci/devices/<id>`, else the directory named `id` below `/sys/devices` (trees
/// without the bus view); the bus path when none exists (its reads then come back empty).
fn device_dir(r: &mut Reader, id: &str, card: Option<&str>) -> PathBuf {
    if let Some(card) = card {
        let link = r.host(&format!("/sys/class/drm/{card}/device"));
        if r.exists(&link) {
            return link;
        }
    }
    let bus = r.host(&format!("/sys/bus/pci/devices/{id}"));
    if r.exists(&bus) {
        return bus;
    }
    let devices = r.host("/sys/devices");
    find_dir(r, &devices, id, 0).unwrap_or(bus)
}

fn find_dir(r: &mut Reader, dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    if depth > MAX_WALK_DEPTH {
        return None;
    }
    let entries = r.entries(dir);
    for (entry, path) in &entries {
        if entry == name && path.is_dir() && !path.is_symlink() {
            return Some(path.clone());
        }
    }
    entries
        .into_iter()
        .filter(|(entry, path)| {
            (entry.starts_with("pci") || odac_host::inventory::fsread::is_pci_address(entry))
                && path.is_dir()
                && !path.is_symlink()
        })
        .find_map(|(_, path)| find_dir(r, &path, name, depth + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::nvml::{FakeNvml, NvmlGpu};

    fn gpu(vendor: Vendor, id: &str, driver: &str) -> GpuInfo {
        crate::telemetry::test_gpu(vendor, id, driver)
    }

    #[test]
    fn impossible_figures_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/bus/pci/devices/0000:19:00.0");
        let mon = dev.join("hwmon/hwmon3");
        std::fs::create_dir_all(&mon).unwrap();
        // a sensor's error values, as a broken hwmon driver reports them
        std::fs::write(mon.join("temp1_input"), "-273150000\n").unwrap();
        std::fs::write(mon.join("power1_average"), "4294967295000000\n").unwrap();
        std::fs::write(dev.join("gpu_busy_percent"), "250\n").unwrap();
        std::fs::write(dev.join("mem_info_vram_used"), "68719476736\n").unwrap();
        std::fs::write(dev.join("mem_info_vram_total"), "17179869184\n").unwrap();
        let mut c = Collector::with_nvml(
            dir.path(),
            Box::new(|| Err(NvmlError::Query("no nvml".into()))),
        );
        let s = c.sample(
            &[gpu(Vendor::Amd, "0000:19:00.0", "amdgpu")],
            Instant::now(),
        );
        assert_eq!(s[0].temp_c, None, "{s:?}");
        assert_eq!(s[0].power_w, None, "{s:?}");
        assert_eq!(s[0].util, Some(100), "the amd reader caps it: {s:?}");
        assert_eq!(s[0].vram_used_mib, None, "{s:?}");
        assert_eq!(s[0].vram_total_mib, Some(16384), "{s:?}");
        let ok = GpuSample {
            temp_c: Some(-40),
            power_w: Some(700),
            clock_mhz: Some(2100),
            util: Some(100),
            ..GpuSample::default()
        };
        assert_eq!(plausible(ok.clone()), ok);
    }

    #[test]
    fn nvidia_figures_come_from_nvml_and_others_from_sysfs() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/bus/pci/devices/0000:19:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("gpu_busy_percent"), "12\n").unwrap();
        let fake = FakeNvml::new(
            vec![NvmlGpu {
                engines: Default::default(),
                pci_address: "0000:3b:00.0".into(),
                uuid: None,
                vram_total_bytes: None,
                sample: GpuSample {
                    util: Some(55),
                    ..GpuSample::default()
                },
            }],
            None,
        );
        let held = fake.clone();
        let mut c = Collector::with_nvml(
            dir.path(),
            Box::new(move || Ok(Box::new(held.clone()) as Box<dyn Nvml>)),
        );
        let gpus = [
            gpu(Vendor::Nvidia, "0000:3b:00.0", "nvidia"),
            gpu(Vendor::Amd, "0000:19:00.0", "amdgpu"),
        ];
        let s = c.sample(&gpus, Instant::now());
        assert_eq!(s[0].id, "0000:3b:00.0");
        assert_eq!(s[0].util, Some(55));
        assert_eq!(s[1].util, Some(12));
        fake.set("0000:3b:00.0", |s| s.util = Some(99));
        assert_eq!(c.sample(&gpus, Instant::now())[0].util, Some(99));
    }

    #[test]
    fn device_dirs_are_found_in_trees_without_the_bus_view() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/devices/pci0000:00/0000:00:02.0");
        std::fs::create_dir_all(dev.join("drm/card1")).unwrap();
        std::fs::write(dev.join("drm/card1/gt_act_freq_mhz"), "900\n").unwrap();
        let mut c =
            Collector::with_nvml(dir.path(), Box::new(|| Err(NvmlError::Query("x".into()))));
        let mut g = gpu(Vendor::Intel, "0000:00:02.0", "i915");
        g.card_node = Some("/dev/dri/card1".into());
        assert_eq!(c.sample(&[g], Instant::now())[0].clock_mhz, Some(900));
    }

    #[test]
    fn without_nvml_the_others_are_still_sampled() {
        let dir = tempfile::tempdir().unwrap();
        let mut tries = 0;
        let mut c = Collector::with_nvml(
            dir.path(),
            Box::new(move || {
                tries += 1;
                assert_eq!(tries, 1, "loading is tried once");
                Err(NvmlError::Unavailable {
                    library: "libnvidia-ml.so.1".into(),
                    message: "not found".into(),
                })
            }),
        );
        let gpus = [
            gpu(Vendor::Nvidia, "0000:3b:00.0", "nvidia"),
            gpu(Vendor::Intel, "0000:00:02.0", "i915"),
        ];
        for _ in 0..2 {
            let s = c.sample(&gpus, Instant::now());
            assert_eq!(s.len(), 2);
            assert_eq!(s[0].util, None);
        }
        assert!(c.nvml_problem().unwrap().contains("libnvidia-ml.so.1"));
    }

    #[test]
    fn per_app_usage_comes_from_nvml_processes_and_proc_cgroups() {
        let ours = "4b1d3c0ffee0c0de4b1d3c0ffee0c0de4b1d3c0ffee0c0de4b1d3c0ffee0c0de";
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc/4242");
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(
            proc.join("cgroup"),
            format!("0::/system.slice/docker-{ours}.scope\n"),
        )
        .unwrap();
        let fake = FakeNvml::new(
            vec![NvmlGpu {
                pci_address: "0000:3b:00.0".into(),
                ..NvmlGpu::default()
            }],
            None,
        );
        let held = fake.clone();
        let mut c = Collector::with_nvml(
            dir.path(),
            Box::new(move || Ok(Box::new(held.clone()) as Box<dyn Nvml>)),
        );
        let statuses = [odac_protocol::AppStatus {
            name: "llm".into(),
            container_id: Some(ours.into()),
            ..odac_protocol::AppStatus::default()
        }];
        let holds = [AppGpus {
            app: "llm".into(),
            gpus: vec!["0000:3b:00.0".into()],
        }];
        assert!(
            c.app_usage(&statuses, &holds).is_empty(),
            "nothing before nvml is loaded"
        );
        c.sample(
            &[gpu(Vendor::Nvidia, "0000:3b:00.0", "nvidia")],
            Instant::now(),
        );
        fake.set_processes("0000:3b:00.0", vec![], true);
        let idle = c.app_usage(&statuses, &holds);
        assert_eq!((idle[0].vram_used_mib, idle[0].util), (0, Some(0)));
        fake.set_processes(
            "0000:3b:00.0",
            vec![crate::telemetry::NvmlProcess {
                pid: 4242,
                used_bytes: Some(8 << 30),
                util: Some(77),
            }],
            true,
        );
        let busy = c.app_usage(&statuses, &holds);
        assert_eq!(busy.len(), 1);
        assert_eq!(
            (busy[0].app.as_str(), busy[0].gpu.as_str()),
            ("llm", "0000:3b:00.0")
        );
        assert_eq!((busy[0].vram_used_mib, busy[0].util), (8192, Some(77)));
    }
}
