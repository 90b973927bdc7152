//! The dashboard at phone width (390 × 844) in headless Chromium, with apps in several states
//! (running, running on the CPU after a GPU fallback whose engine words are long and without
//! a space, a required GPU app the engine refused, a crash loop with a long last output): the
//! page never scrolls sideways, folds closed or open; each failing app's error is one line
//! (code and meaning) with its fix, shown once, the engine's words and the last output folded;
//! every row's Actions (Restart, Logs) lie inside the window and Restart works there.
//! Statuses come from a protocol-level agent over the real WebSocket. Needs Chromium and
//! chromedriver: a missing one fails the test.

use crate::browser;
use crate::common;

use std::time::Duration;

use browser::Driver;
use common::Sim;
use odac_protocol::AppState;
use odac_simulator::fake_agent::inventories::profile;
use serde::Deserialize;
use serde_json::json;

/// The engine's words: long, without a space, with a marker to count.
fn refusal(marker: &str) -> String {
    format!(
        "could not select device driver \"nvidia\" with capabilities: [[gpu]] {marker}-{}",
        "x".repeat(300)
    )
}

/// One app card as the page lays it out.
#[derive(Debug, Deserialize)]
struct Card {
    app: String,
    /// The text of the Reason cell's one line (empty when there is none).
    line: String,
    /// How many lines (`.reason-line`) the Reason cell has.
    lines: usize,
    fix: String,
    folds: usize,
    folds_open: usize,
    /// How often the app's marker appears in the whole card.
    markers: usize,
    /// The Actions buttons' left and right edges.
    actions: Vec<(f64, f64)>,
}

#[derive(Debug, Deserialize)]
struct Phone {
    inner: f64,
    scroll: f64,
    cards: Vec<Card>,
}

const PHONE_JS: &str = r##"
const markers = {vision: "VISION-WORDS", cuda: "CUDA-WORDS", looper: "LOOPER-TAIL"};
if (arguments[0]) for (const d of document.querySelectorAll("details")) d.open = true;
const t = (root, s) => { const e = root.querySelector(s); return e ? e.textContent : ""; };
return {
  inner: window.innerWidth,
  scroll: document.scrollingElement.scrollWidth,
  cards: [...document.querySelectorAll("#apps tbody tr")].map(r => ({
    app: r.dataset.app,
    line: t(r, ".reason .reason-line"),
    lines: r.querySelectorAll(".reason .reason-line").length,
    fix: t(r, ".reason .fix"),
    folds: r.querySelectorAll(".reason details").length,
    folds_open: r.querySelectorAll(".reason details[open]").length,
    markers: markers[r.dataset.app] ? r.textContent.split(markers[r.dataset.app]).length - 1 : 0,
    actions: [...r.querySelectorAll("td[data-label=Actions] button")].map(b => {
      const x = b.getBoundingClientRect();
      return [x.left, x.right];
    }),
  })),
};
"##;

fn card<'a>(phone: &'a Phone, app: &str) -> &'a Card {
    phone
        .cards
        .iter()
        .find(|c| c.app == app)
        .unwrap_or_else(|| panic!("no card for {app}: {phone:#?}"))
}

/// No sideways scrolling, and every row's Restart, Logs and Shell inside the window.
fn assert_fits(phone: &Phone, when: &str) {
    println!(
        "{when}: scrollWidth {}, innerWidth {}",
        phone.scroll, phone.inner
    );
    assert!(
        phone.inner <= 400.0,
        "a phone-width window: {}",
        phone.inner
    );
    assert!(
        phone.scroll <= phone.inner,
        "{when}: the page scrolls sideways: {} > {}",
        phone.scroll,
        phone.inner
    );
    for c in &phone.cards {
        assert_eq!(c.actions.len(), 3, "{when}: Restart, Logs and Shell: {c:?}");
        for (left, right) in &c.actions {
            assert!(
                *left >= 0.0 && *right <= phone.inner,
                "{when}: {}'s Actions outside the window: {c:?}",
                c.app
            );
        }
    }
}

#[test]
fn at_390_px_nothing_scrolls_sideways_each_error_is_one_line_with_its_fix_and_actions_are_reachable()
 {
    let (browser_bin, driver_bin) = browser::find_chromium()
        .unwrap_or_else(|e| panic!("the phone dashboard test needs Chromium: {e}"));
    let sim = Sim::start();
    let inv = profile(0, "gpu-host");
    let mut agent = sim.agent("agt_phone", inv.clone());
    let web = sim.create_app(&json!({"name": "web", "image": "busybox"}));
    let vision = sim.create_app(&json!({"name": "vision", "image": "busybox",
                "gpu": {"runtime": "nvidia", "count": 1, "optional": true}}));
    let cuda = sim.create_app(
        &json!({"name": "cuda", "image": "busybox", "gpu": {"runtime": "nvidia", "count": 1}}),
    );
    let looper = sim.create_app(&json!({"name": "looper", "image": "busybox"}));

    sim.send_status(
        &mut agent,
        2,
        odac_simulator::fake_agent::sim_agent::status_for(&web, &inv, 2),
    );
    // an optional GPU the engine refused: running on the CPU
    let mut st = odac_simulator::fake_agent::sim_agent::status_for(&vision, &inv, 2);
    common::engine_refused(&mut st, AppState::Running, &refusal("VISION-WORDS"));
    sim.send_status(&mut agent, 3, st);
    // a required one: failed, the same words as its last error
    let mut st = odac_simulator::fake_agent::sim_agent::status_for(&cuda, &inv, 2);
    common::engine_refused(&mut st, AppState::Failed, &refusal("CUDA-WORDS"));
    st.last_error = Some(refusal("CUDA-WORDS"));
    sim.send_status(&mut agent, 4, st);
    let mut st = odac_simulator::fake_agent::sim_agent::status_for(&looper, &inv, 2);
    st.state = AppState::CrashLoop;
    st.crash = common::crash_info(&format!("LOOPER-TAIL {}\n", "y".repeat(300)));
    sim.send_status(&mut agent, 5, st);
    sim.wait_api("/api/apps/web", |v| v["state"] == "running");
    sim.wait_api("/api/apps/vision", |v| !v["fallback"].is_null());
    sim.wait_api("/api/apps/cuda", |v| v["state"] == "failed");
    sim.wait_api("/api/apps/looper", |v| v["state"] == "crash_loop");

    let failure_png = browser::target_dir().join("dashboard-phone-failure.png");
    sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
        d.client.set_window_size(390, 844).await.unwrap();
        d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
            .await;
        let phone: Phone = d
            .wait_for(
                "four app cards with their reasons",
                Duration::from_secs(15),
                &failure_png,
                || d.eval::<Phone>(PHONE_JS, vec![json!(false)]),
                |p| p.cards.len() == 4 && p.cards.iter().filter(|c| !c.fix.is_empty()).count() == 3,
            )
            .await;
        println!("{phone:#?}");
        assert_fits(&phone, "folds closed");

        let web = card(&phone, "web");
        assert_eq!(
            (web.lines, web.fix.as_str(), web.folds),
            (0, "", 0),
            "{web:?}"
        );
        for app in ["vision", "cuda"] {
            let c = card(&phone, app);
            assert_eq!(c.lines, 1, "one line: {c:?}");
            assert!(
                c.line.starts_with("engine_rejected") && c.line.contains("refused the GPU device"),
                "{c:?}"
            );
            assert!(!c.fix.is_empty(), "its fix: {c:?}");
            assert_eq!((c.folds, c.folds_open), (1, 0), "details folded: {c:?}");
            assert_eq!(c.markers, 1, "the engine's words once: {c:?}");
        }
        assert!(
            card(&phone, "vision").line.contains("(on CPU)"),
            "{phone:?}"
        );
        let looper = card(&phone, "looper");
        assert_eq!(looper.lines, 1, "one line: {looper:?}");
        assert!(
            looper.line.starts_with("crash_loop") && looper.line.contains("exits again"),
            "{looper:?}"
        );
        assert!(looper.fix.contains("last output"), "its fix: {looper:?}");
        assert_eq!(
            (looper.folds, looper.folds_open),
            (1, 0),
            "last output folded: {looper:?}"
        );
        assert_eq!(looper.markers, 1, "the last output once: {looper:?}");

        let open: Phone = d.eval(PHONE_JS, vec![json!(true)]).await;
        assert!(
            open.cards.iter().all(|c| c.folds == c.folds_open),
            "{open:?}"
        );
        assert_fits(&open, "every fold open");
        let png = browser::target_dir().join("dashboard-phone-390.png");
        d.screenshot(&png).await;
        println!("screenshot: {}", png.display());

        d.click("#restart-looper").await;
        d.wait_for(
            "Restart used at phone width",
            Duration::from_secs(10),
            &failure_png,
            || {
                d.eval::<String>(
                    "return document.getElementById('message').textContent;",
                    vec![],
                )
            },
            |m| m.contains("restart requested for looper"),
        )
        .await;
        d.close().await;
    });
}
