//! Events: what the engine's event stream buys. The agent (shipped defaults) manages 20
//! running apps through a unix-socket proxy in front of the Docker engine (its `[docker]
//! host` points at it), which counts the HTTP requests the agent sends.
//!
//! - idle engine API calls per minute, and the agent's idle CPU, over one window;
//! - crash → `app_status` at the control plane: `docker kill` of one app's container per run,
//!   from the engine's own `die` timestamp (`docker events`, nanoseconds) to the first moment
//!   the simulator's API shows the exit (polled every 2 ms);
//! - `docker rm -f` by hand → the app recreated and reported running.
//!
//! Printed, never asserted; targets from the issue: crash median ≤ 150 ms (p95 ≤ 500 ms),
//! recreate ≤ 1 s, ≤ 3 idle calls a minute, idle CPU ≤ 0.05 %.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use odac_e2e::stack::Stack;
use odac_e2e::{Error, Result};

use super::procfs::CpuWindow;
use super::stats::percentile;
use super::{Opts, Row, Table, Target, Unit, docker_or_skip, ms, production};

/// Apps the agent manages while measured.
const APPS: usize = 20;

fn docker(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| Error::command("docker", e.to_string()))?;
    if !out.status.success() {
        return Err(Error::Other(format!(
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn now_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The engine's time of container `id`'s `die` at or after `since` (Unix seconds).
fn die_time(id: &str, since: u64) -> Result<i128> {
    let until = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 1;
    let out = docker(&[
        "events",
        "--since",
        &since.to_string(),
        "--until",
        &until.to_string(),
        "--filter",
        &format!("container={id}"),
        "--filter",
        "event=die",
        "--format",
        "{{.TimeNano}}",
    ])?;
    out.lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| Error::Other(format!("no die event of {id} in docker events: {out:?}")))
}

/// Polls the simulator every 2 ms until `done` holds for app `name`'s status; the wall
/// clock then, Unix nanoseconds.
fn seen_at(
    stack: &Stack,
    name: &str,
    done: impl Fn(&odac_protocol::AppStatus) -> bool,
) -> Result<i128> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let app = stack.sim.app(name)?;
        if app.and_then(|a| a.status).is_some_and(|s| done(&s)) {
            return Ok(now_nanos());
        }
        if Instant::now() > deadline {
            return Err(Error::Other(format!("{name}: not reported within 30 s")));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Option<Table>> {
    if !docker_or_skip("events")? {
        return Ok(None);
    }
    let window = Duration::from_secs(opts.pick(120, 10));
    let kills = opts.pick(15, 5);
    let removals = opts.pick(5, 2);
    let stack = Stack::builder("bench-events")
        .agent_options(production)
        .docker_proxy()
        .start()?;
    let host = stack.wait_connected(Duration::from_secs(60))?;
    for i in 0..APPS {
        let mut body = Stack::app_body(&format!("ev{i:02}"));
        body["host"] = serde_json::Value::String(host.clone());
        stack.sim.create_app(&body)?;
    }
    stack.wait_converged(APPS, Duration::from_secs(300))?;
    std::thread::sleep(Duration::from_secs(5));

    // idle: engine calls and CPU
    let proxy = stack
        .docker_proxy
        .as_ref()
        .ok_or_else(|| Error::Other("events: no docker proxy".into()))?;
    let agent_pid = stack.agent()?.process()?.pid();
    let before = proxy.requests();
    let cpu = CpuWindow::start(&[agent_pid])?;
    std::thread::sleep(window);
    let cpu = cpu.percent()?.first().copied().unwrap_or_default();
    let calls = (proxy.requests() - before) as f64 * 60.0 / window.as_secs_f64();
    println!("events idle: {calls:.1} engine calls/min, cpu {cpu:.3} %");

    // crash → status
    let mut latencies = Vec::new();
    let before_kills = proxy.requests();
    let by_app = stack.containers_by_app()?;
    for i in 0..kills {
        let name = format!("ev{:02}", i % APPS);
        let id = by_app
            .get(&name)
            .and_then(|c| c.first())
            .map(|c| c.id.clone())
            .ok_or_else(|| Error::Other(format!("no container for {name}")))?;
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        docker(&["kill", &id])?;
        let seen = seen_at(&stack, &name, |s| s.last_exit_code == Some(137))?;
        let died = die_time(&id, since)?;
        let latency = (seen - died) as f64 / 1e6;
        println!("events kill {}/{kills} {name}: {latency:.1} ms", i + 1);
        latencies.push(latency);
    }

    let per_crash = (proxy.requests() - before_kills) as f64 / kills as f64;

    // docker rm -f → recreated and reported running
    let mut recreations = Vec::new();
    for i in 0..removals {
        let name = format!("ev{:02}", APPS - 1 - i);
        let by_app = stack.containers_by_app()?;
        let id = by_app
            .get(&name)
            .and_then(|c| c.first())
            .map(|c| c.id.clone())
            .ok_or_else(|| Error::Other(format!("no container for {name}")))?;
        let start = now_nanos();
        docker(&["rm", "-f", &id])?;
        let seen = seen_at(&stack, &name, |s| {
            s.state == odac_protocol::AppState::Running
                && s.container_id
                    .as_deref()
                    .is_some_and(|c| !c.starts_with(&id))
        })?;
        let took = (seen - start) as f64 / 1e6;
        println!("events rm -f {}/{removals} {name}: {took:.1} ms", i + 1);
        recreations.push(took);
    }

    let mut t = Table::new(
        format!(
            "Events — agent with {APPS} running apps, engine calls counted by a unix-socket proxy"
        ),
        "—",
    );
    t.push(
        Row::new(
            "crash (docker kill) → app_status at the control plane, from the engine's die time",
            Unit::Ms,
            latencies.clone(),
        )
        .target(Target::AtMost(150.0)),
    );
    t.push(
        Row::new(
            "… p95 of the same",
            Unit::Ms,
            vec![percentile(&latencies, 95.0)],
        )
        .target(Target::AtMost(500.0)),
    );
    t.push(
        Row::new(
            "docker rm -f by hand → recreated and reported running",
            Unit::Ms,
            recreations,
        )
        .target(Target::AtMost(1000.0)),
    );
    t.push(
        Row::new(
            format!(
                "idle engine API calls per minute ({} s window)",
                window.as_secs()
            ),
            Unit::PerMin,
            vec![calls],
        )
        .target(Target::AtMost(3.0)),
    );
    t.push(Row::new(
        "engine API calls per crash (the die's pass, the restart, the start's pass)",
        Unit::Count,
        vec![per_crash],
    ));
    t.push(
        Row::new("idle CPU (% of one core)", Unit::CpuPercent, vec![cpu])
            .target(Target::AtMost(0.05)),
    );
    t.note(
        "agent: shipped defaults (events, a full pass every 60 s, inventory every 10 s with the \
         engine's capabilities read again only on an engine change or every 60 s)",
    );
    t.note(format!(
        "latency: the simulator's REST API polled every 2 ms ({:.0} ms resolution at best); \
         the die time is `docker events` TimeNano",
        ms(Duration::from_millis(2))
    ));
    Ok(Some(t))
}
