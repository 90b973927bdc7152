//! Which GPUs each app holds: the devices its container was given (read back from the
//! engine into `status.gpu.attached.devices`: CDI names, NVIDIA UUIDs or indexes, device
//! node paths) mapped to the inventory's GPU ids.

use odac_protocol::{AppGpus, AppStatus, GpuInfo};

/// Apps with at least one attached GPU that the inventory knows, sorted by name.
pub fn app_gpus(statuses: &[AppStatus], gpus: &[GpuInfo]) -> Vec<AppGpus> {
    let mut out: Vec<AppGpus> = statuses
        .iter()
        .filter_map(|s| {
            let attached = s.gpu.attached.as_ref()?;
            let mut ids: Vec<String> = attached
                .devices
                .iter()
                .filter_map(|d| gpu_of(d, attached.vendor, gpus))
                .collect();
            ids.sort();
            ids.dedup();
            (!ids.is_empty()).then(|| AppGpus {
                app: s.name.clone(),
                gpus: ids,
            })
        })
        .collect();
    out.sort_by(|a, b| a.app.cmp(&b.app));
    out
}

/// The GPU id one attached device names: a UUID, a device node, a PCI address, or an index
/// among the vendor's GPUs (`0`, `nvidia.com/gpu=0`, `amd.com/gpu=1`).
fn gpu_of(device: &str, vendor: odac_protocol::Vendor, gpus: &[GpuInfo]) -> Option<String> {
    let name = device.rsplit_once('=').map_or(device, |(_, n)| n);
    if let Some(g) = gpus.iter().find(|g| {
        g.uuid.as_deref() == Some(name)
            || g.card_node.as_deref() == Some(name)
            || g.render_node.as_deref() == Some(name)
            || g.pci_address == name
    }) {
        return Some(g.pci_address.clone());
    }
    let index: usize = name.parse().ok()?;
    gpus.iter()
        .filter(|g| g.vendor == vendor)
        .nth(index)
        .map(|g| g.pci_address.clone())
}

#[cfg(test)]
mod tests {
    use odac_protocol::{Attached, GpuStatus, Mechanism, Vendor};

    use super::*;

    fn gpu(vendor: Vendor, id: &str, render: &str, uuid: Option<&str>) -> GpuInfo {
        GpuInfo {
            vendor,
            pci_address: id.into(),
            vendor_id: String::new(),
            device_id: String::new(),
            model: String::new(),
            driver: Some("any".into()),
            driver_version: None,
            vram_bytes: None,
            card_node: None,
            render_node: Some(render.into()),
            uuid: uuid.map(str::to_owned),
            passable: true,
            health: None,
        }
    }

    fn status(name: &str, vendor: Vendor, devices: &[&str]) -> AppStatus {
        AppStatus {
            name: name.into(),
            gpu: GpuStatus {
                attached: Some(Attached {
                    vendor,
                    mechanism: Mechanism::DeviceNodes,
                    devices: devices.iter().map(|d| d.to_string()).collect(),
                    capabilities: vec![],
                }),
                ..GpuStatus::default()
            },
            ..AppStatus::default()
        }
    }

    #[test]
    fn devices_map_to_gpu_ids() {
        let gpus = [
            gpu(Vendor::Amd, "0000:19:00.0", "/dev/dri/renderD128", None),
            gpu(Vendor::Amd, "0000:1a:00.0", "/dev/dri/renderD129", None),
            gpu(
                Vendor::Nvidia,
                "0000:3b:00.0",
                "/dev/dri/renderD130",
                Some("GPU-abc"),
            ),
        ];
        let statuses = [
            status("web", Vendor::Amd, &["/dev/kfd", "/dev/dri/renderD129"]),
            status("llm", Vendor::Nvidia, &["GPU-abc"]),
            status("cdi", Vendor::Amd, &["amd.com/gpu=0"]),
            status("cpu", Vendor::Amd, &[]),
        ];
        let apps = app_gpus(&statuses, &gpus);
        let pairs: Vec<(&str, Vec<&str>)> = apps
            .iter()
            .map(|a| (a.app.as_str(), a.gpus.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("cdi", vec!["0000:19:00.0"]),
                ("llm", vec!["0000:3b:00.0"]),
                ("web", vec!["0000:1a:00.0"]),
            ]
        );
    }
}
