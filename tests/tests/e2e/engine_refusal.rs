//! Engine refusal at runtime: the host's pre-flight says an Intel GPU can be passed (the
//! `intel-i915-igpu` fixture, read through the agent's `host_root`, has `/dev/dri/renderD129`)
//! but the real engine cannot open that node on this machine and refuses the device. The
//! optional app must end up running on the CPU with `engine_rejected` and the engine's own
//! words, in exactly one container, without churn.

use std::time::{Duration, Instant};

use odac_e2e::docker::inspect;
use odac_e2e::figures::{figure, secs};
use odac_e2e::poll::holds_for;
use odac_e2e::require_docker;
use odac_e2e::stack::{Stack, fixture_host};
use odac_protocol::{FallbackTier, Reason};
use serde_json::json;

const SCENARIO: &str = "engine-refusal";

#[test]
fn render_node_the_engine_cannot_open_falls_back_to_cpu_with_engine_rejected() {
    require_docker!(SCENARIO);
    let node = fixture_host("intel-i915-igpu").join("dev/dri/renderD129");
    assert!(node.exists(), "the fixture has the render node");
    assert!(
        !std::path::Path::new("/dev/dri/renderD129").exists(),
        "this scenario needs a machine without /dev/dri/renderD129"
    );
    let t0 = Instant::now();
    let stack = Stack::on_fixture_host(SCENARIO, "intel-i915-igpu").unwrap();
    let hosts = stack.sim.hosts().unwrap();
    assert!(
        hosts[0]
            .schedulable
            .iter()
            .any(|v| v.to_string() == "intel"),
        "the pre-flight must see the intel gpu as usable: {:?}",
        hosts[0].schedulable
    );

    let mut body = Stack::app_body("igpu");
    body["gpu"] = json!({"runtime": "intel", "optional": true});
    let t = Instant::now();
    stack.sim.create_app(&body).unwrap();
    let app = stack
        .wait_app("igpu", Duration::from_secs(60), "running on the cpu", |a| {
            a.state == "running" && a.fallback.is_some()
        })
        .unwrap();
    figure(SCENARIO, "create_to_running_on_cpu", secs(t.elapsed()));
    let fallback = app.fallback.clone().unwrap();
    assert_eq!(fallback.tier, FallbackTier::Engine, "{fallback:?}");
    assert_eq!(fallback.reason, Reason::EngineRejected);
    let detail = fallback.detail.clone().unwrap_or_default();
    assert!(
        detail.contains("renderD129") || detail.contains("device"),
        "the engine's words: {detail:?}"
    );
    assert!(app.attached.is_none());
    assert_eq!(
        app.requested,
        Some(serde_json::from_value(json!({"runtime": "intel", "optional": true})).unwrap())
    );
    figure(SCENARIO, "engine_words", format!("{detail:?}"));

    // exactly one container, running, without the device; and it stays that way
    let cs = stack.containers().unwrap();
    assert_eq!(cs.len(), 1, "{cs:?}");
    let ins = inspect(&cs[0].id).unwrap();
    assert_eq!(ins["State"]["Running"], json!(true));
    let devices = &ins["HostConfig"]["Devices"];
    assert!(
        devices.is_null() || devices.as_array().is_some_and(Vec::is_empty),
        "{devices}"
    );
    let id = cs[0].id.clone();
    holds_for(
        "exactly one container, the same one",
        Duration::from_secs(3),
        || {
            let cs = stack.containers().map_err(|e| e.to_string())?;
            match cs.as_slice() {
                [c] if c.id == id && c.state == "running" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .unwrap();
    stack.wait_converged(1, Duration::from_secs(20)).unwrap();
    figure(SCENARIO, "containers", cs.len());
    figure(SCENARIO, "total", secs(t0.elapsed()));
}
