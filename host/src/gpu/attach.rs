//! From a plan to engine requests, and back: [`Attachment::apply`] writes the device requests,
//! device mappings and numeric group ids of an attachment into a container spec (CDI:
//! `driver "cdi"` with fully-qualified ids and no count; NVIDIA runtime: `driver "nvidia"` with
//! explicit ids and capabilities `[["gpu", <driver capabilities>…]]`; device nodes: one
//! mapping per node plus the GIDs owning them). Every NVIDIA path also sets the container's
//! `NVIDIA_DRIVER_CAPABILITIES` to the attachment's effective set, so the toolkit mounts the
//! libraries of exactly that set whatever the image says. [`attached_from`] reads what a
//! container really holds from the engine's inspect, never from the plan.

use odac_protocol::Compute;
use odac_protocol::{
    Attached, DRIVER_CAPABILITIES_ENV, DriverCapabilities, DriverCapability, Mechanism, Vendor,
};
use serde::{Serialize, Serializer};

use crate::engine::{ContainerDetails, ContainerSpec, DeviceMapping, DeviceRequest};

/// A decided attachment: the vendor, the mechanism and the concrete devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attachment {
    /// The vendor chosen.
    pub vendor: Vendor,
    /// How the GPUs reach the container.
    pub mechanism: Mechanism,
    /// What the engine is asked for: CDI ids, NVIDIA UUIDs (or indexes), or device node
    /// host paths.
    pub devices: Vec<String>,
    /// The GPUs held ([`crate::inventory::Gpu::id`]), for allocation bookkeeping.
    pub gpus: Vec<String>,
    /// Numeric group ids owning the device nodes (device nodes only), sorted.
    pub group_add: Vec<u32>,
    /// The NVIDIA driver capabilities the container gets (see
    /// [`DriverCapabilities::effective`]); pre-flight sets the intent's or the default, the
    /// app manager the image's once the image is there.
    #[serde(serialize_with = "capability_names")]
    pub capabilities: DriverCapabilities,
}

fn capability_names<S: Serializer>(c: &DriverCapabilities, s: S) -> Result<S::Ok, S::Error> {
    c.names().serialize(s)
}

/// The capabilities a status shows for an attachment: NVIDIA through the toolkit (CDI or the
/// runtime) gets `effective`; NVIDIA device nodes alone get no driver library; AMD and Intel
/// device nodes (render node plus the `video`/`render` groups) serve compute and video.
pub fn capabilities_for(
    vendor: Vendor,
    mechanism: Mechanism,
    effective: &DriverCapabilities,
) -> Vec<String> {
    match (vendor, mechanism) {
        (Vendor::Nvidia, Mechanism::DeviceNodes) => Vec::new(),
        (Vendor::Nvidia, _) => effective.names(),
        (Vendor::Amd | Vendor::Intel, _) => [DriverCapability::Compute, DriverCapability::Video]
            .into_iter()
            .collect::<DriverCapabilities>()
            .names(),
    }
}

impl Attachment {
    /// The engine request for this attachment, added to `spec`.
    pub fn apply(&self, spec: &mut ContainerSpec) {
        if self.vendor.facts().compute == Compute::Cuda && self.mechanism != Mechanism::DeviceNodes
        {
            spec.env.insert(
                DRIVER_CAPABILITIES_ENV.into(),
                self.capabilities.to_string(),
            );
        }
        match self.mechanism {
            Mechanism::Cdi => spec.device_requests.push(DeviceRequest {
                driver: "cdi".into(),
                device_ids: self.devices.clone(),
                ..DeviceRequest::default()
            }),
            Mechanism::NvidiaRuntime => spec.device_requests.push(DeviceRequest {
                driver: "nvidia".into(),
                device_ids: self.devices.clone(),
                capabilities: vec![
                    std::iter::once("gpu".to_owned())
                        .chain(self.capabilities.names())
                        .collect(),
                ],
                ..DeviceRequest::default()
            }),
            Mechanism::DeviceNodes => {
                spec.devices
                    .extend(self.devices.iter().cloned().map(DeviceMapping::same_path));
                for gid in &self.group_add {
                    let gid = gid.to_string();
                    if !spec.group_add.contains(&gid) {
                        spec.group_add.push(gid);
                    }
                }
            }
        }
    }
}

/// The vendor a CDI id names by its kind (`nvidia.com/gpu=0` → NVIDIA).
fn cdi_kind_vendor(id: &str) -> Option<Vendor> {
    let vendor = id.split('/').next().unwrap_or_default();
    match vendor {
        "nvidia.com" => Some(Vendor::Nvidia),
        "amd.com" => Some(Vendor::Amd),
        "intel.com" => Some(Vendor::Intel),
        _ => None,
    }
}

/// What the container holds, read from the engine's inspect. `vendor_hint` (the vendor the
/// agent recorded in the container's labels) names the vendor when the devices themselves do
/// not (a CDI id of another vendor's domain, plain render nodes). `None` when the container
/// holds no GPU device.
pub fn attached_from(details: &ContainerDetails, vendor_hint: Option<Vendor>) -> Option<Attached> {
    if let Some(r) = details.device_requests.iter().find(|r| r.driver == "cdi") {
        let vendor = r
            .device_ids
            .iter()
            .find_map(|id| cdi_kind_vendor(id))
            .or(vendor_hint)?;
        return Some(Attached {
            vendor,
            mechanism: Mechanism::Cdi,
            devices: r.device_ids.clone(),
            capabilities: capabilities_for(vendor, Mechanism::Cdi, &from_env(details)),
        });
    }
    let gpu_request = details.device_requests.iter().find(|r| {
        r.driver == "nvidia"
            || r.capabilities
                .iter()
                .any(|set| set.iter().any(|c| c == "gpu"))
    });
    if let Some(r) = gpu_request {
        let devices = if r.device_ids.is_empty() {
            match r.count {
                Some(-1) | None => vec!["all".to_owned()],
                Some(n) => vec![format!("count={n}")],
            }
        } else {
            r.device_ids.clone()
        };
        // moby's nvidia driver puts the request's driver capabilities last in the process
        // environment, so they win over the container's and the image's
        let requested = DriverCapabilities::parse(
            r.capabilities
                .iter()
                .flatten()
                .map(String::as_str)
                .filter(|c| DriverCapability::from_name(c).is_some()),
        )
        .unwrap_or_default();
        let effective = if requested.names().is_empty() {
            from_env(details)
        } else {
            requested
        };
        let vendor = if r.driver == "nvidia" || r.driver.is_empty() {
            Vendor::Nvidia
        } else {
            vendor_hint.unwrap_or(Vendor::Nvidia)
        };
        return Some(Attached {
            vendor,
            mechanism: Mechanism::NvidiaRuntime,
            devices,
            capabilities: capabilities_for(vendor, Mechanism::NvidiaRuntime, &effective),
        });
    }
    if details.devices.is_empty() {
        return None;
    }
    let paths: Vec<String> = details
        .devices
        .iter()
        .map(|d| d.host_path.clone())
        .collect();
    let vendor = if paths.iter().any(|p| p == "/dev/kfd") {
        Vendor::Amd
    } else if paths.iter().any(|p| p.starts_with("/dev/nvidia")) {
        Vendor::Nvidia
    } else {
        vendor_hint.unwrap_or(Vendor::Intel)
    };
    Some(Attached {
        vendor,
        mechanism: Mechanism::DeviceNodes,
        devices: paths,
        capabilities: capabilities_for(vendor, Mechanism::DeviceNodes, &from_env(details)),
    })
}

/// The set the toolkit reads from the container's environment (the image's merged with the
/// container's, as inspect shows it).
fn from_env(details: &ContainerDetails) -> DriverCapabilities {
    DriverCapabilities::effective(None, &details.env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attachment(mechanism: Mechanism, devices: &[&str]) -> Attachment {
        Attachment {
            vendor: Vendor::Nvidia,
            mechanism,
            devices: devices.iter().map(|d| (*d).to_owned()).collect(),
            gpus: vec!["0000:01:00.0".into()],
            group_add: vec![44, 109],
            capabilities: DriverCapabilities::parse(["video", "compute"]).unwrap_or_default(),
        }
    }

    #[test]
    fn requests_per_mechanism() {
        let mut spec = ContainerSpec::default();
        attachment(Mechanism::Cdi, &["nvidia.com/gpu=0"]).apply(&mut spec);
        assert_eq!(
            spec.device_requests,
            vec![DeviceRequest {
                driver: "cdi".into(),
                count: None,
                device_ids: vec!["nvidia.com/gpu=0".into()],
                capabilities: vec![],
                options: Default::default(),
            }]
        );
        assert!(spec.devices.is_empty() && spec.group_add.is_empty());
        assert_eq!(
            spec.env
                .get("NVIDIA_DRIVER_CAPABILITIES")
                .map(String::as_str),
            Some("compute,video"),
            "cdi: the toolkit reads the set from the environment"
        );

        let mut spec = ContainerSpec::default();
        attachment(Mechanism::NvidiaRuntime, &["GPU-1"]).apply(&mut spec);
        assert_eq!(spec.device_requests[0].driver, "nvidia");
        assert_eq!(spec.device_requests[0].count, None);
        assert_eq!(spec.device_requests[0].device_ids, vec!["GPU-1"]);
        assert_eq!(
            spec.device_requests[0].capabilities,
            vec![vec!["gpu", "compute", "video"]]
        );
        assert_eq!(
            spec.env
                .get("NVIDIA_DRIVER_CAPABILITIES")
                .map(String::as_str),
            Some("compute,video")
        );

        let mut spec = ContainerSpec::default();
        attachment(Mechanism::DeviceNodes, &["/dev/kfd", "/dev/dri/renderD128"]).apply(&mut spec);
        assert!(spec.device_requests.is_empty());
        assert_eq!(spec.devices.len(), 2);
        assert_eq!(spec.devices[1].container_path, "/dev/dri/renderD128");
        assert_eq!(spec.group_add, vec!["44", "109"]);
        assert!(spec.env.is_empty(), "no nvidia toolkit for device nodes");
    }

    #[test]
    fn capabilities_are_read_back_from_inspect() {
        let mut details = ContainerDetails {
            device_requests: vec![DeviceRequest {
                driver: "nvidia".into(),
                device_ids: vec!["GPU-1".into()],
                capabilities: vec![vec!["gpu".into()]],
                ..DeviceRequest::default()
            }],
            ..ContainerDetails::default()
        };
        let caps = |d: &ContainerDetails| {
            attached_from(d, None)
                .map(|a| a.capabilities)
                .unwrap_or_default()
        };
        assert_eq!(
            caps(&details),
            vec!["compute", "utility"],
            "the toolkit's default"
        );
        details.env = vec!["NVIDIA_DRIVER_CAPABILITIES=all".into()];
        assert_eq!(caps(&details).len(), 6, "the image's own all");
        details.device_requests[0].capabilities = vec![vec!["gpu".into(), "video".into()]];
        assert_eq!(caps(&details), vec!["video"], "the request's set wins");
        details.device_requests[0].driver = "cdi".into();
        details.device_requests[0].device_ids = vec!["nvidia.com/gpu=0".into()];
        details.env = vec!["NVIDIA_DRIVER_CAPABILITIES=compute,video".into()];
        assert_eq!(caps(&details), vec!["compute", "video"]);
        details.device_requests.clear();
        details.devices = vec![DeviceMapping::same_path("/dev/dri/renderD128")];
        assert_eq!(
            caps(&details),
            vec!["compute", "video"],
            "intel render node"
        );
    }

    #[test]
    fn attached_is_read_from_inspect() {
        let mut details = ContainerDetails::default();
        assert_eq!(attached_from(&details, Some(Vendor::Intel)), None);
        details.devices = vec![
            DeviceMapping::same_path("/dev/kfd"),
            DeviceMapping::same_path("/dev/dri/renderD128"),
        ];
        let a = attached_from(&details, None).unwrap_or_else(|| unreachable!());
        assert_eq!(
            (a.vendor, a.mechanism),
            (Vendor::Amd, Mechanism::DeviceNodes)
        );
        details.devices.remove(0);
        let a = attached_from(&details, Some(Vendor::Intel)).unwrap_or_else(|| unreachable!());
        assert_eq!(a.vendor, Vendor::Intel);
        assert_eq!(a.devices, vec!["/dev/dri/renderD128"]);
        details.devices.clear();
        details.device_requests = vec![DeviceRequest {
            driver: "cdi".into(),
            device_ids: vec!["amd.com/gpu=1".into()],
            ..DeviceRequest::default()
        }];
        let a = attached_from(&details, None).unwrap_or_else(|| unreachable!());
        assert_eq!((a.vendor, a.mechanism), (Vendor::Amd, Mechanism::Cdi));
        details.device_requests = vec![DeviceRequest {
            driver: "nvidia".into(),
            device_ids: vec!["0".into()],
            capabilities: vec![vec!["gpu".into()]],
            ..DeviceRequest::default()
        }];
        let a = attached_from(&details, None).unwrap_or_else(|| unreachable!());
        assert_eq!(
            (a.vendor, a.mechanism, a.devices),
            (
                Vendor::Nvidia,
                Mechanism::NvidiaRuntime,
                vec!["0".to_owned()]
            )
        );
    }
}
