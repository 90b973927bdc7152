//! The GPUs a lab simulates (`--gpus nvidia:2,amd:2,intel:1`) and the identity each one gets:
//! PCI address, NVIDIA UUID and minor, DRM card and render minors.

use std::collections::BTreeMap;

use odac_protocol::{Compute, NodeRule, Vendor};

use super::error::LabError;

/// How many GPUs of each vendor the lab simulates (each vendor's model, ids and bus from the
/// vendor table, `Vendor::facts().lab`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabGpus {
    counts: BTreeMap<Vendor, u32>,
}

/// Most GPUs of one vendor the lab makes.
pub const MAX_PER_VENDOR: u32 = 16;

/// One simulated GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabGpu {
    /// Its vendor.
    pub vendor: Vendor,
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
            let Ok(known) = parse_vendor(&vendor) else {
                return Err(bad(format!(
                    "unknown vendor {vendor:?} (nvidia, amd, intel)"
                )));
            };
            gpus.counts.insert(known, count);
            seen.push(vendor);
        }
        Ok(gpus)
    }

    /// How many GPUs of `vendor` the lab simulates.
    pub fn count(&self, vendor: Vendor) -> u32 {
        self.counts.get(&vendor).copied().unwrap_or(0)
    }

    /// `self` with `count` GPUs of `vendor`.
    pub fn with(mut self, vendor: Vendor, count: u32) -> LabGpus {
        self.counts.insert(vendor, count);
        self
    }

    /// Every GPU with its identity, vendors in wire order, each on its buses from the vendor
    /// table (NVIDIA 0x10…, AMD 0x40…, Intel 0x70…); CUDA GPUs get a UUID, DRM GPUs card and
    /// render minors handed out in vendor order (cards from 0, render nodes from 128).
    pub fn devices(&self) -> Vec<LabGpu> {
        let mut out = Vec::new();
        let mut minor = 0;
        for vendor in Vendor::ALL {
            let facts = vendor.facts();
            for i in 0..self.count(vendor) {
                let drm = matches!(facts.nodes, NodeRule::Dri { .. });
                out.push(LabGpu {
                    vendor,
                    index: i,
                    pci_address: facts.lab_pci_address(i),
                    uuid: (facts.compute == Compute::Cuda).then(|| nvidia_uuid(i)),
                    card: drm.then_some(minor),
                    render: drm.then_some(128 + minor),
                });
                if drm {
                    minor += 1;
                }
            }
        }
        out
    }
}

/// `--vendor` and the vendors of `--gpus`: `nvidia`, `amd` (or `rocm`) or `intel`.
pub fn parse_vendor(s: &str) -> Result<Vendor, String> {
    match s {
        "rocm" => Ok(Vendor::Amd),
        other => {
            Vendor::from_wire(other).ok_or_else(|| format!("{other:?} is not nvidia, amd or intel"))
        }
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
        let counts = Vendor::ALL.map(|v| g.count(v));
        assert_eq!(counts, [2, 2, 1]);
        assert!(LabGpus::parse("tpu:1").is_err());
        assert!(LabGpus::parse("nvidia:x").is_err());
        assert!(LabGpus::parse("nvidia:1,nvidia:2").is_err());
        assert!(LabGpus::parse("amd:99").is_err());
        assert_eq!(LabGpus::parse("").ok(), Some(LabGpus::default()));
    }

    #[test]
    fn identities_are_distinct() {
        let g = LabGpus::default()
            .with(Vendor::Nvidia, 2)
            .with(Vendor::Amd, 2)
            .with(Vendor::Intel, 1);
        let d = g.devices();
        assert_eq!(d.len(), 5);
        assert_eq!(
            d[1].uuid.as_deref(),
            Some("GPU-0dac1ab0-0000-4000-8000-000000000001")
        );
        assert_eq!(d[2].pci_address, "0000:40:00.0");
        assert_eq!((d[4].card, d[4].render), (Some(2), Some(130)));
        assert_eq!(d[4].vendor, Vendor::Intel);
    }
}
