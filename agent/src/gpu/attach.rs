//! From a plan to engine requests, and back: [`Attachment::apply`] writes the device requests,
//! device mappings and numeric group ids of an attachment into a container spec (CDI:
//! `driver "cdi"` with fully-qualified ids and no count; NVIDIA runtime: `driver "nvidia"` with
//! explicit ids and capabilities `[["gpu"]]`; device nodes: one mapping per node plus the GIDs
//! owning them). [`attached_from`] reads what a container really holds from the engine's
//! inspect, never from the plan.

use odac_protocol::{Attached, Mechanism, Vendor};
use serde::Serialize;

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
}

impl Attachment {
    /// The engine request for this attachment, added to `spec`.
    pub fn apply(&self, spec: &mut ContainerSpec) {
        match self.mechanism {
            Mechanism::Cdi => spec.device_requests.push(DeviceRequest {
                driver: "cdi".into(),
                device_ids: self.devices.clone(),
                ..DeviceRequest::default()
            }),
            Mechanism::NvidiaRuntime => spec.device_requests.push(DeviceRequest {
                driver: "nvidia".into(),
                device_ids: self.devices.clone(),
                capabilities: vec![vec!["gpu".into()]],
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
        return Some(Attached {
            vendor: if r.driver == "nvidia" || r.driver.is_empty() {
                Vendor::Nvidia
            } else {
                vendor_hint.unwrap_or(Vendor::Nvidia)
            },
            mechanism: Mechanism::NvidiaRuntime,
            devices,
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
    })
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

        let mut spec = ContainerSpec::default();
        attachment(Mechanism::NvidiaRuntime, &["GPU-1"]).apply(&mut spec);
        assert_eq!(spec.device_requests[0].driver, "nvidia");
        assert_eq!(spec.device_requests[0].count, None);
        assert_eq!(spec.device_requests[0].device_ids, vec!["GPU-1"]);
        assert_eq!(spec.device_requests[0].capabilities, vec![vec!["gpu"]]);

        let mut spec = ContainerSpec::default();
        attachment(Mechanism::DeviceNodes, &["/dev/kfd", "/dev/dri/renderD128"]).apply(&mut spec);
        assert!(spec.device_requests.is_empty());
        assert_eq!(spec.devices.len(), 2);
        assert_eq!(spec.devices[1].container_path, "/dev/dri/renderD128");
        assert_eq!(spec.group_add, vec!["44", "109"]);
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
