//! The conformance rules on what a control plane does with the agent's frames beyond plain
//! acks (PROTOCOL.md 1, 3.1, 3.8, 4.1, 4.3, 5 and 6): a `gpu_stats` or `update_status` report is
//! acked with its `seq` like every report, and so is an `event` carrying `image_removed`; a frame holding a key twice is refused as a whole with
//! `error{code:"invalid"}` naming the key and is not acked, and the session goes on; an
//! `error` from the agent (a `conflict` while it is out of step) is never answered with an
//! `error`, and the session goes on.

use std::time::Duration;

use odac_protocol::{
    AgentMessage, ControlMessage, ErrorCode, ErrorMessage, GpuSample, GpuStats, GpuStatsReport,
    UpdatePhase, UpdateStatusReport,
};

use crate::fake_agent::agent_conn::{AgentConn, Incoming};

/// How long a control plane may take to answer.
const ANSWER: Duration = Duration::from_secs(5);

/// How long to listen for an answer that must not come.
const QUIET: Duration = Duration::from_secs(1);

async fn send(conn: &mut AgentConn, msg: &AgentMessage) -> Result<(), String> {
    conn.send(msg).await.map_err(|e| e.to_string())
}

async fn send_raw(conn: &mut AgentConn, text: &str) -> Result<(), String> {
    conn.send_raw(text.to_owned())
        .await
        .map_err(|e| e.to_string())
}

/// An `event` the control plane must ack: the session still goes on.
async fn goes_on(conn: &mut AgentConn, seq: u64) -> Result<(), String> {
    let event = format!(
        r#"{{"type":"event","seq":{seq},"level":"info","message":"conformance check: the session goes on"}}"#
    );
    send_raw(conn, &event).await?;
    conn.recv_until(ANSWER, |m| match m {
        Incoming::Message(ControlMessage::Ack(a)) if a.seq == seq => Some(()),
        _ => None,
    })
    .await
    .map_err(|e| format!("the session did not go on (no ack for event seq {seq}): {e}"))
}

/// `gpu_stats` is a report: acked with its `seq` (3.1, 4.1).
pub(super) async fn acks_gpu_stats(conn: &mut AgentConn) -> Result<String, String> {
    let stats = GpuStats {
        interval_secs: 60,
        gpus: vec![GpuSample {
            id: "0000:01:00.0".to_owned(),
            util: Some(12),
            ..GpuSample::default()
        }],
        ..GpuStats::default()
    };
    send(
        conn,
        &AgentMessage::GpuStats(GpuStatsReport { seq: 1101, stats }),
    )
    .await?;
    conn.recv_until(ANSWER, |m| match m {
        Incoming::Message(ControlMessage::Ack(a)) if a.seq == 1101 => Some(()),
        _ => None,
    })
    .await
    .map_err(|e| format!("no ack for gpu_stats seq 1101: {e}"))?;
    Ok("gpu_stats seq 1101 acked".to_owned())
}

/// `update_status` is a report: acked with its `seq` (3.8, 4.1), the `update_failed`
/// outcome of a rolled-back agent update included.
pub(super) async fn acks_update_status(conn: &mut AgentConn) -> Result<String, String> {
    let report = UpdateStatusReport {
        seq: 1201,
        version: "0.2.0".to_owned(),
        phase: UpdatePhase::UpdateFailed,
        message: Some("conformance check: version 0.2.0 did not commit".to_owned()),
        ..UpdateStatusReport::default()
    };
    send(conn, &AgentMessage::UpdateStatus(report)).await?;
    conn.recv_until(ANSWER, |m| match m {
        Incoming::Message(ControlMessage::Ack(a)) if a.seq == 1201 => Some(()),
        _ => None,
    })
    .await
    .map_err(|e| format!("no ack for update_status seq 1201: {e}"))?;
    Ok("update_status seq 1201 acked".to_owned())
}

/// An `event` with an `image_removed` part (an image the agent cleaned up) is a report like
/// any other: acked with its `seq` (3.1, 4.1).
pub(super) async fn acks_image_removed(conn: &mut AgentConn) -> Result<String, String> {
    send_raw(
        conn,
        r#"{"type":"event","seq":1103,"level":"info","app":"web","message":"removed image web:1 (sha256:aa): 5.0 MB back; no app used it for apps.image_gc_delay_secs","image_removed":{"image":"sha256:aa","reference":"web:1","bytes":5000000,"reason":"delay"}}"#,
    )
    .await?;
    conn.recv_until(ANSWER, |m| match m {
        Incoming::Message(ControlMessage::Ack(a)) if a.seq == 1103 => Some(()),
        _ => None,
    })
    .await
    .map_err(|e| format!("no ack for the image_removed event seq 1103: {e}"))?;
    Ok("event seq 1103 with image_removed acked".to_owned())
}

/// A key twice in one object: `invalid`, nothing acked, the session goes on (1, 5).
pub(super) async fn refuses_duplicate_keys(conn: &mut AgentConn) -> Result<String, String> {
    send_raw(
        conn,
        r#"{"type":"event","seq":1102,"level":"info","message":"first","message":"second"}"#,
    )
    .await?;
    let answer = conn
        .recv_until(ANSWER, |m| match m {
            Incoming::Message(ControlMessage::Error(e)) => Some(Ok(e.clone())),
            Incoming::Message(ControlMessage::Ack(a)) if a.seq == 1102 => Some(Err(())),
            _ => None,
        })
        .await
        .map_err(|e| format!("no error for a frame with a key twice: {e}"))?;
    let error = answer.map_err(|()| "a frame with a key twice was acked (seq 1102)".to_owned())?;
    if error.code != ErrorCode::Invalid {
        return Err(format!("answered {}, expected invalid", error.code));
    }
    if !error.message.contains("message") {
        return Err(format!(
            "the error does not name the key `message`: {:?}",
            error.message
        ));
    }
    goes_on(conn, 1103).await?;
    Ok(format!(
        "error invalid ({:?}), not acked, and the session went on",
        error.message
    ))
}

/// An `error` of the agent (`conflict`, section 4.3) is not answered with an `error` (5).
pub(super) async fn never_answers_an_error(conn: &mut AgentConn) -> Result<String, String> {
    let conflict = ErrorMessage::new(
        ErrorCode::Conflict,
        "seq: not applied: the agent is out of step (conformance check)",
        Some(1),
    );
    send(conn, &AgentMessage::Error(conflict)).await?;
    let answered = conn
        .recv_until(QUIET, |m| match m {
            Incoming::Message(ControlMessage::Error(e)) => Some(e.clone()),
            _ => None,
        })
        .await;
    if let Ok(e) = answered {
        return Err(format!(
            "an error was answered with error {}: {}",
            e.code, e.message
        ));
    }
    goes_on(conn, 1104).await?;
    Ok("error conflict sent: no error back, and the session went on".to_owned())
}
