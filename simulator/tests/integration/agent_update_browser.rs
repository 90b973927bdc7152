//! The dashboard's Agent column in headless Chromium: each host's agent version and its
//! update state as the agent reports it (`update_status`), an `update_failed` with its cause
//! marked as a reason, then a later `committed` applied live from the event stream.
//! Needs Chromium and chromedriver: a missing one fails unless `ODAC_ALLOW_SKIP=1`.

use crate::browser;
use crate::common;

use std::time::Duration;

use browser::Driver;
use common::Sim;
use odac_protocol::{AgentMessage, UpdatePhase, UpdateStatusReport};
use odac_simulator::fake_agent::inventories::profile;
use serde_json::{Value, json};

const CELL_JS: &str = r#"
const c = document.querySelector('tr[data-host="h1"] td.agent');
return c ? { text: c.textContent, failed: !!c.querySelector('.reason') } : null;"#;

/// The Agent cell once its text contains `needle` (20 s at most).
async fn cell_with(d: &Driver, what: &str, needle: &str, failure_png: &std::path::Path) -> Value {
    d.wait_for(
        what,
        Duration::from_secs(20),
        failure_png,
        || d.eval::<Value>(CELL_JS, vec![]),
        |v| v["text"].as_str().is_some_and(|t| t.contains(needle)),
    )
    .await
}

#[test]
fn agent_update_state_shows_in_the_dashboard_and_follows_the_reports() {
    let Some((browser_bin, driver_bin)) =
        browser::chromium_or_skip("agent update browser test", false)
    else {
        return;
    };
    let sim = Sim::start();
    let mut conn = sim.agent("h1", profile(3, "h1"));
    let report = |seq, phase, version: &str, message: Option<&str>| {
        AgentMessage::UpdateStatus(UpdateStatusReport {
            seq,
            version: version.to_owned(),
            phase,
            message: message.map(str::to_owned),
            ..UpdateStatusReport::default()
        })
    };
    sim.rt
        .block_on(conn.send(&report(
            2,
            UpdatePhase::UpdateFailed,
            "0.3.0",
            Some("version 0.3.0 did not commit after 1 start(s)"),
        )))
        .unwrap();
    sim.wait_api("/api/hosts", |h| h[0]["update"]["phase"] == "update_failed");
    let failure_png = browser::target_dir().join("agent-update-failure.png");
    sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
        d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
            .await;
        let v = cell_with(
            &d,
            "the failed update in the Agent cell",
            "update_failed",
            &failure_png,
        )
        .await;
        let text = v["text"].as_str().unwrap();
        assert!(
            text.starts_with("sim-"),
            "the agent's version first: {text}"
        );
        assert!(
            text.contains(
                "update 0.3.0 update_failed: version 0.3.0 did not commit after 1 start(s)"
            ),
            "{text}"
        );
        assert_eq!(v["failed"], json!(true), "a failure is marked as a reason");
        // a later report arrives live
        conn.send(&report(3, UpdatePhase::Committed, "0.4.0", None))
            .await
            .unwrap();
        let v = cell_with(
            &d,
            "the committed update, live",
            "update 0.4.0 committed",
            &failure_png,
        )
        .await;
        assert_eq!(v["failed"], json!(false), "{v}");
        d.close().await;
    });
}
