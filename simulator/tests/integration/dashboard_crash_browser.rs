//! The dashboard in headless Chromium shows why an app is down (and, once it runs, the short
//! digest of the image it really runs): a crash-looping app's Reason
//! cell is its crash (reason, exit code, next retry, the last output), not the GPU fallback
//! its status still carries; once it runs with a failing health check, the state carries an
//! `unhealthy` badge with the check's output. Statuses come from a protocol-level agent over
//! the real WebSocket, changes reach the page through the event stream. Needs Chromium and
//! chromedriver: a missing one fails unless `ODAC_ALLOW_SKIP=1` (and not `ODAC_REQUIRE_DOCKER=1`).

use crate::browser;
use crate::common;

use std::time::Duration;

use browser::Driver;
use common::Sim;
use odac_protocol::{AppState, HealthReport, HealthState};
use odac_simulator::fake_agent::inventories::profile;
use serde::Deserialize;

fn chromium() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    browser::chromium_or_skip("dashboard crash test", true)
}

#[derive(Debug, Deserialize)]
struct Row {
    state: String,
    reason: String,
    tail: String,
    health: String,
    health_output: String,
    digest: String,
}

const ROW_JS: &str = r#"
const r = document.querySelector('tr[data-app="boom"]');
if (!r) return null;
const text = s => { const e = r.querySelector(s); return e ? e.textContent : ""; };
return {
  state: text(".state"),
  reason: text(".reason"),
  tail: text(".reason pre"),
  health: text(".health .badge"),
  health_output: text(".health-output"),
  digest: text(".digest"),
};
"#;

async fn row(d: &Driver) -> Option<Row> {
    d.eval(ROW_JS, vec![]).await
}

#[test]
fn the_dashboard_says_why_an_app_is_down_and_how_healthy_it_is() {
    let Some((browser_bin, driver_bin)) = chromium() else {
        return;
    };
    let sim = Sim::start();
    let mut agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"boom","image":"busybox"}"#);
    let mut st = odac_simulator::fake_agent::sim_agent::status_for(
        &odac_protocol::AppSpec::new("boom", "busybox"),
        &profile(3, "a"),
        2,
    );
    st.state = AppState::CrashLoop;
    common::crash_loop_after_an_old_refusal(&mut st);
    sim.send_status(&mut agent, 2, st.clone());
    sim.wait_api("/api/apps/boom", |v| v["state"] == "crash_loop");

    let failure_png = browser::target_dir().join("dashboard-crash-failure.png");
    let d = sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
        d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
            .await;
        d
    });
    let r = sim.rt.block_on(d.wait_for(
        "the crash in the reason cell",
        Duration::from_secs(10),
        &failure_png,
        || row(&d),
        |r| r.as_ref().is_some_and(|r| r.state == "crash_loop"),
    ));
    let r = r.unwrap();
    assert!(r.reason.starts_with("crash_loop"), "{r:?}");
    assert!(r.reason.contains("exit 3"), "{r:?}");
    assert!(r.reason.contains("next retry"), "{r:?}");
    assert!(
        !r.reason.contains("engine_rejected"),
        "no stale gpu reason: {r:?}"
    );
    assert_eq!(r.tail, "loading\nboom\n");
    assert_eq!(r.health, "");

    st.state = AppState::Running;
    st.crash = None;
    st.image_id =
        Some("sha256:aaed00369d7d41e4b4d8ef2bd4b1a2cbd2f8c1e2f3a4b5c6d7e8f9a0b1c2d3e4".into());
    st.repo_digest = Some("127.0.0.1:5000/odac/boom@sha256:6267e2b6b2c6f75f00112233".into());
    st.health = Some(HealthReport {
        state: HealthState::Unhealthy,
        last_output: Some("model not loaded".into()),
    });
    sim.send_status(&mut agent, 3, st);
    let r = sim.rt.block_on(d.wait_for(
        "the health badge",
        Duration::from_secs(10),
        &failure_png,
        || row(&d),
        |r| r.as_ref().is_some_and(|r| r.health == "unhealthy"),
    ));
    let r = r.unwrap();
    assert_eq!(
        (r.state.as_str(), r.health_output.as_str()),
        ("running", "model not loaded")
    );
    assert!(!r.reason.contains("crash"), "{r:?}");
    assert_eq!(r.digest, "@6267e2b6b2c6", "the short repo digest: {r:?}");
    sim.rt.block_on(d.close());
}
