//! An unacked `removed` status outlives an agent restart (PROTOCOL.md 4.4): an app is removed
//! while the control plane withholds acks, the agent (uplink and app manager, on the fake
//! engine) is stopped before any ack and started again on the same state dir, and the control
//! plane receives the `removed` status again with the same `seq`, before the fresh inventory;
//! once acked it is not resent after a further restart.

use crate::uplink_support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::AppManager;
use odac_agent::run::ManagerControl;
use odac_agent::uplink::Uplink;
use odac_host::engine::FakeEngine;
use odac_protocol::{Ack, AgentMessage, AppState, ControlMessage};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uplink_support::*;

struct Agent {
    manager: AppManager,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

fn start(dir: &Path, fake: &Arc<FakeEngine>, pki: &Pki, server: &TestServer) -> Agent {
    let manager = manager_on(fake, dir, "rmrestart");
    let (inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let mut config = uplink_config(pki, &server.url(), TOKEN);
    config.agent_id = "agt_removal".into();
    config.state_dir = Some(dir.to_path_buf());
    let uplink = Uplink::new(config, Arc::new(ManagerControl(manager.clone())), inv_rx);
    let shutdown = CancellationToken::new();
    let run = uplink.run(shutdown.clone());
    let task = tokio::spawn(async move {
        let _keep = inv_tx;
        run.await;
    });
    Agent {
        manager,
        shutdown,
        task,
    }
}

impl Agent {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }
}

/// Runs app-manager passes until the agent has sent on `conn` a message `pick` accepts.
async fn wait_sent<T>(
    server: &TestServer,
    agent: &Agent,
    conn: usize,
    pick: impl Fn(&AgentMessage) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(t) = server.snapshot().of_conn(conn).iter().find_map(&pick) {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "conn {conn}: not sent; got {:?}",
            server.snapshot().of_conn(conn)
        );
        agent.manager.reconcile_once().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn status_of(m: &AgentMessage, name: &str, state: AppState) -> Option<u64> {
    match m {
        AgentMessage::AppStatus(r) if r.status.name == name && r.status.state == state => {
            Some(r.seq)
        }
        _ => None,
    }
}

async fn welcomed(server: &TestServer, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while server.snapshot().welcomed.len() < n {
        assert!(tokio::time::Instant::now() < deadline, "no session {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_unacked_removal_is_resent_with_its_seq_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&["busybox:1.36"]);
    let pki = Pki::new();
    // the control plane never acks a report on its own
    let server = unacking_server(&pki).await;

    let agent = start(dir.path(), &fake, &pki, &server);
    welcomed(&server, 1).await;
    server.send_text(r#"{"type":"desired_state","seq":1,"generation":1,"apps":[{"name":"web","image":"busybox:1.36","command":["httpd","-f"]}]}"#);
    wait_sent(&server, &agent, 1, |m| {
        status_of(m, "web", AppState::Running)
    })
    .await;
    server.send_text(r#"{"type":"app_delete","seq":2,"generation":2,"name":"web"}"#);
    let removed_seq = wait_sent(&server, &agent, 1, |m| {
        status_of(m, "web", AppState::Removed)
    })
    .await;
    agent.stop().await;

    // restarted on the same state dir: the removal comes again, same seq, before the inventory
    let agent = start(dir.path(), &fake, &pki, &server);
    welcomed(&server, 2).await;
    server.send_text(r#"{"type":"desired_state","seq":1,"generation":2,"apps":[]}"#);
    let again = wait_sent(&server, &agent, 2, |m| {
        status_of(m, "web", AppState::Removed)
    })
    .await;
    assert_eq!(again, removed_seq);
    let sent = server.snapshot().of_conn(2);
    let inventory_seq = sent
        .iter()
        .find_map(|m| match m {
            AgentMessage::Inventory(r) => Some(r.seq),
            _ => None,
        })
        .unwrap();
    assert!(inventory_seq > removed_seq, "{sent:?}");
    let web: Vec<_> = sent
        .iter()
        .filter(|m| matches!(m, AgentMessage::AppStatus(r) if r.status.name == "web"))
        .collect();
    assert_eq!(web.len(), 1, "one status of web: {web:?}");
    server.send_control(&ControlMessage::Ack(Ack { seq: removed_seq }));
    let file = dir
        .path()
        .join(odac_agent::uplink::removal_log::REMOVALS_FILE);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&file).unwrap().contains("\"web\"") {
        assert!(tokio::time::Instant::now() < deadline, "ack not recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    agent.stop().await;

    // acked: a further restart does not send it again
    let agent = start(dir.path(), &fake, &pki, &server);
    welcomed(&server, 3).await;
    server.send_text(r#"{"type":"desired_state","seq":1,"generation":2,"apps":[]}"#);
    wait_sent(&server, &agent, 3, |m| match m {
        AgentMessage::Inventory(r) => Some(r.seq),
        _ => None,
    })
    .await;
    assert!(
        !server
            .snapshot()
            .of_conn(3)
            .iter()
            .any(|m| matches!(m, AgentMessage::AppStatus(r) if r.status.name == "web")),
        "{:?}",
        server.snapshot().of_conn(3)
    );
    agent.stop().await;
}
