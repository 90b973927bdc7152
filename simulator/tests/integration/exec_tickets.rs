//! Exec sessions through the simulator, with a protocol-level agent on the other side that
//! dials the session socket with the real agent's dialer: `odac app exec` sends an
//! `exec_request` naming the command and the principal, the relayed stdout/stderr bytes land
//! on the CLI's own fds and the `exit` code becomes its code; a replayed ticket, an expired
//! one and one presented by another agent are refused (403, with the reason); an
//! `exec_refused` from the agent ends the CLI with 125 and the agent's reason.

use crate::common;

use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{Sim, TOKEN};
use futures_util::{SinkExt, StreamExt};
use odac_agent::uplink::{ConnectError, Dialer, Endpoint, Token};
use odac_protocol::{
    AgentMessage, ControlMessage, ExecEndReason, ExecExit, ExecFrame, ExecRefused, ExecRequest,
    STREAM_STDERR, STREAM_STDOUT,
};
use odac_simulator::fake_agent::agent_conn::AgentConn;
use tokio_tungstenite::tungstenite::Message;

fn odac_exec(sim: &Sim, args: &[&str]) -> Child {
    sim.spawn_odac(&[&["app", "exec"], args].concat(), Stdio::null())
}

/// The `exec_request` the CLI's session sent (the CLI's output on failure).
fn exec_request(sim: &Sim, c: &mut AgentConn, cli: &mut Child) -> ExecRequest {
    let got = sim.recv_control(c, |m| match m {
        ControlMessage::ExecRequest(r) => Some(r.clone()),
        _ => None,
    });
    got.unwrap_or_else(|e| {
        let _ = cli.kill();
        let mut err = String::new();
        if let Some(mut pipe) = cli.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
        }
        panic!("no exec_request ({e:?}); the cli said {err:?}")
    })
}

/// The real agent's session dialer for `agent_id`, trusting this simulator's CA.
pub(crate) fn dialer(sim: &Sim, agent_id: &str) -> Dialer {
    let tls = odac_simulator::server::tls::client_config(sim.server().ca_pem.as_bytes()).unwrap();
    Dialer::new(
        Endpoint::parse(&sim.server().agents_url()).unwrap(),
        Arc::clone(&tls),
        Token::new(TOKEN).unwrap(),
        Duration::from_secs(5),
    )
    .with_agent_id(agent_id)
}

fn refusal(result: Result<impl Sized, ConnectError>) -> String {
    match result {
        Err(ConnectError::Unauthorized { status, message }) => {
            assert_eq!(status, 403);
            message.unwrap_or_default()
        }
        Err(other) => panic!("expected a 403, got {other}"),
        Ok(_) => panic!("expected a refusal, the upgrade succeeded"),
    }
}

fn setup(sim: &Sim, id: &str) -> AgentConn {
    sim.agent_with_app(id, "web", "busybox")
}

#[test]
fn exec_bytes_and_exit_code_are_relayed_and_tickets_are_good_once() {
    let sim = Sim::start();
    let mut agent = setup(&sim, "agent-a");
    let mut cli = odac_exec(
        &sim,
        &["web", "--", "sh", "-c", "echo out; echo err >&2; exit 7"],
    );
    let req = exec_request(&sim, &mut agent, &mut cli);
    assert_eq!(req.app, "web");
    assert_eq!(req.cmd, ["sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(req.principal, "open-api");
    assert!(!req.tty);
    assert_eq!(req.ticket.0.len(), 64, "a 32-byte ticket in hex");

    // another agent cannot use the ticket; the agent it was issued to can, once
    let other = sim
        .rt
        .block_on(dialer(&sim, "agent-b").dial_exec(&req.ticket));
    let said = refusal(other);
    assert!(said.contains("another agent"), "{said}");
    let d = dialer(&sim, "agent-a");
    let mut ws = sim.rt.block_on(d.dial_exec(&req.ticket)).unwrap();
    let again = refusal(sim.rt.block_on(d.dial_exec(&req.ticket)));
    assert!(again.contains("already used"), "{again}");

    sim.rt.block_on(async {
        ws.send(Message::Binary(
            [&[STREAM_STDOUT][..], b"out\n"].concat().into(),
        ))
        .await
        .unwrap();
        ws.send(Message::Binary(
            [&[STREAM_STDERR][..], b"err\n"].concat().into(),
        ))
        .await
        .unwrap();
        let exit = ExecFrame::Exit(ExecExit {
            reason: ExecEndReason::Exited,
            code: Some(7),
            message: String::new(),
        });
        ws.send(Message::Text(exit.encode().into())).await.unwrap();
        let _ = ws.close(None).await;
        while ws.next().await.is_some() {}
    });
    let out = cli.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    assert_eq!(out.status.code(), Some(7));

    // an expired ticket is refused, and a replay of it says so
    let (_, old, _rx) = sim.server().hub.exec.open("agent-a", Duration::ZERO);
    let expired = refusal(sim.rt.block_on(d.dial_exec(&old)));
    assert!(expired.contains("expired"), "{expired}");
    let unknown = refusal(
        sim.rt
            .block_on(d.dial_exec(&odac_protocol::Ticket("0".repeat(64)))),
    );
    assert!(unknown.contains("unknown"), "{unknown}");
}

#[test]
fn an_agent_refusal_ends_the_cli_with_125_and_the_reason() {
    let sim = Sim::start();
    let mut agent = setup(&sim, "agent-r");
    let mut cli = odac_exec(&sim, &["web", "--", "true"]);
    let req = exec_request(&sim, &mut agent, &mut cli);
    let ticket = req.ticket.clone();
    let refused = ExecRefused {
        session_id: req.session_id,
        reason: ExecEndReason::Busy,
        message: "3 exec sessions are already open on this agent ([exec] max_sessions)".into(),
    };
    sim.rt
        .block_on(agent.send(&AgentMessage::ExecRefused(refused)))
        .unwrap();
    let out = cli.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("exec session ended (busy): 3 exec sessions are already open"),
        "{stderr}"
    );
    // the ticket of a refused session is spent
    let spent = refusal(sim.rt.block_on(dialer(&sim, "agent-r").dial_exec(&ticket)));
    assert!(spent.contains("already used"), "{spent}");
}

#[test]
fn a_missing_command_or_an_unknown_app_is_refused_before_any_session() {
    let sim = Sim::start();
    let _agent = setup(&sim, "agent-c");
    let out = odac_exec(&sim, &["nope", "--", "true"])
        .wait_with_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown app \"nope\""), "{stderr}");
    let out = odac_exec(&sim, &["web"]).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "clap requires the command");
}
