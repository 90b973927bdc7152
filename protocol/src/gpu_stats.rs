//! `gpu_stats`: live per-GPU figures (utilisation, VRAM, temperature, power, clock) and which
//! GPUs each app holds. The agent samples every `telemetry.interval_secs` (60 s by default)
//! and sends a report only when a figure moved beyond a threshold, at most one per interval;
//! only the latest report is ever pending, so a reconnect resends no history. Every figure is
//! optional: a platform that does not expose it leaves it out. Integers only, so reports stay
//! small (well under 200 bytes per GPU) and compare exactly.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{
    ValidationError, check_dns_label, check_range, check_required, check_string_list,
};

/// Most GPUs one report may carry.
pub const MAX_STATS_GPUS: usize = 256;

/// `gpu_stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuStatsReport {
    /// Report sequence number.
    pub seq: u64,
    /// The sample.
    pub stats: GpuStats,
}

/// One sample of every GPU of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuStats {
    /// Sampling interval in seconds (10..=600).
    #[schemars(range(min = 10, max = 600))]
    pub interval_secs: u32,
    /// One entry per GPU, in inventory order.
    #[schemars(length(max = 256))]
    pub gpus: Vec<GpuSample>,
    /// Apps that hold GPUs (allocations), by app name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppGpus>,
    /// What each app uses of each GPU, where the GPU accounts per process (NVIDIA through
    /// NVML): by app name, then GPU id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub usage: Vec<AppGpuUsage>,
}

/// One GPU's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuSample {
    /// The GPU's id, as `pci_address` in the inventory.
    pub id: String,
    /// Busy percentage, 0..=100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub util: Option<u8>,
    /// VRAM in use, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_used_mib: Option<u64>,
    /// VRAM size, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_total_mib: Option<u64>,
    /// Temperature, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<i32>,
    /// Power draw, W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<u32>,
    /// Graphics/core clock, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<u32>,
}

/// The GPUs one app holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AppGpus {
    /// App name.
    pub app: String,
    /// GPU ids (inventory `pci_address`).
    pub gpus: Vec<String>,
}

/// One app's use of one GPU: the sum over its container's processes on that GPU. An app that
/// holds the GPU but runs nothing on it reports zeros.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct AppGpuUsage {
    /// App name.
    pub app: String,
    /// GPU id (inventory `pci_address`).
    pub gpu: String,
    /// VRAM its processes hold, MiB.
    pub vram_used_mib: u64,
    /// Busy percentage its processes cause, 0..=100; absent where the GPU does not account
    /// utilisation per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub util: Option<u8>,
}

impl GpuStats {
    /// Checks every field; errors name the field (`gpus[1].util`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_range("interval_secs", Some(self.interval_secs), 10..=600)?;
        if self.gpus.len() > MAX_STATS_GPUS {
            return Err(ValidationError::new(
                "gpus",
                format!(
                    "has {} entries, the limit is {MAX_STATS_GPUS}",
                    self.gpus.len()
                ),
            ));
        }
        for (i, g) in self.gpus.iter().enumerate() {
            g.validate().map_err(|e| e.under(&format!("gpus[{i}]")))?;
        }
        for (i, a) in self.apps.iter().enumerate() {
            let at = format!("apps[{i}]");
            check_dns_label("app", &a.app).map_err(|e| e.under(&at))?;
            check_string_list("gpus", &a.gpus, MAX_STATS_GPUS).map_err(|e| e.under(&at))?;
        }
        if self.usage.len() > MAX_STATS_GPUS {
            return Err(ValidationError::new(
                "usage",
                format!(
                    "has {} entries, the limit is {MAX_STATS_GPUS}",
                    self.usage.len()
                ),
            ));
        }
        for (i, u) in self.usage.iter().enumerate() {
            let at = format!("usage[{i}]");
            check_dns_label("app", &u.app).map_err(|e| e.under(&at))?;
            check_required("gpu", &u.gpu).map_err(|e| e.under(&at))?;
            check_range("util", u.util, 0..=100).map_err(|e| e.under(&at))?;
        }
        Ok(())
    }
}

impl GpuSample {
    fn validate(&self) -> Result<(), ValidationError> {
        check_required("id", &self.id)?;
        check_range("util", self.util, 0..=100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(util: Option<u8>) -> GpuStats {
        GpuStats {
            interval_secs: 60,
            gpus: vec![GpuSample {
                id: "0000:19:00.0".into(),
                util,
                ..GpuSample::default()
            }],
            apps: vec![],
            usage: vec![],
        }
    }

    #[test]
    fn util_is_a_percentage() {
        assert!(sample(Some(100)).validate().is_ok());
        assert!(sample(None).validate().is_ok());
        let err = sample(Some(101)).validate().unwrap_err();
        assert_eq!(err.to_string(), "gpus[0].util: 101 is out of range 0..=100");
    }

    #[test]
    fn interval_is_bounded() {
        let mut s = sample(None);
        s.interval_secs = 5;
        assert!(s.validate().is_err());
    }

    #[test]
    fn app_names_are_labels() {
        let mut s = sample(None);
        s.apps.push(AppGpus {
            app: "Bad Name".into(),
            gpus: vec!["0000:19:00.0".into()],
        });
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .starts_with("apps[0].app")
        );
    }

    #[test]
    fn usage_names_an_app_and_a_gpu_with_a_percentage() {
        let mut s = sample(None);
        s.usage.push(AppGpuUsage {
            app: "llm".into(),
            gpu: "0000:3b:00.0".into(),
            vram_used_mib: 0,
            util: Some(0),
        });
        assert!(s.validate().is_ok());
        s.usage[0].util = Some(101);
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "usage[0].util: 101 is out of range 0..=100"
        );
        s.usage[0].util = None;
        s.usage[0].gpu = String::new();
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .starts_with("usage[0].gpu")
        );
    }
}
