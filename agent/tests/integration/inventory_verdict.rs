//! Table test of the pure verdict function: hand-built scans and engine capabilities,
//! one row per rule of `inventory::verdict`.

use odac_host::engine::EngineCapabilities;
use odac_host::inventory::{
    AmdGpu, CdiDevice, CdiSpec, DeviceNode, Gpu, HostScan, NvidiaGpu, PciIds, ToolkitBinary,
    Vendor, verdict::vendor_verdict,
};
use odac_protocol::{Mechanism, Reason};
use serde_json::json;

fn node(path: &str, present: bool) -> DeviceNode {
    DeviceNode {
        path: path.to_owned(),
        present,
        char_device: present,
        gid: present.then_some(44),
        mode: present.then_some(0o660),
    }
}

fn gpu(vendor: Vendor, driver: Option<&str>, render: Option<bool>) -> Gpu {
    Gpu {
        vendor,
        index: 0,
        pci_address: Some("0000:01:00.0".to_owned()),
        pci: PciIds {
            vendor_id: 0x10de,
            ..PciIds::default()
        },
        driver: driver.map(str::to_owned),
        model: None,
        card: Some(node("/dev/dri/card0", true)),
        render: render.map(|p| node("/dev/dri/renderD128", p)),
        nvidia: (vendor == Vendor::Nvidia).then(|| NvidiaGpu {
            minor: Some(0),
            uuid: Some("GPU-x".to_owned()),
            device_node: Some(node("/dev/nvidia0", true)),
            proc_info: true,
        }),
        amd: (vendor == Vendor::Amd).then(AmdGpu::default),
        cdi_ids: Vec::new(),
    }
}

fn engine(
    runtimes: &[&str],
    version: &str,
    cdi_dirs: &[&str],
    cdi_devices: &[&str],
) -> EngineCapabilities {
    let info = json!({
        "ServerVersion": version,
        "Runtimes": runtimes.iter().map(|r| (r.to_string(), json!({"path": r}))).collect::<serde_json::Map<_, _>>(),
        "CDISpecDirs": cdi_dirs,
        "DiscoveredDevices": cdi_devices.iter().map(|id| json!({"Source": "cdi", "ID": id})).collect::<Vec<_>>(),
    });
    EngineCapabilities::from_info_json(&info, Some("1.50".into()))
}

fn with_gpus(gpus: Vec<Gpu>) -> HostScan {
    HostScan {
        gpus,
        ..HostScan::default()
    }
}

fn hook() -> ToolkitBinary {
    ToolkitBinary {
        name: "nvidia-container-runtime-hook".into(),
        path: "/usr/bin/nvidia-container-runtime-hook".into(),
    }
}

type Row = (
    &'static str,
    HostScan,
    EngineCapabilities,
    Vendor,
    Result<Mechanism, Reason>,
);

fn rows() -> Vec<Row> {
    let runc = engine(&["runc"], "28.2.2", &[], &[]);
    let nvidia_rt = engine(&["nvidia", "runc"], "28.2.2", &[], &[]);
    let cdi_nv = engine(&["runc"], "28.2.2", &["/etc/cdi"], &["nvidia.com/gpu=0"]);
    let cdi_old = engine(&["runc"], "24.0.7", &["/etc/cdi"], &["nvidia.com/gpu=0"]);
    let cdi_no_devices = engine(&["runc"], "27.1.0", &["/etc/cdi", "/var/run/cdi"], &[]);
    let down = EngineCapabilities::unreachable("connection refused");

    let mut hooked = with_gpus(vec![gpu(Vendor::Nvidia, Some("nvidia"), None)]);
    hooked.nvidia.toolkit.push(hook());
    let mut ctk_only = with_gpus(vec![gpu(Vendor::Nvidia, Some("nvidia"), None)]);
    ctk_only.nvidia.toolkit.push(ToolkitBinary {
        name: "nvidia-ctk".into(),
        path: "/usr/bin/nvidia-ctk".into(),
    });
    let mut amd_ok = with_gpus(vec![gpu(Vendor::Amd, Some("amdgpu"), Some(true))]);
    amd_ok.amd.kfd_node = node("/dev/kfd", true);
    let amd_no_kfd = with_gpus(vec![gpu(Vendor::Amd, Some("amdgpu"), Some(true))]);
    let mut amd_no_render = with_gpus(vec![gpu(Vendor::Amd, Some("amdgpu"), Some(false))]);
    amd_no_render.amd.kfd_node = node("/dev/kfd", true);
    let mut amd_cdi = amd_ok.clone();
    amd_cdi.cdi.specs.push(CdiSpec {
        path: "/var/run/cdi/amd.json".into(),
        dir: "/var/run/cdi".into(),
        cdi_version: "0.6.0".into(),
        kind: "amd.com/gpu".into(),
        devices: vec![CdiDevice {
            name: "0".into(),
            id: "amd.com/gpu=0".into(),
            nodes: vec![],
        }],
    });
    let nv_ok = with_gpus(vec![gpu(Vendor::Nvidia, Some("nvidia"), None)]);
    let mixed = with_gpus(vec![
        gpu(Vendor::Nvidia, None, None),
        Gpu {
            pci_address: Some("0000:02:00.0".into()),
            ..gpu(Vendor::Nvidia, Some("nvidia"), None)
        },
    ]);

    vec![
        (
            "no gpu",
            HostScan::default(),
            runc.clone(),
            Vendor::Nvidia,
            Err(Reason::NoDevice),
        ),
        (
            "no gpu, engine down",
            HostScan::default(),
            down.clone(),
            Vendor::Amd,
            Err(Reason::NoDevice),
        ),
        (
            "nvidia without driver",
            with_gpus(vec![gpu(Vendor::Nvidia, None, None)]),
            nvidia_rt.clone(),
            Vendor::Nvidia,
            Err(Reason::NoDriver),
        ),
        (
            "nvidia on nouveau",
            with_gpus(vec![gpu(Vendor::Nvidia, Some("nouveau"), Some(true))]),
            nvidia_rt.clone(),
            Vendor::Nvidia,
            Err(Reason::NoDriver),
        ),
        (
            "nvidia on vfio-pci",
            with_gpus(vec![gpu(Vendor::Nvidia, Some("vfio-pci"), None)]),
            nvidia_rt.clone(),
            Vendor::Nvidia,
            Err(Reason::NoDriver),
        ),
        (
            "nvidia driver, no toolkit",
            nv_ok.clone(),
            runc.clone(),
            Vendor::Nvidia,
            Err(Reason::NoContainerRuntime),
        ),
        (
            "nvidia driver, only nvidia-ctk",
            ctk_only,
            runc.clone(),
            Vendor::Nvidia,
            Err(Reason::NoContainerRuntime),
        ),
        (
            "nvidia runtime in docker info",
            nv_ok.clone(),
            nvidia_rt.clone(),
            Vendor::Nvidia,
            Ok(Mechanism::NvidiaRuntime),
        ),
        (
            "nvidia hook installed",
            hooked,
            runc.clone(),
            Vendor::Nvidia,
            Ok(Mechanism::NvidiaRuntime),
        ),
        (
            "nvidia cdi listed by engine",
            nv_ok.clone(),
            cdi_nv.clone(),
            Vendor::Nvidia,
            Ok(Mechanism::Cdi),
        ),
        (
            "cdi listed but engine too old",
            nv_ok.clone(),
            cdi_old,
            Vendor::Nvidia,
            Err(Reason::NoContainerRuntime),
        ),
        (
            "engine down, hardware fine",
            nv_ok.clone(),
            down.clone(),
            Vendor::Nvidia,
            Err(Reason::EngineUnavailable),
        ),
        (
            "engine down, no driver",
            with_gpus(vec![gpu(Vendor::Nvidia, None, None)]),
            down.clone(),
            Vendor::Nvidia,
            Err(Reason::NoDriver),
        ),
        (
            "one of two nvidia usable",
            mixed,
            nvidia_rt.clone(),
            Vendor::Nvidia,
            Ok(Mechanism::NvidiaRuntime),
        ),
        (
            "amd with kfd and render",
            amd_ok.clone(),
            runc.clone(),
            Vendor::Amd,
            Ok(Mechanism::DeviceNodes),
        ),
        (
            "amd without kfd",
            amd_no_kfd,
            runc.clone(),
            Vendor::Amd,
            Err(Reason::NoDriver),
        ),
        (
            "amd render node missing",
            amd_no_render,
            runc.clone(),
            Vendor::Amd,
            Err(Reason::NoRenderNode),
        ),
        (
            "amd cdi from host spec dir",
            amd_cdi.clone(),
            cdi_no_devices.clone(),
            Vendor::Amd,
            Ok(Mechanism::Cdi),
        ),
        (
            "amd cdi engine lists other vendor only",
            amd_cdi,
            cdi_nv.clone(),
            Vendor::Amd,
            Ok(Mechanism::DeviceNodes),
        ),
        (
            "amd without driver",
            with_gpus(vec![gpu(Vendor::Amd, None, None)]),
            runc.clone(),
            Vendor::Amd,
            Err(Reason::NoDriver),
        ),
        (
            "intel i915 with render",
            with_gpus(vec![gpu(Vendor::Intel, Some("i915"), Some(true))]),
            runc.clone(),
            Vendor::Intel,
            Ok(Mechanism::DeviceNodes),
        ),
        (
            "intel xe with render",
            with_gpus(vec![gpu(Vendor::Intel, Some("xe"), Some(true))]),
            runc.clone(),
            Vendor::Intel,
            Ok(Mechanism::DeviceNodes),
        ),
        (
            "intel without render",
            with_gpus(vec![gpu(Vendor::Intel, Some("i915"), None)]),
            runc.clone(),
            Vendor::Intel,
            Err(Reason::NoRenderNode),
        ),
        (
            "intel present, asking nvidia",
            with_gpus(vec![gpu(Vendor::Intel, Some("i915"), Some(true))]),
            nvidia_rt,
            Vendor::Nvidia,
            Err(Reason::NoDevice),
        ),
    ]
}

#[test]
fn verdict_table() {
    let mut failures = Vec::new();
    for (name, scan, engine, vendor, want) in rows() {
        let v = vendor_verdict(&scan, &engine, vendor);
        let got = match (v.schedulable, v.mechanism, v.reason) {
            (true, Some(m), None) => Ok(m),
            (false, None, Some(r)) => Err(r),
            other => {
                failures.push(format!("{name}: inconsistent verdict {other:?}"));
                continue;
            }
        };
        if got != want {
            failures.push(format!("{name}: want {want:?}, got {got:?} ({})", v.detail));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
