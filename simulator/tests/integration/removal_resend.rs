//! The simulator gets an unacked `removed` status again, with the same `seq`, from a
//! restarted agent (PROTOCOL.md 4.1, 4.4): the real agent side (uplink and app manager on the
//! fake engine) runs in process against `odac-sim`; an app is deleted while the
//! `withhold_acks` fault is on, the agent is stopped before any ack and started again on the
//! same state dir with acks resumed. The resend is acked (the agent's file of unacked
//! removals empties) and recorded once: a new `seq` would be recorded a second time.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Sim, TOKEN};
use odac_agent::appmgr::{AppManager, AppManagerConfig, HostSource};
use odac_agent::run::ManagerControl;
use odac_agent::uplink::backoff::BackoffPolicy;
use odac_agent::uplink::connect::{Dialer, Endpoint};
use odac_agent::uplink::outbox::OutboxLimits;
use odac_agent::uplink::removal_log::REMOVALS_FILE;
use odac_agent::uplink::token::Token;
use odac_agent::uplink::{Uplink, UplinkConfig};
use odac_host::engine::FakeEngine;
use odac_protocol::Inventory;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const AGENT: &str = "agt_removal";

fn start_agent(sim: &Sim, dir: &Path, fake: &Arc<FakeEngine>) -> CancellationToken {
    let server = sim.server();
    let config = UplinkConfig {
        dialer: Dialer::new(
            Endpoint::parse(&server.agents_url()).unwrap(),
            odac_simulator::server::tls::client_config(server.ca_pem.as_bytes()).unwrap(),
            Token::new(TOKEN).unwrap(),
            Duration::from_secs(10),
        ),
        agent_id: AGENT.into(),
        hostname: "removal".into(),
        heartbeat: Duration::from_secs(20),
        welcome_timeout: Duration::from_secs(10),
        backoff: BackoffPolicy::default(),
        outbox: OutboxLimits::default(),
        state_dir: Some(dir.to_path_buf()),
        jitter_seed: Some(7),
    };
    let shutdown = CancellationToken::new();
    let fake = fake.clone();
    let dir = dir.to_path_buf();
    let stop = shutdown.clone();
    sim.rt.spawn(async move {
        let manager = AppManager::open_with_host(
            AppManagerConfig {
                state_dir: dir,
                stop_timeout_secs: 0,
                poll_interval_ms: 100,
                instance: format!("rmresend{}", std::process::id()),
                ..AppManagerConfig::default()
            },
            fake,
            HostSource::Root(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/no-gpu"),
            ),
        )
        .unwrap();
        let mut inv = Inventory::default();
        inv.host.hostname = "removal".into();
        inv.host.cpus = 4;
        let (_inv_tx, inv_rx) = watch::channel(Some(Arc::new(inv)));
        let uplink = Uplink::new(config, Arc::new(ManagerControl(manager.clone())), inv_rx);
        tokio::join!(manager.run(stop.clone()), uplink.run(stop.clone()));
    });
    shutdown
}

fn removed_lines(sim: &Sim) -> usize {
    let log = sim.client().get("/api/events/log").unwrap();
    log.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["message"] == format!("app web removed from host {AGENT}"))
        .count()
}

fn wait(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_restarted_agent_resends_an_unacked_removal_with_its_seq() {
    let sim = Sim::start();
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    fake.add_image("busybox:1.36");
    let file = dir.path().join(REMOVALS_FILE);
    let unacked = || std::fs::read_to_string(&file).is_ok_and(|t| t.contains("\"web\""));

    let agent = start_agent(&sim, dir.path(), &fake);
    let client = sim.client();
    wait("the agent connects", || {
        client
            .get(&format!("/api/hosts/{AGENT}"))
            .is_ok_and(|h| h["connected"] == true)
    });
    let (s, body) = sim.call(
        "POST",
        "/api/apps",
        Some(&format!(
            r#"{{"name":"web","host":"{AGENT}","image":"busybox:1.36","command":["httpd","-f"]}}"#
        )),
    );
    assert_eq!(s, 201, "{body}");
    sim.wait_api("/api/apps/web", |a| a["state"] == "running");

    let (s, _) = sim.call(
        "POST",
        "/api/admin/faults",
        Some(r#"{"withhold_acks":true}"#),
    );
    assert_eq!(s, 200);
    let (s, _) = sim.call("DELETE", "/api/apps/web", None);
    assert_eq!(s, 200);
    wait("the simulator records the removal", || {
        removed_lines(&sim) == 1
    });
    assert!(unacked(), "the agent keeps the unacked removal");
    agent.cancel();
    sim.wait_api(&format!("/api/hosts/{AGENT}"), |h| h["connected"] == false);

    let (s, _) = sim.call("POST", "/api/admin/faults", Some(r#"{"clear":true}"#));
    assert_eq!(s, 200);
    let agent = start_agent(&sim, dir.path(), &fake);
    wait("the resend is acked", || !unacked());
    assert_eq!(
        removed_lines(&sim),
        1,
        "the resend is recorded once: same seq"
    );
    agent.cancel();
}
