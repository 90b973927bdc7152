//! Identity bound to credentials, against the real simulator and a real agent: another
//! credential — here a token minted through the (open, loopback-only) API — presenting the real
//! agent's id is refused with HTTP 403 on the upgrade, eight times in a row, and without the
//! `odac-agent-id` header with `error unauthorized` before `welcome`; it never receives the
//! host's desired state, enrollment cannot move the id to it (409), and the real agent stays
//! connected on its first session, never kicked off and never backed off.

use std::time::{Duration, Instant};

use odac_e2e::agent::{SESSION_LOST, SESSION_UP};
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use odac_protocol::{AgentMessage, ControlMessage, ErrorCode};
use odac_simulator::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};
use serde_json::json;

#[test]
fn another_credential_cannot_take_the_real_agents_id() {
    const SCENARIO: &str = "impersonation";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).start().unwrap();
    let id = stack.wait_connected(Duration::from_secs(30)).unwrap();
    stack.sim.create_app(&Stack::app_body("imp0")).unwrap();
    stack.wait_converged(1, Duration::from_secs(60)).unwrap();
    let process = stack.agent().unwrap().process().unwrap();
    let sessions_before = process.count_lines(SESSION_UP);
    let lost_before = process.count_lines(SESSION_LOST);

    // a credential of its own, minted through the open API
    let client = stack.sim.client().unwrap();
    let code = client.post("/api/enroll/codes", &json!({})).unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let stolen = client
        .post("/api/enroll", &json!({ "code": code }))
        .unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    // enrollment cannot move the real agent's id to a new token
    let code2 = client.post("/api/enroll/codes", &json!({})).unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let e = client
        .post("/api/enroll", &json!({ "code": code2, "agent_id": id }))
        .unwrap_err()
        .to_string();
    assert!(e.contains("belongs to another credential"), "{e}");

    let url = stack.sim.agents_url();
    let ca = std::fs::read(stack.sim.ca_path()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let t0 = Instant::now();
    rt.block_on(async {
        for attempt in 1..=8 {
            let r =
                AgentConn::connect_hello(&url, &ca, &stolen, AgentConn::hello(&id, "evil")).await;
            assert!(
                matches!(r, Err(ConnError::Http { status: 403, .. })),
                "attempt {attempt}: {:?}",
                r.map(|(_, w)| w)
            );
        }
        // an old-style client that names no id on the upgrade is refused at hello
        let mut c = AgentConn::connect(&url, &ca, &stolen).await.unwrap();
        c.send(&AgentMessage::Hello(AgentConn::hello(&id, "evil")))
            .await
            .unwrap();
        let mut got = Vec::new();
        let end = loop {
            match c.recv_timeout(Duration::from_secs(5)).await {
                Ok(m) => got.push(m),
                Err(e) => break e,
            }
        };
        assert!(matches!(end, ConnError::Closed(Some(1008))), "{end}");
        match got.as_slice() {
            [Incoming::Message(ControlMessage::Error(e))] => {
                assert_eq!(e.code, ErrorCode::Unauthorized)
            }
            other => panic!("only an error expected, got {other:?}"),
        }
    });
    println!(
        "impersonation: 9 attempts refused in {:.2} s",
        t0.elapsed().as_secs_f64()
    );

    // the real agent was never disturbed: same session, still connected, still converged
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(stack.wait_connected(Duration::from_secs(5)).unwrap(), id);
    assert_eq!(
        process.count_lines(SESSION_UP),
        sessions_before,
        "no new session"
    );
    assert_eq!(
        process.count_lines(SESSION_LOST),
        lost_before,
        "no lost session"
    );
    stack.sim.create_app(&Stack::app_body("imp1")).unwrap();
    stack.wait_converged(2, Duration::from_secs(60)).unwrap();
}
