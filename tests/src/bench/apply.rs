//! Apply latency: an app created through the control plane (`POST /api/apps`) until the
//! control plane shows it `running` (polled every 10 ms on a kept-alive connection), against
//! `docker run -d` of the same local image (the CLI's own wall time); and the engine-fallback
//! path (an optional Intel GPU on the `intel-i915-igpu` fixture host, whose render node the
//! engine cannot open: the agent's first start is refused and it starts again on the CPU)
//! against a plain start on the same agent. Runs alternate between the two sides, after one
//! warm-up of each; every app is deleted (its container gone) before the next run.
//! The fallback is measured twice: on an agent that never remembers a refusal (every fallback
//! pays the engine's failed start, as the first one on a host does) and on the shipped agent,
//! which learned the refusal on the warm-up and goes straight to the CPU.
//! Targets: ≤ 1.15× `docker run -d`; first fallback ≤ 1.3×, repeated ≤ 1.05× a plain start.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use odac_e2e::agent::AgentOptions;
use odac_e2e::docker::{LabelCleanup, TEST_LABEL};
use odac_e2e::image::{SLEEPER_IMAGE, ensure_sleeper_image};
use odac_e2e::poll::{poll, poll_every};
use odac_e2e::stack::{Stack, fixture_host};
use odac_e2e::{Error, Result};
use odac_protocol::FallbackTier;
use odac_simulator::state::views::AppView;
use serde_json::{Value, json};

use super::{Opts, Row, Table, Target, Unit, bench_label, docker_or_skip, ms, production};

/// How often the control plane is asked whether the app runs.
const POLL: Duration = Duration::from_millis(10);

/// Creates app `name` on `host` (with `gpu` when given), waits until it is `running`, returns
/// the time it took and the view; then deletes it and waits for its container to go.
fn apply_once(
    stack: &Stack,
    host: &str,
    name: &str,
    gpu: Option<&Value>,
) -> Result<(f64, AppView)> {
    let client = stack.sim.client()?;
    let mut body = Stack::app_body(name);
    body["host"] = Value::String(host.to_owned());
    if let Some(g) = gpu {
        body["gpu"] = g.clone();
    }
    let path = format!("/api/apps/{name}");
    let t = Instant::now();
    client
        .post("/api/apps", &body)
        .map_err(|e| Error::Other(format!("POST /api/apps {name}: {e}")))?;
    let view = poll_every(
        &format!("app {name} to run"),
        Duration::from_secs(60),
        POLL,
        || {
            let v: AppView = client.get_as(&path).map_err(|e| e.to_string())?;
            match v.state.as_str() {
                "running" => Ok(v),
                "failed" => Ok(v),
                other => Err(other.to_owned()),
            }
        },
    )?;
    let took = ms(t.elapsed());
    if view.state != "running" {
        return Err(Error::Other(format!(
            "app {name} failed: {:?}",
            view.status.as_ref().and_then(|s| s.last_error.clone())
        )));
    }
    client
        .delete(&path)
        .map_err(|e| Error::Other(format!("DELETE {path}: {e}")))?;
    poll(
        &format!("app {name}'s container to go"),
        Duration::from_secs(60),
        || {
            let left = stack.containers().map_err(|e| e.to_string())?;
            if left.iter().any(|c| c.app == name) {
                Err(format!("{} containers", left.len()))
            } else {
                Ok(())
            }
        },
    )?;
    Ok((took, view))
}

/// `docker run -d` of the sleeper image: the CLI's wall time; the container is removed after.
fn docker_run_once() -> Result<f64> {
    let label = bench_label();
    let t = Instant::now();
    let out = Command::new("docker")
        .args(["run", "-d", "--label"])
        .arg(format!("{TEST_LABEL}=1"))
        .arg("--label")
        .arg(&label)
        .arg(SLEEPER_IMAGE)
        .output()
        .map_err(|e| Error::command("docker run -d", e.to_string()))?;
    let took = ms(t.elapsed());
    if !out.status.success() {
        return Err(Error::command(
            "docker run -d",
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let rm = Command::new("docker")
        .args(["rm", "-f", "-v", &id])
        .output()
        .map_err(|e| Error::command("docker rm -f", e.to_string()))?;
    if !rm.status.success() {
        return Err(Error::command(
            format!("docker rm -f {id}"),
            String::from_utf8_lossy(&rm.stderr).trim().to_owned(),
        ));
    }
    Ok(took)
}

/// The shipped settings, but engine refusals are never remembered.
fn never_learning(o: &mut AgentOptions) {
    production(o);
    o.env.push((
        "ODAC_AGENT__APPS__REFUSAL_MEMORY_SECS".to_owned(),
        "0".to_owned(),
    ));
}

/// Plain starts and engine fallbacks, alternating on one fixture agent set up by `options`,
/// after one warm-up of each.
fn fallbacks(runs: usize, options: fn(&mut AgentOptions)) -> Result<(Vec<f64>, Vec<f64>)> {
    let (mut plain, mut fallback) = (Vec::new(), Vec::new());
    let stack = Stack::builder("bench-fallback")
        .host_root(fixture_host("intel-i915-igpu"))
        .agent_options(options)
        .start()?;
    let host = stack.wait_connected(Duration::from_secs(60))?;
    let gpu = json!({"runtime": "intel", "optional": true});
    for i in 0..=runs {
        let (p, _) = apply_once(&stack, &host, &format!("pl{i:02}"), None)?;
        let (f, view) = apply_once(&stack, &host, &format!("fb{i:02}"), Some(&gpu))?;
        let tier = view.fallback.as_ref().map(|f| f.tier);
        if tier != Some(FallbackTier::Engine) {
            return Err(Error::Other(format!(
                "app fb{i:02} ran without the engine fallback: {:?}",
                view.fallback
            )));
        }
        println!("fallback run {i}/{runs}: plain start {p:.0} ms | engine fallback {f:.0} ms");
        if i > 0 {
            plain.push(p);
            fallback.push(f);
        }
    }
    Ok((plain, fallback))
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Option<Table>> {
    if !docker_or_skip("apply")? {
        return Ok(None);
    }
    ensure_sleeper_image()?;
    let runs = opts.pick(10, 2);
    let _cleanup = LabelCleanup::new(bench_label());
    let mut t = Table::new(
        format!("Apply latency — {runs} runs each, alternating, after one warm-up"),
        "docker run -d / plain start",
    );

    let (mut agent, mut docker) = (Vec::new(), Vec::new());
    {
        let stack = Stack::builder("bench-apply")
            .agent_options(production)
            .start()?;
        let host = stack.wait_connected(Duration::from_secs(60))?;
        for i in 0..=runs {
            let (a, _) = apply_once(&stack, &host, &format!("ap{i:02}"), None)?;
            let d = docker_run_once()?;
            println!(
                "apply run {i}/{runs}: control plane → running {a:.0} ms | docker run -d {d:.0} ms"
            );
            if i > 0 {
                agent.push(a);
                docker.push(d);
            }
        }
    }
    t.push(
        Row::new("create → running (control plane)", Unit::Ms, agent)
            .baseline(docker)
            .target(Target::RatioAtMost(1.15)),
    );

    if Path::new("/dev/dri/renderD129").exists() {
        t.note("engine fallback not measured: this machine has /dev/dri/renderD129, so the engine would not refuse it");
        return Ok(Some(t));
    }
    // The shipped agent learns the refusal on the warm-up, so its measured fallbacks are
    // repeated ones; an agent that never remembers a refusal pays the engine's failed start
    // on every fallback (the first one on a host).
    for (row, options, target) in [
        (
            "engine fallback → CPU, first (refusal not yet learned)",
            never_learning as fn(&mut AgentOptions),
            1.3,
        ),
        (
            "engine fallback → CPU, repeated (refusal learned)",
            production as fn(&mut AgentOptions),
            1.05,
        ),
    ] {
        let (plain, fallback) = fallbacks(runs, options)?;
        t.push(
            Row::new(row, Unit::Ms, fallback)
                .baseline(plain)
                .target(Target::RatioAtMost(target)),
        );
    }
    t.note("baseline of the first row: `docker run -d` (CLI wall time); of the fallback rows: a plain app on the same fixture agent (`intel-i915-igpu`)");
    t.note("first: an agent with `apps.refusal_memory_secs = 0` (every fallback asks the engine, as the first one on a host does); repeated: the shipped agent, which learned the refusal on the warm-up");
    t.note(format!(
        "the control plane is polled every {} ms: ±{} ms resolution",
        POLL.as_millis(),
        POLL.as_millis()
    ));
    Ok(Some(t))
}
