//! Live GPU figures in the dashboard, in headless Chromium: an agent (protocol-level, the
//! simulator's own client) on a host with two AMD GPUs sends `gpu_stats` with figures that
//! change over time and says which GPUs the app `llm` holds. The host's GPU detail shows a
//! utilisation and a VRAM bar per GPU and a one-hour sparkline; the apps table shows the
//! app's GPU and its figures; the app `infer` holds the other GPU and the report says what it
//! uses of it (`usage`): "0 % · 0 MiB" while it runs nothing there; a new report updates all of
//! it from the event stream alone.
//! Screenshot: `target/dashboard-gpu-stats.png`. Needs Chromium and chromedriver: a missing one
//! fails unless `ODAC_ALLOW_SKIP=1`.

use crate::browser;
use crate::common;

use std::time::Duration;

use browser::Driver;
use common::Sim;
use odac_protocol::{
    AgentMessage, AppGpuUsage, AppGpus, AppSpec, GpuInfo, GpuSample, GpuStats, GpuStatsReport,
    Inventory, Vendor,
};
use serde_json::Value;

const HOST: &str = "gpu-host-1";
const GPU0: &str = "0000:03:00.0";
const GPU1: &str = "0000:26:00.0";

fn chromium() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    browser::chromium_or_skip("dashboard gpu browser test", true)
}

fn gpu(id: &str) -> GpuInfo {
    GpuInfo {
        vendor: Vendor::Amd,
        pci_address: id.into(),
        vendor_id: "0x1002".into(),
        device_id: "0x740f".into(),
        model: "AMD Aldebaran/MI200 [Instinct MI210]".into(),
        driver: Some("amdgpu".into()),
        driver_version: Some("6.8.0-45-generic".into()),
        vram_bytes: Some(68_702_699_520),
        card_node: None,
        render_node: None,
        uuid: None,
        passable: true,
        health: None,
    }
}

fn report(seq: u64, util0: u8, vram0: u64) -> AgentMessage {
    let sample = |id: &str, util: u8, vram: u64| GpuSample {
        id: id.into(),
        util: Some(util),
        vram_used_mib: Some(vram),
        vram_total_mib: Some(65_520),
        temp_c: Some(50),
        power_w: Some(200),
        clock_mhz: Some(1700),
    };
    AgentMessage::GpuStats(GpuStatsReport {
        seq,
        stats: GpuStats {
            interval_secs: 60,
            gpus: vec![sample(GPU0, util0, vram0), sample(GPU1, 3, 12)],
            apps: vec![
                AppGpus {
                    app: "infer".into(),
                    gpus: vec![GPU1.into()],
                },
                AppGpus {
                    app: "llm".into(),
                    gpus: vec![GPU0.into()],
                },
            ],
            // `infer` runs nothing on its GPU at first, then 40 % and 2 GiB
            usage: vec![AppGpuUsage {
                app: "infer".into(),
                gpu: GPU1.into(),
                vram_used_mib: if seq > 2 { 2048 } else { 0 },
                util: Some(if seq > 2 { 40 } else { 0 }),
            }],
        },
    })
}

const PAGE_JS: &str = r##"
const live = [...document.querySelectorAll(".gpu-live")].map(g => ({
  gpu: g.dataset.gpu,
  util: (g.querySelector(".gbar.util") || { getAttribute: () => null }).getAttribute("aria-valuenow"),
  vram: (g.querySelector(".gbar.vram .gbar-text") || {}).textContent || null,
  points: Number((g.querySelector("svg.spark") || { dataset: {} }).dataset.points || 0),
}));
const usage = document.querySelector('[data-usage="llm"]');
const infer = document.querySelector('[data-usage="infer"]');
return { live: document.getElementById("live").textContent, gpus: live, usage: usage ? usage.textContent : null,
  infer: infer ? infer.textContent : null };
"##;

async fn page(d: &Driver) -> Value {
    d.eval(PAGE_JS, vec![]).await
}

fn of<'a>(v: &'a Value, id: &str) -> Option<&'a Value> {
    v["gpus"].as_array()?.iter().find(|g| g["gpu"] == id)
}

#[test]
fn dashboard_shows_per_gpu_bars_sparkline_and_app_usage_live() {
    let Some((browser_bin, driver_bin)) = chromium() else {
        return;
    };
    let sim = Sim::start();
    let mut inv = Inventory {
        gpus: vec![gpu(GPU0), gpu(GPU1)],
        ..Inventory::default()
    };
    inv.host.hostname = HOST.into();
    let mut agent = sim.agent(HOST, inv);
    sim.rt
        .block_on(sim.server().hub.create_app(
            Some(HOST),
            AppSpec {
                name: "llm".into(),
                image: Some("registry.example/llm:1".into()),
                ..AppSpec::default()
            },
        ))
        .unwrap();
    sim.rt
        .block_on(sim.server().hub.create_app(
            Some(HOST),
            AppSpec {
                name: "infer".into(),
                image: Some("registry.example/infer:1".into()),
                ..AppSpec::default()
            },
        ))
        .unwrap();
    sim.rt.block_on(agent.send(&report(2, 20, 1024))).unwrap();
    sim.wait_api("/api/gpu-stats", |v| {
        v.as_array().is_some_and(|a| a.len() == 1)
    });

    let shots = browser::target_dir();
    let failure_png = shots.join("dashboard-gpu-stats-failure.png");
    sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
        d.client.set_window_size(1400, 1000).await.unwrap();
        d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
            .await;
        d.wait_for(
            "the page live",
            Duration::from_secs(20),
            &failure_png,
            || page(&d),
            |v| v["live"] == "live",
        )
        .await;
        d.click(&format!("#detail-{HOST}")).await;
        let v = d
            .wait_for(
                "bars for both GPUs and the app's usage",
                Duration::from_secs(20),
                &failure_png,
                || page(&d),
                |v| {
                    of(v, GPU0).is_some_and(|g| g["util"] == "20")
                        && of(v, GPU1).is_some_and(|g| g["util"] == "3")
                        && v["usage"].as_str().is_some_and(|u| u.contains(GPU0))
                        && v["infer"].as_str().is_some_and(|u| u.contains(GPU1))
                },
            )
            .await;
        assert_eq!(of(&v, GPU0).unwrap()["vram"], "1024 / 65520 MiB", "{v}");
        assert_eq!(v["usage"], format!("{GPU0}: 20 %, 1024 MiB"), "{v}");
        assert_eq!(v["infer"], format!("{GPU1}: 0 % · 0 MiB"), "{v}");
        assert_eq!(of(&v, GPU0).unwrap()["points"], 1, "{v}");

        // a new report arrives over the event stream: bars, sparkline and usage follow
        agent.send(&report(3, 85, 40_000)).await.unwrap();
        let v = d
            .wait_for(
                "the new figures",
                Duration::from_secs(20),
                &failure_png,
                || page(&d),
                |v| of(v, GPU0).is_some_and(|g| g["util"] == "85" && g["points"] == 2),
            )
            .await;
        assert_eq!(v["usage"], format!("{GPU0}: 85 %, 40000 MiB"), "{v}");
        assert_eq!(v["infer"], format!("{GPU1}: 40 % · 2048 MiB"), "{v}");
        assert_eq!(of(&v, GPU1).unwrap()["points"], 2, "{v}");
        d.screenshot(&shots.join("dashboard-gpu-stats.png")).await;
        d.close().await;
    });
}
