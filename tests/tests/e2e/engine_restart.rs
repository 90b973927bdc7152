//! The agent across a restart of its engine, on a real one: the GPU lab's private dockerd
//! (`odac-sim gpu-lab engine stop|start`; the machine's own dockerd is never touched). The
//! agent runs with a one-hour backstop, so only its event stream (or, while the stream is
//! down, its polling) can make it see a change soon. With an app running: the lab's engine
//! stops (its containers stop with it); the agent logs the outage and `odac-agent doctor`'s
//! `events` line says the stream is down and the agent polls. The engine starts again: the
//! agent resubscribes (log line, doctor `ok` again), and the pass that follows finds the app's
//! container stopped and starts it, reported to the control plane. A `docker kill` on the lab's
//! engine then reaches the control plane through the resubscribed stream, long before the
//! backstop. Figures: engine back → resubscribed, engine back → app running again, kill →
//! the crash reported.

use std::process::Command;
use std::time::{Duration, Instant};

use odac_e2e::bins::{AGENT, bin};
use odac_e2e::figures::{figure, secs};
use odac_e2e::gpu_lab::Lab;
use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use odac_simulator::state::views::AppView;
use serde_json::json;

const SCENARIO: &str = "engine-restart";
const WAIT: Duration = Duration::from_secs(90);
/// The agent's backstop: a full pass only hourly unless something else wakes it.
const BACKSTOP_SECS: &str = "3600";

/// `odac-agent doctor`'s `events` line for the stack's agent (as its operator would run it).
fn doctor_events(stack: &Stack, lab: &Lab) -> Result<String, String> {
    let agent = stack.agent().map_err(|e| e.to_string())?;
    let out = Command::new(bin(AGENT).map_err(|e| e.to_string())?)
        .arg("doctor")
        .arg("--config")
        .arg(agent.config_path())
        .arg("--root")
        .arg(&lab.host_root)
        .args(["--docker-host", &lab.docker_host])
        .envs(agent.options().env.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|e| format!("cannot run odac-agent doctor: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.contains("] events: "))
        .map(str::to_owned)
        .ok_or(text)
}

fn wait_doctor(stack: &Stack, lab: &Lab, what: &str, want: &str) -> String {
    poll(what, WAIT, || {
        let line = doctor_events(stack, lab)?;
        if line.contains(want) {
            Ok(line)
        } else {
            Err(line)
        }
    })
    .unwrap()
}

fn container(a: &AppView) -> (String, u32) {
    let s = a.status.as_ref().expect("a status");
    (
        s.container_id.clone().expect("a container id"),
        s.restart_count,
    )
}

/// Whether the lab's engine says container `id` runs.
fn running_on_lab(lab: &Lab, id: &str) -> bool {
    lab.inspect(id)
        .is_ok_and(|v| v["State"]["Running"] == json!(true))
}

#[test]
fn after_an_engine_restart_the_agent_resubscribes_runs_a_full_pass_and_sees_a_kill_at_once() {
    require_docker!(SCENARIO);
    let mut stack = Stack::builder(SCENARIO).no_agent().start().unwrap();
    let lab = Lab::start_for(&mut stack, "nvidia:1", &[]).unwrap();
    stack
        .start_agent_connected(&[("ODAC_AGENT__APPS__BACKSTOP_SECS", BACKSTOP_SECS)])
        .unwrap();
    stack
        .sim
        .create_app(&json!({"name": "web", "image": lab.image}))
        .unwrap();
    let web = stack
        .wait_app("web", WAIT, "running", |a| a.state == "running")
        .unwrap();
    let (first_id, _) = container(&web);
    assert!(running_on_lab(&lab, &first_id));
    let live = wait_doctor(&stack, &lab, "doctor: events live", "[ ok ] events: ");
    println!("before: {live}");

    // the lab's engine stops (SIGTERM to its dockerd): the agent notices the outage
    let mark = stack.agent().unwrap().process().unwrap().mark();
    let said = lab.engine("stop").unwrap();
    assert_eq!(said, "engine stopped");
    let stopped = Instant::now();
    let down = stack
        .agent()
        .unwrap()
        .process()
        .unwrap()
        .wait_for_line_after(mark, "engine event stream down", WAIT)
        .unwrap();
    println!("agent: {down}");
    let warn = wait_doctor(
        &stack,
        &lab,
        "doctor: events down",
        "[warn] events: the engine's event stream is down since",
    );
    assert!(warn.contains("polls the engine every"), "{warn}");
    println!("during the outage: {warn}");
    figure(
        SCENARIO,
        "engine_stop_to_doctor_down",
        secs(stopped.elapsed()),
    );

    // it starts again: resubscribed, and the pass after it starts the app's stopped container
    let mark = stack.agent().unwrap().process().unwrap().mark();
    let said = lab.engine("start").unwrap();
    assert!(said.starts_with("engine running "), "{said}");
    let back = Instant::now();
    stack
        .agent()
        .unwrap()
        .process()
        .unwrap()
        .wait_for_line_after(mark, "engine event stream resubscribed", WAIT)
        .unwrap();
    figure(
        SCENARIO,
        "engine_back_to_resubscribed",
        secs(back.elapsed()),
    );
    let web = stack
        .wait_app("web", WAIT, "running again on the restarted engine", |a| {
            a.state == "running"
                && a.status
                    .as_ref()
                    .and_then(|s| s.container_id.as_deref())
                    .is_some_and(|id| running_on_lab(&lab, id))
        })
        .unwrap();
    figure(SCENARIO, "engine_back_to_app_running", secs(back.elapsed()));
    let (id, restarts) = container(&web);
    println!("web after the restart: container {id}, restart_count {restarts}");
    let ok = wait_doctor(&stack, &lab, "doctor: events live again", "[ ok ] events: ");
    println!("after: {ok}");

    // the stream is live again: a kill is reported at once, not at the hourly backstop
    let mark = stack.agent().unwrap().process().unwrap().mark();
    lab.docker(&["kill", &id]).unwrap();
    let killed = Instant::now();
    let web = stack
        .wait_app("web", WAIT, "the kill reported", |a| {
            a.status.as_ref().is_some_and(|s| {
                s.restart_count > restarts || s.container_id.as_deref() != Some(id.as_str())
            })
        })
        .unwrap();
    figure(SCENARIO, "kill_to_status", secs(killed.elapsed()));
    println!("web after the kill: {:?}", web.status);
    let lines = stack.agent().unwrap().process().unwrap().lines();
    assert!(
        !lines[mark..]
            .iter()
            .any(|l| l.contains("engine event stream down")),
        "the kill was seen through a live stream, not by polling"
    );

    drop(stack.agent.take());
    let took = lab.stop().unwrap();
    figure(SCENARIO, "lab_stop", secs(took));
    let main = stack.containers().unwrap();
    assert!(main.is_empty(), "nothing on the main engine: {main:?}");
}
