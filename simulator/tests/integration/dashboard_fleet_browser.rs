//! The dashboard in headless Chromium over a fleet of 60 simulated hosts (`odac-sim fleet`, the
//! agent token given as `ODAC_AGENT_TOKEN`): fleet totals equal the API's, every host has a
//! row with its GPU detail (model, VRAM, driver, PCI address; for a vendor that is not
//! schedulable the reason and its fix), the filters by host name, vendor and reason narrow the
//! rows to what the API says, changes arrive from the event stream's payloads without fetching
//! `/api/hosts` again, and at phone width (390 px) the apps are cards with every control inside
//! the screen and usable. Screenshots: `target/dashboard-1400.png`, `target/dashboard-390.png`.
//! Needs Chromium and chromedriver: a missing one fails unless `ODAC_ALLOW_SKIP=1`.

use crate::browser;
use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use browser::Driver;
use common::{Sim, TOKEN};
use fantoccini::Locator;
use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
use odac_simulator::state::views::HostView;
use serde_json::{Value, json};

const HOSTS: usize = 60;

struct FleetProc(Child);

impl Drop for FleetProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chromium() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    browser::chromium_or_skip("dashboard fleet browser test", true)
}

const PAGE_JS: &str = r##"
const t = id => (document.getElementById(id) || {}).textContent || "";
const rows = [...document.querySelectorAll("#hosts tbody tr")];
return {
  live: t("live"),
  hosts: rows.map(r => r.dataset.host),
  apps: [...document.querySelectorAll("#apps tbody tr")].map(r => r.dataset.app),
  total_hosts: t("total-hosts"),
  total_gpus: t("total-gpus"),
  total_schedulable: t("total-schedulable"),
  top_reasons: t("top-reasons"),
  message: t("message"),
};"##;

async fn page(d: &Driver) -> Value {
    d.eval(PAGE_JS, vec![]).await
}

async fn set_filter(d: &Driver, id: &str, value: &str) {
    let _: Value = d
        .eval(
            "const e = document.getElementById(arguments[0]); e.value = arguments[1]; \
             e.dispatchEvent(new Event('input', {bubbles: true})); return null;",
            vec![json!(id), json!(value)],
        )
        .await;
}

/// For every app card: the card's display, and whether its switch and Restart button lie
/// inside the window; plus the page's horizontal overflow.
const PHONE_JS: &str = r##"
const w = window.innerWidth;
const inside = e => { if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= w; };
return {
  width: w,
  overflow: document.documentElement.scrollWidth - w,
  cards: [...document.querySelectorAll("#apps tbody tr")].map(r => ({
    app: r.dataset.app,
    display: getComputedStyle(r).display,
    switch_inside: inside(r.querySelector("label.switch")),
    restart_inside: inside(r.querySelector("button")),
    labels: [...r.querySelectorAll("td")].map(c => getComputedStyle(c, "::before").content),
  })),
  filters_inside: inside(document.getElementById("filter-text")) && inside(document.getElementById("filter-reason")),
};"##;

#[test]
fn dashboard_over_a_fleet_desktop_and_phone() {
    let Some((browser_bin, driver_bin)) = chromium() else {
        return;
    };
    let t0 = Instant::now();
    let sim = Sim::start();
    let fleet = FleetProc(
        Command::new(env!("CARGO_BIN_EXE_odac-sim"))
            .args(["fleet", "--agents", &HOSTS.to_string(), "--cp"])
            .arg(sim.server().agents_url())
            .args(["--ca-file", &sim.ca_path(), "--prefix", "dash"])
            .env("ODAC_AGENT_TOKEN", TOKEN)
            .env_remove("ODAC_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    sim.wait_api("/api/hosts", |h| {
        let a = h.as_array().unwrap();
        a.len() == HOSTS
            && a.iter()
                .all(|h| h["connected"] == true && h["inventory"].is_object())
    });
    let hosts: Vec<HostView> = sim.client().get_as("/api/hosts").unwrap();
    let nvidia_host = hosts
        .iter()
        .find(|h| h.schedulable.iter().any(|v| v.as_str() == "nvidia"))
        .unwrap()
        .clone();
    let broken = hosts
        .iter()
        .find(|h| {
            h.reasons
                .values()
                .any(|r| r.as_str() == "no_container_runtime")
        })
        .unwrap()
        .clone();
    for (name, host, gpu) in [
        (
            "chat",
            &nvidia_host.id,
            json!({"runtime":"nvidia","count":1}),
        ),
        (
            "vision",
            &broken.id,
            json!({"runtime":"nvidia","count":1,"optional":true}),
        ),
        ("web-frontend-with-a-long-name", &hosts[3].id, Value::Null),
    ] {
        let mut body =
            json!({"name": name, "image": "registry.example/team/image:1.2.3", "host": host});
        if !gpu.is_null() {
            body["gpu"] = gpu;
        }
        let (s, v) = sim.call("POST", "/api/apps", Some(&body.to_string()));
        assert_eq!(s, 201, "{v}");
    }

    let shots = browser::target_dir();
    let failure_png = shots.join("dashboard-fleet-failure.png");
    sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
d.client.set_window_size(1400, 1000).await.unwrap();
d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
    .await;
        let v = d
            .wait_for(
                "every host and app rendered, live",
                Duration::from_secs(20),
                &failure_png,
                || page(&d),
                |v| {
                    v["live"] == "live"
                        && v["hosts"].as_array().is_some_and(|a| a.len() == HOSTS)
                        && v["apps"].as_array().is_some_and(|a| a.len() == 3)
                },
            )
            .await;
        // totals as the API has them
        let gpus: usize = hosts.iter().flat_map(|h| &h.gpus).map(|g| g.count).sum();
        assert_eq!(v["total_hosts"], format!("{HOSTS} / {HOSTS}hosts connected"), "{v}");
        assert!(
            v["total_gpus"].as_str().unwrap().starts_with(&gpus.to_string()),
            "{v}"
        );
        let ncr_hosts = hosts
            .iter()
            .filter(|h| h.reasons.values().any(|r| r.as_str() == "no_container_runtime"))
            .count();
        let top = v["top_reasons"].as_str().unwrap();
        assert!(
            top.contains(&format!("nvidia: no_container_runtime — {ncr_hosts} hosts")),
            "{top}"
        );
        assert!(top.contains("nvidia-ctk runtime configure"), "the fix: {top}");

        // per-host GPU detail: model, VRAM, driver, PCI address; why not and the fix
        let detail = |id: String| {
            let d = &d;
            async move {
                d.eval::<String>(
                    "const r = document.querySelector('tr[data-host=\"' + arguments[0] + '\"] .gpu-detail'); \
                     return r ? r.textContent : '';",
                    vec![json!(id)],
                )
                .await
            }
        };
        let text = detail(nvidia_host.id.clone()).await;
        let inv = nvidia_host.inventory.as_ref().unwrap();
        for needle in [
            inv.gpus[0].model.as_str(),
            "80 GiB",
            "driver nvidia 550.54.14",
            inv.gpus[0].pci_address.as_str(),
            "schedulable via nvidia_runtime",
        ] {
            assert!(text.contains(needle), "{needle:?} in {text:?}");
        }
        let text = detail(broken.id.clone()).await;
        for needle in [
            "not schedulable — no_container_runtime",
            "nvidia runtime missing from docker info",
            "nvidia-ctk runtime configure",
        ] {
            assert!(text.contains(needle), "{needle:?} in {text:?}");
        }

        // filters: host name, vendor, reason — the rows the API says
        let count = |f: &dyn Fn(&HostView) -> bool| hosts.iter().filter(|h| f(h)).count();
        let rows = |v: &Value| v["hosts"].as_array().map_or(0, Vec::len);
        set_filter(&d, "filter-text", &nvidia_host.hostname).await;
        let v = page(&d).await;
        assert_eq!(
            rows(&v),
            count(&|h| h.hostname.contains(&nvidia_host.hostname)
                || h.id.contains(&nvidia_host.hostname)),
            "{v}"
        );
        assert!(v["apps"].as_array().unwrap().contains(&json!("chat")), "{v}");
        set_filter(&d, "filter-text", "").await;
        set_filter(&d, "filter-vendor", "amd").await;
        let v = page(&d).await;
        assert_eq!(
            rows(&v),
            count(&|h| h.gpus.iter().any(|g| g.vendor.as_str() == "amd")),
            "{v}"
        );
        set_filter(&d, "filter-vendor", "").await;
        set_filter(&d, "filter-reason", "no_container_runtime").await;
        let v = page(&d).await;
        assert_eq!(rows(&v), ncr_hosts, "{v}");
        set_filter(&d, "filter-reason", "").await;

        // events apply their payloads: a new app appears, /api/hosts is not fetched again
        let _: Value = d
            .eval(
                "window.__fetched = []; const f = window.fetch; \
                 window.fetch = (u, i) => { window.__fetched.push(String(u)); return f(u, i); }; \
                 return null;",
                vec![],
            )
            .await;
        let body = json!({"name": "late", "image": "x", "host": hosts[7].id});
        let (s, _) = sim.call("POST", "/api/apps", Some(&body.to_string()));
        assert_eq!(s, 201);
        d.wait_for(
            "the new app from the event stream",
            Duration::from_secs(10),
            &failure_png,
            || page(&d),
            |v| v["apps"].as_array().is_some_and(|a| a.contains(&json!("late"))),
        )
        .await;
        let fetched: Vec<String> = d.eval("return window.__fetched;", vec![]).await;
        assert!(
            fetched.iter().all(|u| !u.contains("/api/hosts") && !u.contains("/api/apps")),
            "no full re-fetch: {fetched:?}"
        );
        let png = shots.join("dashboard-1400.png");
        d.screenshot(&png).await;
        assert!(std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000));

        // a press held while a live update arrives still clicks: the update waits for the
        // release (rebuilt rows under a held press lost the click, the release landing on a
        // new button)
        let _: Value = d
            .eval("setTimeout(() => renderSoon(), 150); return null;", vec![])
            .await;
        let restart = d
            .client
            .find(Locator::Css("button[aria-label=\"Restart late\"]"))
            .await
            .unwrap();
        let held = MouseActions::new("mouse".into())
            .then(PointerAction::MoveToElement {
                element: restart,
                duration: None,
                x: 0.0,
                y: 0.0,
            })
            .then(PointerAction::Down {
                button: MOUSE_BUTTON_LEFT,
            })
            .then(PointerAction::Pause {
                duration: Duration::from_millis(600),
            })
            .then(PointerAction::Up {
                button: MOUSE_BUTTON_LEFT,
            });
        d.client.perform_actions(held).await.unwrap();
        d.wait_for(
            "Restart held across a live update",
            Duration::from_secs(10),
            &failure_png,
            || page(&d),
            |v| v["message"].as_str().is_some_and(|m| m.contains("restart requested for late")),
        )
        .await;

        // phone width: cards, nothing cut, every control inside the screen and usable
        d.client.set_window_size(390, 844).await.unwrap();
        let phone: Value = d
            .wait_for(
                "the phone layout",
                Duration::from_secs(5),
                &failure_png,
                || d.eval::<Value>(PHONE_JS, vec![]),
                |v| v["cards"].as_array().is_some_and(|c| c.len() == 4),
            )
            .await;
        assert!(phone["width"].as_i64().unwrap() <= 400, "{phone}");
        assert!(phone["overflow"].as_i64().unwrap() <= 0, "no sideways scrolling: {phone}");
        assert_eq!(phone["filters_inside"], true, "{phone}");
        for card in phone["cards"].as_array().unwrap() {
            assert_eq!(card["display"], "block", "{card}");
            assert_eq!(card["switch_inside"], true, "{card}");
            assert_eq!(card["restart_inside"], true, "{card}");
            assert!(
                card["labels"].as_array().unwrap().contains(&json!("\"Reason\"")),
                "cells labelled: {card}"
            );
        }
        d.click("#gpu-late").await;
        d.wait_for(
            "the switch used at phone width",
            Duration::from_secs(10),
            &failure_png,
            || page(&d),
            |v| v["message"].as_str().is_some_and(|m| m.contains("app late: GPU on")),
        )
        .await;
        assert_eq!(
            sim.call("GET", "/api/apps/late", None).1["requested"],
            json!({"optional": true}),
            "the switch sets an optional GPU of any vendor"
        );
        d.click("button[aria-label=\"Restart late\"]").await;
        d.wait_for(
            "Restart used at phone width",
            Duration::from_secs(10),
            &failure_png,
            || page(&d),
            |v| v["message"].as_str().is_some_and(|m| m.contains("restart requested for late")),
        )
        .await;
        let png = shots.join("dashboard-390.png");
        d.screenshot(&png).await;
        assert!(std::fs::metadata(&png).is_ok_and(|m| m.len() > 5_000));
        println!("screenshots: {} and {}", shots.join("dashboard-1400.png").display(), png.display());
        d.close().await;
    });
    drop(fleet);
    println!("dashboard fleet browser test took {:?}", t0.elapsed());
}
