//! Identity bound to credentials: a token speaks for the agent ids bound to it and no other.
//! An impersonator naming another host's id is refused with 403 on the upgrade (or, without the
//! `odac-agent-id` header, with `error unauthorized` before `welcome`), never receives the
//! host's desired state and never displaces the real agent's session; a static token cannot
//! register hundreds of invented ids; ids breaking the agent-id rule are refused; enrollment
//! binds a token to its id; minting codes needs the API token when one is set.

use crate::common;

use std::time::Duration;

use common::{Sim, TOKEN};
use odac_protocol::{AgentMessage, ControlMessage, ErrorCode, Event};
use odac_simulator::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};
use odac_simulator::fake_agent::inventories::profile;
use serde_json::json;

const OTHER: &str = "other-valid-token";

fn sim_with_two_tokens(hosts_per_token: u32) -> Sim {
    Sim::start_with(|c| {
        c.tokens = vec![TOKEN.to_owned(), OTHER.to_owned()];
        c.hosts_per_token = hosts_per_token;
    })
}

/// Connects with `token` naming `id` on the upgrade and in `hello`.
fn connect(
    sim: &Sim,
    token: &str,
    id: &str,
) -> Result<(AgentConn, odac_protocol::Welcome), ConnError> {
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    let (token, id) = (token.to_owned(), id.to_owned());
    sim.rt.block_on(async move {
        AgentConn::connect_hello(&url, ca.as_bytes(), &token, AgentConn::hello(&id, "h")).await
    })
}

/// Connects with `token` without the header and sends `hello` for `id`; returns everything
/// received until the connection closed.
fn hello_without_header(sim: &Sim, token: &str, id: &str) -> (Vec<Incoming>, Option<u16>) {
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    let (token, id) = (token.to_owned(), id.to_owned());
    sim.rt.block_on(async move {
        let mut c = AgentConn::connect(&url, ca.as_bytes(), &token)
            .await
            .unwrap();
        c.send(&AgentMessage::Hello(AgentConn::hello(&id, "h")))
            .await
            .unwrap();
        let mut got = Vec::new();
        loop {
            match c.recv_timeout(Duration::from_secs(5)).await {
                Ok(m) => got.push(m),
                Err(ConnError::Closed(code)) => return (got, code),
                Err(e) => panic!("closed connection expected, got {e}"),
            }
        }
    })
}

/// The real agent's session is alive: a report is still acked on it.
fn still_served(sim: &Sim, c: &mut AgentConn, seq: u64) {
    sim.rt.block_on(async {
        c.send(&AgentMessage::Event(Event {
            seq,
            message: "still here".into(),
            ..Event::default()
        }))
        .await
        .unwrap();
        loop {
            match c.recv_timeout(Duration::from_secs(5)).await.unwrap() {
                Incoming::Message(ControlMessage::Ack(a)) if a.seq == seq => return,
                Incoming::Message(ControlMessage::AppUpsert(_)) => {}
                other => panic!("ack {seq} expected, got {other:?}"),
            }
        }
    });
}

#[test]
fn another_token_cannot_impersonate_a_connected_host() {
    let sim = sim_with_two_tokens(1);
    let mut real = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"private","source":{"url":"https://git.example/o/r.git","secret":"ghp_topsecret"},"host":"agt_a"}"#);

    // with the header: 403 on the upgrade, before any frame
    for _ in 0..8 {
        let err = connect(&sim, OTHER, "agt_a").err().unwrap();
        assert!(matches!(err, ConnError::Http { status: 403, .. }), "{err}");
    }
    // without it: error unauthorized and close 1008 instead of welcome and desired state
    let (got, code) = hello_without_header(&sim, OTHER, "agt_a");
    assert_eq!(code, Some(1008));
    match got.as_slice() {
        [Incoming::Message(ControlMessage::Error(e))] => {
            assert_eq!(e.code, ErrorCode::Unauthorized);
            assert!(e.message.contains("agt_a"), "{}", e.message);
        }
        other => panic!("one error expected, got {other:?}"),
    }

    // the real agent was never replaced: same session, still served, one session counted
    still_served(&sim, &mut real, 50);
    let host = sim.wait_api("/api/hosts/agt_a", |h| h["connected"] == true);
    assert_eq!(host["connected"], true);
    let sessions = sim.server().hub.read(|d| d.hosts["agt_a"].sessions);
    assert_eq!(sessions, 1, "no other session ever registered as agt_a");

    // the binding survives a restart of the simulator
    drop(real);
    let mut sim = sim;
    sim.restart_with(|c| {
        c.tokens = vec![TOKEN.to_owned(), OTHER.to_owned()];
        c.hosts_per_token = 1;
    });
    let err = connect(&sim, OTHER, "agt_a").err().unwrap();
    assert!(matches!(err, ConnError::Http { status: 403, .. }), "{err}");
    assert!(connect(&sim, TOKEN, "agt_a").is_ok());
}

#[test]
fn a_static_token_registers_its_first_ids_only() {
    let sim = sim_with_two_tokens(3);
    let mut accepted = Vec::new();
    let mut refused = 0;
    for i in 0..300 {
        let id = format!("invented-{i:03}");
        match connect(&sim, OTHER, &id) {
            Ok((c, _)) => {
                accepted.push(id);
                sim.rt.block_on(c.close());
            }
            Err(ConnError::Http { status: 403, .. }) => refused += 1,
            Err(e) => panic!("{id}: {e}"),
        }
    }
    assert_eq!(accepted, ["invented-000", "invented-001", "invented-002"]);
    assert_eq!(refused, 297);
    let (_, hosts) = sim.call("GET", "/api/hosts", None);
    assert_eq!(hosts.as_array().unwrap().len(), 3, "{hosts}");
    // the ids it holds still work; the other token has its own allowance
    assert!(connect(&sim, OTHER, "invented-001").is_ok());
    assert!(connect(&sim, TOKEN, "mine").is_ok());
}

#[test]
fn agent_ids_breaking_the_rule_are_refused() {
    let sim = Sim::start();
    for id in ["../../etc", "a/b", "with space", "..", "-x"] {
        let err = connect(&sim, TOKEN, id).err().unwrap();
        assert!(
            matches!(err, ConnError::Http { status: 400, .. }),
            "{id}: {err}"
        );
    }
    for id in ["../../etc", "bell\u{7}", "tab\tid", ""] {
        let (got, code) = hello_without_header(&sim, TOKEN, id);
        assert_eq!(code, Some(1008), "{id:?}");
        match got.as_slice() {
            [Incoming::Message(ControlMessage::Error(e))] => {
                assert_eq!(e.code, ErrorCode::Invalid, "{id:?}");
                assert!(e.message.starts_with("agent_id: "), "{id:?}: {}", e.message);
            }
            other => panic!("{id:?}: one error expected, got {other:?}"),
        }
    }
    let (_, hosts) = sim.call("GET", "/api/hosts", None);
    assert_eq!(hosts, json!([]));
    // a header that does not match hello is refused too
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    let (got, code) = sim.rt.block_on(async {
        let mut c = AgentConn::connect_as(&url, ca.as_bytes(), TOKEN, Some("agt_x"))
            .await
            .unwrap();
        c.send(&AgentMessage::Hello(AgentConn::hello("agt_y", "h")))
            .await
            .unwrap();
        let m = c.recv_timeout(Duration::from_secs(5)).await.unwrap();
        (m, c.recv_timeout(Duration::from_secs(5)).await.err())
    });
    match got {
        Incoming::Message(ControlMessage::Error(e)) => {
            assert_eq!(e.code, ErrorCode::Unauthorized);
            assert!(e.message.contains("odac-agent-id"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(code, Some(ConnError::Closed(Some(1008)))),
        "{code:?}"
    );
}

#[test]
fn enrollment_binds_the_token_to_one_agent() {
    let sim = Sim::start_with(|c| c.enroll_codes = vec!["code-1".into(), "code-2".into()]);
    // a bad agent_id is refused before the code is spent
    let (s, e) = sim.call(
        "POST",
        "/api/enroll",
        Some(r#"{"code":"code-1","agent_id":"../etc"}"#),
    );
    assert_eq!((s, e["field"].clone()), (400, json!("agent_id")), "{e}");
    let (s, e) = sim.call(
        "POST",
        "/api/enroll",
        Some(r#"{"code":"code-1","agnet_id":"x"}"#),
    );
    assert_eq!((s, e["field"].clone()), (400, json!("agnet_id")), "{e}");
    let (s, v) = sim.call(
        "POST",
        "/api/enroll",
        Some(r#"{"code":"code-1","agent_id":"agt_e"}"#),
    );
    assert_eq!(s, 201, "{v}");
    let bound = v["token"].as_str().unwrap().to_owned();
    assert!(connect(&sim, &bound, "agt_e").is_ok());
    let err = connect(&sim, &bound, "agt_f").err().unwrap();
    assert!(matches!(err, ConnError::Http { status: 403, .. }), "{err}");

    // without agent_id the token belongs to the first id it is used with
    let (_, v) = sim.call("POST", "/api/enroll", Some(r#"{"code":"code-2"}"#));
    let first_use = v["token"].as_str().unwrap().to_owned();
    assert!(connect(&sim, &first_use, "agt_g").is_ok());
    for id in ["agt_h", "agt_e"] {
        let err = connect(&sim, &first_use, id).err().unwrap();
        assert!(
            matches!(err, ConnError::Http { status: 403, .. }),
            "{id}: {err}"
        );
    }
    // and the shared test token cannot take an enrolled host's id either
    let err = connect(&sim, TOKEN, "agt_e").err().unwrap();
    assert!(matches!(err, ConnError::Http { status: 403, .. }), "{err}");

    // enrollment never moves a bound id (minting a code must not be a way to take a host over)
    let (_, v) = sim.call("POST", "/api/enroll/codes", None);
    let code = v["code"].as_str().unwrap().to_owned();
    let (s, e) = sim.call(
        "POST",
        "/api/enroll",
        Some(&json!({"code": code, "agent_id": "agt_e"}).to_string()),
    );
    assert_eq!((s, e["field"].clone()), (409, json!("agent_id")), "{e}");
    assert!(connect(&sim, &bound, "agt_e").is_ok(), "the owner keeps it");
    let (s, _) = sim.call(
        "POST",
        "/api/enroll",
        Some(&json!({"code": code, "agent_id": "agt_new"}).to_string()),
    );
    assert_eq!(s, 201, "the code was not spent by the refusal");
}

#[test]
fn minting_enrollment_codes_needs_the_api_token_when_one_is_set() {
    let sim = Sim::start_with(|c| c.api_token = Some("api-secret".into()));
    let (s, _) = sim.call("POST", "/api/enroll/codes", None);
    assert_eq!(s, 401);
    let (s, _) = sim.call_auth("POST", "/api/enroll/codes", None, Some("wrong"));
    assert_eq!(s, 401);
    let (s, v) = sim.call_auth("POST", "/api/enroll/codes", None, Some("api-secret"));
    assert_eq!(s, 201, "{v}");
    let (s, e) = sim.call_auth(
        "POST",
        "/api/enroll/codes",
        Some(r#"{"count":18446744073709551615}"#),
        Some("api-secret"),
    );
    assert_eq!((s, e["field"].clone()), (400, json!("count")), "{e}");
}
