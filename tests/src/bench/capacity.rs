//! Simulator capacity: `odac-sim fleet` with 1,000, 2,000 and 5,000 simulated agents
//! (`--quick`: 50) against one fresh `odac-sim serve` per level, all heartbeating (20 s).
//! Once every agent holds a session, repeated windows (15 s; quick 3 s) each time
//! `GET /api/hosts` back to back with 200 ms pauses (whole body read, not parsed) and read the
//! CPU share of the simulator and of the fleet; peak RSS at the end. The ramp (fleet start →
//! every TCP connection established, from `/proc/net/tcp`) is printed too. The ratio column
//! compares each level with the smallest. Target: 5,000 agents with p99 ≤ 100 ms.

use std::time::{Duration, Instant};

use odac_e2e::poll::poll_every;
use odac_e2e::process::Process;
use odac_e2e::sim::Sim;
use odac_e2e::stack::TOKEN;
use odac_e2e::{Error, Result};

use super::fleet::{start_fleet, wait_all_connected};
use super::http::TimingClient;
use super::procfs::{CpuWindow, ensure_nofile, established_to, status_kib};
use super::stats::percentile;
use super::{Opts, Row, Table, Target, Unit, ms};

/// Pause between two listing requests.
const PAUSE: Duration = Duration::from_millis(200);
/// The target p99 at the largest level.
const P99_TARGET_MS: f64 = 100.0;

/// One level's figures, one entry per window.
#[derive(Debug, Default)]
struct Level {
    agents: usize,
    p50: Vec<f64>,
    p99: Vec<f64>,
    sim_cpu: Vec<f64>,
    fleet_cpu: Vec<f64>,
    sim_hwm: f64,
    fleet_hwm: f64,
    ramp: f64,
    body: usize,
    requests: usize,
}

fn measure_level(agents: usize, opts: Opts) -> Result<Level> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("odac-bench-capacity-{agents}-"))
        .tempdir()
        .map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
    let sim = Sim::start_fleet(dir.path(), TOKEN, 10_000)?;
    let sim_pid = sim
        .process()
        .map(Process::pid)
        .ok_or_else(|| Error::Other("the simulator did not start".to_owned()))?;
    let port = sim.addr().port();
    let t0 = Instant::now();
    let mut fleet = start_fleet(&sim, agents, &format!("cap{agents}"), dir.path())?;
    poll_every(
        &format!("{agents} connections to the simulator"),
        Duration::from_secs(300),
        Duration::from_millis(200),
        || match established_to(port) {
            Ok(n) if n >= agents => Ok(()),
            Ok(n) => Err(format!("{n} established")),
            Err(e) => Err(e.to_string()),
        },
    )?;
    let ramp = t0.elapsed().as_secs_f64();
    wait_all_connected(&fleet, 0, agents, Duration::from_secs(120))?;
    let client = TimingClient::new(&sim.api_url(), &sim.ca_path())?;
    let windows = opts.pick(3, 2);
    let window = Duration::from_secs(opts.pick(15, 3));
    let mut level = Level {
        agents,
        ramp,
        ..Level::default()
    };
    for w in 0..windows {
        let cpu = CpuWindow::start(&[sim_pid, fleet.pid()])?;
        let mut lat = Vec::new();
        while cpu.elapsed() < window {
            let (took, bytes) = client.get("/api/hosts")?;
            lat.push(ms(took));
            level.body = bytes;
            std::thread::sleep(PAUSE);
        }
        let pct = cpu.percent()?;
        let (p50, p99) = (percentile(&lat, 50.0), percentile(&lat, 99.0));
        println!(
            "capacity {agents} agents, window {}/{windows}: GET /api/hosts p50 {p50:.1} ms p99 {p99:.1} ms ({} requests, {} bytes) | cpu sim {:.1} % fleet {:.1} %",
            w + 1,
            lat.len(),
            level.body,
            pct.first().copied().unwrap_or_default(),
            pct.get(1).copied().unwrap_or_default()
        );
        level.requests += lat.len();
        level.p50.push(p50);
        level.p99.push(p99);
        level.sim_cpu.push(pct.first().copied().unwrap_or_default());
        level
            .fleet_cpu
            .push(pct.get(1).copied().unwrap_or_default());
    }
    level.sim_hwm = status_kib(sim_pid, "VmHWM")? as f64;
    level.fleet_hwm = status_kib(fleet.pid(), "VmHWM")? as f64;
    let still = established_to(port)?;
    if still < agents {
        return Err(Error::Other(format!(
            "only {still} of {agents} agents still connected after the windows"
        )));
    }
    fleet.sigkill()?;
    Ok(level)
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Table> {
    let levels: Vec<usize> = opts.pick(vec![1000, 2000, 5000], vec![50]);
    let largest = levels.iter().copied().max().unwrap_or(0) as u64;
    let limit = ensure_nofile(largest + 1024)?;
    let mut measured = Vec::new();
    for n in &levels {
        measured.push(measure_level(*n, opts)?);
    }
    let first = measured.first();
    let base = |f: fn(&Level) -> Vec<f64>| first.map(f);
    let mut t = Table::new(
        "Simulator capacity — one `odac-sim serve`, `odac-sim fleet` heartbeating every 20 s",
        format!("{} agents", levels.first().copied().unwrap_or(0)),
    );
    for (i, l) in measured.iter().enumerate() {
        let n = l.agents;
        let with_base = |row: Row, f: fn(&Level) -> Vec<f64>| match base(f) {
            Some(b) if i > 0 => row.baseline(b),
            _ => row,
        };
        let mut p99 = with_base(
            Row::new(
                format!("{n} agents: GET /api/hosts p99"),
                Unit::Ms,
                l.p99.clone(),
            ),
            |l| l.p99.clone(),
        );
        if i + 1 == measured.len() {
            p99 = p99.target(Target::AtMost(P99_TARGET_MS));
        }
        t.push(p99);
        t.push(with_base(
            Row::new(
                format!("{n} agents: GET /api/hosts p50"),
                Unit::Ms,
                l.p50.clone(),
            ),
            |l| l.p50.clone(),
        ));
        t.push(with_base(
            Row::new(
                format!("{n} agents: simulator CPU (% of one core)"),
                Unit::CpuPercent,
                l.sim_cpu.clone(),
            ),
            |l| l.sim_cpu.clone(),
        ));
        t.push(with_base(
            Row::new(
                format!("{n} agents: simulator peak RSS"),
                Unit::Kib,
                vec![l.sim_hwm],
            ),
            |l| vec![l.sim_hwm],
        ));
        t.push(Row::new(
            format!("{n} agents: fleet CPU (% of one core)"),
            Unit::CpuPercent,
            l.fleet_cpu.clone(),
        ));
        t.push(Row::new(
            format!("{n} agents: fleet peak RSS"),
            Unit::Kib,
            vec![l.fleet_hwm],
        ));
        t.push(Row::new(
            format!("{n} agents: ramp (start → all connected)"),
            Unit::Secs,
            vec![l.ramp],
        ));
        t.push(Row::new(
            format!("{n} agents: /api/hosts body"),
            Unit::Bytes,
            vec![l.body as f64],
        ));
    }
    let requests: usize = measured.iter().map(|l| l.requests).sum();
    t.note(format!(
        "runs = windows of {} s per level; p50/p99 per window over back-to-back requests with {} ms pauses ({requests} requests in all)",
        opts.pick(15, 3),
        PAUSE.as_millis()
    ));
    t.note(format!(
        "simulator, fleet and benchmark share the 2 cores; open-file limit {limit}"
    ));
    Ok(t)
}
