//! GPU metrics under the names of NVIDIA's DCGM exporter (`DCGM_FI_DEV_GPU_UTIL`,
//! `DCGM_FI_DEV_FB_USED`, …, units as in its `default-counters.csv`: %, MiB, °C, W, MHz), with
//! its labels (`gpu`, `UUID`, `device`, `modelName`, `Hostname`, `pci_bus_id`) plus `vendor`,
//! for NVIDIA, AMD and Intel alike where the meaning is the same. A GPU an app holds appears
//! once per holding app with `app` and `container` labels (as dcgm-exporter labels a GPU
//! with the pod that holds it), one nobody holds without them. The figures are the telemetry
//! loop's latest sample ([`GpuMetrics::offer`]) with its allocations (and NVML's memory-copy,
//! encoder and decoder utilisations, which the `gpu_stats` report does not carry); an app that no longer
//! holds a GPU in the app manager's statuses at scrape time is left out, so a removed app's
//! series are gone at the next scrape.
//! Per-process figures (NVIDIA) are `odac_app_gpu_memory_used_bytes` and
//! `odac_app_gpu_utilization_ratio`. A figure a GPU does not report has no series.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use odac_protocol::{AppState, AppStatus, GpuInfo, GpuStats, NodeRule, Vendor};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue};
use prometheus_client::metrics::MetricType;

use odac_host::lock::lock;

/// The app manager's current statuses, read at scrape time.
pub type Statuses = Arc<dyn Fn() -> Vec<AppStatus> + Send + Sync>;
/// The container name of an app of an instance (`odac_host::names::container_name`).
pub type ContainerName = fn(&str, &str) -> String;

type Labels = Vec<(&'static str, String)>;

/// Engine utilisations only some GPUs report (NVIDIA through NVML), by GPU id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineUtil {
    /// Memory (copy engine / memory controller) busy, %.
    pub mem_copy: Option<u8>,
    /// Video encoder busy, %.
    pub encoder: Option<u8>,
    /// Video decoder busy, %.
    pub decoder: Option<u8>,
}

/// [`EngineUtil`] by GPU id (inventory `pci_address`).
pub type EngineUtils = BTreeMap<String, EngineUtil>;

/// The latest sample and the inventory it was taken against.
#[derive(Debug, Default, Clone)]
struct Latest {
    gpus: Vec<GpuInfo>,
    stats: GpuStats,
    engines: EngineUtils,
}

/// The DCGM-named GPU metrics (a scrape-time collector).
#[derive(Clone)]
pub struct GpuMetrics {
    latest: Arc<Mutex<Latest>>,
    statuses: Statuses,
    hostname: String,
    instance: String,
    container_name: ContainerName,
}

impl fmt::Debug for GpuMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuMetrics")
            .field("hostname", &self.hostname)
            .finish_non_exhaustive()
    }
}

impl GpuMetrics {
    /// Metrics of host `hostname`; the `container` label is `container_name(instance, app)`.
    pub fn new(
        hostname: &str,
        instance: &str,
        container_name: ContainerName,
        statuses: Statuses,
    ) -> Self {
        Self {
            latest: Arc::default(),
            statuses,
            hostname: hostname.to_owned(),
            instance: instance.to_owned(),
            container_name,
        }
    }

    /// The telemetry loop's latest sample of `gpus`, with the engine utilisations of those
    /// that report them.
    pub fn offer(&self, gpus: &[GpuInfo], stats: &GpuStats, engines: &EngineUtils) {
        *lock(&self.latest) = Latest {
            gpus: gpus.to_vec(),
            stats: stats.clone(),
            engines: engines.clone(),
        };
    }

    /// Every series, by metric name (tests and the encoder).
    fn rows(&self) -> Rows {
        let latest = lock(&self.latest).clone();
        // the sample's allocations, less the apps gone since
        let present: Vec<String> = (self.statuses)()
            .into_iter()
            .filter(|s| s.state != AppState::Removed && s.gpu.attached.is_some())
            .map(|s| s.name)
            .collect();
        let holders: Vec<&odac_protocol::AppGpus> = latest
            .stats
            .apps
            .iter()
            .filter(|a| present.contains(&a.app))
            .collect();
        let mut rows = Rows::default();
        let mut index: BTreeMap<Vendor, usize> = BTreeMap::new();
        for info in &latest.gpus {
            let next = index.entry(info.vendor).or_default();
            let gpu_index = *next;
            *next += 1;
            let Some(sample) = latest.stats.gpus.iter().find(|s| s.id == info.pci_address) else {
                continue;
            };
            let base = self.device_labels(info, gpu_index);
            let held: Vec<&str> = holders
                .iter()
                .filter(|a| a.gpus.contains(&info.pci_address))
                .map(|a| a.app.as_str())
                .collect();
            let label_sets: Vec<Labels> = if held.is_empty() {
                vec![base.clone()]
            } else {
                held.iter().map(|app| self.with_app(&base, app)).collect()
            };
            let free = sample
                .vram_total_mib
                .zip(sample.vram_used_mib)
                .and_then(|(t, u)| t.checked_sub(u));
            let engine = latest
                .engines
                .get(&info.pci_address)
                .copied()
                .unwrap_or_default();
            for labels in label_sets {
                rows.push(GPU_UTIL, &labels, sample.util.map(i64::from));
                rows.push(MEM_COPY_UTIL, &labels, engine.mem_copy.map(i64::from));
                rows.push(ENC_UTIL, &labels, engine.encoder.map(i64::from));
                rows.push(DEC_UTIL, &labels, engine.decoder.map(i64::from));
                rows.push(FB_USED, &labels, sample.vram_used_mib.map(clamp));
                rows.push(FB_FREE, &labels, free.map(clamp));
                rows.push(GPU_TEMP, &labels, sample.temp_c.map(i64::from));
                rows.push(POWER_USAGE, &labels, sample.power_w.map(i64::from));
                rows.push(SM_CLOCK, &labels, sample.clock_mhz.map(i64::from));
            }
            for usage in latest
                .stats
                .usage
                .iter()
                .filter(|u| u.gpu == info.pci_address)
            {
                if !held.contains(&usage.app.as_str()) {
                    continue;
                }
                let labels = self.with_app(&base, &usage.app);
                rows.push_f(
                    APP_MEMORY,
                    &labels,
                    Some(usage.vram_used_mib as f64 * 1024.0 * 1024.0),
                );
                rows.push_f(APP_UTIL, &labels, usage.util.map(|u| f64::from(u) / 100.0));
            }
        }
        rows
    }

    fn device_labels(&self, info: &GpuInfo, index: usize) -> Labels {
        // DCGM's device label: `nvidia0` where the vendor has per-GPU device nodes, the DRM
        // card's name (`card1`) elsewhere
        let device = match info.vendor.facts().nodes {
            NodeRule::PerGpuControl => format!("{}{index}", info.vendor),
            NodeRule::Dri { .. } => info
                .card_node
                .as_deref()
                .and_then(|c| c.rsplit('/').next())
                .unwrap_or_default()
                .to_owned(),
        };
        vec![
            ("gpu", index.to_string()),
            ("UUID", info.uuid.clone().unwrap_or_default()),
            ("pci_bus_id", info.pci_address.clone()),
            ("device", device),
            ("modelName", info.model.clone()),
            ("Hostname", self.hostname.clone()),
            ("vendor", info.vendor.as_str().to_owned()),
        ]
    }

    fn with_app(&self, base: &Labels, app: &str) -> Labels {
        let mut labels = base.clone();
        labels.push(("app", app.to_owned()));
        labels.push(("container", (self.container_name)(&self.instance, app)));
        labels
    }
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// One metric: name and help.
type Def = (&'static str, &'static str);

pub(crate) const GPU_UTIL: Def = ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).");
pub(crate) const MEM_COPY_UTIL: Def = ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).");
pub(crate) const ENC_UTIL: Def = ("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).");
pub(crate) const DEC_UTIL: Def = ("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).");
pub(crate) const FB_USED: Def = ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).");
pub(crate) const FB_FREE: Def = ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).");
pub(crate) const GPU_TEMP: Def = ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).");
pub(crate) const POWER_USAGE: Def = ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).");
pub(crate) const SM_CLOCK: Def = ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).");
const APP_MEMORY: Def = (
    "odac_app_gpu_memory_used_bytes",
    "GPU memory the processes of an app's container hold on a GPU.",
);
const APP_UTIL: Def = (
    "odac_app_gpu_utilization_ratio",
    "Share of a GPU's busy time the processes of an app's container cause (0..1).",
);

/// Series by metric, in a fixed metric order.
#[derive(Debug, Default)]
struct Rows {
    ints: Vec<(Def, Vec<(Labels, i64)>)>,
    floats: Vec<(Def, Vec<(Labels, f64)>)>,
}

impl Rows {
    fn push(&mut self, def: Def, labels: &Labels, value: Option<i64>) {
        let Some(v) = value else { return };
        slot(&mut self.ints, def).push((labels.clone(), v));
    }

    fn push_f(&mut self, def: Def, labels: &Labels, value: Option<f64>) {
        let Some(v) = value else { return };
        slot(&mut self.floats, def).push((labels.clone(), v));
    }
}

fn slot<V>(list: &mut Vec<(Def, Vec<V>)>, def: Def) -> &mut Vec<V> {
    let at = match list.iter().position(|(d, _)| d.0 == def.0) {
        Some(i) => i,
        None => {
            list.push((def, Vec::new()));
            list.len() - 1
        }
    };
    &mut list[at].1
}

fn encode_gauges<V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    def: Def,
    series: &[(Labels, V)],
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(def.0, def.1, None, MetricType::Gauge)?;
    for (labels, value) in series {
        metric.encode_family(labels)?.encode_gauge(value)?;
    }
    Ok(())
}

impl Collector for GpuMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let rows = self.rows();
        for (def, series) in &rows.ints {
            encode_gauges(&mut encoder, *def, series)?;
        }
        for (def, series) in &rows.floats {
            encode_gauges(&mut encoder, *def, series)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
