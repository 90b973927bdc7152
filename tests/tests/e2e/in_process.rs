//! The whole agent in this process: `odac_agent::run::run_with` on the in-memory
//! [`FakeEngine`] against a real `odac-sim`. An app created through the simulator's API is
//! delivered over the uplink, created and started on the fake by the app manager, and its
//! `running` status comes back to the simulator — no Docker engine involved.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::config::Config;
use odac_agent::engine::{FakeEngine, Op};
use odac_e2e::agent::AgentOptions;
use odac_e2e::poll::poll;
use odac_e2e::sim::Sim;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "tok-in-process-3kX9";
const IMAGE: &str = "example.test/web:1";

#[test]
fn the_agent_runs_in_process_against_the_fake_engine() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(dir.path(), TOKEN).unwrap();

    let home = dir.path().join("agent");
    let state = home.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let token = home.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let options = AgentOptions::new(sim.agents_url(), Some(sim.ca_path()), TOKEN, "inproc");
    let file = home.join("agent.toml");
    std::fs::write(&file, options.toml(&state, &token)).unwrap();
    let lock_dir = home.join("locks");
    let env = [(
        "ODAC_AGENT__APPS__LOCK_DIR".to_owned(),
        lock_dir.to_string_lossy().into_owned(),
    )];
    let config = Config::load_with_env(Some(&file), env).unwrap();

    let engine = Arc::new(FakeEngine::new());
    engine.add_image(IMAGE);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let agent = runtime.spawn(odac_agent::run::run_with(
        config,
        engine.clone(),
        shutdown.clone(),
    ));

    poll(
        "the agent's host to be connected",
        Duration::from_secs(60),
        || {
            if agent.is_finished() {
                return Ok(());
            }
            let hosts = sim.hosts().map_err(|e| e.to_string())?;
            match hosts.as_slice() {
                [h] if h.connected => Ok(()),
                other => Err(format!("{} host(s), none connected", other.len())),
            }
        },
    )
    .unwrap();
    assert!(!agent.is_finished(), "the agent ended early: {agent:?}");
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

    shutdown.cancel();
    let result = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), agent).await })
        .expect("the agent stops within 10 s of the shutdown")
        .expect("the agent task did not panic");
    assert!(result.is_ok(), "{result:?}");
}
