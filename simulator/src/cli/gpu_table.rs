//! `odac host show HOST`: the host's summary line and one row per GPU with its current
//! figures (utilisation, VRAM, temperature, power, clock) from the host's latest `gpu_stats`
//! report, and the apps that hold it (from that report, or from the apps' statuses before the
//! first), after the NVIDIA driver and the CUDA version it supports when the host has one;
//! then one row per app and GPU with what the app uses of
//! it (NVIDIA: its processes' utilisation and VRAM, `0% 0` when it holds the GPU but runs
//! nothing on it). Each GPU's health is a column, with its history under the table
//! ([`super::gpu_health`]).

use serde_json::json;

use super::args::HostShowArgs;
use super::client::{Client, ClientError, segment};
use super::table::render;
use crate::state::gpu_history::HostGpuStats;
use crate::state::views::{AppView, HostView};

/// Prints the host and its GPUs.
pub fn show(client: &Client, args: &HostShowArgs) -> Result<(), ClientError> {
    let path = format!("/api/hosts/{}", segment(&args.host));
    let host_json = client.get(&path)?;
    let stats_json = client.get(&format!("{path}/gpu-stats"))?;
    if args.json {
        let both = json!({"host": host_json, "gpu_stats": stats_json});
        let text = serde_json::to_string_pretty(&both).unwrap_or_else(|_| both.to_string());
        println!("{}", super::term::json_safe(&text));
        return Ok(());
    }
    let unexpected = |e: serde_json::Error| ClientError::new(format!("unexpected answer: {e}"));
    let host: HostView = serde_json::from_value(host_json).map_err(unexpected)?;
    let mut stats: HostGpuStats = serde_json::from_value(stats_json).map_err(unexpected)?;
    if stats.apps.is_empty() {
        // no gpu_stats report (yet): which app holds which GPU follows from the apps' statuses
        let apps: Vec<AppView> =
            serde_json::from_value(client.get("/api/apps")?).map_err(unexpected)?;
        stats.apps = held_by_apps(&host, &apps);
    }
    super::term::print(&render_host(&host, &stats));
    Ok(())
}

/// `nvidia driver 535.183.01, cuda 12.2`: the host's NVIDIA driver and the CUDA version it
/// supports (what an image's `NVIDIA_REQUIRE_CUDA` is checked against).
fn nvidia_line(inv: &odac_protocol::Inventory) -> Option<String> {
    let cuda = inv.host.cuda_version.as_deref()?;
    let driver = inv
        .gpus
        .iter()
        .filter(|g| g.vendor == odac_protocol::Vendor::Nvidia)
        .find_map(|g| g.driver_version.as_deref())
        .unwrap_or("-");
    Some(format!("nvidia driver {driver}, cuda {cuda}\n"))
}

/// The text `show` prints.
pub fn render_host(host: &HostView, stats: &HostGpuStats) -> String {
    let mut out = format!(
        "host {} ({}) {}, agent {}, engine {}\n",
        host.hostname,
        host.id,
        if host.connected {
            "connected"
        } else {
            "disconnected"
        },
        host.agent_version,
        host.engine
    );
    let inventory = host.inventory.as_deref();
    if let Some(line) = inventory.and_then(nvidia_line) {
        out.push_str(&line);
    }
    let ids: Vec<String> = match inventory {
        Some(inv) if !inv.gpus.is_empty() => {
            inv.gpus.iter().map(|g| g.pci_address.clone()).collect()
        }
        _ => stats.gpus.iter().map(|g| g.id.clone()).collect(),
    };
    if ids.is_empty() {
        out.push_str("no gpus\n");
        return out;
    }
    let dash = || "-".to_owned();
    let rows: Vec<Vec<String>> = ids
        .iter()
        .map(|id| {
            let info = inventory.and_then(|inv| inv.gpus.iter().find(|g| &g.pci_address == id));
            let cur = stats.gpus.iter().find(|g| &g.id == id).map(|s| &s.current);
            let total = cur
                .and_then(|c| c.vram_total_mib)
                .or_else(|| info.and_then(|i| i.vram_bytes).map(|b| b / (1024 * 1024)));
            let apps: Vec<&str> = stats
                .apps
                .iter()
                .filter(|a| a.gpus.contains(id))
                .map(|a| a.app.as_str())
                .collect();
            vec![
                id.clone(),
                info.map_or_else(dash, |i| i.vendor.to_string()),
                info.map_or_else(dash, |i| i.model.clone()),
                super::gpu_health::cell(info),
                cur.and_then(|c| c.util)
                    .map_or_else(dash, |u| format!("{u}%")),
                match (cur.and_then(|c| c.vram_used_mib), total) {
                    (None, None) => dash(),
                    (used, total) => format!(
                        "{}/{}",
                        used.map_or_else(dash, |u| u.to_string()),
                        total.map_or_else(dash, |t| t.to_string())
                    ),
                },
                cur.and_then(|c| c.temp_c)
                    .map_or_else(dash, |t| format!("{t}C")),
                cur.and_then(|c| c.power_w)
                    .map_or_else(dash, |p| format!("{p}W")),
                cur.and_then(|c| c.clock_mhz)
                    .map_or_else(dash, |c| format!("{c}MHz")),
                if apps.is_empty() {
                    dash()
                } else {
                    apps.join(",")
                },
            ]
        })
        .collect();
    out.push_str(&render(
        &[
            "GPU", "VENDOR", "MODEL", "HEALTH", "UTIL", "VRAM MiB", "TEMP", "POWER", "CLOCK",
            "APPS",
        ],
        &rows,
    ));
    if let Some(inv) = inventory {
        out.push_str(&super::gpu_health::lines(inv));
    }
    out.push_str(&render_usage(stats));
    if stats.updated.is_empty() {
        out.push_str("no gpu figures reported yet\n");
    } else {
        out.push_str(&format!(
            "figures of {} (sampled every {} s)\n",
            stats.updated, stats.interval_secs
        ));
    }
    out
}

/// The GPUs each app of `host` holds, read from the devices attached to its container and
/// mapped to the inventory's GPU ids (the agent's own mapping).
fn held_by_apps(host: &HostView, apps: &[AppView]) -> Vec<odac_protocol::AppGpus> {
    let Some(inventory) = host.inventory.as_deref() else {
        return Vec::new();
    };
    let statuses: Vec<odac_protocol::AppStatus> = apps
        .iter()
        .filter(|a| a.host == host.id)
        .filter_map(|a| a.status.clone())
        .collect();
    odac_host::app_gpus::app_gpus(&statuses, &inventory.gpus)
}

/// The per-app usage rows (nothing when the host reports none).
fn render_usage(stats: &HostGpuStats) -> String {
    if stats.usage.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = stats
        .usage
        .iter()
        .map(|u| {
            vec![
                u.app.clone(),
                u.gpu.clone(),
                u.util.map_or_else(|| "-".to_owned(), |u| format!("{u}%")),
                u.vram_used_mib.to_string(),
            ]
        })
        .collect();
    render(&["APP", "ON GPU", "APP UTIL", "APP VRAM MiB"], &rows)
}

#[cfg(test)]
mod tests {
    use odac_protocol::{AppGpuUsage, AppGpus};

    use super::*;

    #[test]
    fn per_app_usage_rows_follow_the_gpus() {
        let stats = HostGpuStats {
            host: "h1".into(),
            interval_secs: 60,
            updated: "2026-12-04T15:00:00Z".into(),
            apps: vec![AppGpus {
                app: "llm".into(),
                gpus: vec!["0000:3b:00.0".into()],
            }],
            usage: vec![
                AppGpuUsage {
                    app: "llm".into(),
                    gpu: "0000:3b:00.0".into(),
                    vram_used_mib: 0,
                    util: Some(0),
                },
                AppGpuUsage {
                    app: "vision".into(),
                    gpu: "0000:5e:00.0".into(),
                    vram_used_mib: 300,
                    util: None,
                },
            ],
            ..HostGpuStats::default()
        };
        let text = render_usage(&stats);
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[1], ["llm", "0000:3b:00.0", "0%", "0"], "{text}");
        assert_eq!(lines[2], ["vision", "0000:5e:00.0", "-", "300"], "{text}");
        assert!(render_usage(&HostGpuStats::default()).is_empty());
    }

    #[test]
    fn the_nvidia_driver_and_its_cuda_version_are_shown() {
        let mut inv = odac_protocol::Inventory::default();
        assert_eq!(nvidia_line(&inv), None);
        inv.host.cuda_version = Some("12.2".into());
        inv.gpus.push(odac_protocol::GpuInfo {
            vendor: odac_protocol::Vendor::Nvidia,
            pci_address: "0000:01:00.0".into(),
            vendor_id: "0x10de".into(),
            device_id: "0x2204".into(),
            model: "RTX 3090".into(),
            driver: Some("nvidia".into()),
            driver_version: Some("535.183.01".into()),
            vram_bytes: None,
            card_node: None,
            render_node: None,
            uuid: None,
            passable: true,
            health: None,
        });
        assert_eq!(
            nvidia_line(&inv).as_deref(),
            Some("nvidia driver 535.183.01, cuda 12.2\n")
        );
    }
}
