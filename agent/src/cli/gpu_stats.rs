//! `odac-agent gpu-stats`: one sample of every GPU the inventory finds under `--root`, as a
//! real host reports it (for `deploy/gpu-check.sh` and fixture checks). With `--wait-ms` it
//! samples twice that far apart, so energy-counter power (Intel) has a delta. Prints the
//! `gpu_stats` payload and, when NVML could not be loaded, why.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use odac_protocol::GpuStats;
use serde::Serialize;

use super::output::{EXIT_OK, EXIT_USAGE, fail};
use crate::telemetry::collect::Collector;
use odac_host::engine::EngineCapabilities;
use odac_host::inventory::{Assessment, scan};

/// Flags of `gpu-stats`.
#[derive(Debug, Clone, clap::Args)]
pub struct GpuStatsArgs {
    /// Print JSON (the default is one line per GPU).
    #[arg(long)]
    pub json: bool,
    /// Read every host path under this directory instead of `/`.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Sample twice, this many milliseconds apart (power from energy counters needs two).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub wait_ms: u64,
}

/// What the command prints.
#[derive(Debug, Serialize)]
pub struct GpuStatsOutput {
    pub stats: GpuStats,
    /// Why NVML is unavailable, when an NVIDIA GPU needed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvml_problem: Option<String>,
    /// The driver version NVML reports, when it is loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvml_driver_version: Option<String>,
}

/// One sample of the GPUs under `root`.
pub fn sample_once(root: &std::path::Path, wait: Duration) -> GpuStatsOutput {
    let inventory = Assessment::new(
        scan(root),
        EngineCapabilities::unreachable("not asked (gpu-stats)"),
    )
    .inventory();
    let mut collector = Collector::new(root);
    let mut gpus = collector.sample(&inventory.gpus, Instant::now());
    if !wait.is_zero() && !inventory.gpus.is_empty() {
        std::thread::sleep(wait);
        gpus = collector.sample(&inventory.gpus, Instant::now());
    }
    GpuStatsOutput {
        stats: GpuStats {
            interval_secs: u32::try_from(wait.as_secs().max(10)).unwrap_or(600),
            gpus,
            apps: Vec::new(),
            usage: Vec::new(),
        },
        nvml_problem: collector.nvml_problem(),
        nvml_driver_version: collector.nvml_driver_version(),
    }
}

/// The body of `odac-agent gpu-stats`; exit 0, or 2 when the root is not a directory.
pub fn gpu_stats_command(args: &GpuStatsArgs) -> i32 {
    if !args.root.is_dir() {
        return fail(
            format!("scan root {} is not a directory", args.root.display()),
            EXIT_USAGE,
        );
    }
    let out = sample_once(&args.root, Duration::from_millis(args.wait_ms));
    let text = if args.json {
        match serde_json::to_string_pretty(&out) {
            Ok(t) => t,
            Err(e) => return fail(format!("cannot serialise output: {e}"), EXIT_USAGE),
        }
    } else {
        render(&out)
    };
    println!("{text}");
    EXIT_OK
}

fn render(out: &GpuStatsOutput) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let mut lines = vec![format!(
        "{:<14} {:>5} {:>17} {:>6} {:>7} {:>8}",
        "GPU", "UTIL", "VRAM MiB", "TEMP", "POWER", "CLOCK"
    )];
    for g in &out.stats.gpus {
        lines.push(format!(
            "{:<14} {:>5} {:>17} {:>6} {:>7} {:>8}",
            g.id,
            opt(g.util.map(|u| format!("{u}%"))),
            format!(
                "{}/{}",
                opt(g.vram_used_mib.map(|v| v.to_string())),
                opt(g.vram_total_mib.map(|v| v.to_string()))
            ),
            opt(g.temp_c.map(|t| format!("{t}C"))),
            opt(g.power_w.map(|p| format!("{p}W"))),
            opt(g.clock_mhz.map(|c| format!("{c}MHz"))),
        ));
    }
    if let Some(p) = &out.nvml_problem {
        lines.push(format!("nvml: {p}"));
    }
    lines.join("\n")
}
