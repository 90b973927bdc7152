//! Nothing that matters is lost: a control plane killed while 50 status changes are unacked,
//! with more changes made while it is down, and restarted on the same address ends up with
//! every app's final status, and its view equals the agent's.

use crate::uplink_support;

use std::sync::Arc;
use std::time::Duration;

use odac_agent::uplink::{AppControl, Uplink};
use odac_protocol::{AgentMessage, AppState};
use tokio::sync::watch;
use uplink_support::*;

const STATES: [AppState; 5] = [
    AppState::Pending,
    AppState::Creating,
    AppState::Running,
    AppState::Restarting,
    AppState::CrashLoop,
];

#[tokio::test(start_paused = true)]
async fn a_killed_and_restarted_control_plane_gets_every_final_status() {
    let pki = Pki::new();
    let server = unacking_server(&pki).await;
    let addr = server.addr;
    let apps = FakeApps::new();
    let (_inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(4))));
    let uplink = Uplink::new(
        uplink_config(&pki, &server.url(), TOKEN),
        apps.clone() as Arc<dyn AppControl>,
        inv_rx,
    );
    let outbox = uplink.outbox();
    let (shutdown, task) = spawn_welcomed(uplink, &server, Duration::from_secs(5)).await;

    // 50 changes over 10 apps while connected; the control plane acks none of them
    for round in 0..5u32 {
        for app in 0..10 {
            apps.set_status(status(&format!("app{app}"), STATES[round as usize], round));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    wait_for(&server.log, Duration::from_secs(5), "the 50 changes", |l| {
        l.messages
            .iter()
            .filter(|(_, m)| matches!(m, AgentMessage::AppStatus(_)))
            .count()
            >= 10
    })
    .await;
    let pending = odac_agent::uplink::Outbox::pending(&outbox.lock().unwrap());
    assert_eq!(
        pending, 11,
        "10 coalesced statuses + the inventory await an ack"
    );

    let first_log = server.kill();
    let seen_before = first_log.lock().unwrap().view.clone();
    assert_eq!(seen_before.len(), 10);

    // more changes while the control plane is down: some apps fail, one is restarted
    tokio::time::sleep(Duration::from_secs(3)).await;
    for app in [1, 4, 7] {
        apps.set_status(status(&format!("app{app}"), AppState::Failed, 9));
    }
    apps.set_status(status("app2", AppState::Running, 5));
    tokio::time::sleep(Duration::from_secs(20)).await;

    let restarted = TestServer::start_on(&pki, addr, Behaviour::default(), None).await;
    wait_for(
        &restarted.log,
        Duration::from_secs(300),
        "every final status",
        |l| {
            l.view.len() == 10
                && l.view
                    .get("app1")
                    .is_some_and(|s| s.state == AppState::Failed)
                && l.view.get("app2").is_some_and(|s| s.restart_count == 5)
        },
    )
    .await;
    wait_for(
        &restarted.log,
        Duration::from_secs(5),
        "acks to land",
        |_| odac_agent::uplink::Outbox::pending(&outbox.lock().unwrap()) == 0,
    )
    .await;

    let view = restarted.log.lock().unwrap().view.clone();
    let agent: std::collections::BTreeMap<_, _> = apps
        .statuses()
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    assert_eq!(view, agent, "the control plane's view equals the agent's");
    // the restarted server got the inventory again, first, and nothing twice per app
    let msgs = restarted.log.lock().unwrap().of_conn(1);
    assert_eq!(msgs[0].type_name(), "hello");
    assert_eq!(msgs[1].type_name(), "inventory");
    let statuses = msgs
        .iter()
        .filter(|m| matches!(m, AgentMessage::AppStatus(_)))
        .count();
    assert_eq!(statuses, 10, "coalesced: one status per app");
    shutdown.cancel();
    task.await.unwrap();
}
