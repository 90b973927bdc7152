//! Link cost of GPU telemetry: an agent on the 8-GPU AMD fixture host (copied, counters
//! written by the bench) measured through the harness's TCP proxy in two phases of the same
//! length: counters steady, then counters moving beyond the thresholds before every sample
//! (the worst case: one `gpu_stats` per interval). The difference, both ways (report and
//! ack, TLS and WebSocket framing included), divided by the GPUs, is the cost per GPU; it is
//! printed at the measured interval and scaled to the default 60 s interval. Target: ≤ 200
//! B/min per GPU at the default interval. Steady counters send nothing beyond the first.

use std::time::{Duration, Instant};

use odac_e2e::gpu_counters::{copy_fixture, set_amd};
use odac_e2e::stack::{Stack, fixture_host};
use odac_e2e::{Error, Result};

use super::{Opts, Row, Table, Target, Unit, production};

/// The fixture's GPUs.
const GPUS: [&str; 8] = odac_e2e::gpu_counters::MI210_GPUS;
/// The agent's default sampling interval, s.
const DEFAULT_INTERVAL: f64 = 60.0;

fn quick_options(o: &mut odac_e2e::agent::AgentOptions) {
    production(o);
    o.env.push((
        "ODAC_AGENT__TELEMETRY__INTERVAL_SECS".to_owned(),
        "10".to_owned(),
    ));
}

fn set_all(root: &std::path::Path, util: u8) -> Result<()> {
    for id in GPUS {
        set_amd(root, id, util, 1024 + u64::from(util) * 100, 40, 100)?;
    }
    Ok(())
}

/// Adds the per-GPU rows to `t`.
pub fn gpu_stats_bytes(opts: Opts, t: &mut Table) -> Result<()> {
    let interval = opts.pick(60u64, 10);
    let scratch =
        tempfile::tempdir().map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
    let root = copy_fixture(&fixture_host("amd-kfd-mi210-8gpu"), scratch.path())?;
    set_all(&root, 10)?;
    let stack = Stack::builder("bench-gpu-link")
        .tcp_proxy()
        .host_root(root.clone())
        .agent_options(if opts.quick {
            quick_options
        } else {
            production
        })
        .start()?;
    stack.wait_connected(Duration::from_secs(60))?;
    // the first sample, then let the link settle
    std::thread::sleep(Duration::from_secs(interval + 5));
    let proxy = stack.proxy()?;
    // three samples a window (quick: one)
    let window = Duration::from_secs(interval * opts.pick(3, 1));
    let measure = |moving: bool| -> Result<f64> {
        let b0 = proxy.bytes_up() + proxy.bytes_down();
        let t0 = Instant::now();
        let mut util = 10u8;
        while t0.elapsed() < window {
            if moving {
                // beyond the 5-point threshold before every sample
                util = if util >= 80 { 10 } else { util + 20 };
                set_all(&root, util)?;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let per_min = 60.0 / t0.elapsed().as_secs_f64();
        Ok((proxy.bytes_up() + proxy.bytes_down() - b0) as f64 * per_min)
    };
    let runs = opts.pick(2, 1);
    let (mut measured, mut scaled, mut steady) = (Vec::new(), Vec::new(), Vec::new());
    for w in 0..runs {
        let quiet = measure(false)?;
        let busy = measure(true)?;
        let per_gpu = (busy - quiet).max(0.0) / GPUS.len() as f64;
        let at_default = per_gpu * interval as f64 / DEFAULT_INTERVAL;
        println!(
            "gpu_stats window {}/{runs}: steady {quiet:.0} B/min, moving {busy:.0} B/min \
             → {per_gpu:.0} B/min/GPU at {interval} s, {at_default:.0} at 60 s",
            w + 1
        );
        measured.push(per_gpu);
        scaled.push(at_default);
        steady.push(quiet / GPUS.len() as f64);
    }
    t.push(Row::new(
        format!("gpu_stats per GPU, every {interval} s sample moving"),
        Unit::BytesPerMin,
        measured,
    ));
    t.push(
        Row::new(
            "gpu_stats per GPU at the default 60 s interval",
            Unit::BytesPerMin,
            scaled,
        )
        .target(Target::AtMost(200.0)),
    );
    t.push(Row::new(
        "link per GPU with steady counters (heartbeats only)",
        Unit::BytesPerMin,
        steady,
    ));
    t.note(format!(
        "gpu_stats: agent on the 8-GPU AMD fixture, {interval} s interval, {} s windows; moving \
         minus steady bytes (both ways: report, ack, TLS and WebSocket framing) per GPU",
        window.as_secs()
    ));
    Ok(())
}
