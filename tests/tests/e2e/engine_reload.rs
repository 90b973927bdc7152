//! An engine change reaches the control plane in seconds, not at the next periodic read: the
//! whole agent in this process (`run_with` on the [`FakeEngine`]) against a real `odac-sim`,
//! with a one-hour backstop, so the engine's capabilities are otherwise read again only
//! hourly. A daemon `reload` (new runtimes configured) and an engine restart (the event stream
//! closed, then resubscribed) each make the agent rescan: the new engine version shows at the
//! simulator within the generous bound.

use std::sync::Arc;
use std::time::Duration;

use odac_e2e::in_process::InProcessAgent;
use odac_e2e::poll::poll;
use odac_e2e::sim::Sim;
use odac_host::engine::{EngineCapabilities, EngineEvent, FakeEngine};

const TOKEN: &str = "tok-engine-reload-7Qp2";

fn caps(version: &str) -> EngineCapabilities {
    let info = serde_json::json!({
        "ServerVersion": version,
        "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
        "DefaultRuntime": "runc",
    });
    EngineCapabilities::from_info_json(&info, Some("1.41".into()))
}

fn engine_at_sim(sim: &Sim, want: &str) {
    poll(
        &format!("the simulator to show the engine as {want}"),
        Duration::from_secs(30),
        || {
            let hosts = sim.hosts().map_err(|e| e.to_string())?;
            match hosts.as_slice() {
                [h] if h.connected && h.engine == want => Ok(()),
                other => Err(format!(
                    "{:?}",
                    other.iter().map(|h| &h.engine).collect::<Vec<_>>()
                )),
            }
        },
    )
    .unwrap();
}

#[test]
fn a_daemon_reload_and_an_engine_restart_reach_the_control_plane_in_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(dir.path(), TOKEN).unwrap();
    let engine = Arc::new(FakeEngine::new());
    let agent = InProcessAgent::start(
        &sim,
        &dir.path().join("agent"),
        (TOKEN, "reload"),
        engine.clone(),
        &[("ODAC_AGENT__APPS__BACKSTOP_SECS", "3600")],
    )
    .unwrap();
    engine_at_sim(&sim, "docker 20.10.24+dfsg1");
    poll("the event stream", Duration::from_secs(30), || {
        (engine.event_subscriptions() >= 1)
            .then_some(())
            .ok_or_else(|| "no subscription yet".to_owned())
    })
    .unwrap();

    // the toolkit configured a runtime and the daemon reloaded
    engine.set_capabilities(caps("24.0.7"));
    engine.emit(EngineEvent::reload(0));
    engine_at_sim(&sim, "docker 24.0.7");

    // the engine restarts: its stream closes, the agent resubscribes and rescans
    engine.set_capabilities(caps("25.0.1"));
    engine.close_events();
    engine_at_sim(&sim, "docker 25.0.1");
    assert!(engine.event_subscriptions() >= 2);

    agent.stop().unwrap();
}
