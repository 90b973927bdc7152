//! Benchmark: scan of the 8-GPU datacenter fixture (`tests/fixtures/hosts/nvidia-dgx-8gpu`),
//! then the verdict, the wire inventory and its change hash, as the agent's periodic rescan
//! does. Target: at most 1 ms per scan. A plain bench binary (no criterion):
//! `cargo bench -p odac-agent --bench scan` prints the mean, median and p95 per iteration.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use odac_host::engine::EngineCapabilities;
use odac_host::inventory::{Assessment, inventory_hash, scan};

const WARMUP: usize = 50;
const ITERATIONS: usize = 2000;

fn measure(label: &str, mut f: impl FnMut()) -> Duration {
    for _ in 0..WARMUP {
        f();
    }
    let mut samples: Vec<Duration> = (0..ITERATIONS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort_unstable();
    let total: Duration = samples.iter().sum();
    let mean = total / u32::try_from(ITERATIONS).unwrap_or(u32::MAX);
    let median = samples.get(ITERATIONS / 2).copied().unwrap_or_default();
    let p95 = samples
        .get(ITERATIONS * 95 / 100)
        .copied()
        .unwrap_or_default();
    println!(
        "{label:<40} mean {:>8.1} us  median {:>8.1} us  p95 {:>8.1} us  ({ITERATIONS} iterations)",
        mean.as_secs_f64() * 1e6,
        median.as_secs_f64() * 1e6,
        p95.as_secs_f64() * 1e6,
    );
    mean
}

fn main() {
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/nvidia-dgx-8gpu");
    let gpus = scan(&root).gpus.len();
    if gpus != 8 {
        eprintln!("fixture {} has {gpus} gpus, expected 8", root.display());
        std::process::exit(1);
    }
    let engine = EngineCapabilities::from_info_json(
        &serde_json::json!({"ServerVersion": "28.2.2", "Runtimes": {"nvidia": {}, "runc": {}}}),
        Some("1.50".to_owned()),
    );
    let scan_mean = measure("scan (8-gpu dgx fixture)", || {
        black_box(scan(black_box(&root)));
    });
    measure("scan + verdict + inventory + hash", || {
        let a = Assessment::new(scan(&root), engine.clone());
        black_box(inventory_hash(&a.inventory()));
    });
    let target = Duration::from_millis(1);
    println!(
        "target <= 1 ms per scan: {}",
        if scan_mean <= target {
            "met"
        } else {
            "NOT met"
        }
    );
}
