//! The dashboard in headless Chromium at 1400 px tells where GPU apps fail (issue 31 finding
//! 11): the header counts a required NVIDIA app the engine refused (`engine_rejected`) on its
//! host beside "GPUs schedulable" (and one refused before the start, `driver_too_old`), and
//! the top reasons show them with their fixes; the Reason cell
//! is one line (code, meaning, fix) with the engine's words folded and shown once; with every
//! fold open nothing is wider than the window (the Actions column stays on screen); times say
//! their zone (UTC, as the CLI). The GPU switch turns a required `nvidia` count 1 request off
//! and on again without rewriting it, and turns an app without a request on as an optional
//! GPU of any vendor. Statuses come from a protocol-level agent over the real WebSocket. Needs
//! Chromium and chromedriver: a missing one fails unless `ODAC_ALLOW_SKIP=1` (and not
//! `ODAC_REQUIRE_DOCKER=1`).

use crate::browser;
use crate::common;

use std::time::Duration;

use browser::Driver;
use common::Sim;
use odac_protocol::{AppState, Fallback, FallbackTier, Reason};
use odac_simulator::fake_agent::inventories::profile;
use serde::Deserialize;
use serde_json::{Value, json};

fn chromium() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    browser::chromium_or_skip("dashboard defects test", true)
}

/// The engine's words, long and without a space (the kind that pushed the Actions column off).
fn refusal() -> String {
    format!(
        "could not select device driver \"nvidia\" with capabilities: [[gpu]] MARKER-{}",
        "x".repeat(400)
    )
}

#[derive(Debug, Deserialize)]
struct Page {
    failing: String,
    failing_what: String,
    schedulable: String,
    top: String,
    top_hidden: bool,
    line: String,
    fix: String,
    folds: usize,
    folds_open: usize,
    markers: usize,
    retry: String,
    event: String,
}

const PAGE_JS: &str = r##"
const r = document.querySelector('tr[data-app="vision"]');
const c = document.querySelector('tr[data-app="looper"]');
if (!r || !c) return null;
const t = (root, s) => { const e = root.querySelector(s); return e ? e.textContent : ""; };
const failing = document.getElementById("total-gpu-failing");
const ev = document.querySelector("#events li");
return {
  failing: failing ? t(failing, ".n") : "",
  failing_what: failing ? t(failing, ".what") : "",
  schedulable: t(document, "#total-schedulable"),
  top: t(document, "#top-reasons"),
  top_hidden: document.getElementById("top-reasons-box").hidden,
  line: t(r, ".reason .reason-line"),
  fix: t(r, ".reason .fix"),
  folds: r.querySelectorAll(".reason details").length,
  folds_open: r.querySelectorAll(".reason details[open]").length,
  markers: r.textContent.split("MARKER-").length - 1,
  retry: t(c, ".reason .detail"),
  event: ev ? ev.textContent : "",
};
"##;

const WIDTH_JS: &str = r#"
for (const d of document.querySelectorAll("details")) d.open = true;
const b = document.getElementById("restart-vision").getBoundingClientRect();
return [document.documentElement.scrollWidth, window.innerWidth, Math.ceil(b.right)];
"#;

#[test]
fn gpu_failures_reach_the_header_one_line_per_app_no_overflow_and_the_switch_keeps_the_request() {
    let Some((browser_bin, driver_bin)) = chromium() else {
        return;
    };
    let sim = Sim::start();
    let inv = profile(0, "gpu-host");
    let mut agent = sim.agent("agt_gpu", inv.clone());
    let vision = sim.create_app(
        &json!({"name": "vision", "image": "busybox", "gpu": {"runtime": "nvidia", "count": 1}}),
    );
    sim.create_app(&json!({"name": "plain", "image": "busybox"}));
    let looper = sim.create_app(&json!({"name": "looper", "image": "busybox"}));
    let cuda = sim.create_app(
        &json!({"name": "cuda", "image": "busybox", "gpu": {"runtime": "nvidia", "count": 1}}),
    );

    let mut st = odac_simulator::fake_agent::sim_agent::status_for(&vision, &inv, 2);
    common::engine_refused(&mut st, AppState::Failed, &refusal());
    st.last_error = Some(refusal());
    sim.send_status(&mut agent, 2, st);
    let mut lp = odac_simulator::fake_agent::sim_agent::status_for(&looper, &inv, 2);
    lp.state = AppState::CrashLoop;
    lp.crash = common::crash_info(&format!("boom {}\n", "y".repeat(300)));
    sim.send_status(&mut agent, 3, lp);
    let mut cu = odac_simulator::fake_agent::sim_agent::status_for(&cuda, &inv, 2);
    cu.state = AppState::Failed;
    cu.gpu.attached = None;
    cu.gpu.fallback = Some(Fallback {
        tier: FallbackTier::Preflight,
        reason: Reason::DriverTooOld,
        detail: Some("the image requires cuda>=12.4; this host's driver supports CUDA 12.2".into()),
    });
    sim.send_status(&mut agent, 4, cu);
    sim.wait_api("/api/apps/cuda", |v| v["state"] == "failed");
    sim.wait_api("/api/apps/vision", |v| v["state"] == "failed");
    sim.wait_api("/api/apps/looper", |v| v["state"] == "crash_loop");

    let failure_png = browser::target_dir().join("dashboard-defects-failure.png");
    let d = sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
        d.client.set_window_size(1400, 1000).await.unwrap();
        d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
            .await;
        d
    });
    let page: Page = sim
        .rt
        .block_on(d.wait_for(
            "the failing GPU app in the header",
            Duration::from_secs(15),
            &failure_png,
            || d.eval::<Option<Page>>(PAGE_JS, vec![]),
            |p| {
                p.as_ref()
                    .is_some_and(|p| p.failing == "2" && !p.fix.is_empty())
            },
        ))
        .unwrap();
    println!("{page:#?}");
    assert!(page.failing_what.contains("gpu-host"), "{page:?}");
    assert!(page.schedulable.contains("2 GPU apps failing"), "{page:?}");
    assert!(
        !page.top_hidden && page.top.contains("GPU apps: engine_rejected"),
        "{page:?}"
    );
    assert!(
        page.line
            .starts_with("engine_rejected: the container engine refused the GPU device"),
        "{page:?}"
    );
    assert_eq!(
        (page.folds, page.folds_open),
        (1, 0),
        "details folded: {page:?}"
    );
    assert_eq!(page.markers, 1, "the engine's words once: {page:?}");
    assert!(page.retry.contains(" UTC"), "{page:?}");
    let (line, fix, folded): (String, String, String) = sim.rt.block_on(d.eval(
        r#"const r = document.querySelector('tr[data-app="cuda"]');
           const t = s => { const e = r.querySelector(s); return e ? e.textContent : ""; };
           return [t(".reason-line"), t(".fix"), t("details.more")];"#,
        vec![],
    ));
    assert!(
        line.starts_with("driver_too_old: the image needs a newer NVIDIA driver"),
        "{line}"
    );
    assert!(fix.contains("install the NVIDIA driver branch"), "{fix}");
    assert!(
        folded.contains("found before the start") && !folded.contains("preflight"),
        "{folded}"
    );
    assert!(page.failing_what.contains("gpu-host"), "{page:?}");
    assert!(page.event.contains(" UTC — "), "{page:?}");

    let (scroll, inner, actions): (i64, i64, i64) = sim.rt.block_on(d.eval(WIDTH_JS, vec![]));
    println!(
        "with every fold open: scrollWidth {scroll}, innerWidth {inner}, Restart button right edge {actions}"
    );
    assert!(inner >= 1380, "a 1400 px window: {inner}");
    assert!(scroll <= inner, "horizontal overflow: {scroll} > {inner}");
    assert!(
        actions <= inner,
        "the Actions column is off screen: {actions} > {inner}"
    );

    // the switch: off removes the request, on restores it as it was
    let requested = |v: &Value| v["requested"].clone();
    sim.rt.block_on(d.click("#gpu-vision"));
    sim.wait_api("/api/apps/vision", |v| requested(v).is_null());
    sim.rt.block_on(d.wait_for(
        "the switch says what on restores",
        Duration::from_secs(10),
        &failure_png,
        || {
            d.eval::<String>(
                "return document.getElementById('gpu-says-vision').textContent;",
                vec![],
            )
        },
        |t| t.contains("on restores nvidia count=1"),
    ));
    sim.rt.block_on(d.click("#gpu-vision"));
    let v = sim.wait_api("/api/apps/vision", |v| !requested(v).is_null());
    assert_eq!(
        requested(&v),
        json!({"runtime": "nvidia", "count": 1}),
        "{v}"
    );
    sim.rt.block_on(d.click("#gpu-plain"));
    let v = sim.wait_api("/api/apps/plain", |v| !requested(v).is_null());
    assert_eq!(requested(&v)["optional"], json!(true), "{v}");
    assert!(
        requested(&v)["runtime"].is_null() || requested(&v)["runtime"] == "auto",
        "{v}"
    );
    sim.rt.block_on(d.close());
}
