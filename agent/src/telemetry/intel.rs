//! Intel figures from sysfs, for both kernel drivers. Frequency: i915 has
//! `/sys/class/drm/cardN/gt_act_freq_mhz` (or `gt/gt0/rps_act_freq_mhz`, `gt_cur_freq_mhz`
//! when the actual one is missing); xe has `device/tile0/gt0/freq0/act_freq` (or `cur_freq`).
//! Power: the hwmon `energy1_input` counter (µJ) of the PCI device, turned into watts from
//! the delta between two samples, so the first sample of a GPU has none and a counter that
//! went back (wrap, driver reload) restarts the delta. Temperature from hwmon `temp1_input`
//! where the card has one (discrete cards). Utilisation needs perf counters and is not read.

use std::path::Path;
use std::time::Instant;

use odac_protocol::GpuSample;

use super::sysfs::{celsius, hwmon, num, signed};
use odac_host::inventory::fsread::Reader;

/// The last energy reading of one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnergyMark {
    /// `energy1_input`, µJ.
    pub micro_joules: u64,
    pub at: Instant,
}

/// The figures of the Intel GPU with PCI device directory `dev` and DRM card directory
/// `card` (`/sys/class/drm/cardN`, when known). `last` is the previous energy reading; the
/// new one is returned for the next call.
pub(crate) fn sample(
    r: &mut Reader,
    id: &str,
    dev: &Path,
    card: Option<&Path>,
    last: Option<EnergyMark>,
    now: Instant,
) -> (GpuSample, Option<EnergyMark>) {
    let mut s = GpuSample {
        id: id.to_owned(),
        clock_mhz: frequency(r, dev, card),
        ..GpuSample::default()
    };
    let mut mark = None;
    if let Some(mon) = hwmon(r, dev) {
        s.temp_c = signed(r, &mon.join("temp1_input")).map(celsius);
        if let Some(uj) = num(r, &mon.join("energy1_input")) {
            mark = Some(EnergyMark {
                micro_joules: uj,
                at: now,
            });
            s.power_w = last.and_then(|l| watts(l, uj, now));
        }
    }
    (s, mark)
}

fn watts(last: EnergyMark, micro_joules: u64, now: Instant) -> Option<u32> {
    let joules = micro_joules.checked_sub(last.micro_joules)? as f64 / 1e6;
    let secs = now.checked_duration_since(last.at)?.as_secs_f64();
    if secs < 0.5 {
        return None;
    }
    let w = (joules / secs).round();
    (0.0..f64::from(u32::MAX)).contains(&w).then_some(w as u32)
}

fn frequency(r: &mut Reader, dev: &Path, card: Option<&Path>) -> Option<u32> {
    let mut candidates = Vec::new();
    if let Some(card) = card {
        candidates.push(card.join("gt_act_freq_mhz"));
        candidates.push(card.join("gt/gt0/rps_act_freq_mhz"));
    }
    candidates.push(dev.join("tile0/gt0/freq0/act_freq"));
    if let Some(card) = card {
        candidates.push(card.join("gt_cur_freq_mhz"));
    }
    candidates.push(dev.join("tile0/gt0/freq0/cur_freq"));
    candidates
        .iter()
        .find_map(|p| num(r, p))
        .and_then(|mhz| u32::try_from(mhz).ok())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn write(path: &Path, value: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value).unwrap();
    }

    #[test]
    fn i915_frequency_and_power_from_energy_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("sys/class/drm/card0/gt_act_freq_mhz"), "1150\n");
        let energy = root.join("sys/bus/pci/devices/0000:00:02.0/hwmon/hwmon2/energy1_input");
        write(&energy, "1000000\n");
        let mut r = Reader::new(root);
        let dev = r.host("/sys/bus/pci/devices/0000:00:02.0");
        let card = r.host("/sys/class/drm/card0");
        let t0 = Instant::now();
        let (s, mark) = sample(&mut r, "0000:00:02.0", &dev, Some(&card), None, t0);
        assert_eq!(s.clock_mhz, Some(1150));
        assert_eq!(s.power_w, None, "one reading gives no power");
        // 600 J in 60 s = 10 W
        write(&energy, "601000000\n");
        let t1 = t0 + Duration::from_secs(60);
        let (s, mark) = sample(&mut r, "0000:00:02.0", &dev, Some(&card), mark, t1);
        assert_eq!(s.power_w, Some(10));
        // a counter that went back gives no power this time
        write(&energy, "5\n");
        let (s, _) = sample(
            &mut r,
            "0000:00:02.0",
            &dev,
            Some(&card),
            mark,
            t1 + Duration::from_secs(60),
        );
        assert_eq!(s.power_w, None);
    }

    #[test]
    fn xe_layout() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let dev = root.join("sys/bus/pci/devices/0000:03:00.0");
        write(&dev.join("tile0/gt0/freq0/act_freq"), "2050\n");
        write(&dev.join("hwmon/hwmon4/temp1_input"), "52000\n");
        let mut r = Reader::new(root);
        let dev = r.host("/sys/bus/pci/devices/0000:03:00.0");
        let (s, mark) = sample(&mut r, "x", &dev, None, None, Instant::now());
        assert_eq!(s.clock_mhz, Some(2050));
        assert_eq!(s.temp_c, Some(52));
        assert!(mark.is_none());
    }
}
