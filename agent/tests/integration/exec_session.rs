//! An exec session's pump and refusals against the recording fake engine, over an in-memory
//! WebSocket: stdin bytes reach the command and its output comes back as stdout frames, a
//! `resize` reaches the engine, `stdin_eof` closes the command's input (the exit code ends the
//! session); the session ends `idle_timeout` after the idle time (paused
//! clock), `max_lifetime` at the lifetime, `shutdown` when the agent stops, `cancelled` when
//! the viewer goes away, and `backpressure` once a viewer that does not
//! read leaves more than `max_unsent_bytes` unsent; `[exec] enabled = false` and a `user`
//! without `allow_user` are refused at once with their reasons.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use odac_agent::uplink::exec::audit::Ending;
use odac_agent::uplink::exec::pump::pump;
use odac_agent::uplink::exec::{ExecConfig, ExecService};
use odac_host::engine::{ContainerEngine, ContainerSpec, ExecProcess, ExecSpec, FakeEngine};
use odac_host::names::container_name;
use odac_protocol::{
    ExecEndReason, ExecFrame, ExecRequest, ExecResize, STREAM_STDIN, STREAM_STDOUT, Ticket,
};
use tokio::io::DuplexStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;

type Ws = WebSocketStream<DuplexStream>;

async fn running_exec(engine: &FakeEngine) -> ExecProcess {
    engine.add_image("img");
    let spec = ContainerSpec {
        name: container_name("inst", "web"),
        image: "img".into(),
        ..ContainerSpec::default()
    };
    let id = engine.create(&spec).await.unwrap();
    engine.start(&id).await.unwrap();
    let exec = ExecSpec {
        cmd: vec!["/bin/sh".into()],
        tty: true,
        stdin: true,
        user: None,
        size: Some((80, 24)),
    };
    engine.exec("inst_web", &exec).await.unwrap()
}

async fn socket_pair() -> (Ws, Ws) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let agent = WebSocketStream::from_raw_socket(a, Role::Client, None).await;
    let viewer = WebSocketStream::from_raw_socket(b, Role::Server, None).await;
    (agent, viewer)
}

/// Frames until the `exit` frame; returns the stdout bytes and the exit.
async fn read_until_exit(viewer: &mut Ws) -> (Vec<u8>, odac_protocol::ExecExit) {
    let mut out = Vec::new();
    while let Some(Ok(m)) = viewer.next().await {
        match m {
            Message::Binary(b) if b.first() == Some(&STREAM_STDOUT) => {
                out.extend_from_slice(&b[1..])
            }
            Message::Text(t) => {
                if let Ok(ExecFrame::Exit(e)) = ExecFrame::decode(&t) {
                    return (out, e);
                }
            }
            _ => {}
        }
    }
    panic!("the session closed without an exit frame");
}

/// A running exec on `engine` pumped under `cfg` to the agent's end of a socket pair: the
/// viewer's end, the token that stops the session, and the session's task.
async fn session(
    engine: &FakeEngine,
    cfg: ExecConfig,
) -> (Ws, CancellationToken, tokio::task::JoinHandle<Ending>) {
    let process = running_exec(engine).await;
    let (agent, viewer) = socket_pair().await;
    let stop = CancellationToken::new();
    let pump_stop = stop.clone();
    let session = tokio::spawn(async move { pump(agent, process, &cfg, true, &pump_stop).await });
    (viewer, stop, session)
}

fn stdin(data: &[u8]) -> Message {
    Message::Binary([&[STREAM_STDIN][..], data].concat().into())
}

#[tokio::test(start_paused = true)]
async fn input_output_and_resize_flow_then_the_idle_timeout_ends_the_session() {
    let engine = FakeEngine::new();
    let cfg = ExecConfig {
        idle_timeout_secs: 5,
        ..ExecConfig::default()
    };
    let (mut viewer, _stop, session) = session(&engine, cfg).await;
    viewer.send(stdin(b"echo hi\n")).await.unwrap();
    let resize = ExecFrame::Resize(ExecResize {
        cols: 120,
        rows: 40,
    });
    viewer
        .send(Message::Text(resize.encode().into()))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let (out, exit) = read_until_exit(&mut viewer).await;
    assert_eq!(out, b"echo hi\n", "the fake echoes its input");
    assert_eq!(exit.reason, ExecEndReason::IdleTimeout);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(engine.exec_resizes(), [(80, 24), (120, 40)]);
    assert_eq!(session.await.unwrap().reason, ExecEndReason::IdleTimeout);
}

#[tokio::test]
async fn a_viewer_that_goes_away_cancels_the_session() {
    let engine = FakeEngine::new();
    let cfg = ExecConfig::default();
    let (mut viewer, _stop, session) = session(&engine, cfg).await;
    viewer.close(None).await.unwrap();
    let end = session.await.unwrap();
    assert_eq!(end.reason, ExecEndReason::Cancelled, "{end:?}");
}

#[tokio::test]
async fn a_viewer_that_does_not_read_ends_the_session_past_the_unsent_bound() {
    let engine = FakeEngine::new();
    let cfg = ExecConfig {
        max_unsent_bytes: 256 * 1024,
        ..ExecConfig::default()
    };
    let (viewer, _stop, session) = session(&engine, cfg).await;
    // 4 MiB of input echoed back; the viewer sends and never reads
    let chunk = vec![b'x'; 16 * 1024];
    let (mut tx, _rx) = viewer.split();
    let writer = tokio::spawn(async move {
        for _ in 0..256 {
            if tx.send(stdin(&chunk)).await.is_err() {
                break;
            }
        }
    });
    let end = tokio::time::timeout(Duration::from_secs(60), session)
        .await
        .expect("the session ends")
        .unwrap();
    writer.abort();
    assert_eq!(end.reason, ExecEndReason::Backpressure, "{end:?}");
    assert!(
        end.message
            .contains("more than 262144 bytes of output unsent"),
        "{}",
        end.message
    );
}

#[tokio::test]
async fn stdin_eof_closes_the_command_s_input_and_its_exit_code_ends_the_session() {
    let engine = FakeEngine::new();
    engine.set_exec_exit_code(4);
    let cfg = ExecConfig::default();
    let (mut viewer, _stop, session) = session(&engine, cfg).await;
    viewer.send(stdin(b"abc")).await.unwrap();
    let eof = ExecFrame::StdinEof(odac_protocol::ExecStdinEof {});
    viewer
        .send(Message::Text(eof.encode().into()))
        .await
        .unwrap();
    let (out, exit) = read_until_exit(&mut viewer).await;
    assert_eq!(out, b"abc");
    assert_eq!((exit.reason, exit.code), (ExecEndReason::Exited, Some(4)));
    assert_eq!(session.await.unwrap().code, Some(4));
}

#[tokio::test(start_paused = true)]
async fn the_maximum_lifetime_and_shutdown_end_busy_sessions() {
    let engine = FakeEngine::new();
    let cfg = ExecConfig {
        idle_timeout_secs: 100,
        max_lifetime_secs: 10,
        ..ExecConfig::default()
    };
    let (mut viewer, _stop, _) = session(&engine, cfg).await;
    let started = tokio::time::Instant::now();
    let (_, exit) = read_until_exit(&mut viewer).await;
    assert_eq!(exit.reason, ExecEndReason::MaxLifetime, "{exit:?}");
    assert_eq!(started.elapsed(), Duration::from_secs(10));

    let (mut viewer, stop, _) = session(&FakeEngine::new(), ExecConfig::default()).await;
    stop.cancel();
    let (_, exit) = read_until_exit(&mut viewer).await;
    assert_eq!(exit.reason, ExecEndReason::Shutdown, "{exit:?}");
}

fn request(user: Option<&str>) -> ExecRequest {
    ExecRequest {
        session_id: "exec_1".into(),
        app: "web".into(),
        cmd: vec!["true".into()],
        user: user.map(str::to_owned),
        principal: "tester".into(),
        ticket: Ticket("t".repeat(64)),
        ..ExecRequest::default()
    }
}

#[tokio::test]
async fn disabled_exec_and_a_user_without_allow_user_are_refused_with_reasons() {
    let engine: Arc<dyn ContainerEngine> = Arc::new(FakeEngine::new());
    let off = Arc::new(ExecService::new(
        Arc::clone(&engine),
        "inst",
        "agent-1",
        ExecConfig {
            enabled: false,
            ..ExecConfig::default()
        },
    ));
    let refused = off.request(request(None)).unwrap();
    assert_eq!(refused.reason, ExecEndReason::Disabled);
    assert_eq!(
        refused.message,
        "exec is disabled on this agent ([exec] enabled = false)"
    );
    let on = Arc::new(ExecService::new(
        engine,
        "inst",
        "agent-1",
        ExecConfig::default(),
    ));
    let refused = on.request(request(Some("root"))).unwrap();
    assert_eq!(refused.reason, ExecEndReason::Forbidden);
    assert!(
        refused.message.contains("allow_user = false"),
        "{}",
        refused.message
    );
    assert_eq!(on.open_sessions(), 0, "a refusal holds no place");
}
