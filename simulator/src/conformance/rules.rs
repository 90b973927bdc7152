//! The conformance rules, each checked by a scripted agent over real connections (PROTOCOL.md
//! sections 1, 2 and 4): an upgrade without a token is refused with 401; a refusal for load
//! carries `Retry-After` (with the close codes, in `closing.rs`); `welcome` answers
//! `hello`; a full `desired_state` follows `welcome`; every report is acked with its `seq`; a
//! resent report (same `seq`) is acked again, and so is a rolled-back status
//! (`running_generation` below `generation`); `resync` is answered with a snapshot; a
//! reconnect gets a snapshot again; the same generation never carries different content; an
//! unknown message type is answered with `unknown_type` and the session goes on (with the
//! rules on `gpu_stats`, duplicate keys and the agent's errors, in `reports.rs`). A rule that
//! cannot be checked because an earlier step failed fails with that evidence.

use std::time::Duration;

use odac_protocol::{
    AgentMessage, AppStatus, AppStatusReport, ControlMessage, DesiredStateMessage, ErrorCode,
    Event, EventLevel, Resync, RolloutReport, RolloutState,
};

use super::{ConformanceConfig, Outcome, closing, exec, reports};
use crate::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};

/// How long a control plane may take to answer.
const ANSWER: Duration = Duration::from_secs(5);

fn outcome(rule: &'static str, result: Result<String, String>) -> Outcome {
    match result {
        Ok(evidence) => Outcome {
            rule,
            pass: true,
            evidence,
        },
        Err(evidence) => Outcome {
            rule,
            pass: false,
            evidence,
        },
    }
}

/// Runs every rule against the control plane; one outcome per rule, in order.
pub async fn run(cfg: &ConformanceConfig) -> Vec<Outcome> {
    let mut out = vec![
        outcome("refuses_a_missing_token", refuses_bad_token(cfg).await),
        outcome(
            "retry_after_when_refusing",
            closing::retry_after_when_refusing(cfg).await,
        ),
    ];
    let hello = AgentConn::hello(&cfg.agent_id, "conformance");
    let session = AgentConn::connect_hello(&cfg.url, &cfg.ca_pem, &cfg.token, hello.clone()).await;
    let (mut conn, welcome) = match session {
        Ok(s) => s,
        Err(e) => {
            let why = format!("no session: {e}");
            for rule in RULES_AFTER_WELCOME {
                out.push(outcome(rule, Err(why.clone())));
            }
            closing_rules(cfg, &mut out).await;
            return out;
        }
    };
    out.push(outcome(
        "welcome_after_hello",
        Ok(format!("welcome host_id {:?}", welcome.host_id)),
    ));
    let first = snapshot(&mut conn).await;
    out.push(outcome(
        "snapshot_after_welcome",
        first
            .as_ref()
            .map(|s| {
                format!(
                    "desired_state seq {} generation {} with {} apps",
                    s.seq,
                    s.generation,
                    s.apps.len()
                )
            })
            .map_err(Clone::clone),
    ));
    out.push(outcome("acks_every_report", acks_reports(&mut conn).await));
    out.push(outcome("acks_a_resent_seq", acks_resend(&mut conn).await));
    out.push(outcome(
        "acks_a_rolled_back_status",
        acks_rolled_back(&mut conn).await,
    ));
    out.push(outcome(
        "answers_unknown_type",
        answers_unknown_type(&mut conn).await,
    ));
    out.push(outcome(
        "acks_gpu_stats",
        reports::acks_gpu_stats(&mut conn).await,
    ));
    out.push(outcome(
        "acks_update_status",
        reports::acks_update_status(&mut conn).await,
    ));
    out.push(outcome(
        "acks_image_removed",
        reports::acks_image_removed(&mut conn).await,
    ));
    out.push(outcome(
        "refuses_duplicate_keys",
        reports::refuses_duplicate_keys(&mut conn).await,
    ));
    out.push(outcome(
        "never_answers_an_error",
        reports::never_answers_an_error(&mut conn).await,
    ));
    let after_resync = resync(&mut conn, first.as_ref().ok()).await;
    out.push(outcome(
        "answers_resync_with_a_snapshot",
        after_resync
            .as_ref()
            .map(|s| s.1.clone())
            .map_err(Clone::clone),
    ));
    conn.close().await;
    let again = match AgentConn::connect_hello(&cfg.url, &cfg.ca_pem, &cfg.token, hello).await {
        Ok((mut c, _)) => {
            let s = snapshot(&mut c).await;
            c.close().await;
            s
        }
        Err(e) => Err(format!("reconnect failed: {e}")),
    };
    out.push(outcome(
        "snapshot_after_reconnect",
        again
            .as_ref()
            .map(|s| format!("desired_state seq {} generation {}", s.seq, s.generation))
            .map_err(Clone::clone),
    ));
    let mut snapshots: Vec<&DesiredStateMessage> = Vec::new();
    snapshots.extend(first.as_ref().ok());
    snapshots.extend(after_resync.as_ref().ok().map(|s| &s.0));
    snapshots.extend(again.as_ref().ok());
    out.push(outcome(
        "generation_never_reused",
        generations_consistent(&snapshots),
    ));
    closing_rules(cfg, &mut out).await;
    out
}

/// The close-code rules (`closing.rs`); each opens its own connections.
async fn closing_rules(cfg: &ConformanceConfig, out: &mut Vec<Outcome>) {
    out.push(outcome(
        "closes_a_replaced_session",
        closing::closes_a_replaced_session(cfg).await,
    ));
    out.push(outcome(
        "closes_an_unsupported_version",
        closing::closes_an_unsupported_version(cfg).await,
    ));
    out.push(outcome(
        "closes_a_session_without_hello",
        closing::closes_a_session_without_hello(cfg).await,
    ));
    out.push(outcome(
        "refuses_an_unknown_exec_ticket",
        exec::refuses_an_unknown_exec_ticket(cfg).await,
    ));
}

/// Rules that need a session.
const RULES_AFTER_WELCOME: [&str; 14] = [
    "welcome_after_hello",
    "snapshot_after_welcome",
    "acks_every_report",
    "acks_a_resent_seq",
    "acks_a_rolled_back_status",
    "answers_unknown_type",
    "acks_gpu_stats",
    "acks_update_status",
    "acks_image_removed",
    "refuses_duplicate_keys",
    "never_answers_an_error",
    "answers_resync_with_a_snapshot",
    "snapshot_after_reconnect",
    "generation_never_reused",
];

async fn refuses_bad_token(cfg: &ConformanceConfig) -> Result<String, String> {
    match AgentConn::connect(&cfg.url, &cfg.ca_pem, "conformance-not-a-token").await {
        Err(ConnError::Http { status, .. }) if status == 401 || status == 403 => {
            Ok(format!("http {status} for an unknown token"))
        }
        Err(e) => Err(format!("expected http 401, got: {e}")),
        Ok(c) => {
            c.close().await;
            Err("an unknown token was accepted".to_owned())
        }
    }
}

async fn snapshot(conn: &mut AgentConn) -> Result<DesiredStateMessage, String> {
    conn.recv_until(ANSWER, |m| match m {
        Incoming::Message(ControlMessage::DesiredState(d)) => Some(d.clone()),
        _ => None,
    })
    .await
    .map_err(|e| format!("no desired_state: {e}"))
}

async fn wait_ack(conn: &mut AgentConn, seq: u64) -> Result<(), String> {
    conn.recv_until(ANSWER, |m| match m {
        Incoming::Message(ControlMessage::Ack(a)) if a.seq == seq => Some(()),
        _ => None,
    })
    .await
    .map_err(|e| format!("no ack for seq {seq}: {e}"))
}

fn event(seq: u64, message: &str) -> AgentMessage {
    AgentMessage::Event(Event {
        seq,
        level: EventLevel::Info,
        app: None,
        message: message.to_owned(),
        dropped: None,
        image_removed: None,
    })
}

async fn send(conn: &mut AgentConn, msg: &AgentMessage) -> Result<(), String> {
    conn.send(msg).await.map_err(|e| e.to_string())
}

async fn acks_reports(conn: &mut AgentConn) -> Result<String, String> {
    let status = AppStatus {
        name: "conformance-app".to_owned(),
        generation: 0,
        state: odac_protocol::AppState::Pending,
        ..AppStatus::default()
    };
    send(
        conn,
        &AgentMessage::AppStatus(AppStatusReport { seq: 1001, status }),
    )
    .await?;
    wait_ack(conn, 1001).await?;
    send(conn, &event(1002, "conformance check: an event")).await?;
    wait_ack(conn, 1002).await?;
    Ok("app_status seq 1001 and event seq 1002 acked".to_owned())
}

async fn acks_resend(conn: &mut AgentConn) -> Result<String, String> {
    send(conn, &event(1002, "conformance check: an event")).await?;
    wait_ack(conn, 1002).await?;
    Ok("event seq 1002 sent again and acked again".to_owned())
}

/// A status whose container runs an older generation than the desired one (a rollback):
/// `running_generation` and the `rollout` part are valid fields, acked like any status.
async fn acks_rolled_back(conn: &mut AgentConn) -> Result<String, String> {
    let status = AppStatus {
        name: "conformance-app".to_owned(),
        generation: 2,
        state: odac_protocol::AppState::Running,
        running_generation: Some(1),
        rollout: Some(RolloutReport {
            state: RolloutState::RolledBack,
            generation: 2,
            error: Some("exited with code 3".to_owned()),
            cause: Some(odac_protocol::CrashInfo {
                reason: odac_protocol::CrashReason::Crashed,
                exit_code: Some(3),
                output_tail: Some("conformance check: broken config\n".to_owned()),
                ..odac_protocol::CrashInfo::default()
            }),
            at_ms: Some(1_780_000_000_000),
            ..RolloutReport::default()
        }),
        ..AppStatus::default()
    };
    send(
        conn,
        &AgentMessage::AppStatus(AppStatusReport { seq: 1005, status }),
    )
    .await?;
    wait_ack(conn, 1005).await?;
    Ok("app_status seq 1005 (rolled_back, running_generation 1 of 2) acked".to_owned())
}

async fn answers_unknown_type(conn: &mut AgentConn) -> Result<String, String> {
    conn.send_raw(r#"{"type":"conformance_probe","seq":1003}"#.to_owned())
        .await
        .map_err(|e| e.to_string())?;
    let code = conn
        .recv_until(ANSWER, |m| match m {
            Incoming::Message(ControlMessage::Error(e)) => Some(e.code.clone()),
            _ => None,
        })
        .await
        .map_err(|e| format!("no error for an unknown type: {e}"))?;
    if code != ErrorCode::UnknownType {
        return Err(format!("answered {code}, expected unknown_type"));
    }
    // the session goes on
    send(conn, &event(1004, "conformance check: after the probe")).await?;
    wait_ack(conn, 1004).await?;
    Ok("error unknown_type, and the session went on (seq 1004 acked)".to_owned())
}

async fn resync(
    conn: &mut AgentConn,
    first: Option<&DesiredStateMessage>,
) -> Result<(DesiredStateMessage, String), String> {
    send(
        conn,
        &AgentMessage::Resync(Resync {
            reason: "conformance check".to_owned(),
            last_generation: first.map(|f| f.generation),
        }),
    )
    .await?;
    let s = snapshot(conn).await?;
    let text = format!("desired_state seq {} generation {}", s.seq, s.generation);
    Ok((s, text))
}

fn generations_consistent(snapshots: &[&DesiredStateMessage]) -> Result<String, String> {
    for (i, a) in snapshots.iter().enumerate() {
        for b in &snapshots[i + 1..] {
            if a.generation == b.generation && a.apps != b.apps {
                return Err(format!(
                    "generation {} was sent with different apps",
                    a.generation
                ));
            }
        }
    }
    if snapshots.is_empty() {
        return Err("no snapshot to compare".to_owned());
    }
    Ok(format!(
        "{} snapshots, generations {:?}",
        snapshots.len(),
        snapshots.iter().map(|s| s.generation).collect::<Vec<_>>()
    ))
}
