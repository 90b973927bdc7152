//! AMD figures from the amdgpu sysfs attributes of one PCI device: `gpu_busy_percent`,
//! `mem_info_vram_used` / `mem_info_vram_total`, and from its hwmon: `temp1_input`
//! (millidegrees), `power1_average` (µW; `power1_input` on newer kernels) and `freq1_input`
//! (the shader clock, Hz).

use std::path::Path;

use odac_protocol::GpuSample;

use super::sysfs::{celsius, hwmon, mib, num, signed};
use odac_host::inventory::fsread::Reader;

/// The figures of the AMD GPU whose PCI device directory is `dev`.
pub(crate) fn sample(r: &mut Reader, id: &str, dev: &Path) -> GpuSample {
    let mut s = GpuSample {
        id: id.to_owned(),
        util: num(r, &dev.join("gpu_busy_percent")).map(|u| u.min(100) as u8),
        vram_used_mib: num(r, &dev.join("mem_info_vram_used")).map(mib),
        vram_total_mib: num(r, &dev.join("mem_info_vram_total")).map(mib),
        ..GpuSample::default()
    };
    if let Some(mon) = hwmon(r, dev) {
        s.temp_c = signed(r, &mon.join("temp1_input")).map(celsius);
        s.power_w = num(r, &mon.join("power1_average"))
            .or_else(|| num(r, &mon.join("power1_input")))
            .map(|uw| u32::try_from(uw / 1_000_000).unwrap_or(u32::MAX));
        s.clock_mhz = num(r, &mon.join("freq1_input"))
            .map(|hz| u32::try_from(hz / 1_000_000).unwrap_or(u32::MAX));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_amdgpu_attributes() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/bus/pci/devices/0000:19:00.0");
        let mon = dev.join("hwmon/hwmon3");
        std::fs::create_dir_all(&mon).unwrap();
        for (file, value) in [
            ("gpu_busy_percent", "37\n"),
            ("mem_info_vram_used", "1073741824\n"),
            ("mem_info_vram_total", "68702699520\n"),
        ] {
            std::fs::write(dev.join(file), value).unwrap();
        }
        for (file, value) in [
            ("temp1_input", "45000\n"),
            ("power1_average", "300000000\n"),
            ("freq1_input", "1700000000\n"),
        ] {
            std::fs::write(mon.join(file), value).unwrap();
        }
        let mut r = Reader::new(dir.path());
        let dev = r.host("/sys/bus/pci/devices/0000:19:00.0");
        let s = sample(&mut r, "0000:19:00.0", &dev);
        assert_eq!(s.util, Some(37));
        assert_eq!(s.vram_used_mib, Some(1024));
        assert_eq!(s.vram_total_mib, Some(65520));
        assert_eq!(s.temp_c, Some(45));
        assert_eq!(s.power_w, Some(300));
        assert_eq!(s.clock_mhz, Some(1700));
    }

    #[test]
    fn missing_attributes_are_absent() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Reader::new(dir.path());
        let dev = r.host("/sys/bus/pci/devices/0000:19:00.0");
        let s = sample(&mut r, "0000:19:00.0", &dev);
        assert_eq!(s.util, None);
        assert_eq!(s.power_w, None);
    }
}
