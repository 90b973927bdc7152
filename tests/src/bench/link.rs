//! Link cost: the bytes an idle agent (shipped defaults, 3 running apps) exchanges with the
//! control plane per minute, read from the harness's TCP proxy counters (TLS records and TCP
//! payload both ways, no headers), beside the bare client through a second proxy in the same
//! windows (60 s; quick 5 s, scaled to a minute); and a reconnect storm: a fleet of simulated
//! agents (1,000; quick 50) all dropped at once by the simulator's fault API
//! (`drop_connections`), watched in `/proc/net/tcp` every 50 ms: time until all are back, when
//! half and 90 % were, and the peak connection rate over a sliding second. Target: ≤ 2 KB
//! per minute per idle agent.

use std::time::{Duration, Instant};

use odac_e2e::poll::poll_every;
use odac_e2e::process::Process;
use odac_e2e::sim::Sim;
use odac_e2e::stack::{Stack, TOKEN};
use odac_e2e::tcp_proxy::TcpProxy;
use odac_e2e::{Error, Result};
use serde_json::json;

use super::client::start_client;
use super::fleet::{start_fleet, wait_all_connected};
use super::procfs::{ensure_nofile, established_to};
use super::{Opts, Row, Table, Target, Unit, docker_or_skip, production};

/// Apps the idle agent runs.
const APPS: usize = 3;
/// How often the storm is sampled.
const SAMPLE: Duration = Duration::from_millis(50);

fn total(p: &TcpProxy) -> u64 {
    p.bytes_up() + p.bytes_down()
}

/// Bytes per minute of the agent and of the bare client, one pair per window.
fn idle_bytes(opts: Opts, t: &mut Table) -> Result<()> {
    let stack = Stack::builder("bench-link")
        .tcp_proxy()
        .agent_options(production)
        .hosts_per_token(2)
        .start()?;
    let host = stack.wait_connected(Duration::from_secs(60))?;
    for i in 0..APPS {
        let mut body = Stack::app_body(&format!("lk{i}"));
        body["host"] = serde_json::Value::String(host.clone());
        stack.sim.create_app(&body)?;
    }
    stack.wait_converged(APPS, Duration::from_secs(120))?;
    let agent_proxy = stack.proxy()?;
    let client_proxy = TcpProxy::start(stack.sim.addr())?;
    let _client = start_client(
        &stack.sim,
        Some(client_proxy.port()),
        "bench-link-client",
        stack.dir(),
    )?;
    std::thread::sleep(Duration::from_secs(5));
    let runs = opts.pick(3, 2);
    let window = Duration::from_secs(opts.pick(60, 5));
    let (mut agent, mut client, mut up, mut down) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for w in 0..runs {
        let (a0, c0) = (total(agent_proxy), total(&client_proxy));
        let (u0, d0) = (agent_proxy.bytes_up(), agent_proxy.bytes_down());
        let t0 = Instant::now();
        std::thread::sleep(window);
        let per_min = 60.0 / t0.elapsed().as_secs_f64();
        let a = (total(agent_proxy) - a0) as f64 * per_min;
        let c = (total(&client_proxy) - c0) as f64 * per_min;
        println!(
            "link window {}/{runs}: agent {a:.0} B/min | bare client {c:.0} B/min",
            w + 1
        );
        agent.push(a);
        client.push(c);
        up.push((agent_proxy.bytes_up() - u0) as f64 * per_min);
        down.push((agent_proxy.bytes_down() - d0) as f64 * per_min);
    }
    if agent_proxy.forwarded() != 1 {
        return Err(Error::Other(format!(
            "the agent reconnected during the windows ({} connections)",
            agent_proxy.forwarded()
        )));
    }
    t.push(
        Row::new("idle agent, both ways", Unit::BytesPerMin, agent)
            .baseline(client)
            .target(Target::AtMost(2048.0)),
    );
    t.push(Row::new(
        "idle agent → control plane",
        Unit::BytesPerMin,
        up,
    ));
    t.push(Row::new(
        "control plane → idle agent",
        Unit::BytesPerMin,
        down,
    ));
    t.note(format!(
        "idle: agent with shipped defaults and {APPS} running apps, {} s windows; bytes are TCP \
         payload (TLS records) counted by the harness's proxy; baseline: the bare client (pings only)",
        window.as_secs()
    ));
    Ok(())
}

/// One storm's figures.
#[derive(Debug)]
struct Storm {
    all_back: f64,
    half: f64,
    ninety: f64,
    peak_rate: f64,
}

/// Drops every session and watches the reconnections.
fn storm_once(sim: &Sim, fleet: &Process, agents: usize) -> Result<Storm> {
    let port = sim.addr().port();
    let mark = fleet.mark();
    let t0 = Instant::now();
    sim.faults(&json!({"drop_connections": true}))?;
    poll_every(
        "the sessions to drop",
        Duration::from_secs(10),
        Duration::from_millis(5),
        || match established_to(port) {
            Ok(n) if n <= agents / 10 => Ok(()),
            Ok(n) => Err(format!("{n} established")),
            Err(e) => Err(e.to_string()),
        },
    )?;
    let mut samples: Vec<(f64, usize)> = Vec::new();
    loop {
        let n = established_to(port)?;
        let at = t0.elapsed().as_secs_f64();
        samples.push((at, n));
        if n >= agents {
            break;
        }
        if at > 180.0 {
            return Err(Error::Other(format!(
                "only {n} of {agents} agents back after 180 s"
            )));
        }
        std::thread::sleep(SAMPLE);
    }
    wait_all_connected(fleet, mark, agents, Duration::from_secs(30))?;
    let when = |frac: f64| {
        samples
            .iter()
            .find(|(_, n)| *n as f64 >= frac * agents as f64)
            .map_or(0.0, |(t, _)| *t)
    };
    // connections gained within any one-second window (the first sample is the low point)
    let mut peak_rate: f64 = 0.0;
    for (i, (t, n)) in samples.iter().enumerate() {
        if let Some((_, n0)) = samples[..=i].iter().find(|(t0, _)| t - t0 <= 1.0) {
            peak_rate = peak_rate.max(*n as f64 - *n0 as f64);
        }
    }
    let last = samples.last().map_or(0.0, |(t, _)| *t);
    Ok(Storm {
        all_back: last,
        half: when(0.5),
        ninety: when(0.9),
        peak_rate,
    })
}

/// The reconnect storm rows.
fn storm(opts: Opts, t: &mut Table) -> Result<()> {
    let agents = opts.pick(1000, 50);
    ensure_nofile(agents as u64 + 1024)?;
    let dir = tempfile::Builder::new()
        .prefix("odac-bench-storm-")
        .tempdir()
        .map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
    let sim = Sim::start_fleet(dir.path(), TOKEN, 10_000)?;
    let mut fleet = start_fleet(&sim, agents, "storm", dir.path())?;
    wait_all_connected(&fleet, 0, agents, Duration::from_secs(300))?;
    let runs = opts.pick(3, 1);
    let mut storms = Vec::new();
    for s in 0..runs {
        let st = storm_once(&sim, &fleet, agents)?;
        println!(
            "storm {}/{runs}: {agents} agents dropped; 50 % back in {:.2} s, 90 % in {:.2} s, all in {:.2} s; peak {:.0} connections/s",
            s + 1,
            st.half,
            st.ninety,
            st.all_back,
            st.peak_rate
        );
        storms.push(st);
    }
    fleet.sigkill()?;
    let col = |f: fn(&Storm) -> f64| storms.iter().map(f).collect::<Vec<f64>>();
    t.push(Row::new(
        format!("storm, {agents} agents: all back"),
        Unit::Secs,
        col(|s| s.all_back),
    ));
    t.push(Row::new(
        format!("storm, {agents} agents: 50 % back"),
        Unit::Secs,
        col(|s| s.half),
    ));
    t.push(Row::new(
        format!("storm, {agents} agents: 90 % back"),
        Unit::Secs,
        col(|s| s.ninety),
    ));
    t.push(Row::new(
        format!("storm, {agents} agents: peak connections per second"),
        Unit::PerSec,
        col(|s| s.peak_rate),
    ));
    t.note(format!(
        "storm: `odac-sim fleet` agents (first retry after a uniform 0.5–1 s, backon jitter; the \
         real agent draws from [0, 1 s]) dropped with POST /api/admin/faults {{\"drop_connections\": true}}; \
         established connections counted in /proc/net/tcp every {} ms, peak over a sliding second",
        SAMPLE.as_millis()
    ));
    Ok(())
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Option<Table>> {
    let mut t = Table::new(
        "Link cost — idle agent bytes per minute; reconnect storm",
        "bare client",
    );
    if docker_or_skip("link")? {
        idle_bytes(opts, &mut t)?;
        super::gpu_link::gpu_stats_bytes(opts, &mut t)?;
    }
    storm(opts, &mut t)?;
    Ok(Some(t))
}
