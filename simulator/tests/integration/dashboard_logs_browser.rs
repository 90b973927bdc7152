//! The dashboard's logs panel in headless Chromium against an in-process simulator, with a
//! protocol-level agent answering on the other side: the app's Logs button opens the panel
//! and sends `logs_request` (follow, last 200 lines); relayed lines and the dropped count
//! appear; Close makes the control plane send `logs_cancel`; an end from the agent shows why
//! the stream ended. Needs Chromium and chromedriver: a missing one fails the test unless
//! `ODAC_ALLOW_SKIP=1`.

use crate::browser;
use crate::common;

use std::time::{Duration, Instant};

use browser::Driver;
use common::Sim;
use odac_protocol::{AgentMessage, ControlMessage, LogsChunk, LogsEnd, LogsEndReason, LogsRequest};
use odac_simulator::fake_agent::agent_conn::{AgentConn, Incoming};
use serde::Deserialize;

const APP: &str = "logs-web";

#[derive(Debug, Deserialize)]
struct Panel {
    hidden: bool,
    app: String,
    output: String,
    status: String,
}

const PANEL_JS: &str = r#"
const t = id => document.getElementById(id).textContent;
return {
  hidden: document.getElementById("logs-panel").hidden,
  app: t("logs-app"),
  output: t("logs-output"),
  status: t("logs-status"),
};
"#;

async fn panel(d: &Driver) -> Panel {
    d.eval(PANEL_JS, vec![]).await
}

async fn logs_request(c: &mut AgentConn) -> LogsRequest {
    c.recv_until(Duration::from_secs(10), |m| match m {
        Incoming::Message(ControlMessage::LogsRequest(r)) => Some(r.clone()),
        _ => None,
    })
    .await
    .unwrap()
}

fn chunk(id: &str, lines: &[&str], dropped: u64) -> AgentMessage {
    AgentMessage::LogsChunk(LogsChunk {
        request_id: id.to_owned(),
        lines: lines.iter().map(|l| (*l).to_owned()).collect(),
        dropped,
    })
}

#[test]
fn dashboard_logs_panel_follows_and_cancels() {
    let Some((browser_bin, driver_bin)) =
        browser::chromium_or_skip("dashboard logs browser test", false)
    else {
        return;
    };
    let sim = Sim::start();
    let mut c = sim.agent_on_with_app("agt_logs", "logs-host", APP, "busybox");
    let failure_png = browser::target_dir().join("dashboard-logs-failure.png");
    sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
        d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
            .await;

        // Logs: the panel opens and asks the agent
        d.click(&format!("#logs-{APP}")).await;
        let req = logs_request(&mut c).await;
        assert_eq!(req.app, APP);
        assert!(req.follow);
        assert_eq!(req.tail, Some(200));
        c.send(&chunk(&req.request_id, &["hello from web", "second"], 0))
            .await
            .unwrap();
        c.send(&chunk(&req.request_id, &["third"], 7))
            .await
            .unwrap();
        let p = d
            .wait_for(
                "the relayed lines in the panel",
                Duration::from_secs(10),
                &failure_png,
                || panel(&d),
                |p| p.output.contains("third"),
            )
            .await;
        assert!(!p.hidden, "{p:?}");
        assert_eq!(p.app, APP);
        assert_eq!(
            p.output, "hello from web\nsecond\n[7 lines dropped]\nthird",
            "{p:?}"
        );
        assert_eq!(p.status, "following", "{p:?}");
        d.screenshot(&browser::target_dir().join("dashboard-logs.png"))
            .await;

        // Close: the control plane cancels the agent's stream
        d.click("#logs-close").await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // a closed viewer is noticed when the next chunk is written to it
            c.send(&chunk(&req.request_id, &["more"], 0)).await.unwrap();
            let got = c
                .recv_until(Duration::from_millis(500), |m| match m {
                    Incoming::Message(ControlMessage::LogsCancel(x)) => Some(x.request_id.clone()),
                    _ => None,
                })
                .await;
            if let Ok(id) = got {
                assert_eq!(id, req.request_id);
                break;
            }
            assert!(Instant::now() < deadline, "no logs_cancel after Close");
        }
        assert!(panel(&d).await.hidden);

        // an end from the agent says why
        d.click(&format!("#logs-{APP}")).await;
        let req = logs_request(&mut c).await;
        c.send(&AgentMessage::LogsEnd(LogsEnd {
            request_id: req.request_id.clone(),
            reason: LogsEndReason::NotFound,
            dropped: 0,
            message: format!("app \"{APP}\" has no container"),
        }))
        .await
        .unwrap();
        let p = d
            .wait_for(
                "the end reason in the panel",
                Duration::from_secs(10),
                &failure_png,
                || panel(&d),
                |p| p.status.starts_with("ended"),
            )
            .await;
        assert_eq!(
            p.status,
            format!("ended: no container — app \"{APP}\" has no container"),
            "{p:?}"
        );
        d.close().await;
    });
}
