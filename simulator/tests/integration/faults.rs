//! Fault injection through `POST /api/admin/faults`: dropped connections, refused
//! connections, withheld and delayed acks, malformed and oversize frames, rejected tokens.

use crate::common;

use std::time::{Duration, Instant};

use common::{Sim, TOKEN};
use odac_protocol::{AgentMessage, ControlMessage, DecodeError, Event};
use odac_simulator::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};
use odac_simulator::fake_agent::inventories::profile;
use serde_json::json;

fn fault(sim: &Sim, body: &str) -> serde_json::Value {
    let (s, v) = sim.call("POST", "/api/admin/faults", Some(body));
    assert_eq!(s, 200, "{body}: {v}");
    v
}

fn event(sim: &Sim, c: &mut AgentConn, seq: u64) {
    sim.rt
        .block_on(c.send(&AgentMessage::Event(Event {
            seq,
            message: "x".into(),
            ..Event::default()
        })))
        .unwrap();
}

fn try_connect(sim: &Sim, token: &str) -> Result<(), ConnError> {
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    sim.rt
        .block_on(AgentConn::connect_hello(
            &url,
            ca.as_bytes(),
            token,
            AgentConn::hello("agt_probe", "probe"),
        ))
        .map(|_| ())
}

#[test]
fn drop_connections_cuts_every_session() {
    let sim = Sim::start();
    let mut a = sim.agent("agt_a", profile(3, "a"));
    let mut b = sim.agent("agt_b", profile(0, "b"));
    let v = fault(&sim, r#"{"drop_connections":true}"#);
    assert_eq!(v["sessions_affected"], 2);
    for c in [&mut a, &mut b] {
        let r = sim.rt.block_on(c.recv_timeout(Duration::from_secs(5)));
        assert!(
            matches!(r, Err(ConnError::Closed(_) | ConnError::Protocol(_))),
            "{r:?}"
        );
    }
    sim.wait_api("/api/hosts", |h| {
        h.as_array()
            .unwrap()
            .iter()
            .all(|h| h["connected"] == false)
    });
}

#[test]
fn refuse_connections_for_a_while() {
    let sim = Sim::start();
    fault(&sim, r#"{"refuse_secs":30}"#);
    let (_, view) = sim.call("GET", "/api/admin/faults", None);
    assert!(view["refusing_secs_left"].as_u64().unwrap() >= 29);
    let err = try_connect(&sim, TOKEN).unwrap_err();
    assert!(matches!(err, ConnError::Http { status: 503, .. }), "{err}");
    fault(&sim, r#"{"refuse_secs":1}"#);
    std::thread::sleep(Duration::from_millis(1100));
    try_connect(&sim, TOKEN).unwrap();
}

#[test]
fn withheld_acks_then_resumed() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_a", profile(3, "a"));
    fault(&sim, r#"{"withhold_acks":true}"#);
    event(&sim, &mut c, 2);
    let r = sim.rt.block_on(c.recv_timeout(Duration::from_millis(400)));
    assert!(
        matches!(r, Err(ConnError::Timeout)),
        "no ack expected: {r:?}"
    );
    fault(&sim, r#"{"withhold_acks":false}"#);
    event(&sim, &mut c, 3);
    let r = sim
        .rt
        .block_on(c.recv_timeout(Duration::from_secs(5)))
        .unwrap();
    assert!(matches!(r, Incoming::Message(ControlMessage::Ack(a)) if a.seq == 3));
}

#[test]
fn delayed_acks() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_a", profile(3, "a"));
    fault(&sim, r#"{"ack_delay_ms":300}"#);
    let t = Instant::now();
    event(&sim, &mut c, 2);
    let r = sim
        .rt
        .block_on(c.recv_timeout(Duration::from_secs(5)))
        .unwrap();
    assert!(matches!(r, Incoming::Message(ControlMessage::Ack(a)) if a.seq == 2));
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn malformed_and_oversize_frames_reach_the_agents() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_a", profile(3, "a"));
    let v = fault(&sim, r#"{"send_malformed":true}"#);
    assert_eq!(v["sessions_affected"], 1);
    let r = sim
        .rt
        .block_on(c.recv_timeout(Duration::from_secs(5)))
        .unwrap();
    assert!(
        matches!(r, Incoming::Undecodable(DecodeError::Malformed(_))),
        "{r:?}"
    );
    fault(&sim, r#"{"send_oversize":true}"#);
    let r = sim
        .rt
        .block_on(c.recv_timeout(Duration::from_secs(5)))
        .unwrap();
    assert!(
        matches!(r, Incoming::Undecodable(DecodeError::TooLarge { size }) if size == odac_protocol::MAX_FRAME_BYTES + 1),
        "{r:?}"
    );
}

#[test]
fn rejected_tokens_then_cleared() {
    let sim = Sim::start();
    fault(&sim, r#"{"reject_tokens":true}"#);
    let err = try_connect(&sim, TOKEN).unwrap_err();
    assert!(matches!(err, ConnError::Http { status: 401, .. }), "{err}");
    let (s, v) = sim.call("DELETE", "/api/admin/faults", None);
    assert_eq!(s, 200);
    assert_eq!(
        v["faults"],
        json!({"refusing_secs_left":0,"withhold_acks":false,"ack_delay_ms":0,"reject_tokens":false,"omit_retry_after":false,"wrong_close_codes":false})
    );
    try_connect(&sim, TOKEN).unwrap();
}

#[test]
fn bad_fault_requests_name_the_field() {
    let sim = Sim::start();
    let (s, e) = sim.call(
        "POST",
        "/api/admin/faults",
        Some(r#"{"refuse_secs":"soon"}"#),
    );
    assert_eq!((s, e["field"].clone()), (400, json!("refuse_secs")));
    let (s, e) = sim.call("POST", "/api/admin/faults", Some(r#"{"explode":true}"#));
    assert_eq!(s, 400, "{e}");
}
