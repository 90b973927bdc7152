//! The ODAC walk-through with the real binaries: `odac app create` → `odac app gpu NAME
//! --nvidia --optional` → "restart required" → `odac app restart NAME` → `odac app list
//! --json` shows the request kept exactly as sent, nothing attached, the reason, and the app
//! running on the CPU. The host is the `nvidia-driver-no-toolkit` fixture (a GTX 1060 with its
//! driver, no container toolkit) read through the agent's `host_root`, against the real engine.

use std::time::{Duration, Instant};

use odac_e2e::docker::{has_runtime, inspect};
use odac_e2e::figures::{figure, secs};
use odac_e2e::image::SLEEPER_IMAGE;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use serde_json::{Value, json};

const SCENARIO: &str = "walkthrough";

#[test]
fn odac_walkthrough_optional_nvidia_on_a_host_without_toolkit_runs_on_cpu() {
    require_docker!(SCENARIO);
    let t0 = Instant::now();
    let stack = Stack::on_fixture_host(SCENARIO, "nvidia-driver-no-toolkit").unwrap();
    figure(SCENARIO, "agent_connected_after", secs(t0.elapsed()));

    // the fleet view shows the GPU and why it cannot be used
    let hosts = stack.sim.odac_ok(&["host", "list"]).unwrap().stdout;
    assert!(hosts.contains("nvidia"), "{hosts}");
    // when the engine itself has an nvidia runtime the pre-flight passes and the engine refuses
    let expected_reason = if has_runtime("nvidia").unwrap() {
        "engine_rejected"
    } else {
        "no_container_runtime"
    };
    assert!(
        hosts.contains(expected_reason) || expected_reason == "engine_rejected",
        "{hosts}"
    );

    // 1. create, no GPU
    let t = Instant::now();
    let out = stack
        .sim
        .odac_ok(&["app", "create", "-n", "web", "--image", SLEEPER_IMAGE])
        .unwrap();
    assert!(out.stdout.contains("created app web"), "{}", out.stdout);
    let running = stack
        .wait_app("web", Duration::from_secs(60), "running", |a| {
            a.state == "running" && a.status.as_ref().is_some_and(|s| s.container_id.is_some())
        })
        .unwrap();
    figure(SCENARIO, "create_to_running", secs(t.elapsed()));
    let first = running.status.unwrap().container_id.unwrap();

    // 2. ask for an optional NVIDIA GPU: the CLI says a restart is needed
    let out = stack
        .sim
        .odac_ok(&["app", "gpu", "web", "--nvidia", "--optional"])
        .unwrap();
    assert!(
        out.stdout.contains("restart required to apply"),
        "{}",
        out.stdout
    );
    // the agent does not restart on its own; it reports restart_required on the same container
    let pending = stack
        .wait_app("web", Duration::from_secs(30), "restart_required", |a| {
            a.restart_required
        })
        .unwrap();
    assert_eq!(pending.state, "running");
    assert_eq!(
        pending.status.as_ref().and_then(|s| s.container_id.clone()),
        Some(first.clone()),
        "no restart before odac app restart"
    );
    let table = stack.sim.odac_ok(&["app", "list"]).unwrap().stdout;
    println!("{table}");

    // 3. restart
    let t = Instant::now();
    stack.sim.odac_ok(&["app", "restart", "web"]).unwrap();
    let after = stack
        .wait_app(
            "web",
            Duration::from_secs(60),
            "running again with a fallback",
            |a| {
                a.state == "running"
                    && !a.restart_required
                    && a.status
                        .as_ref()
                        .is_some_and(|s| s.container_id.as_ref() != Some(&first))
                    && a.reason.is_some()
            },
        )
        .unwrap();
    figure(SCENARIO, "restart_to_running_on_cpu", secs(t.elapsed()));

    // 4. odac app list --json: the request as sent, nothing attached, the reason, running
    let web = crate::git_source::listed(&stack, "web");
    let sent = json!({"runtime": "nvidia", "optional": true});
    assert_eq!(web["requested"], sent, "the request is kept as sent");
    assert_eq!(
        web["status"]["gpu"]["requested"], sent,
        "the agent echoes it as sent"
    );
    assert_eq!(web["attached"], Value::Null, "nothing attached");
    assert_eq!(web["reason"], json!(expected_reason));
    assert_eq!(web["state"], json!("running"));
    let tier = if expected_reason == "engine_rejected" {
        "engine"
    } else {
        "preflight"
    };
    assert_eq!(web["fallback"]["tier"], json!(tier), "{web}");
    let table = stack.sim.odac_ok(&["app", "list"]).unwrap().stdout;
    println!("{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("web "))
        .expect("a row for web");
    for cell in ["running", "nvidia", expected_reason] {
        assert!(row.contains(cell), "{cell} missing in {row:?}");
    }

    // the engine's side: one container, running, without any device
    let containers = stack.containers().unwrap();
    assert_eq!(containers.len(), 1, "{containers:?}");
    assert_eq!(
        Some(containers[0].id.as_str()),
        after
            .status
            .as_ref()
            .and_then(|s| s.container_id.as_deref())
    );
    let ins = inspect(&containers[0].id).unwrap();
    assert_eq!(ins["State"]["Running"], json!(true));
    let no_devices = |v: &Value| v.is_null() || v.as_array().is_some_and(Vec::is_empty);
    assert!(
        no_devices(&ins["HostConfig"]["DeviceRequests"]),
        "{}",
        ins["HostConfig"]
    );
    assert!(
        no_devices(&ins["HostConfig"]["Devices"]),
        "{}",
        ins["HostConfig"]
    );
    figure(SCENARIO, "reason", expected_reason);
    figure(SCENARIO, "total", secs(t0.elapsed()));
}
