//! A control-plane frame holding a key twice, against the uplink (paused time, in-process
//! control plane; PROTOCOL.md 1 and 4.3): the agent applies neither value, answers
//! `error{code:"invalid"}` naming the key's path with the change's `ref_seq`, acks nothing,
//! and, being out of step, asks for a snapshot with one `resync`; the `conflict`s that answer
//! later changes send no further `resync`; the snapshot puts it back in step.

use crate::uplink_support;

use std::sync::Arc;
use std::time::Duration;

use odac_agent::uplink::Uplink;
use odac_protocol::{AgentMessage, ErrorCode};
use tokio::sync::watch;
use uplink_support::*;

fn resyncs(log: &ServerLog) -> usize {
    log.messages
        .iter()
        .filter(|(_, m)| matches!(m, AgentMessage::Resync(_)))
        .count()
}

fn error_for(log: &ServerLog, seq: u64) -> Option<odac_protocol::ErrorMessage> {
    log.errors().into_iter().find(|e| e.ref_seq == Some(seq))
}

const SNAPSHOT: &str = r#"{"type":"desired_state","seq":1,"generation":1,"apps":[{"name":"web","image":"odac/busybox:test"}]}"#;

#[tokio::test(start_paused = true)]
async fn a_key_twice_is_refused_whole_and_the_agent_asks_for_a_snapshot_once() {
    let pki = Arc::new(Pki::new());
    let server = TestServer::start(&pki, Behaviour::default()).await;
    let apps = FakeApps::new();
    let (_inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let uplink = Uplink::new(
        uplink_config(&pki, &server.url(), TOKEN),
        apps.clone(),
        inv_rx,
    );
    let (shutdown, task) = spawn_welcomed(uplink, &server, Duration::from_secs(5)).await;
    server.send_text(SNAPSHOT);
    wait_for(&server.log, Duration::from_secs(5), "ack 1", |l| {
        l.acks() == [1]
    })
    .await;

    // `image` twice: which one a reader takes differs by language, so neither is taken
    server.send_text(
        r#"{"type":"app_upsert","seq":2,"generation":2,"app":{"name":"db","image":"odac/busybox:test","image":"evil/other:1"}}"#,
    );
    wait_for(
        &server.log,
        Duration::from_secs(5),
        "error and resync",
        |l| error_for(l, 2).is_some() && resyncs(l) == 1,
    )
    .await;
    let log = server.snapshot();
    let e = error_for(&log, 2).unwrap();
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(
        e.message.starts_with("app.image: is a duplicate key"),
        "{}",
        e.message
    );
    assert_eq!(log.acks(), [1], "not acked");
    let d = apps.desired.lock().unwrap().clone().unwrap();
    assert_eq!(
        (d.generation, d.apps.len()),
        (1, 1),
        "nothing of it applied"
    );

    // out of step: a valid change is answered `conflict`, and no second resync follows
    server.send_text(
        r#"{"type":"app_upsert","seq":3,"generation":3,"app":{"name":"api","image":"odac/busybox:test"}}"#,
    );
    wait_for(&server.log, Duration::from_secs(5), "conflict", |l| {
        error_for(l, 3).is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let log = server.snapshot();
    assert_eq!(error_for(&log, 3).unwrap().code, ErrorCode::Conflict);
    assert_eq!(resyncs(&log), 1, "a conflict sends no new resync");

    // the snapshot that answers the resync puts it back in step
    server.send_text(
        r#"{"type":"desired_state","seq":4,"generation":3,"apps":[{"name":"web","image":"odac/busybox:test"}]}"#,
    );
    server.send_text(
        r#"{"type":"app_upsert","seq":5,"generation":4,"app":{"name":"api","image":"odac/busybox:test"}}"#,
    );
    wait_for(&server.log, Duration::from_secs(5), "acks 4 and 5", |l| {
        l.acks() == [1, 4, 5]
    })
    .await;
    shutdown.cancel();
    task.await.unwrap();
}
