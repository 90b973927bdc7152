//! The CUDA driver API version an NVIDIA driver supports: what `nvidia-smi` prints as "CUDA
//! Version" and what the toolkit compares `NVIDIA_REQUIRE_CUDA=cuda>=X.Y` against. NVML gives
//! it where the library loads; otherwise it follows from the driver's branch (its major
//! version) by NVIDIA's table "CUDA Toolkit and Corresponding Driver Versions" of the CUDA
//! release notes: every driver of a branch supports the same CUDA version, and a newer branch
//! supports every older CUDA.

use std::fmt;

/// A CUDA version, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion {
    /// Major, e.g. 12.
    pub major: u32,
    /// Minor, e.g. 4.
    pub minor: u32,
}

impl CudaVersion {
    /// `major.minor`.
    pub const fn new(major: u32, minor: u32) -> CudaVersion {
        CudaVersion { major, minor }
    }

    /// Parses `12.4` or `12.4.1` (the patch is ignored: the driver API has none).
    pub fn parse(s: &str) -> Option<CudaVersion> {
        let mut parts = s.trim().split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().map_or(Some(0), |m| m.parse().ok())?;
        Some(CudaVersion { major, minor })
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Driver branch → the CUDA version its drivers support (release notes, Linux x86_64;
/// `nvidia-smi` of 565 drivers prints 12.7, a version that had no toolkit release).
pub const BRANCH_CUDA: [(u32, CudaVersion); 20] = [
    (450, CudaVersion::new(11, 0)),
    (455, CudaVersion::new(11, 1)),
    (460, CudaVersion::new(11, 2)),
    (465, CudaVersion::new(11, 3)),
    (470, CudaVersion::new(11, 4)),
    (495, CudaVersion::new(11, 5)),
    (510, CudaVersion::new(11, 6)),
    (515, CudaVersion::new(11, 7)),
    (520, CudaVersion::new(11, 8)),
    (525, CudaVersion::new(12, 0)),
    (530, CudaVersion::new(12, 1)),
    (535, CudaVersion::new(12, 2)),
    (545, CudaVersion::new(12, 3)),
    (550, CudaVersion::new(12, 4)),
    (555, CudaVersion::new(12, 5)),
    (560, CudaVersion::new(12, 6)),
    (565, CudaVersion::new(12, 7)),
    (570, CudaVersion::new(12, 8)),
    (575, CudaVersion::new(12, 9)),
    (580, CudaVersion::new(13, 0)),
];

/// The branch (major version) of a driver version such as `535.183.01`.
pub fn driver_branch(driver_version: &str) -> Option<u32> {
    driver_version.trim().split('.').next()?.parse().ok()
}

/// The CUDA version a driver supports, by the table: the newest branch not newer than the
/// driver's. `None` for drivers older than the table (before 450) or unparseable versions.
pub fn cuda_for_driver(driver_version: &str) -> Option<CudaVersion> {
    let branch = driver_branch(driver_version)?;
    BRANCH_CUDA
        .iter()
        .rev()
        .find(|(b, _)| *b <= branch)
        .map(|(_, cuda)| *cuda)
}

/// The oldest driver branch that supports `cuda`; `None` when the table has none.
pub fn min_branch_for(cuda: CudaVersion) -> Option<u32> {
    BRANCH_CUDA
        .iter()
        .find(|(_, c)| *c >= cuda)
        .map(|(branch, _)| *branch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The release notes' table, as `nvidia-smi` reports it per driver.
    #[test]
    fn drivers_map_to_the_release_notes_cuda_versions() {
        for (driver, cuda) in [
            ("450.36.06", "11.0"),
            ("470.256.02", "11.4"),
            ("525.60.13", "12.0"),
            ("535.54.03", "12.2"),
            ("535.183.01", "12.2"),
            ("545.23.06", "12.3"),
            ("550.54.14", "12.4"),
            ("550.127.05", "12.4"),
            ("555.42.02", "12.5"),
            ("560.35.03", "12.6"),
            ("565.57.01", "12.7"),
            ("570.86.10", "12.8"),
            ("575.51.03", "12.9"),
            ("580.65.06", "13.0"),
        ] {
            assert_eq!(
                cuda_for_driver(driver).map(|c| c.to_string()),
                Some(cuda.to_owned()),
                "{driver}"
            );
        }
        assert_eq!(cuda_for_driver("440.33"), None, "older than the table");
        assert_eq!(cuda_for_driver("garbage"), None);
    }

    #[test]
    fn the_fix_names_the_oldest_branch() {
        let branch = |s: &str| CudaVersion::parse(s).and_then(min_branch_for);
        assert_eq!(branch("12.4"), Some(550));
        assert_eq!(branch("12.4.1"), Some(550));
        assert_eq!(branch("12.2"), Some(535));
        assert_eq!(branch("12"), Some(525));
        assert_eq!(branch("13.0"), Some(580));
        assert_eq!(branch("14.0"), None);
    }
}
