//! Live logs through a real uplink session (in-process TLS WebSocket control plane, paused
//! time, the fake engine): a `logs_request` is answered with chunks and one `logs_end`, a
//! status change still goes out while a stream is open, `logs_cancel` ends a followed stream,
//! shutdown ends open streams with `shutdown` before closing, and an uplink without a log
//! source answers `not_found`.

use crate::uplink_support;

use std::sync::Arc;
use std::time::Duration;

use odac_agent::uplink::logs::LogSource;
use odac_agent::uplink::{AppControl, Uplink};
use odac_host::engine::{ContainerEngine, ContainerSpec};
use odac_protocol::{
    AgentMessage, AppState, ControlMessage, LogsCancel, LogsChunk, LogsEnd, LogsEndReason,
    LogsRequest,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uplink_support::*;

struct Harness {
    server: TestServer,
    apps: Arc<FakeApps>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _inv: watch::Sender<Option<Arc<odac_protocol::Inventory>>>,
    _pki: Pki,
}

async fn start(with_logs: bool) -> Harness {
    let pki = Pki::new();
    let server = TestServer::start(&pki, Behaviour::default()).await;
    let (inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let apps = FakeApps::new();
    let mut uplink = Uplink::new(
        uplink_config(&pki, &server.url(), TOKEN),
        apps.clone() as Arc<dyn AppControl>,
        inv_rx,
    );
    if with_logs {
        let engine = crate::appmgr_support::fake_with_images(&["img"]);
        let id = engine
            .create(&ContainerSpec {
                name: "inst_web".into(),
                image: "img".into(),
                ..ContainerSpec::default()
            })
            .await
            .unwrap();
        engine.push_log(&id, "line 1\nline 2\nline 3\n");
        uplink = uplink.with_logs(LogSource::new(engine, "inst"));
    }
    let (shutdown, task) = spawn_welcomed(uplink, &server, Duration::from_secs(5)).await;
    Harness {
        server,
        apps,
        shutdown,
        task,
        _inv: inv_tx,
        _pki: pki,
    }
}

fn request(id: &str, follow: bool, tail: Option<u32>) -> ControlMessage {
    ControlMessage::LogsRequest(LogsRequest {
        request_id: id.into(),
        app: "web".into(),
        follow,
        tail,
        ..LogsRequest::default()
    })
}

fn chunks(log: &ServerLog, id: &str) -> Vec<LogsChunk> {
    log.of_conn(1)
        .into_iter()
        .filter_map(|m| match m {
            AgentMessage::LogsChunk(c) if c.request_id == id => Some(c),
            _ => None,
        })
        .collect()
}

fn end(log: &ServerLog, id: &str) -> Option<LogsEnd> {
    log.of_conn(1).into_iter().find_map(|m| match m {
        AgentMessage::LogsEnd(e) if e.request_id == id => Some(e),
        _ => None,
    })
}

/// Waits (up to 5 s) for the end of stream `id` and returns it.
async fn end_of(h: &Harness, id: &str) -> LogsEnd {
    wait_for(&h.server.log, Duration::from_secs(5), "the end", |l| {
        end(l, id).is_some()
    })
    .await;
    end(&h.server.snapshot(), id).expect("the end just seen")
}

#[tokio::test(start_paused = true)]
async fn a_tail_is_answered_with_chunks_then_its_end() {
    let h = start(true).await;
    h.server.send_control(&request("r1", false, Some(2)));
    wait_for(&h.server.log, Duration::from_secs(5), "the end", |l| {
        end(l, "r1").is_some()
    })
    .await;
    let log = h.server.snapshot();
    let lines: Vec<String> = chunks(&log, "r1")
        .into_iter()
        .flat_map(|c| c.lines)
        .collect();
    assert_eq!(lines, ["line 2", "line 3"]);
    assert_eq!(end(&log, "r1").unwrap().reason, LogsEndReason::Complete);
    // the end comes after the stream's last chunk
    let order: Vec<&str> = log
        .of_conn(1)
        .iter()
        .filter(|m| matches!(m, AgentMessage::LogsChunk(_) | AgentMessage::LogsEnd(_)))
        .map(AgentMessage::type_name)
        .collect();
    assert_eq!(order, ["logs_chunk", "logs_end"]);
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_followed_stream_leaves_statuses_alone_and_ends_on_cancel() {
    let h = start(true).await;
    h.server.send_control(&request("r1", true, None));
    wait_for(&h.server.log, Duration::from_secs(5), "the lines", |l| {
        chunks(l, "r1").iter().map(|c| c.lines.len()).sum::<usize>() == 3
    })
    .await;
    h.apps.set_status(status("web", AppState::Running, 1));
    wait_for(&h.server.log, Duration::from_secs(5), "the status", |l| {
        l.view.get("web").is_some_and(|s| s.restart_count == 1)
    })
    .await;
    assert!(end(&h.server.snapshot(), "r1").is_none(), "still open");
    h.server
        .send_control(&ControlMessage::LogsCancel(LogsCancel {
            request_id: "r1".into(),
        }));
    assert_eq!(end_of(&h, "r1").await.reason, LogsEndReason::Cancelled);
    h.shutdown.cancel();
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_open_streams_before_closing() {
    let h = start(true).await;
    h.server.send_control(&request("r1", true, Some(1)));
    wait_for(&h.server.log, Duration::from_secs(5), "a chunk", |l| {
        !chunks(l, "r1").is_empty()
    })
    .await;
    h.shutdown.cancel();
    h.task.await.unwrap();
    let e = end(&h.server.snapshot(), "r1").expect("an end before the close");
    assert_eq!(e.reason, LogsEndReason::Shutdown);
}

#[tokio::test(start_paused = true)]
async fn without_a_log_source_requests_end_not_found() {
    let h = start(false).await;
    h.server.send_control(&request("r1", true, None));
    assert_eq!(end_of(&h, "r1").await.reason, LogsEndReason::NotFound);
    h.shutdown.cancel();
    h.task.await.unwrap();
}
