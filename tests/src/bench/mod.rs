//! `odac-bench`'s suites. Each starts what it measures on loopback with the e2e harness (the
//! real `odac-sim` and `odac-agent` binaries of the same profile, the Docker engine, the TCP
//! proxy's byte counters), repeats the measurement, and returns one [`Table`]:
//!
//! - [`footprint`]: the agent's peak RSS and idle CPU beside the bare client;
//! - [`events`]: crash → status latency from the engine's own event time, `docker rm -f` →
//!   recreated, idle engine calls per minute (a counting unix-socket proxy) and idle CPU;
//! - [`apply`]: create → running through the control plane beside `docker run -d`, and the
//!   engine-fallback path beside a plain start;
//! - [`inventory`]: the in-process scan of the 8-GPU fixture, and a fixture change until the
//!   control plane shows the pushed inventory;
//! - [`capacity`]: `odac-sim fleet` of 1,000–5,000 agents against one `odac-sim serve`;
//! - [`link`]: bytes per minute per idle agent, and a reconnect storm;
//! - [`pull`]: a ≥ 50 MB image pulled from a local registry by the agent's pull path beside
//!   `docker pull`;
//! - [`scrape`]: what Prometheus scrapes of `/metrics` cost the agent.
//!
//! `--quick` shortens every suite (fewer runs, shorter windows, 50 fleet agents) so CI keeps
//! the runner working; no target is asserted, the verdicts are printed.

pub mod apply;
pub mod capacity;
pub mod client;
pub mod events;
pub mod fleet;
pub mod footprint;
pub mod gpu_link;
pub mod gpu_sample;
pub mod http;
pub mod inventory;
pub mod link;
pub mod procfs;
pub mod pull;
pub mod scrape;
pub mod stats;
pub mod table;

use std::time::Duration;

use odac_e2e::agent::AgentOptions;
use odac_e2e::docker::{TEST_LABEL, remove_by_label};
use odac_e2e::poll::poll;
use odac_e2e::sim::Sim;
use odac_e2e::{Error, Result};

pub use table::{Row, Table, Target, Unit};

/// How long and how often to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opts {
    /// The short CI mode.
    pub quick: bool,
}

impl Opts {
    /// `full` normally, `quick` with `--quick`.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// The suites, in the order `all` runs them.
pub const SUITES: [&str; 8] = [
    "footprint",
    "events",
    "apply",
    "inventory",
    "capacity",
    "link",
    "pull",
    "scrape",
];

/// Runs one suite by name; `Ok(None)` when it was skipped (no Docker engine).
pub fn run_suite(name: &str, opts: Opts) -> Result<Option<Table>> {
    match name {
        "footprint" => footprint::run(opts),
        "events" => events::run(opts),
        "apply" => apply::run(opts),
        "inventory" => inventory::run(opts),
        "capacity" => capacity::run(opts).map(Some),
        "link" => link::run(opts),
        "pull" => pull::run(opts),
        "scrape" => scrape::run(opts),
        other => Err(Error::Other(format!(
            "unknown suite {other:?} (one of {}, or all)",
            SUITES.join(", ")
        ))),
    }
}

/// The agent's shipped defaults (`deploy/agent.toml`) where the harness shortens them for
/// fault tests: heartbeat 20 s, inventory every 10 s, apps polled every 2 s (while the engine's
/// event stream is down; a full pass every 60 s while it is up), backoff 1 s to
/// 60 s, `info` logs. Benchmarks measure the agent as it would run.
pub fn production(o: &mut AgentOptions) {
    o.heartbeat_secs = 20;
    o.connect_timeout_secs = 10;
    o.backoff_base_ms = 1_000;
    o.backoff_max_secs = 60;
    o.poll_interval_ms = 2_000;
    o.stop_timeout_secs = 10;
    o.inventory_secs = 10;
    o.log_level = "info".to_owned();
}

/// Whether Docker-backed suites may run: without an engine an error, or false (after a skip
/// line) when the developer opted out with `ODAC_ALLOW_SKIP=1`.
pub fn docker_or_skip(suite: &str) -> Result<bool> {
    odac_e2e::docker::docker_or_skip(&format!("bench {suite}"))
}

/// Label on the containers the benchmark creates itself (`docker run` baselines); its value is
/// `bench-<pid>`.
pub const BENCH_LABEL: &str = "odac.bench";

/// The [`BENCH_LABEL`] value of this process.
pub fn bench_label() -> String {
    format!("{BENCH_LABEL}=bench-{}", std::process::id())
}

/// Values of label `key` on containers that carry `odac.test=1`.
fn label_values(key: &str) -> Result<std::collections::BTreeSet<String>> {
    let out = std::process::Command::new("docker")
        .args(["ps", "-a", "--filter"])
        .arg(format!("label={TEST_LABEL}=1"))
        .arg("--format")
        .arg(format!("{{{{.Label \"{key}\"}}}}"))
        .output()
        .map_err(|e| Error::command("docker ps", e.to_string()))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Removes containers an interrupted earlier benchmark left: its `docker run` baselines
/// (`odac.bench=bench-<pid>`) and its agents' containers (`odac.instance=e2e-bench-…-<pid>`),
/// only where that process is gone (never anything else).
pub fn remove_leftovers() -> Result<usize> {
    let mut n = 0;
    for (key, prefix) in [(BENCH_LABEL, "bench-"), ("odac.instance", "e2e-bench-")] {
        for value in label_values(key)? {
            if value.starts_with(prefix) && !owner_alive(&value) {
                n += remove_by_label(&format!("{key}={value}"))?;
            }
        }
    }
    Ok(n)
}

/// Whether the process named by an instance's `-<pid>` suffix still runs (another bench).
fn owner_alive(instance: &str) -> bool {
    instance
        .rsplit('-')
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
}

/// Waits until host `id` shows as connected on `sim`.
pub fn wait_host(sim: &Sim, id: &str, timeout: Duration) -> Result<()> {
    poll(&format!("host {id} to be connected"), timeout, || {
        let hosts = sim.hosts().map_err(|e| e.to_string())?;
        match hosts.iter().find(|h| h.id == id || h.hostname == id) {
            Some(h) if h.connected => Ok(()),
            Some(_) => Err("disconnected".to_owned()),
            None => Err(format!("{} hosts, not {id}", hosts.len())),
        }
    })
}

/// Milliseconds of a duration.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
