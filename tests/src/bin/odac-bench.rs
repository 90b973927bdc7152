//! `odac-bench`: the benchmark runner. `odac-bench <suite>… | all [--quick]` runs the suites
//! (footprint, apply, inventory, capacity, link, pull, scrape; see `tests/src/bench/`) on loopback with the
//! real `odac-sim` and `odac-agent` binaries of the same cargo profile and the Docker engine,
//! and prints one Markdown table per suite: median and spread over repeated runs, the
//! baseline measured in the same run, the ratio, the target and whether it was met. The tables
//! are also written to `target/bench-results.md`. `--quick` (CI) shortens every suite; no
//! target fails the run, only errors do.
//!
//! `cargo run --release -p odac-e2e --bin odac-bench -- all`

#[path = "../bench/mod.rs"]
mod bench;

use std::process::ExitCode;
use std::time::Instant;

use bench::{Opts, SUITES};

const USAGE: &str = "usage: odac-bench <footprint|events|apply|inventory|capacity|link|pull|scrape>... | all [--quick]";

/// The machine, for the header and the README.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned());
    let docker = odac_e2e::docker::engine_version().unwrap_or_else(|_| "none".to_owned());
    let profile = odac_e2e::bins::profile_dir()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    format!("{cores} cores, Linux {kernel}, Docker {docker}, {profile} build")
}

fn main() -> ExitCode {
    let mut quick = false;
    let mut suites: Vec<String> = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => quick = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "all" => suites.extend(SUITES.iter().map(|s| (*s).to_owned())),
            s if SUITES.contains(&s) => suites.push(s.to_owned()),
            other => {
                eprintln!("odac-bench: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if suites.is_empty() {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let opts = Opts { quick };
    let started = Instant::now();
    let header = format!(
        "odac-bench{}: {}",
        if quick { " --quick" } else { "" },
        machine()
    );
    println!("{header}");
    if odac_e2e::docker::engine_version().is_ok() {
        match bench::remove_leftovers() {
            Ok(0) => {}
            Ok(n) => println!("removed {n} containers an earlier benchmark left"),
            Err(e) => eprintln!("odac-bench: cleaning up an earlier run: {e}"),
        }
    }
    let mut out = format!("{header}\n\n");
    let mut failed = Vec::new();
    for suite in &suites {
        let t = Instant::now();
        println!("\n== {suite} ==");
        match bench::run_suite(suite, opts) {
            Ok(Some(table)) => {
                let text = table.render();
                println!("\n{text}");
                println!("({suite}: {:.0} s)", t.elapsed().as_secs_f64());
                out.push_str(&text);
                out.push('\n');
            }
            Ok(None) => println!("({suite}: skipped)"),
            Err(e) => {
                eprintln!("odac-bench: suite {suite} failed: {e}");
                failed.push(suite.clone());
            }
        }
    }
    let total = format!("total: {:.0} s", started.elapsed().as_secs_f64());
    println!("\n{total}");
    out.push_str(&total);
    out.push('\n');
    if let Ok(dir) = odac_e2e::bins::profile_dir()
        && let Some(target) = dir.parent()
    {
        let path = target.join("bench-results.md");
        if let Err(e) = std::fs::write(&path, out) {
            eprintln!("odac-bench: cannot write {}: {e}", path.display());
        } else {
            println!("tables written to {}", path.display());
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("odac-bench: failed suites: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}
