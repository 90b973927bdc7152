//! The agents' WebSocket at the protocol level: auth and subprotocol checks, the handshake,
//! desired state on connect, seq/ack, and bad frames answered with `error` messages while the
//! session goes on (oversize frames are answered and closed with 1009).

use crate::common;

use std::time::Duration;

use common::{Sim, TOKEN};
use odac_protocol::{
    AgentMessage, AppStatusReport, ControlMessage, ErrorCode, Event, EventLevel, MAX_FRAME_BYTES,
};
use odac_simulator::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};
use odac_simulator::fake_agent::inventories::profile;
use odac_simulator::fake_agent::sim_agent::status_for;

fn next(sim: &Sim, c: &mut AgentConn) -> Incoming {
    sim.rt
        .block_on(c.recv_timeout(Duration::from_secs(5)))
        .unwrap()
}

fn error_of(m: Incoming) -> odac_protocol::ErrorMessage {
    match m {
        Incoming::Message(ControlMessage::Error(e)) => e,
        other => panic!("error expected, got {other:?}"),
    }
}

#[test]
fn wrong_token_and_missing_subprotocol_are_refused() {
    let sim = Sim::start();
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    let err = sim
        .rt
        .block_on(AgentConn::connect(&url, ca.as_bytes(), "wrong"))
        .err()
        .unwrap();
    assert!(matches!(err, ConnError::Http { status: 401, .. }), "{err}");

    // a plain WebSocket client that offers no subprotocol
    let tls = odac_simulator::server::tls::client_config(ca.as_bytes()).unwrap();
    let status = sim.rt.block_on(async {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = url.as_str().into_client_request().unwrap();
        req.headers_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        match tokio_tungstenite::connect_async_tls_with_config(
            req,
            None,
            false,
            Some(tokio_tungstenite::Connector::Rustls(tls)),
        )
        .await
        {
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => r.status().as_u16(),
            other => panic!("refusal expected, got {:?}", other.map(|_| ())),
        }
    });
    assert_eq!(status, 400);
}

#[test]
fn handshake_then_desired_state_with_the_hosts_apps() {
    let sim = Sim::start();
    let _first = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"one","image":"busybox"}"#);
    sim.create_app_text(r#"{"name":"two","image":"busybox"}"#);
    // a second session of the same host replaces the first and gets the full snapshot
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    let (mut c, w) = sim
        .rt
        .block_on(AgentConn::connect_hello(
            &url,
            ca.as_bytes(),
            TOKEN,
            AgentConn::hello("agt_a", "a"),
        ))
        .unwrap();
    assert_eq!(w.host_id, "agt_a");
    assert!(w.session_id.unwrap().starts_with("sess_"));
    assert_eq!(w.heartbeat_secs, Some(20));
    let Incoming::Message(ControlMessage::DesiredState(ds)) = next(&sim, &mut c) else {
        panic!("desired_state expected")
    };
    assert_eq!(ds.generation, 2);
    let names: Vec<_> = ds.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["one", "two"]);
    // acking the snapshot records the applied generation
    sim.rt
        .block_on(c.send(&AgentMessage::Ack(odac_protocol::Ack { seq: ds.seq })))
        .unwrap();
    sim.wait_api("/api/hosts/agt_a", |h| h["acked_generation"] == 2);
}

#[test]
fn every_report_is_acked_and_recorded() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox"}"#);
    next(&sim, &mut c); // upsert
    let status = status_for(
        &odac_protocol::AppSpec::new("web", "busybox"),
        &profile(3, "a"),
        1,
    );
    sim.rt.block_on(async {
        c.send(&AgentMessage::AppStatus(AppStatusReport { seq: 7, status }))
            .await
            .unwrap();
        c.send(&AgentMessage::Event(Event {
            seq: 8,
            level: EventLevel::Warn,
            app: Some("web".into()),
            message: "optional GPU request fell back to CPU".into(),
            dropped: Some(2),
            image_removed: None,
        }))
        .await
        .unwrap();
    });
    let mut acked = Vec::new();
    for _ in 0..2 {
        match next(&sim, &mut c) {
            Incoming::Message(ControlMessage::Ack(a)) => acked.push(a.seq),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(acked, [7, 8]);
    let app = sim.wait_api("/api/apps/web", |v| v["state"] == "running");
    assert_eq!(app["status"]["container_id"].as_str().unwrap().len(), 15);
    let (_, log) = sim.call("GET", "/api/events/log", None);
    assert!(
        log.as_array()
            .unwrap()
            .iter()
            .any(|e| e["source"] == "agent"
                && e["message"]
                    .as_str()
                    .unwrap()
                    .contains("fell back to CPU (2 earlier events dropped)")),
        "{log}"
    );
}

#[test]
fn bad_frames_get_error_messages_and_the_session_goes_on() {
    let sim = Sim::start();
    let mut c = sim.agent("agt_a", profile(3, "a"));
    let send = |c: &mut AgentConn, s: &str| sim.rt.block_on(c.send_raw(s.to_owned())).unwrap();

    send(&mut c, "{not json");
    assert_eq!(error_of(next(&sim, &mut c)).code, ErrorCode::Malformed);

    send(&mut c, r#"{"type":"teleport","seq":4}"#);
    let e = error_of(next(&sim, &mut c));
    assert_eq!(e.code, ErrorCode::UnknownType);
    assert_eq!(e.ref_seq, Some(4));

    send(
        &mut c,
        r#"{"type":"app_status","seq":5,"status":{"name":"Bad Name","generation":1,"state":"running"}}"#,
    );
    let e = error_of(next(&sim, &mut c));
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(e.message.starts_with("status.name: "), "{}", e.message);
    assert_eq!(e.ref_seq, Some(5));

    sim.rt
        .block_on(c.send(&AgentMessage::Hello(AgentConn::hello("agt_a", "a"))))
        .unwrap();
    assert_eq!(error_of(next(&sim, &mut c)).code, ErrorCode::Conflict);

    // still alive: a valid report is acked
    sim.rt
        .block_on(c.send(&AgentMessage::Event(Event {
            seq: 9,
            message: "still here".into(),
            ..Event::default()
        })))
        .unwrap();
    assert!(matches!(
        next(&sim, &mut c),
        Incoming::Message(ControlMessage::Ack(a)) if a.seq == 9
    ));

    // an oversize frame is answered with too_large and the session is closed with 1009
    let big = format!(
        r#"{{"type":"event","seq":10,"message":"{}"}}"#,
        "x".repeat(MAX_FRAME_BYTES)
    );
    send(&mut c, &big);
    assert_eq!(error_of(next(&sim, &mut c)).code, ErrorCode::TooLarge);
    let closed = sim.rt.block_on(c.recv_timeout(Duration::from_secs(5)));
    assert!(
        matches!(closed, Err(ConnError::Closed(Some(1009)))),
        "{closed:?}"
    );
}

#[test]
fn the_first_message_must_be_a_v1_hello() {
    let sim = Sim::start();
    sim.rt.block_on(async {
        let mut c = sim.raw_conn().await;
        c.send(&AgentMessage::Ack(odac_protocol::Ack { seq: 1 }))
            .await
            .unwrap();
        let m = c.recv_timeout(Duration::from_secs(5)).await.unwrap();
        assert_eq!(error_of(m).code, ErrorCode::Invalid);

        let mut c = sim.raw_conn().await;
        let mut hello = AgentConn::hello("agt_v2", "v2");
        hello.protocol_version = 2;
        c.send(&AgentMessage::Hello(hello)).await.unwrap();
        let m = c.recv_timeout(Duration::from_secs(5)).await.unwrap();
        assert_eq!(error_of(m).code, ErrorCode::UnsupportedVersion);
        assert!(matches!(
            c.recv_timeout(Duration::from_secs(5)).await,
            Err(ConnError::Closed(Some(1008)))
        ));
    });
}

#[test]
fn disconnect_is_seen_by_the_api() {
    let sim = Sim::start();
    let c = sim.agent("agt_a", profile(3, "a"));
    sim.wait_api("/api/hosts/agt_a", |h| h["connected"] == true);
    sim.rt.block_on(c.close());
    sim.wait_api("/api/hosts/agt_a", |h| h["connected"] == false);
}
