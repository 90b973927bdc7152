//! The uplink keeps PROTOCOL.md section 4 (paused time, in-process control plane): a stale
//! change is acked and changes nothing; a refused change puts the agent out of step, so it
//! refuses incremental changes with `conflict` and asks for a snapshot with `resync` (at once
//! after a refused upsert or delete, after a delay after a refused snapshot) until one is
//! applied; with the real app manager and a state directory that cannot be written, the
//! control plane's view and the engine agree after one resync; a resent report keeps its
//! `seq`, and `seq` continues after an agent restart.

use crate::uplink_support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::run::ManagerControl;
use odac_agent::uplink::{AppControl, Uplink};
use odac_protocol::{
    AgentMessage, AppDelete, AppSpec, AppState, AppUpsert, ControlMessage, DesiredStateMessage,
    ErrorCode, EventLevel, Resync,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uplink_support::*;

struct Harness {
    server: TestServer,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    uplink_events: odac_agent::uplink::EventSink,
    _inv: watch::Sender<Option<Arc<odac_protocol::Inventory>>>,
    _pki: Arc<Pki>,
}

impl Harness {
    /// Stops the uplink and waits for its task to end.
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }
}

async fn start_with(
    pki: Arc<Pki>,
    server: TestServer,
    apps: Arc<dyn AppControl>,
    state_dir: Option<&Path>,
) -> Harness {
    let (inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let mut config = uplink_config(&pki, &server.url(), TOKEN);
    config.state_dir = state_dir.map(Path::to_path_buf);
    let uplink = Uplink::new(config, apps, inv_rx);
    let uplink_events = uplink.events();
    let (shutdown, task) = spawn_welcomed(uplink, &server, Duration::from_secs(5)).await;
    Harness {
        server,
        shutdown,
        task,
        uplink_events,
        _inv: inv_tx,
        _pki: pki,
    }
}

async fn start(behaviour: Behaviour, apps: Arc<dyn AppControl>) -> Harness {
    let pki = Arc::new(Pki::new());
    let server = TestServer::start(&pki, behaviour).await;
    start_with(pki, server, apps, None).await
}

/// A fresh fake app manager and an uplink to a default control plane that drives it.
async fn start_fake() -> (Arc<FakeApps>, Harness) {
    let apps = FakeApps::new();
    let h = start(Behaviour::default(), apps.clone()).await;
    (apps, h)
}

fn desired(seq: u64, generation: u64, names: &[&str]) -> ControlMessage {
    ControlMessage::DesiredState(DesiredStateMessage {
        seq,
        generation,
        apps: names.iter().map(|n| app(n)).collect(),
    })
}

fn app(name: &str) -> AppSpec {
    let mut spec = AppSpec::new(name, "odac/busybox:test");
    spec.command = vec!["sleep".into(), "3600".into()];
    spec
}

fn upsert(seq: u64, generation: u64, name: &str) -> ControlMessage {
    ControlMessage::AppUpsert(AppUpsert {
        seq,
        generation,
        app: app(name),
    })
}

fn delete(seq: u64, generation: u64, name: &str) -> ControlMessage {
    ControlMessage::AppDelete(AppDelete {
        seq,
        generation,
        name: name.into(),
    })
}

fn resyncs(log: &ServerLog) -> Vec<Resync> {
    log.messages
        .iter()
        .filter_map(|(_, m)| match m {
            AgentMessage::Resync(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn error_for(log: &ServerLog, seq: u64) -> Option<odac_protocol::ErrorMessage> {
    log.errors().into_iter().find(|e| e.ref_seq == Some(seq))
}

#[tokio::test(start_paused = true)]
async fn stale_changes_are_acked_and_change_nothing() {
    let (apps, h) = start_fake().await;
    h.server.send_control(&desired(1, 5, &["web"]));
    h.server.send_control(&upsert(2, 5, "db")); // equal generation
    h.server.send_control(&delete(3, 4, "web")); // lower generation
    h.server.send_control(&desired(4, 2, &["web", "api"])); // lower snapshot: applied
    wait_for(&h.server.log, Duration::from_secs(5), "four acks", |l| {
        l.acks() == [1, 2, 3, 4]
    })
    .await;
    let d = apps.desired.lock().unwrap().clone().unwrap();
    assert_eq!(d.generation, 2);
    let names: Vec<_> = d.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["web", "api"]);
    let log = h.server.snapshot();
    assert!(log.errors().is_empty(), "{:?}", log.errors());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_refused_change_is_followed_by_resync_and_nothing_incremental_until_a_snapshot() {
    let (apps, h) = start_fake().await;
    h.server.send_control(&desired(1, 1, &["web"]));
    wait_for(&h.server.log, Duration::from_secs(5), "ack 1", |l| {
        l.acks() == [1]
    })
    .await;

    *apps.fail_persist.lock().unwrap() = true;
    h.server.send_control(&upsert(2, 2, "db"));
    wait_for(&h.server.log, Duration::from_secs(5), "resync", |l| {
        resyncs(l).len() == 1
    })
    .await;
    let log = h.server.snapshot();
    assert_eq!(error_for(&log, 2).unwrap().code, ErrorCode::Internal);
    let r = &resyncs(&log)[0];
    assert!(r.reason.starts_with("seq 2: internal: "), "{}", r.reason);
    assert_eq!(r.last_generation, Some(1));

    // the disk works again, but incremental changes are not applied on a stale base
    *apps.fail_persist.lock().unwrap() = false;
    h.server.send_control(&delete(3, 3, "web"));
    h.server.send_control(&upsert(4, 4, "api"));
    wait_for(
        &h.server.log,
        Duration::from_secs(5),
        "two conflicts",
        |l| error_for(l, 3).is_some() && error_for(l, 4).is_some(),
    )
    .await;
    let log = h.server.snapshot();
    for seq in [3, 4] {
        let e = error_for(&log, seq).unwrap();
        assert_eq!(e.code, ErrorCode::Conflict);
        assert!(e.message.starts_with("seq: "), "{}", e.message);
    }
    assert_eq!(log.acks(), [1], "nothing acked while out of step");
    assert_eq!(resyncs(&log).len(), 1, "one resync per refusal");
    assert_eq!(apps.generation(), Some(1));

    // the snapshot that answers the resync puts the agent back in step
    h.server.send_control(&desired(5, 4, &["db", "api"]));
    h.server.send_control(&upsert(6, 5, "cache"));
    wait_for(&h.server.log, Duration::from_secs(5), "acks 5 and 6", |l| {
        l.acks() == [1, 5, 6]
    })
    .await;
    let d = apps.desired.lock().unwrap().clone().unwrap();
    let names: Vec<_> = d.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!((d.generation, names), (5, vec!["db", "api", "cache"]));

    // a refused snapshot asks again only after a delay, then 1 s, 2 s, ... later
    *apps.fail_persist.lock().unwrap() = true;
    h.server.send_control(&desired(7, 6, &["db"]));
    wait_for(&h.server.log, Duration::from_secs(5), "error 7", |l| {
        error_for(l, 7).is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(resyncs(&h.server.snapshot()).len(), 1, "not at once");
    wait_for(
        &h.server.log,
        Duration::from_secs(2),
        "second resync",
        |l| resyncs(l).len() == 2,
    )
    .await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_change_also_puts_the_agent_out_of_step() {
    let (_apps, h) = start_fake().await;
    h.server.send_control(&desired(1, 1, &["web"]));
    h.server.send_text(
        r#"{"type":"app_upsert","seq":2,"generation":2,"app":{"name":"Bad Name","image":"x"}}"#,
    );
    h.server.send_control(&upsert(3, 3, "db"));
    wait_for(&h.server.log, Duration::from_secs(5), "resync", |l| {
        !resyncs(l).is_empty() && error_for(l, 3).is_some()
    })
    .await;
    let log = h.server.snapshot();
    let invalid = error_for(&log, 2).unwrap();
    assert_eq!(invalid.code, ErrorCode::Invalid);
    assert!(
        invalid.message.starts_with("app.name: "),
        "{}",
        invalid.message
    );
    assert_eq!(error_for(&log, 3).unwrap().code, ErrorCode::Conflict);
    assert_eq!(log.acks(), [1]);
    h.stop().await;
}

/// The real app manager on the fake engine, whose state directory stops being writable: the
/// trick works as root too (a directory where the store's temp file goes).
#[tokio::test(start_paused = true)]
async fn unwritable_state_dir_view_and_engine_agree_after_one_resync() {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&["odac/busybox:test"]);
    let _instance = format!("resync-{}", std::process::id());
    let manager = manager_on(&fake, dir.path(), "resync");
    let h = start(
        Behaviour::default(),
        Arc::new(ManagerControl(manager.clone())),
    )
    .await;
    let running = || async {
        manager.reconcile_once().await;
        let mut apps: Vec<String> = fake
            .container_ids()
            .iter()
            .filter_map(|id| fake.spec_of(id))
            .filter_map(|s| s.labels.get(odac_host::names::APP).cloned())
            .collect();
        apps.sort();
        apps
    };

    h.server.send_control(&desired(1, 1, &["a"]));
    wait_for(&h.server.log, Duration::from_secs(5), "ack 1", |l| {
        l.acks() == [1]
    })
    .await;
    assert_eq!(running().await, ["a"]);

    // the state directory refuses writes: gen 2 (create b) is refused, gen 3 (delete a)
    // arrives while the agent is out of step
    let blocker = dir
        .path()
        .join(format!(".desired.json.tmp-{}", std::process::id()));
    std::fs::create_dir(&blocker).unwrap();
    h.server.send_control(&upsert(2, 2, "b"));
    h.server.send_control(&delete(3, 3, "a"));
    wait_for(&h.server.log, Duration::from_secs(5), "resync", |l| {
        !resyncs(l).is_empty() && error_for(l, 3).is_some()
    })
    .await;
    assert_eq!(
        error_for(&h.server.snapshot(), 2).unwrap().code,
        ErrorCode::Internal
    );
    // writable again; gen 4 (create c) must not be applied on the stale base and acked
    std::fs::remove_dir(&blocker).unwrap();
    h.server.send_control(&upsert(4, 4, "c"));
    wait_for(&h.server.log, Duration::from_secs(5), "conflict 4", |l| {
        error_for(l, 4).is_some()
    })
    .await;
    assert_eq!(h.server.snapshot().acks(), [1]);
    assert_eq!(running().await, ["a"], "nothing applied while out of step");

    // the control plane answers the resync with its view: generation 4 = {b, c}
    h.server.send_control(&desired(5, 4, &["b", "c"]));
    wait_for(&h.server.log, Duration::from_secs(5), "ack 5", |l| {
        l.acks() == [1, 5]
    })
    .await;
    assert_eq!(running().await, ["b", "c"], "engine equals the acked view");
    assert_eq!(manager.generation(), Some(4));
    // and the removal of a was reported
    wait_for(&h.server.log, Duration::from_secs(5), "a removed", |l| {
        l.view
            .get("a")
            .is_some_and(|s| s.state == AppState::Removed && s.generation == 4)
    })
    .await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_resent_report_keeps_its_seq_and_seq_continues_after_a_restart() {
    let pki = Arc::new(Pki::new());
    let state = tempfile::tempdir().unwrap();
    let apps = FakeApps::new();
    apps.set_status(status("web", AppState::Running, 0));
    let behaviour = Behaviour {
        auto_ack: false,
        close_after: Some(Duration::from_secs(3)),
        ..Behaviour::default()
    };
    let server = TestServer::start(&pki, behaviour).await;
    let h = start_with(pki.clone(), server, apps.clone(), Some(state.path())).await;
    h.uplink_events
        .push(EventLevel::Warn, Some("web"), "fell back to the cpu");
    wait_for(
        &h.server.log,
        Duration::from_secs(60),
        "two sessions",
        |l| l.welcomed.len() >= 2 && l.of_conn(2).iter().filter(|m| m.seq().is_some()).count() >= 3,
    )
    .await;
    let log = h.server.snapshot();
    let reports = |conn: usize| -> Vec<(String, u64)> {
        log.of_conn(conn)
            .iter()
            .filter_map(|m| m.seq().map(|s| (m.type_name().to_owned(), s)))
            .collect()
    };
    let first = reports(1);
    let second = reports(2);
    assert_eq!(first.len(), 3, "{first:?}");
    assert_eq!(
        second, first,
        "unacked reports are resent with the same seqs"
    );
    let top = first.iter().map(|(_, s)| *s).max().unwrap();
    h.shutdown.cancel();
    h.task.await.unwrap();

    // the agent restarts on the same state directory: seq continues above every seq used
    let server = TestServer::start(&pki, Behaviour::default()).await;
    let h = start_with(pki.clone(), server, apps, Some(state.path())).await;
    wait_for(&h.server.log, Duration::from_secs(5), "reports", |l| {
        l.of_conn(1).iter().filter(|m| m.seq().is_some()).count() >= 2
    })
    .await;
    let after: Vec<u64> = h
        .server
        .snapshot()
        .of_conn(1)
        .iter()
        .filter_map(AgentMessage::seq)
        .collect();
    assert!(after.iter().all(|s| *s > top), "{after:?} after {top}");
    h.stop().await;
}
