//! GPU counters for the telemetry scenarios: a fixture host tree copied into a scratch
//! directory (symlinks kept, so the tree reads as the original), with the sysfs and hwmon
//! files the agent samples (AMD: `gpu_busy_percent`, VRAM, hwmon temperature and power;
//! Intel i915 and xe: actual frequency, hwmon energy counter) written and changed by the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The PCI addresses of the eight GPUs of the fixture host `amd-kfd-mi210-8gpu`, in order.
pub const MI210_GPUS: [&str; 8] = [
    "0000:03:00.0",
    "0000:26:00.0",
    "0000:43:00.0",
    "0000:63:00.0",
    "0000:83:00.0",
    "0000:a3:00.0",
    "0000:c3:00.0",
    "0000:e3:00.0",
];

/// A copy of `fixture` under `into/host`, for a test to change.
pub fn copy_fixture(fixture: &Path, into: &Path) -> Result<PathBuf> {
    let dest = into.join("host");
    let status = Command::new("cp")
        .arg("-a")
        .arg(fixture)
        .arg(&dest)
        .status()
        .map_err(|e| Error::Other(format!("cannot run cp for {}: {e}", fixture.display())))?;
    if !status.success() {
        return Err(Error::Other(format!(
            "cp -a {} {} failed: {status}",
            fixture.display(),
            dest.display()
        )));
    }
    Ok(dest)
}

fn write(path: &Path, value: impl std::fmt::Display) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Other(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(path, format!("{value}\n"))
        .map_err(|e| Error::Other(format!("cannot write {}: {e}", path.display())))
}

/// One AMD GPU's counters under `/sys/bus/pci/devices/<id>` of `root`.
pub fn set_amd(
    root: &Path,
    id: &str,
    util: u8,
    vram_used_mib: u64,
    temp_c: i64,
    power_w: u64,
) -> Result<()> {
    let dev = root.join("sys/bus/pci/devices").join(id);
    write(&dev.join("gpu_busy_percent"), util)?;
    write(&dev.join("mem_info_vram_used"), vram_used_mib * 1024 * 1024)?;
    write(&dev.join("mem_info_vram_total"), 65_520u64 * 1024 * 1024)?;
    write(&dev.join("hwmon/hwmon0/temp1_input"), temp_c * 1000)?;
    write(
        &dev.join("hwmon/hwmon0/power1_average"),
        power_w * 1_000_000,
    )?;
    write(&dev.join("hwmon/hwmon0/freq1_input"), 1_700_000_000u64)
}

/// An i915 GPU's actual frequency and energy counter; `dev` is its PCI device directory
/// (relative to `root`), `card` its DRM card name.
pub fn set_i915(root: &Path, dev: &str, card: &str, freq_mhz: u32, energy_uj: u64) -> Result<()> {
    let dev = root.join(dev);
    write(
        &dev.join("drm").join(card).join("gt_act_freq_mhz"),
        freq_mhz,
    )?;
    write(&dev.join("hwmon/hwmon1/energy1_input"), energy_uj)
}

/// An xe GPU's actual frequency (tile 0, gt 0), temperature and energy counter.
pub fn set_xe(root: &Path, dev: &str, freq_mhz: u32, temp_c: i64, energy_uj: u64) -> Result<()> {
    let dev = root.join(dev);
    write(&dev.join("tile0/gt0/freq0/act_freq"), freq_mhz)?;
    write(&dev.join("hwmon/hwmon2/temp1_input"), temp_c * 1000)?;
    write(&dev.join("hwmon/hwmon2/energy1_input"), energy_uj)
}
