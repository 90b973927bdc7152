//! The whole agent in this process: `odac_agent::run::run_with` on the in-memory
//! [`FakeEngine`] against a real `odac-sim`. An app created through the simulator's API is
//! delivered over the uplink, created and started on the fake by the app manager, and its
//! `running` status comes back to the simulator — no Docker engine involved.

use std::time::Duration;

use odac_e2e::in_process::InProcessAgent;
use odac_e2e::poll::poll;
use odac_e2e::sim::Sim;
use odac_host::engine::Op;
use serde_json::json;

const TOKEN: &str = "tok-in-process-3kX9";
const IMAGE: &str = "example.test/web:1";

#[test]
fn the_agent_runs_in_process_against_the_fake_engine() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(dir.path(), TOKEN).unwrap();

    let (agent, engine) =
        InProcessAgent::start_connected(&sim, &dir.path().join("agent"), (TOKEN, "inproc"), IMAGE)
            .unwrap();
    sim.create_app(&json!({"name": "web", "image": IMAGE}))
        .unwrap();
    let app = poll("web running on the fake", Duration::from_secs(60), || {
        let app = sim.app("web").map_err(|e| e.to_string())?;
        match app {
            Some(a) if a.state == "running" => Ok(a),
            other => Err(format!("{other:?}")),
        }
    })
    .unwrap();
    let status = app.status.expect("a running app has the agent's status");
    let id = status.container_id.expect("the status names its container");
    assert!(
        engine.container_ids().contains(&id),
        "the reported container {id} is the fake's: {:?}",
        engine.container_ids()
    );
    assert_eq!(engine.calls_of(Op::Start).len(), 1, "{:?}", engine.calls());

    agent.stop().unwrap();
}
