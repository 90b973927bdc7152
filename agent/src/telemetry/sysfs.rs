//! Small helpers over the inventory's host-root reader for the telemetry readers: numeric
//! attributes and the first `hwmon` directory of a device.

use std::path::{Path, PathBuf};

use odac_host::inventory::fsread::Reader;

/// A decimal attribute (`gpu_busy_percent`, `temp1_input`); garbage reads as absent.
pub(crate) fn num(r: &mut Reader, path: &Path) -> Option<u64> {
    r.text(path)?.trim().parse::<u64>().ok()
}

/// A signed decimal attribute (temperatures can be negative).
pub(crate) fn signed(r: &mut Reader, path: &Path) -> Option<i64> {
    r.text(path)?.trim().parse::<i64>().ok()
}

/// The first `hwmon/hwmonN` directory of a PCI device directory.
pub(crate) fn hwmon(r: &mut Reader, dev: &Path) -> Option<PathBuf> {
    r.entries(&dev.join("hwmon"))
        .into_iter()
        .find(|(name, _)| name.starts_with("hwmon"))
        .map(|(_, path)| path)
}

/// Bytes → MiB.
pub(crate) fn mib(bytes: u64) -> u64 {
    bytes / (1024 * 1024)
}

/// Millidegrees Celsius → whole degrees.
pub(crate) fn celsius(milli: i64) -> i32 {
    i32::try_from(milli / 1000).unwrap_or(0)
}
