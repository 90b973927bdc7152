//! What GPU telemetry costs the idle agent: the agent library's sample of every GPU of the
//! 8-GPU AMD fixture (copied, with sysfs and hwmon counters), called in process, and that time
//! as a share of one core at the default 60 s interval (the loop's only periodic work; a
//! report is sent only when a figure moved). Target: ≤ 0.05 % of a core.

use std::hint::black_box;
use std::time::Instant;

use odac_agent::telemetry::Collector;
use odac_e2e::gpu_counters::{copy_fixture, set_amd};
use odac_e2e::stack::fixture_host;
use odac_e2e::{Error, Result};
use odac_host::engine::EngineCapabilities;
use odac_host::inventory::{Assessment, scan};

use super::{Opts, Row, Table, Target, Unit};

/// The default sampling interval, µs.
const INTERVAL_US: f64 = 60e6;

/// Adds the sampling rows to `t`.
pub fn rows(opts: Opts, t: &mut Table) -> Result<()> {
    let scratch =
        tempfile::tempdir().map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
    let root = copy_fixture(&fixture_host("amd-kfd-mi210-8gpu"), scratch.path())?;
    let inventory =
        Assessment::new(scan(&root), EngineCapabilities::unreachable("bench")).inventory();
    for g in &inventory.gpus {
        set_amd(&root, &g.pci_address, 37, 1024, 45, 300)?;
    }
    let mut collector = Collector::new(&root);
    let n = opts.pick(1000, 100);
    let runs = opts.pick(5, 2);
    let (mut us, mut share) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t0 = Instant::now();
        for _ in 0..n {
            black_box(collector.sample(black_box(&inventory.gpus), Instant::now()));
        }
        let mean = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
        us.push(mean);
        share.push(mean / INTERVAL_US * 100.0);
    }
    let gpus = inventory.gpus.len();
    t.push(Row::new(
        format!("gpu_stats sample, {gpus} AMD GPUs (mean of {n})"),
        Unit::Us,
        us,
    ));
    t.push(
        Row::new(
            "gpu_stats sampling at the default 60 s interval (% of one core)",
            Unit::CpuPercent,
            share,
        )
        .target(Target::AtMost(0.05)),
    );
    t.note(
        "gpu_stats: the agent library's sample of the 8-GPU AMD fixture with counters, in process; \
         the share is the sample time over the 60 s default interval",
    );
    Ok(())
}
