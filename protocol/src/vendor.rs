//! GPU vendors and the mechanisms by which a GPU is handed to a container.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A GPU vendor the agent knows how to pass into containers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    /// NVIDIA (PCI vendor 0x10de).
    Nvidia,
    /// AMD (PCI vendor 0x1002), served through ROCm.
    Amd,
    /// Intel (PCI vendor 0x8086).
    Intel,
}

impl Vendor {
    /// Every vendor, in wire order.
    pub const ALL: [Vendor; 3] = [Vendor::Nvidia, Vendor::Amd, Vendor::Intel];

    /// The wire name: `nvidia`, `amd` or `intel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
            Vendor::Intel => "intel",
        }
    }

    /// Parses a wire name (exact, lowercase).
    pub fn from_wire(s: &str) -> Option<Vendor> {
        Vendor::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The PCI vendor id, e.g. `0x10de` for NVIDIA.
    pub fn pci_id(self) -> u16 {
        self.facts().pci_id
    }

    /// The vendor of a PCI vendor id, `None` for a vendor the agent does not pass through.
    pub fn from_pci_id(id: u32) -> Option<Vendor> {
        Vendor::ALL
            .into_iter()
            .find(|v| u32::from(v.pci_id()) == id)
    }

    /// The CDI kind the vendor names its GPUs by (`nvidia.com/gpu`).
    pub fn cdi_kind(self) -> &'static str {
        self.facts().cdi_kind
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a GPU reaches a container.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// A CDI device request (`DeviceRequest{driver:"cdi"}`), Docker ≥ 25.
    Cdi,
    /// The NVIDIA device driver registered by nvidia-container-toolkit
    /// (`DeviceRequest{driver:"nvidia"}`).
    NvidiaRuntime,
    /// Plain device nodes (`/dev/kfd`, `/dev/dri/*`) plus numeric group ids.
    DeviceNodes,
}

impl Mechanism {
    /// The wire name: `cdi`, `nvidia_runtime` or `device_nodes`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Cdi => "cdi",
            Mechanism::NvidiaRuntime => "nvidia_runtime",
            Mechanism::DeviceNodes => "device_nodes",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_match_serde() {
        for v in Vendor::ALL {
            assert_eq!(
                serde_json::to_string(&v).ok(),
                Some(format!("\"{}\"", v.as_str()))
            );
            assert_eq!(Vendor::from_wire(v.as_str()), Some(v));
        }
        for m in [
            Mechanism::Cdi,
            Mechanism::NvidiaRuntime,
            Mechanism::DeviceNodes,
        ] {
            assert_eq!(
                serde_json::to_string(&m).ok(),
                Some(format!("\"{}\"", m.as_str()))
            );
        }
        assert_eq!(Vendor::from_wire("NVIDIA"), None);
    }

    #[test]
    fn pci_ids_name_the_vendor_and_nothing_else() {
        for v in Vendor::ALL {
            assert_eq!(Vendor::from_pci_id(u32::from(v.pci_id())), Some(v));
        }
        assert_eq!(Vendor::from_pci_id(0x1a03), None);
        assert_eq!(Vendor::from_pci_id(0x1_10de), None);
    }
}
