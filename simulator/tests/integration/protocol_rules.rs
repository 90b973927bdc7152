//! The simulator keeps the control plane's side of PROTOCOL.md section 4: a resent report
//! (same `seq`) is acked again but recorded once, `resync` is answered with a full
//! `desired_state` of the current view, and a `removed` status forgets the app's status on
//! that host.

use crate::common;

use std::time::Duration;

use common::Sim;
use odac_protocol::{
    AgentMessage, AppState, AppStatus, AppStatusReport, ControlMessage, Event, EventLevel, Resync,
};
use odac_simulator::fake_agent::agent_conn::{AgentConn, Incoming};
use odac_simulator::fake_agent::inventories::profile;

fn next(sim: &Sim, c: &mut AgentConn) -> Incoming {
    sim.rt
        .block_on(c.recv_timeout(Duration::from_secs(5)))
        .unwrap()
}

fn send(sim: &Sim, c: &mut AgentConn, m: AgentMessage) {
    sim.rt.block_on(c.send(&m)).unwrap();
}

fn ack_of(m: Incoming) -> u64 {
    match m {
        Incoming::Message(ControlMessage::Ack(a)) => a.seq,
        other => panic!("ack expected, got {other:?}"),
    }
}

fn agent_events(sim: &Sim, text: &str) -> usize {
    let (_, log) = sim.call("GET", "/api/events/log", None);
    log.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["message"].as_str().is_some_and(|m| m.contains(text)))
        .count()
}

#[test]
fn a_resent_report_is_acked_again_and_recorded_once() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_dup", profile(2, "dup"));
    let event = Event {
        seq: 40,
        level: EventLevel::Warn,
        app: None,
        message: "disk almost full (dedup test)".into(),
        dropped: None,
        image_removed: None,
    };
    send(&sim, &mut c, AgentMessage::Event(event.clone()));
    assert_eq!(ack_of(next(&sim, &mut c)), 40);
    // the ack was lost: the agent reconnects and resends the same report
    sim.rt.block_on(c.close());
    let mut c = sim.agent("agt_dup", profile(2, "dup"));
    send(&sim, &mut c, AgentMessage::Event(event));
    assert_eq!(ack_of(next(&sim, &mut c)), 40, "a duplicate is acked again");
    send(
        &sim,
        &mut c,
        AgentMessage::Event(Event {
            seq: 41,
            level: EventLevel::Info,
            app: None,
            message: "next one (dedup test)".into(),
            dropped: None,
            image_removed: None,
        }),
    );
    assert_eq!(ack_of(next(&sim, &mut c)), 41);
    assert_eq!(agent_events(&sim, "disk almost full (dedup test)"), 1);
    assert_eq!(agent_events(&sim, "next one (dedup test)"), 1);
}

#[test]
fn resync_is_answered_with_the_current_snapshot() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_rs", profile(2, "rs"));
    sim.create_app_text(r#"{"name":"web","host":"agt_rs","image":"busybox"}"#);
    let Incoming::Message(ControlMessage::AppUpsert(up)) = next(&sim, &mut c) else {
        panic!("upsert expected")
    };
    send(
        &sim,
        &mut c,
        AgentMessage::Resync(Resync {
            reason: "seq 2: internal: read-only file system".into(),
            last_generation: Some(0),
        }),
    );
    let Incoming::Message(ControlMessage::DesiredState(ds)) = next(&sim, &mut c) else {
        panic!("desired_state expected")
    };
    assert!(ds.seq > up.seq);
    assert_eq!(ds.generation, up.generation);
    let names: Vec<_> = ds.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["web"]);
}

#[test]
fn a_removed_status_forgets_the_app_on_that_host() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_rm", profile(2, "rm"));
    sim.create_app_text(r#"{"name":"gone","host":"agt_rm","image":"busybox"}"#);
    next(&sim, &mut c); // upsert, generation 1
    let running = AppStatus {
        name: "gone".into(),
        generation: 1,
        state: AppState::Running,
        ..AppStatus::default()
    };
    send(
        &sim,
        &mut c,
        AgentMessage::AppStatus(AppStatusReport {
            seq: 2,
            status: running,
        }),
    );
    assert_eq!(ack_of(next(&sim, &mut c)), 2);
    sim.wait_api("/api/apps/gone", |a| a["status"]["state"] == "running");
    let (code, _) = sim.call("DELETE", "/api/apps/gone", None);
    assert_eq!(code, 200);
    let Incoming::Message(ControlMessage::AppDelete(del)) = next(&sim, &mut c) else {
        panic!("delete expected")
    };
    let removed = AppStatus {
        name: "gone".into(),
        generation: del.generation,
        state: AppState::Removed,
        ..AppStatus::default()
    };
    send(
        &sim,
        &mut c,
        AgentMessage::AppStatus(AppStatusReport {
            seq: 3,
            status: removed,
        }),
    );
    assert_eq!(ack_of(next(&sim, &mut c)), 3);
    sim.wait_api("/api/hosts/agt_rm", |_| {
        agent_events_contains(&sim, "app gone removed from host agt_rm")
    });
}

fn agent_events_contains(sim: &Sim, text: &str) -> bool {
    agent_events(sim, text) > 0
}
