//! The one closed set of reason codes shared by the inventory (why a vendor is not
//! schedulable), pre-flight and status (why an app fell back or failed). Each code carries a
//! one-line operator explanation and, where one exists, a fix.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::vendor::Vendor;

/// Why a GPU could not be used. snake_case on the wire; the first six codes are ODAC's own.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// GPU support is turned off in the agent's configuration.
    Disabled,
    /// No GPU of the vendor is present.
    NoDevice,
    /// A GPU is present but its kernel driver is not loaded.
    NoDriver,
    /// The driver works but the container engine cannot hand the GPU to containers.
    NoContainerRuntime,
    /// The GPU has no DRM render node.
    NoRenderNode,
    /// The device is present but cannot be passed through (e.g. a BMC display adapter).
    UnsupportedDevice,
    /// More GPUs were requested than are present or free.
    InsufficientDevices,
    /// The Docker engine is not reachable.
    EngineUnavailable,
    /// The engine refused the device; the detail carries the engine's message.
    EngineRejected,
    /// The host's local policy forbids what the spec asks for.
    PolicyDenied,
    /// An app built from git did not build.
    BuildFailed,
    /// The app's image could not be pulled from its registry.
    ImagePullFailed,
    /// The image's `NVIDIA_REQUIRE_*` (a CUDA or driver version) needs a newer NVIDIA driver
    /// than the host has; the detail names the requirement and the host's versions.
    DriverTooOld,
    /// No GPU of the vendor has the VRAM the app asks for (`gpu.min_vram_mib`); the detail
    /// names what was needed and the best GPU's figure.
    InsufficientVram,
    /// The GPU the app would get is unhealthy (a critical kernel error such as an NVIDIA
    /// Xid, or it left the bus); the detail names the GPU and the error.
    GpuUnhealthy,
}

impl Reason {
    /// Every reason code, in wire order.
    pub const ALL: [Reason; 15] = [
        Reason::Disabled,
        Reason::NoDevice,
        Reason::NoDriver,
        Reason::NoContainerRuntime,
        Reason::NoRenderNode,
        Reason::UnsupportedDevice,
        Reason::InsufficientDevices,
        Reason::EngineUnavailable,
        Reason::EngineRejected,
        Reason::PolicyDenied,
        Reason::BuildFailed,
        Reason::ImagePullFailed,
        Reason::DriverTooOld,
        Reason::InsufficientVram,
        Reason::GpuUnhealthy,
    ];

    /// The wire code, e.g. `no_container_runtime`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Disabled => "disabled",
            Reason::NoDevice => "no_device",
            Reason::NoDriver => "no_driver",
            Reason::NoContainerRuntime => "no_container_runtime",
            Reason::NoRenderNode => "no_render_node",
            Reason::UnsupportedDevice => "unsupported_device",
            Reason::InsufficientDevices => "insufficient_devices",
            Reason::EngineUnavailable => "engine_unavailable",
            Reason::EngineRejected => "engine_rejected",
            Reason::PolicyDenied => "policy_denied",
            Reason::BuildFailed => "build_failed",
            Reason::ImagePullFailed => "image_pull_failed",
            Reason::DriverTooOld => "driver_too_old",
            Reason::InsufficientVram => "insufficient_vram",
            Reason::GpuUnhealthy => "gpu_unhealthy",
        }
    }

    /// Parses a wire code.
    pub fn from_wire(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// A one-line explanation for an operator.
    pub fn explanation(self) -> &'static str {
        match self {
            Reason::Disabled => "GPU support is disabled in the agent configuration",
            Reason::NoDevice => "no GPU of this vendor was found on the PCI bus",
            Reason::NoDriver => "a GPU is present but its kernel driver is not loaded",
            Reason::NoContainerRuntime => {
                "the GPU driver works but the container engine cannot pass the GPU into containers"
            }
            Reason::NoRenderNode => "the GPU has no DRM render node (/dev/dri/renderD*)",
            Reason::UnsupportedDevice => "the device cannot be passed into a container",
            Reason::InsufficientDevices => {
                "more GPUs were requested than this host has present or free"
            }
            Reason::EngineUnavailable => "the Docker engine is not reachable",
            Reason::EngineRejected => "the container engine refused the GPU device",
            Reason::PolicyDenied => "the host's local policy forbids what the app spec asks for",
            Reason::BuildFailed => "the app's image could not be built from its git source",
            Reason::ImagePullFailed => "the app's image could not be pulled from its registry",
            Reason::DriverTooOld => {
                "the image needs a newer NVIDIA driver (CUDA version) than this host has"
            }
            Reason::InsufficientVram => {
                "no GPU of this host has as much VRAM as the app asks for (gpu.min_vram_mib)"
            }
            Reason::GpuUnhealthy => {
                "the GPU reported a critical error (e.g. an NVIDIA Xid) and is not trusted until it recovers"
            }
        }
    }

    /// How to fix it, where a fix exists; `vendor` narrows the hint when the reason is
    /// vendor-specific (`None` gives the generic hint, if any).
    pub fn fix(self, vendor: Option<Vendor>) -> Option<&'static str> {
        match (self, vendor) {
            (Reason::Disabled, _) => {
                Some("enable GPUs in agent.toml ([apps.gpu] enabled = true) and restart odac-agent")
            }
            (Reason::NoDevice, _) => None,
            (Reason::NoDriver, Some(Vendor::Nvidia)) => Some(
                "install the NVIDIA driver (e.g. nvidia-driver or the CUDA repository's \
                 cuda-drivers) and reboot, then check nvidia-smi",
            ),
            (Reason::NoDriver, Some(Vendor::Amd)) => Some(
                "load the amdgpu kernel driver (install amdgpu-dkms from AMD's ROCm repository) \
                 and check that /dev/kfd exists",
            ),
            (Reason::NoDriver, Some(Vendor::Intel)) => {
                Some("load the i915 or xe kernel driver and check /dev/dri/renderD*")
            }
            (Reason::NoDriver, None) => Some("install and load the GPU's kernel driver"),
            (Reason::NoContainerRuntime, Some(Vendor::Nvidia)) => Some(
                "install nvidia-container-toolkit, run `nvidia-ctk runtime configure \
                 --runtime=docker`, then restart Docker (systemctl restart docker)",
            ),
            (Reason::NoContainerRuntime, Some(Vendor::Amd)) => Some(
                "make /dev/kfd and /dev/dri readable by the agent's engine (render and video \
                 groups), or install amd-container-toolkit to generate a CDI spec",
            ),
            (Reason::NoContainerRuntime, Some(Vendor::Intel)) => {
                Some("make /dev/dri/renderD* accessible to the container engine (render group)")
            }
            (Reason::NoContainerRuntime, None) => {
                Some("install the vendor's container toolkit and restart Docker")
            }
            (Reason::NoRenderNode, _) => {
                Some("check that the GPU's DRM driver is loaded and /dev/dri/renderD* exists")
            }
            (Reason::UnsupportedDevice, _) => None,
            (Reason::InsufficientDevices, _) => {
                Some("lower the app's gpu count, or stop another app that holds a GPU")
            }
            (Reason::EngineUnavailable, _) => Some(
                "start Docker (systemctl start docker) and check the agent can reach its socket",
            ),
            (Reason::EngineRejected, Some(Vendor::Nvidia)) => Some(
                "run `nvidia-ctk runtime configure --runtime=docker`, restart Docker, and \
                 check `docker info` lists the nvidia runtime",
            ),
            (Reason::EngineRejected, _) => {
                Some("read the engine's message in the detail and check `docker info`")
            }
            (Reason::PolicyDenied, _) => {
                Some("change the app spec, or allow it in the agent's local policy (agent.toml)")
            }
            (Reason::BuildFailed, _) => {
                Some("read the build log in the detail and fix the repository")
            }
            (Reason::ImagePullFailed, _) => Some(
                "read the registry's words in the detail: check the image name and tag, the \
                 registry credentials (odac registry login) and the engine's free disk space",
            ),
            (Reason::DriverTooOld, _) => Some(
                "install the NVIDIA driver branch the detail names (each branch supports one \
                 CUDA version: 535 → 12.2, 550 → 12.4, 570 → 12.8), or use an image built for \
                 the host's CUDA version",
            ),
            (Reason::InsufficientVram, _) => Some(
                "lower gpu.min_vram_mib (a smaller or more quantised model), stop apps that use \
                 the GPU's memory, or place the app on a host with a larger GPU",
            ),
            (Reason::GpuUnhealthy, _) => Some(
                "follow the fix the detail names for the error (reset the GPU with \
                 nvidia-smi -r, reboot, or replace it); the agent trusts the GPU again after \
                 it answered for gpu.health_recovery_secs or after a driver-reported reset",
            ),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_on_the_wire_and_round_trip() {
        for r in Reason::ALL {
            let json = serde_json::to_string(&r).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(Reason::from_wire(r.as_str()), Some(r));
            assert_eq!(r.to_string(), r.as_str());
        }
    }

    #[test]
    fn explanations_are_one_line() {
        for r in Reason::ALL {
            let e = r.explanation();
            assert!(
                !e.is_empty() && !e.contains('\n') && !e.ends_with('.'),
                "{r}: {e}"
            );
        }
    }

    #[test]
    fn nvidia_toolkit_fix() {
        let fix = Reason::NoContainerRuntime
            .fix(Some(Vendor::Nvidia))
            .unwrap_or_default();
        assert!(fix.contains("nvidia-container-toolkit"));
        assert!(fix.contains("nvidia-ctk runtime configure --runtime=docker"));
        assert!(fix.contains("restart Docker"));
        assert_eq!(Reason::NoDevice.fix(Some(Vendor::Amd)), None);
    }
}
