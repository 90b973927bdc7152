//! The DCGM-named series: labels of a free GPU, one series per holding app, per-process
//! figures, and a removed app's series gone at the next scrape.

use std::sync::{Arc, Mutex};

use odac_protocol::{
    AppGpuUsage, AppGpus, AppState, AppStatus, Attached, GpuSample, GpuStats, GpuStatus, Mechanism,
    Vendor,
};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;

use super::GpuMetrics;

fn gpu(vendor: Vendor, id: &str, card: &str, uuid: Option<&str>) -> odac_protocol::GpuInfo {
    let mut g = crate::telemetry::test_gpu(vendor, id, "amdgpu");
    g.card_node = Some(format!("/dev/dri/{card}"));
    g.uuid = uuid.map(str::to_owned);
    g.model = "Instinct MI210".into();
    g
}

fn holding(app: &str, device: &str) -> AppStatus {
    AppStatus {
        name: app.into(),
        state: AppState::Running,
        gpu: GpuStatus {
            attached: Some(Attached {
                vendor: Vendor::Amd,
                mechanism: Mechanism::DeviceNodes,
                devices: vec![device.into()],
                capabilities: vec![],
            }),
            ..GpuStatus::default()
        },
        ..AppStatus::default()
    }
}

fn naming(instance: &str, app: &str) -> String {
    format!("{instance}_{app}")
}

fn scrape(m: &GpuMetrics) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(m.clone()));
    let mut out = String::new();
    prometheus_text::encode(&mut out, &registry).unwrap();
    out
}

#[test]
fn a_free_gpu_has_device_labels_and_a_held_one_a_series_per_app() {
    let statuses = Arc::new(Mutex::new(vec![holding("llm", "/dev/dri/card2")]));
    let source = Arc::clone(&statuses);
    let m = GpuMetrics::new(
        "edge-1",
        "prod",
        naming,
        Arc::new(move || source.lock().unwrap().clone()),
    );
    let gpus = vec![
        gpu(Vendor::Amd, "0000:03:00.0", "card1", None),
        gpu(Vendor::Amd, "0000:26:00.0", "card2", None),
    ];
    let stats = GpuStats {
        interval_secs: 10,
        gpus: vec![
            GpuSample {
                id: "0000:03:00.0".into(),
                util: Some(7),
                vram_used_mib: Some(100),
                vram_total_mib: Some(1000),
                ..GpuSample::default()
            },
            GpuSample {
                id: "0000:26:00.0".into(),
                util: Some(93),
                vram_used_mib: Some(400),
                vram_total_mib: Some(1000),
                temp_c: Some(71),
                power_w: Some(290),
                clock_mhz: Some(1700),
            },
        ],
        apps: vec![AppGpus {
            app: "llm".into(),
            gpus: vec!["0000:26:00.0".into()],
        }],
        usage: vec![AppGpuUsage {
            app: "llm".into(),
            gpu: "0000:26:00.0".into(),
            vram_used_mib: 300,
            util: Some(50),
        }],
    };
    m.offer(&gpus, &stats, &Default::default());
    let text = scrape(&m);
    assert!(text.contains("# TYPE DCGM_FI_DEV_GPU_UTIL gauge"), "{text}");
    assert!(
        text.contains(
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"\",pci_bus_id=\"0000:03:00.0\",device=\"card1\",modelName=\"Instinct MI210\",Hostname=\"edge-1\",vendor=\"amd\"} 7\n"
        ),
        "{text}"
    );
    let held = "gpu=\"1\",UUID=\"\",pci_bus_id=\"0000:26:00.0\",device=\"card2\",modelName=\"Instinct MI210\",Hostname=\"edge-1\",vendor=\"amd\",app=\"llm\",container=\"prod_llm\"";
    for line in [
        format!("DCGM_FI_DEV_GPU_UTIL{{{held}}} 93\n"),
        format!("DCGM_FI_DEV_FB_USED{{{held}}} 400\n"),
        format!("DCGM_FI_DEV_FB_FREE{{{held}}} 600\n"),
        format!("DCGM_FI_DEV_GPU_TEMP{{{held}}} 71\n"),
        format!("DCGM_FI_DEV_POWER_USAGE{{{held}}} 290\n"),
        format!("DCGM_FI_DEV_SM_CLOCK{{{held}}} 1700\n"),
        format!("odac_app_gpu_memory_used_bytes{{{held}}} 314572800.0\n"),
        format!("odac_app_gpu_utilization_ratio{{{held}}} 0.5\n"),
    ] {
        assert!(text.contains(&line), "{line} missing in\n{text}");
    }
    // a figure the GPU did not report has no series (no engine figures on this AMD host)
    assert!(!text.contains("DCGM_FI_DEV_MEM_COPY_UTIL"), "{text}");
    assert_eq!(text.matches("DCGM_FI_DEV_GPU_TEMP{").count(), 1, "{text}");

    // the app is removed: at the next scrape the GPU is free again, no app series left
    statuses.lock().unwrap().clear();
    let text = scrape(&m);
    assert!(!text.contains("app=\"llm\""), "{text}");
    assert!(!text.contains("odac_app_gpu"), "{text}");
    assert_eq!(text.matches("DCGM_FI_DEV_GPU_UTIL{").count(), 2, "{text}");
}

#[test]
fn two_apps_on_one_gpu_get_a_series_each_and_nvidia_devices_are_numbered() {
    let mut a = holding("a", "GPU-1");
    let mut b = holding("b", "GPU-1");
    for s in [&mut a, &mut b] {
        if let Some(att) = &mut s.gpu.attached {
            att.vendor = Vendor::Nvidia;
        }
    }
    let m = GpuMetrics::new(
        "h",
        "i",
        naming,
        Arc::new(move || vec![a.clone(), b.clone()]),
    );
    let mut g = gpu(Vendor::Nvidia, "0000:3b:00.0", "card0", Some("GPU-1"));
    g.card_node = None;
    m.offer(
        &[g],
        &GpuStats {
            interval_secs: 10,
            gpus: vec![GpuSample {
                id: "0000:3b:00.0".into(),
                util: Some(40),
                ..GpuSample::default()
            }],
            apps: vec![
                AppGpus {
                    app: "a".into(),
                    gpus: vec!["0000:3b:00.0".into()],
                },
                AppGpus {
                    app: "b".into(),
                    gpus: vec!["0000:3b:00.0".into()],
                },
            ],
            ..GpuStats::default()
        },
        &[(
            "0000:3b:00.0".to_owned(),
            super::EngineUtil {
                mem_copy: Some(12),
                encoder: Some(0),
                decoder: None,
            },
        )]
        .into(),
    );
    let text = scrape(&m);
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{"))
        .collect();
    assert_eq!(series.len(), 2, "{text}");
    assert!(series[0].contains("UUID=\"GPU-1\"") && series[0].contains("device=\"nvidia0\""));
    assert!(
        series[0].contains("app=\"a\",container=\"i_a\"} 40"),
        "{text}"
    );
    assert!(
        series[1].contains("app=\"b\",container=\"i_b\"} 40"),
        "{text}"
    );
    // NVML's engine figures under dcgm's names; the decoder it did not give has no series
    let copy: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_DEV_MEM_COPY_UTIL{"))
        .collect();
    assert_eq!(copy.len(), 2, "{text}");
    assert!(
        copy[0].ends_with("app=\"a\",container=\"i_a\"} 12"),
        "{text}"
    );
    assert_eq!(text.matches("DCGM_FI_DEV_ENC_UTIL{").count(), 2, "{text}");
    assert!(!text.contains("DCGM_FI_DEV_DEC_UTIL"), "{text}");
}
