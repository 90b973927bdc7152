//! The GPUs a lab simulates (`--gpus nvidia:2,amd:2,intel:1`) and the identity each one gets:
//! PCI address, NVIDIA UUID and minor, DRM card and render minors.

use super::error::LabError;

/// A vendor the lab can simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabVendor {
    /// NVIDIA: procfs, `/dev/nvidia*`, the `nvidia` runtime and hook.
    Nvidia,
    /// AMD: kfd topology, `/dev/kfd`, render and card nodes.
    Amd,
    /// Intel: i915 render and card nodes.
    Intel,
}

/// How many GPUs of each vendor the lab simulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LabGpus {
    /// NVIDIA GPUs.
    pub nvidia: u32,
    /// AMD GPUs.
    pub amd: u32,
    /// Intel GPUs.
    pub intel: u32,
}

/// Most GPUs of one vendor the lab makes.
pub const MAX_PER_VENDOR: u32 = 16;

/// One simulated GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabGpu {
    /// Its vendor.
    pub vendor: LabVendor,
    /// Index among the GPUs of its vendor.
    pub index: u32,
    /// PCI address, `0000:bb:00.0`.
    pub pci_address: String,
    /// NVIDIA UUID (NVIDIA only).
    pub uuid: Option<String>,
    /// DRM card minor (`/dev/dri/cardN`; AMD and Intel).
    pub card: Option<u32>,
    /// DRM render minor (`/dev/dri/renderDN`; AMD and Intel).
    pub render: Option<u32>,
}

impl LabGpus {
    /// Parses `nvidia:2,amd:2,intel:1` (a vendor without `:N` means one; each vendor once).
    pub fn parse(input: &str) -> Result<LabGpus, LabError> {
        let bad = |why: String| LabError::Gpus {
            input: input.to_owned(),
            why,
        };
        let mut gpus = LabGpus::default();
        let mut seen = Vec::new();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (vendor, count) = part.split_once(':').unwrap_or((part, "1"));
            let count: u32 = count
                .trim()
                .parse()
                .map_err(|_| bad(format!("{count:?} is not a count")))?;
            if count > MAX_PER_VENDOR {
                return Err(bad(format!("at most {MAX_PER_VENDOR} gpus per vendor")));
            }
            let vendor = vendor.trim().to_ascii_lowercase();
            if seen.contains(&vendor) {
                return Err(bad(format!("{vendor} is given twice")));
            }
            match vendor.as_str() {
                "nvidia" => gpus.nvidia = count,
                "amd" => gpus.amd = count,
                "intel" => gpus.intel = count,
                other => {
                    return Err(bad(format!(
                        "unknown vendor {other:?} (nvidia, amd, intel)"
                    )));
                }
            }
            seen.push(vendor);
        }
        Ok(gpus)
    }

    /// Every GPU with its identity: NVIDIA on buses 0x10…, AMD on 0x40…, Intel on 0x70…;
    /// DRM minors are handed out AMD first, then Intel (cards from 0, render nodes from 128).
    pub fn devices(&self) -> Vec<LabGpu> {
        let mut out = Vec::new();
        for i in 0..self.nvidia {
            out.push(LabGpu {
                vendor: LabVendor::Nvidia,
                index: i,
                pci_address: format!("0000:{:02x}:00.0", 0x10 + i),
                uuid: Some(nvidia_uuid(i)),
                card: None,
                render: None,
            });
        }
        let mut minor = 0;
        for (vendor, count, bus) in [
            (LabVendor::Amd, self.amd, 0x40),
            (LabVendor::Intel, self.intel, 0x70),
        ] {
            for i in 0..count {
                out.push(LabGpu {
                    vendor,
                    index: i,
                    pci_address: format!("0000:{:02x}:00.0", bus + i),
                    uuid: None,
                    card: Some(minor),
                    render: Some(128 + minor),
                });
                minor += 1;
            }
        }
        out
    }
}

/// The UUID of the lab's NVIDIA GPU `index`.
pub fn nvidia_uuid(index: u32) -> String {
    format!("GPU-0dac1ab0-0000-4000-8000-{index:012x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counts_and_refuses_garbage() {
        let g = LabGpus::parse("nvidia:2, amd:2,intel").unwrap_or_default();
        assert_eq!((g.nvidia, g.amd, g.intel), (2, 2, 1));
        assert!(LabGpus::parse("tpu:1").is_err());
        assert!(LabGpus::parse("nvidia:x").is_err());
        assert!(LabGpus::parse("nvidia:1,nvidia:2").is_err());
        assert!(LabGpus::parse("amd:99").is_err());
        assert_eq!(LabGpus::parse("").ok(), Some(LabGpus::default()));
    }

    #[test]
    fn identities_are_distinct() {
        let g = LabGpus {
            nvidia: 2,
            amd: 2,
            intel: 1,
        };
        let d = g.devices();
        assert_eq!(d.len(), 5);
        assert_eq!(
            d[1].uuid.as_deref(),
            Some("GPU-0dac1ab0-0000-4000-8000-000000000001")
        );
        assert_eq!(d[2].pci_address, "0000:40:00.0");
        assert_eq!((d[4].card, d[4].render), (Some(2), Some(130)));
        assert_eq!(d[4].vendor, LabVendor::Intel);
    }
}
