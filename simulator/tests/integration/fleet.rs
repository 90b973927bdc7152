//! Simulated fleets: N protocol-level agents with realistic inventories connect, receive and
//! report desired state, and reconnect after every connection is dropped.

use crate::common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Sim, TOKEN};
use odac_simulator::fake_agent::fleet::{Fleet, FleetConfig};

#[test]
fn a_fleet_connects_reports_and_survives_a_reconnect_storm() {
    let sim = Sim::start();
    let fleet = {
        let _guard = sim.rt.enter();
        Fleet::start(&FleetConfig {
            agents: 6,
            url: sim.server().agents_url(),
            ca_pem: sim.server().ca_pem.clone().into_bytes(),
            token: TOKEN.to_owned(),
            prefix: "t".to_owned(),
            heartbeat: Duration::from_secs(1),
        })
    };
    let hosts = sim.wait_api("/api/hosts", |h| {
        h.as_array().unwrap().len() == 6
            && h.as_array()
                .unwrap()
                .iter()
                .all(|h| h["connected"] == true && h["inventory"].is_object())
    });
    let vendors: Vec<String> = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["schedulable"].to_string())
        .collect();
    assert!(vendors.contains(&r#"["nvidia"]"#.to_owned()), "{vendors:?}");
    assert!(vendors.contains(&r#"["amd"]"#.to_owned()), "{vendors:?}");
    assert!(vendors.contains(&"[]".to_owned()), "{vendors:?}");

    sim.create_app_text(
        r#"{"name":"llm","image":"x","host":"t-0001","gpu":{"runtime":"amd","count":2}}"#,
    );
    let app = sim.wait_api("/api/apps/llm", |a| a["state"] == "running");
    assert_eq!(app["attached"]["devices"][0], "/dev/kfd");

    let (_, v) = sim.call(
        "POST",
        "/api/admin/faults",
        Some(r#"{"drop_connections":true}"#),
    );
    assert_eq!(v["sessions_affected"], 6);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while fleet.stats.sessions.load(Ordering::Relaxed) < 12 {
        assert!(
            std::time::Instant::now() < deadline,
            "no reconnect: {}",
            fleet.summary()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sim.wait_api("/api/hosts", |h| {
        h.as_array().unwrap().iter().all(|h| h["connected"] == true)
    });
    println!("{}", fleet.summary());
    assert_eq!(fleet.stats.errors.load(Ordering::Relaxed), 0);
    sim.rt.block_on(fleet.stop());
    sim.wait_api("/api/hosts", |h| {
        h.as_array()
            .unwrap()
            .iter()
            .all(|h| h["connected"] == false)
    });
}
