//! A spec whose host-access fields break a rule, sent by a control plane that did not check
//! them: the agent decodes the `desired_state` frame (no `error` answer, no resync), fails that
//! app alone with `policy_denied` naming the field, and runs the other app with the host
//! access it asked for; every capability granted is in the agent's info log. The uplink and
//! the real app manager run on the fake engine against an in-process control plane.

use crate::uplink_support;

use std::sync::Arc;
use std::time::Duration;

use odac_agent::run::ManagerControl;
use odac_agent::uplink::Uplink;
use odac_protocol::{AgentMessage, AppState, Reason};
use serde_json::json;
use tokio::sync::watch;
use uplink_support::*;

#[tokio::test]
async fn a_bad_spec_over_the_wire_fails_that_app_alone() {
    let (capture, _guard) = capture_logs(tracing::Level::INFO);

    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&["busybox:1.36"]);
    let manager = manager_on(&fake, dir.path(), "hacc");
    let pki = Pki::new();
    let server = TestServer::start(&pki, Behaviour::default()).await;
    let (_inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let config = uplink_config(&pki, &server.url(), TOKEN);
    let uplink = Uplink::new(config, Arc::new(ManagerControl(manager.clone())), inv_rx);
    let (shutdown, task) = spawn_welcomed(uplink, &server, Duration::from_secs(10)).await;

    let frame = json!({"type": "desired_state", "seq": 1, "generation": 1, "apps": [
        {"name": "web", "image": "busybox:1.36", "shm_size": "1g", "caps": ["cap_net_bind_service"],
         "sysctls": {"net.core.somaxconn": 1024}},
        {"name": "admin", "image": "busybox:1.36", "caps": ["SYS_ADMIN"]}
    ]});
    server.send_text(frame.to_string());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (web, admin) = loop {
        manager.reconcile_once().await;
        let view = server.snapshot().view;
        if let (Some(web), Some(admin)) = (view.get("web"), view.get("admin"))
            && web.state == AppState::Running
            && admin.state == AppState::Failed
        {
            break (web.clone(), admin.clone());
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "web running and admin failed: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = server.snapshot();
    assert!(
        log.errors().is_empty(),
        "the frame was taken: {:?}",
        log.errors()
    );
    assert!(
        !log.messages
            .iter()
            .any(|(_, m)| matches!(m, AgentMessage::Resync(_))),
        "no resync"
    );
    assert!(log.acks().contains(&1), "the desired state was acked");

    assert_eq!(
        admin.gpu.fallback.as_ref().map(|f| f.reason),
        Some(Reason::PolicyDenied)
    );
    let error = admin.last_error.clone().unwrap_or_default();
    assert!(
        error.starts_with("policy_denied: caps[0]: \"SYS_ADMIN\" is not allowed: caps may only be NET_ADMIN, NET_RAW, NET_BIND_SERVICE, IPC_LOCK, SYS_NICE"),
        "{error}"
    );
    assert_eq!(admin.container_id, None);

    let spec = fake
        .spec_of(web.container_id.as_deref().unwrap())
        .expect("web's container");
    assert_eq!(spec.shm_size, Some(1 << 30));
    assert_eq!(spec.cap_add, vec!["NET_BIND_SERVICE".to_owned()]);
    assert_eq!(spec.sysctls["net.core.somaxconn"], "1024");
    assert_eq!(fake.container_ids().len(), 1, "nothing created for admin");

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let grants: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("granting a capability"))
        .collect();
    assert!(
        !grants.is_empty() && grants.iter().all(|l| l.contains("INFO")),
        "{logs}"
    );
    assert!(
        grants
            .iter()
            .all(|l| l.contains("app=web") && l.contains("capability=NET_BIND_SERVICE")),
        "{grants:?}"
    );
    shutdown.cancel();
    task.await.unwrap();
}
