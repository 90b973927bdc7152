//! What is worth sending: a sample goes out when a figure moved beyond its threshold since
//! the last sample sent (so slow drift adds up), or when the GPUs or the apps' GPUs changed.
//! Thresholds: utilisation 5 points, VRAM 64 MiB, temperature 3 °C, power 10 W, clock
//! 100 MHz; a figure that appears or disappears counts as moved. Per-app usage is held to the
//! same utilisation and VRAM thresholds; an app/GPU pair that appears or disappears counts.

use odac_protocol::{AppGpuUsage, GpuSample, GpuStats};

/// Utilisation, percentage points.
pub const UTIL: u64 = 5;
/// VRAM in use, MiB.
pub const VRAM_MIB: u64 = 64;
/// Temperature, °C.
pub const TEMP_C: u64 = 3;
/// Power, W.
pub const POWER_W: u64 = 10;
/// Clock, MHz.
pub const CLOCK_MHZ: u64 = 100;

/// Remembers the last sample sent.
#[derive(Debug, Default)]
pub struct Threshold {
    last_sent: Option<GpuStats>,
}

impl Threshold {
    /// Whether `next` should be sent; if so it becomes the reference.
    pub fn admit(&mut self, next: &GpuStats) -> bool {
        let send = match &self.last_sent {
            None => true,
            Some(prev) => moved(prev, next),
        };
        if send {
            self.last_sent = Some(next.clone());
        }
        send
    }
}

fn moved(prev: &GpuStats, next: &GpuStats) -> bool {
    prev.apps != next.apps
        || prev.interval_secs != next.interval_secs
        || prev.gpus.len() != next.gpus.len()
        || prev
            .gpus
            .iter()
            .zip(&next.gpus)
            .any(|(a, b)| gpu_moved(a, b))
        || prev.usage.len() != next.usage.len()
        || prev
            .usage
            .iter()
            .zip(&next.usage)
            .any(|(a, b)| usage_moved(a, b))
}

fn usage_moved(a: &AppGpuUsage, b: &AppGpuUsage) -> bool {
    a.app != b.app
        || a.gpu != b.gpu
        || beyond(a.util.map(u64::from), b.util.map(u64::from), UTIL)
        || beyond(Some(a.vram_used_mib), Some(b.vram_used_mib), VRAM_MIB)
}

fn gpu_moved(a: &GpuSample, b: &GpuSample) -> bool {
    a.id != b.id
        || beyond(a.util.map(u64::from), b.util.map(u64::from), UTIL)
        || beyond(a.vram_used_mib, b.vram_used_mib, VRAM_MIB)
        || a.vram_total_mib != b.vram_total_mib
        || beyond(
            a.temp_c.map(|t| i64::from(t).unsigned_abs()),
            b.temp_c.map(|t| i64::from(t).unsigned_abs()),
            TEMP_C,
        )
        || beyond(a.power_w.map(u64::from), b.power_w.map(u64::from), POWER_W)
        || beyond(
            a.clock_mhz.map(u64::from),
            b.clock_mhz.map(u64::from),
            CLOCK_MHZ,
        )
}

fn beyond(a: Option<u64>, b: Option<u64>, threshold: u64) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.abs_diff(b) >= threshold,
        (None, None) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(util: u8, power: u32) -> GpuStats {
        GpuStats {
            interval_secs: 60,
            gpus: vec![GpuSample {
                id: "0000:19:00.0".into(),
                util: Some(util),
                power_w: Some(power),
                ..GpuSample::default()
            }],
            apps: vec![],
            usage: vec![],
        }
    }

    #[test]
    fn small_moves_are_held_back_until_they_add_up() {
        let mut t = Threshold::default();
        assert!(t.admit(&stats(10, 100)), "the first sample goes out");
        assert!(!t.admit(&stats(12, 105)));
        assert!(!t.admit(&stats(14, 109)));
        assert!(t.admit(&stats(15, 109)), "5 points since the last one sent");
        assert!(!t.admit(&stats(15, 109)));
        assert!(t.admit(&stats(15, 119)), "10 W");
    }

    #[test]
    fn a_figure_that_disappears_counts() {
        let mut t = Threshold::default();
        assert!(t.admit(&stats(10, 100)));
        let mut gone = stats(10, 100);
        gone.gpus[0].power_w = None;
        assert!(t.admit(&gone));
    }

    #[test]
    fn per_app_usage_is_held_to_the_same_thresholds() {
        let with = |util: Option<u8>, vram_used_mib: u64| {
            let mut s = stats(10, 100);
            s.usage.push(AppGpuUsage {
                app: "llm".into(),
                gpu: "0000:19:00.0".into(),
                vram_used_mib,
                util,
            });
            s
        };
        let mut t = Threshold::default();
        assert!(t.admit(&stats(10, 100)));
        assert!(t.admit(&with(Some(0), 0)), "usage appears");
        assert!(!t.admit(&with(Some(4), 63)));
        assert!(t.admit(&with(Some(5), 63)), "5 points");
        assert!(t.admit(&with(Some(5), 127)), "64 MiB");
        assert!(t.admit(&with(None, 127)), "utilisation disappears");
        assert!(t.admit(&stats(10, 100)), "usage disappears");
    }
}
