//! ODAC's host-access fields end to end, with the whole agent in this process on the in-memory
//! [`FakeEngine`](odac_host::engine::FakeEngine) against a real `odac-sim`: ODAC's `shmSize`, `caps` and `sysctls` given to
//! `POST /api/apps` reach the engine's create (`/dev/shm` in bytes, `NET_ADMIN`, the sysctl as
//! `"1"`); `caps: ["SYS_ADMIN"]` is refused naming `caps[0]` and the allowlist (a 400:
//! `simulator/tests/integration/api.rs`); a device the agent's `[apps.policy] allowed_device_prefixes`
//! does not allow fails that app with `policy_denied` naming the key, while the other app runs.

use std::time::Duration;

use odac_e2e::in_process::InProcessAgent;
use odac_e2e::poll::poll;
use odac_e2e::sim::Sim;
use serde_json::json;

const TOKEN: &str = "tok-host-access-8Zr2";
const IMAGE: &str = "example.test/media:1";

#[test]
fn host_access_from_the_api_reaches_the_engine_or_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(dir.path(), TOKEN).unwrap();

    let (agent, engine) =
        InProcessAgent::start_connected(&sim, &dir.path().join("agent"), (TOKEN, "hostacc"), IMAGE)
            .unwrap();
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

    agent.stop().unwrap();
}
