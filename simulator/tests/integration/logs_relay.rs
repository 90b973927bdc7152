//! Live logs through the simulator with a protocol-level agent on the other side: `odac app
//! logs` sends `logs_request` with the flags given, prints the relayed chunks and the dropped
//! counts and exits 0 at a `complete` end; a viewer that goes away makes the control plane send
//! `logs_cancel`; an agent whose session ends ends its viewers with `agent_disconnected`
//! (exit 1 and a message); an app of a disconnected host is refused with 409.

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::Sim;
use odac_protocol::{AgentMessage, ControlMessage, LogsChunk, LogsRequest};
use odac_simulator::fake_agent::agent_conn::{AgentConn, Incoming};

fn odac_logs(sim: &Sim, args: &[&str]) -> Child {
    sim.spawn_odac(&[&["app", "logs"], args].concat(), Stdio::null())
}

fn logs_request(sim: &Sim, c: &mut AgentConn) -> LogsRequest {
    sim.recv_control(c, |m| match m {
        ControlMessage::LogsRequest(r) => Some(r.clone()),
        _ => None,
    })
    .unwrap()
}

fn send(sim: &Sim, c: &mut AgentConn, msg: AgentMessage) {
    sim.rt.block_on(c.send(&msg)).unwrap();
}

fn setup(sim: &Sim, id: &str, app: &str) -> AgentConn {
    sim.agent_with_app(id, app, "busybox")
}

fn wait_output(child: Child) -> (i32, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_prints_relayed_chunks_and_dropped_counts() {
    let sim = Sim::start();
    let mut c = setup(&sim, "agt_logs", "web");
    let child = odac_logs(
        &sim,
        &["web", "--tail", "5", "--since", "10m", "--timeout", "2h"],
    );
    let req = logs_request(&sim, &mut c);
    assert_eq!(req.app, "web");
    assert_eq!(req.tail, Some(5));
    assert_eq!(req.since_secs, Some(600));
    assert_eq!(req.timeout_secs, Some(7200));
    assert!(!req.follow);
    let id = req.request_id.clone();
    send(
        &sim,
        &mut c,
        AgentMessage::LogsChunk(LogsChunk {
            request_id: id.clone(),
            lines: vec!["boom".into(), "second line".into()],
            dropped: 3,
        }),
    );
    send(&sim, &mut c, common::logs_complete(id));
    let (code, stdout, stderr) = wait_output(child);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "boom\nsecond line\n");
    assert!(stderr.contains("[3 lines dropped]"), "{stderr}");
    assert!(sim.server().hub.logs.is_empty());
}

#[test]
fn a_viewer_that_goes_away_cancels_and_a_lost_agent_ends_viewers() {
    let sim = Sim::start();
    let mut c = setup(&sim, "agt_logs", "web");

    // the viewer goes away: the agent is told
    let mut gone = odac_logs(&sim, &["web", "--follow"]);
    let req = logs_request(&sim, &mut c);
    assert!(req.follow);
    send(
        &sim,
        &mut c,
        AgentMessage::LogsChunk(LogsChunk {
            request_id: req.request_id.clone(),
            lines: vec!["tick 1".into()],
            dropped: 0,
        }),
    );
    std::thread::sleep(Duration::from_millis(500));
    gone.kill().unwrap();
    let _ = gone.wait();
    // the closed connection is noticed at the next write: another chunk
    let deadline = Instant::now() + Duration::from_secs(30);
    let cancelled = loop {
        send(
            &sim,
            &mut c,
            AgentMessage::LogsChunk(LogsChunk {
                request_id: req.request_id.clone(),
                lines: vec!["tick".into()],
                dropped: 0,
            }),
        );
        let got = sim
            .rt
            .block_on(c.recv_until(Duration::from_millis(500), |m| match m {
                Incoming::Message(ControlMessage::LogsCancel(x)) => Some(x.request_id.clone()),
                _ => None,
            }));
        if let Ok(id) = got {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "no logs_cancel after the viewer went away"
        );
    };
    assert_eq!(cancelled, req.request_id);
    assert!(sim.server().hub.logs.is_empty());

    // the agent's session ends: its viewers end with a message
    let viewer = odac_logs(&sim, &["web", "--follow"]);
    let _req = logs_request(&sim, &mut c);
    sim.rt.block_on(c.close());
    let (code, stdout, stderr) = wait_output(viewer);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("log stream ended (agent_disconnected)"),
        "{stderr}"
    );

    // no session: refused at once
    let (code, _, stderr) = wait_output(odac_logs(&sim, &["web"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("is not connected"), "{stderr}");
}
