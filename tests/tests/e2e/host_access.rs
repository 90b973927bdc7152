//! ODAC's host-access fields end to end, with the whole agent in this process on the in-memory
//! [`FakeEngine`] against a real `odac-sim`: ODAC's `shmSize`, `caps` and `sysctls` given to
//! `POST /api/apps` reach the engine's create (`/dev/shm` in bytes, `NET_ADMIN`, the sysctl as
//! `"1"`); `caps: ["SYS_ADMIN"]` is refused naming `caps[0]` and the allowlist (a 400:
//! `simulator/tests/integration/api.rs`); a device the agent's `[apps.policy] allowed_device_prefixes`
//! does not allow fails that app with `policy_denied` naming the key, while the other app runs.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::config::Config;
use odac_agent::engine::FakeEngine;
use odac_e2e::agent::AgentOptions;
use odac_e2e::poll::poll;
use odac_e2e::sim::Sim;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "tok-host-access-8Zr2";
const IMAGE: &str = "example.test/media:1";

#[test]
fn host_access_from_the_api_reaches_the_engine_or_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(dir.path(), TOKEN).unwrap();

    let home = dir.path().join("agent");
    let state = home.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let token = home.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let options = AgentOptions::new(sim.agents_url(), Some(sim.ca_path()), TOKEN, "hostacc");
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
    let refused = sim
        .create_app(&json!({"name": "admin", "image": IMAGE, "caps": ["SYS_ADMIN"]}))
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("caps[0]")
            && refused.contains("NET_ADMIN, NET_RAW, NET_BIND_SERVICE, IPC_LOCK, SYS_NICE"),
        "{refused}"
    );
    sim.create_app(&json!({"name": "media", "image": IMAGE, "shmSize": "512m",
        "caps": ["net_admin"], "sysctls": {"net.ipv4.ip_forward": true}}))
        .unwrap();
    sim.create_app(&json!({"name": "coral", "image": IMAGE, "devices": ["/dev/apex_0"]}))
        .unwrap();
    let (media, coral) = poll(
        "media running and coral failed",
        Duration::from_secs(60),
        || {
            let media = sim.app("media").map_err(|e| e.to_string())?;
            let coral = sim.app("coral").map_err(|e| e.to_string())?;
            match (media, coral) {
                (Some(m), Some(c)) if m.state == "running" && c.state == "failed" => Ok((m, c)),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .unwrap();
    let id = media
        .status
        .and_then(|s| s.container_id)
        .expect("media's container");
    let spec = engine.spec_of(&id).expect("created on the fake");
    assert_eq!(spec.shm_size, Some(536_870_912));
    assert_eq!(spec.cap_add, vec!["NET_ADMIN".to_owned()]);
    assert_eq!(spec.sysctls["net.ipv4.ip_forward"], "1");
    let error = coral.status.and_then(|s| s.last_error).unwrap_or_default();
    assert!(
        error.contains("devices[0]") && error.contains("apps.policy.allowed_device_prefixes"),
        "{error}"
    );
    assert_eq!(engine.container_ids().len(), 1, "nothing created for coral");

    shutdown.cancel();
    let result = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), agent).await })
        .expect("the agent stops within 10 s of the shutdown")
        .expect("the agent task did not panic");
    assert!(result.is_ok(), "{result:?}");
}
