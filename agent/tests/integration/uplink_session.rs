//! Uplink sessions against an in-process TLS WebSocket control plane (paused time): the
//! handshake order, acks only after persistence, bad frames answered while the session goes
//! on, an invalid desired state refused whole with the field named, oversize frames closed
//! with 1009, a silent peer detected by the heartbeat, and a clean 1001 close on shutdown.

use crate::uplink_support;

use std::sync::Arc;
use std::time::Duration;

use odac_agent::uplink::{AppControl, LinkEvent, Uplink};
use odac_protocol::{
    AgentMessage, AppDelete, AppSpec, AppState, AppUpsert, ControlMessage, DesiredStateMessage,
    ErrorCode, MAX_FRAME_BYTES,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uplink_support::*;

struct Harness {
    server: TestServer,
    apps: Arc<FakeApps>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    link: tokio::sync::broadcast::Receiver<LinkEvent>,
    _inv: watch::Sender<Option<Arc<odac_protocol::Inventory>>>,
    _pki: Pki,
}

async fn start(behaviour: Behaviour, apps: Arc<FakeApps>) -> Harness {
    let pki = Pki::new();
    let server = TestServer::start(&pki, behaviour).await;
    let (inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let uplink = Uplink::new(
        uplink_config(&pki, &server.url(), TOKEN),
        apps.clone() as Arc<dyn AppControl>,
        inv_rx,
    );
    let link = uplink.link_events();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(uplink.run(shutdown.clone()));
    Harness {
        server,
        apps,
        shutdown,
        task,
        link,
        _inv: inv_tx,
        _pki: pki,
    }
}

fn desired(seq: u64, generation: u64, names: &[&str]) -> ControlMessage {
    ControlMessage::DesiredState(DesiredStateMessage {
        seq,
        generation,
        apps: names.iter().map(|n| AppSpec::new(*n, "busybox")).collect(),
    })
}

#[tokio::test(start_paused = true)]
async fn hello_then_welcome_then_inventory_then_every_status() {
    let apps = FakeApps::new();
    apps.set_status(status("web", AppState::Running, 0));
    apps.set_status(status("db", AppState::Failed, 2));
    let h = start(Behaviour::default(), apps).await;
    wait_for(&h.server.log, Duration::from_secs(5), "statuses", |l| {
        l.view.len() == 2
    })
    .await;
    let log = h.server.snapshot();
    let types: Vec<_> = log.of_conn(1).iter().map(|m| m.type_name()).collect();
    assert_eq!(types, ["hello", "inventory", "app_status", "app_status"]);
    let hello = &log.hellos()[0];
    assert_eq!(hello.agent_id, "agent-test-1");
    assert_eq!(hello.hostname, "edge-1");
    assert_eq!(hello.protocol_version, odac_protocol::PROTOCOL_VERSION);
    assert_eq!(hello.agent_version, odac_agent::AGENT_VERSION);
    assert_eq!(hello.last_generation, None);
    let seqs: Vec<_> = log
        .of_conn(1)
        .iter()
        .filter_map(AgentMessage::seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3], "every report carries a seq");
    assert_eq!(log.auth_ok, 1);
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn changes_are_acked_only_after_the_app_manager_persisted_them() {
    let apps = FakeApps::new();
    *apps.apply_delay.lock().unwrap() = Duration::from_secs(2);
    let h = start(Behaviour::default(), apps).await;
    wait_for(&h.server.log, Duration::from_secs(5), "welcome", |l| {
        !l.welcomed.is_empty()
    })
    .await;
    h.server.send_control(&desired(10, 1, &["a", "b"]));
    h.server.send_control(&ControlMessage::AppUpsert(AppUpsert {
        seq: 11,
        generation: 2,
        app: AppSpec::new("c", "busybox"),
    }));
    h.server.send_control(&ControlMessage::AppDelete(AppDelete {
        seq: 12,
        generation: 3,
        name: "a".into(),
    }));
    let sent_at = Instant::now();
    wait_for(&h.server.log, Duration::from_secs(30), "three acks", |l| {
        l.acks().len() == 3
    })
    .await;
    assert_eq!(h.server.log.lock().unwrap().acks(), vec![10, 11, 12]);
    // each change took 2 s to persist and they are applied in order
    let persisted = h.apps.persisted_at.lock().unwrap().clone();
    let names: Vec<_> = persisted.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(names, ["desired:1", "upsert:c", "delete:a"]);
    assert!(persisted[2].1 >= sent_at + Duration::from_secs(6));
    let d = h.apps.desired.lock().unwrap().clone().unwrap();
    assert_eq!(d.generation, 3);
    let mut names: Vec<_> = d.apps.iter().map(|a| a.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["b", "c"]);
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn malformed_and_unknown_frames_are_answered_and_the_session_goes_on() {
    let h = start(Behaviour::default(), FakeApps::new()).await;
    wait_for(&h.server.log, Duration::from_secs(5), "welcome", |l| {
        !l.welcomed.is_empty()
    })
    .await;
    h.server.send_text("this is not json");
    h.server.send_text(r#"{"type":"reboot_now","seq":77}"#);
    h.server
        .send(tokio_tungstenite::tungstenite::Message::binary(vec![
            1u8, 2, 3,
        ]));
    h.server.send_control(&desired(5, 1, &["ok"]));
    wait_for(&h.server.log, Duration::from_secs(5), "ack of seq 5", |l| {
        l.acks() == [5]
    })
    .await;
    let log = h.server.snapshot();
    let errors = log.errors();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert_eq!(errors[0].code, ErrorCode::Malformed);
    assert_eq!(errors[1].code, ErrorCode::UnknownType);
    assert!(errors[1].message.contains("reboot_now"));
    assert_eq!(errors[1].ref_seq, Some(77));
    assert_eq!(errors[2].code, ErrorCode::Malformed);
    assert_eq!(log.accepts.len(), 1, "the session was kept");
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_invalid_desired_state_is_refused_whole_naming_the_field_and_the_previous_is_kept() {
    let h = start(Behaviour::default(), FakeApps::new()).await;
    wait_for(&h.server.log, Duration::from_secs(5), "welcome", |l| {
        !l.welcomed.is_empty()
    })
    .await;
    h.server.send_control(&desired(1, 1, &["good"]));
    wait_for(&h.server.log, Duration::from_secs(5), "ack 1", |l| {
        l.acks() == [1]
    })
    .await;
    // second app has a GPU count of 0
    h.server.send_text(
        r#"{"type":"desired_state","seq":2,"generation":2,"apps":[
            {"name":"fine","image":"x"},
            {"name":"bad","image":"x","gpu":{"runtime":"nvidia","count":0}}]}"#,
    );
    wait_for(&h.server.log, Duration::from_secs(5), "error", |l| {
        !l.errors().is_empty()
    })
    .await;
    let err = h.server.log.lock().unwrap().errors()[0].clone();
    assert_eq!(err.code, ErrorCode::Invalid);
    assert_eq!(err.ref_seq, Some(2));
    assert!(
        err.message.starts_with("apps[1].gpu.count: "),
        "<field>: <problem>: {}",
        err.message
    );
    let d = h.apps.desired.lock().unwrap().clone().unwrap();
    assert_eq!(d.generation, 1);
    assert_eq!(d.apps.len(), 1);
    assert_eq!(d.apps[0].name, "good");
    assert_eq!(h.server.log.lock().unwrap().acks(), vec![1]);
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_oversize_frame_is_reported_too_large_closed_with_1009_and_the_agent_reconnects() {
    let h = start(Behaviour::default(), FakeApps::new()).await;
    wait_for(&h.server.log, Duration::from_secs(5), "welcome", |l| {
        !l.welcomed.is_empty()
    })
    .await;
    let big = format!(
        r#"{{"type":"desired_state","seq":1,"generation":1,"apps":[],"pad":"{}"}}"#,
        "x".repeat(MAX_FRAME_BYTES)
    );
    h.server.send_text(big);
    wait_for(&h.server.log, Duration::from_secs(120), "reconnect", |l| {
        l.welcomed.len() == 2
    })
    .await;
    let log = h.server.snapshot();
    assert_eq!(log.closes, vec![(1, 1009)]);
    let errors = log.errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].code, ErrorCode::TooLarge);
    assert!(
        errors[0].message.contains(&MAX_FRAME_BYTES.to_string()),
        "the error names the limit: {}",
        errors[0].message
    );
    assert!(
        h.apps.desired.lock().unwrap().is_none(),
        "the oversize frame was not applied"
    );
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_missing_pong_triggers_a_reconnect_within_three_intervals() {
    let behaviour = Behaviour {
        mute_after_welcome: true,
        ..Behaviour::default()
    };
    let mut h = start(behaviour, FakeApps::new()).await;
    wait_for(&h.server.log, Duration::from_secs(5), "welcome", |l| {
        !l.welcomed.is_empty()
    })
    .await;
    let first = h.server.log.lock().unwrap().welcomed[0];
    h.server.set(|b| b.mute_after_welcome = false);
    // the muted connection is never read again; the agent must give up on it by itself
    wait_for(
        &h.server.log,
        Duration::from_secs(200),
        "second session",
        |l| l.welcomed.len() >= 2,
    )
    .await;
    let second = h.server.log.lock().unwrap().welcomed[1];
    let gap = second - first;
    // pings at 20 s and 40 s unanswered, declared dead at 60 s, then at most 1 s of backoff
    assert!(gap >= Duration::from_secs(60), "{gap:?}");
    assert!(gap <= Duration::from_secs(62), "{gap:?}");
    let mut reason = None;
    while let Ok(ev) = h.link.try_recv() {
        if let LinkEvent::SessionLost { reason: r, .. } = ev {
            reason = Some(r);
        }
    }
    let reason = reason.expect("a lost session");
    assert!(reason.contains("no pong"), "{reason}");
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn pongs_keep_a_quiet_session_alive() {
    let h = start(Behaviour::default(), FakeApps::new()).await;
    wait_for(&h.server.log, Duration::from_secs(5), "welcome", |l| {
        !l.welcomed.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(h.server.log.lock().unwrap().accepts.len(), 1);
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_finishes_the_change_being_persisted_then_closes_with_1001() {
    let apps = FakeApps::new();
    *apps.apply_delay.lock().unwrap() = Duration::from_secs(2);
    let h = start(Behaviour::default(), apps).await;
    wait_for(&h.server.log, Duration::from_secs(5), "welcome", |l| {
        !l.welcomed.is_empty()
    })
    .await;
    h.server.send_control(&desired(9, 4, &["a"]));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let asked = Instant::now();
    h.shutdown.cancel();
    h.task.await.unwrap();
    assert!(
        asked.elapsed() <= Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    wait_for(&h.server.log, Duration::from_secs(2), "close", |l| {
        !l.closes.is_empty()
    })
    .await;
    let log = h.server.snapshot();
    assert_eq!(
        log.acks(),
        vec![9],
        "the persisted change was acked before closing"
    );
    assert_eq!(log.closes, vec![(1, 1001)]);
    assert_eq!(h.apps.generation(), Some(4));
}

#[tokio::test(start_paused = true)]
async fn status_changes_and_inventory_changes_are_pushed_while_connected() {
    let pki = Pki::new();
    let server = TestServer::start(&pki, Behaviour::default()).await;
    let apps = FakeApps::new();
    let (inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let uplink = Uplink::new(
        uplink_config(&pki, &server.url(), TOKEN),
        apps.clone() as Arc<dyn AppControl>,
        inv_rx,
    );
    let events = uplink.events();
    let (shutdown, task) = spawn_welcomed(uplink, &server, Duration::from_secs(5)).await;
    apps.set_status(status("web", AppState::Creating, 0));
    apps.set_status(status("web", AppState::Running, 0));
    // an identical inventory is not resent; a changed one is
    inv_tx.send_replace(Some(Arc::new(inventory(8))));
    inv_tx.send_replace(Some(Arc::new(inventory(16))));
    events.push(
        odac_protocol::EventLevel::Warn,
        Some("web"),
        "gpu fell back to cpu",
    );
    wait_for(&server.log, Duration::from_secs(5), "event", |l| {
        l.messages
            .iter()
            .any(|(_, m)| matches!(m, AgentMessage::Event(_)))
    })
    .await;
    wait_for(&server.log, Duration::from_secs(5), "running", |l| {
        l.view
            .get("web")
            .is_some_and(|s| s.state == AppState::Running)
    })
    .await;
    let log = server.snapshot();
    let cpus: Vec<u32> = log
        .messages
        .iter()
        .filter_map(|(_, m)| match m {
            AgentMessage::Inventory(r) => Some(r.inventory.host.cpus),
            _ => None,
        })
        .collect();
    assert_eq!(cpus, vec![8, 16]);
    shutdown.cancel();
    task.await.unwrap();
}
