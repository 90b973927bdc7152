//! Control-plane-side liveness and the simulator's other closes of PROTOCOL.md 1.2: a
//! protocol-level agent that pings keeps its session past three heartbeat intervals; once it
//! stops, the simulator closes the session with 4001 `no heartbeat`, and the API shows the
//! host disconnected with the reason in the event log (the timing itself is tested with
//! paused time in `liveness.rs`). No `hello` within 10 s: 1008; a shutdown: 1001.

use crate::common;

use std::time::{Duration, Instant};

use common::Sim;
use odac_protocol::Inventory;
use odac_simulator::fake_agent::agent_conn::ConnError;

#[test]
fn a_silent_agent_is_closed_with_4001_and_shown_disconnected() {
    let sim = Sim::start_with(|c| c.heartbeat_secs = 1);
    let mut inv = Inventory::default();
    inv.host.hostname = "silent".to_owned();
    let mut c = sim.agent("agt_silent", inv);
    sim.rt.block_on(async {
        // pinging every 500 ms for 4 s: longer than three intervals, and still open
        for _ in 0..8 {
            c.ping().await.unwrap();
            match c.recv_timeout(Duration::from_millis(500)).await {
                Err(ConnError::Timeout) => {}
                other => panic!("the session ended while the agent pinged: {other:?}"),
            }
        }
        // silence
        let silent_since = Instant::now();
        let end = loop {
            match c.recv_timeout(Duration::from_secs(10)).await {
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        assert!(matches!(end, ConnError::Closed(Some(4001))), "{end}");
        assert_eq!(c.closed_with(), Some((4001, "no heartbeat")));
        assert!(
            silent_since.elapsed() >= Duration::from_secs(2),
            "closed too early"
        );
    });
    sim.wait_api("/api/hosts/agt_silent", |h| h["connected"] == false);
    let log = sim.client().get("/api/events/log").unwrap();
    assert!(
        log.as_array().unwrap().iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("host agt_silent missed 3 heartbeats"))),
        "{log}"
    );
}

#[test]
fn no_hello_within_10_s_is_closed_with_1008() {
    let sim = Sim::start();
    sim.rt.block_on(async {
        let mut c = sim.raw_conn().await;
        let end = loop {
            match c.recv_timeout(Duration::from_secs(20)).await {
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        assert!(matches!(end, ConnError::Closed(Some(1008))), "{end}");
    });
}

#[test]
fn a_shutdown_closes_sessions_with_1001() {
    let mut sim = Sim::start();
    let mut inv = Inventory::default();
    inv.host.hostname = "going".to_owned();
    let mut c = sim.agent("agt_going", inv);
    let server = sim.server.take().unwrap();
    sim.rt.block_on(async {
        let (_, end) = tokio::join!(server.shutdown(), async {
            loop {
                match c.recv_timeout(Duration::from_secs(10)).await {
                    Ok(_) => {}
                    Err(e) => break e,
                }
            }
        });
        assert!(matches!(end, ConnError::Closed(Some(1001))), "{end}");
    });
}
