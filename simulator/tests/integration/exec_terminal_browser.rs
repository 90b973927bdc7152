//! The dashboard's terminal panel in headless Chromium against an in-process simulator, with
//! a protocol-level agent on the other side that dials the session socket with the real
//! agent's dialer: the app's Shell button opens an xterm.js terminal and sends an
//! `exec_request` (`/bin/sh`, tty, the terminal's size); bytes from the agent appear in the
//! terminal, keys typed in it reach the agent as stdin frames, and the `exit` frame shows why the
//! session ended. Needs Chromium and chromedriver: a missing one fails the test unless
//! `ODAC_ALLOW_SKIP=1`.

use crate::browser;
use crate::common;

use std::time::Duration;

use browser::Driver;
use common::Sim;
use futures_util::{SinkExt, StreamExt};
use odac_protocol::{
    ControlMessage, ExecEndReason, ExecExit, ExecFrame, STREAM_STDIN, STREAM_STDOUT,
};
use odac_simulator::fake_agent::agent_conn::Incoming;
use tokio_tungstenite::tungstenite::Message;

const APP: &str = "term-web";

/// The panel, and the terminal's text as xterm.js holds it (it draws on a canvas).
const PANEL_JS: &str = r#"
const rows = [];
const core = termPanel.term && termPanel.term._core;
if (core) {
  for (let y = 0; y < core.buffer.lines.length; y++) {
    rows.push(core.buffer.translateBufferLineToString(y, true));
  }
}
return {
  hidden: document.getElementById("term-panel").hidden,
  screen: rows.join("\n").trim(),
  status: document.getElementById("term-status").textContent,
};
"#;

#[derive(Debug, serde::Deserialize)]
struct Panel {
    hidden: bool,
    screen: String,
    status: String,
}

#[test]
fn dashboard_terminal_runs_a_shell_session() {
    let Some((browser_bin, driver_bin)) =
        browser::chromium_or_skip("dashboard terminal browser test", false)
    else {
        return;
    };
    let sim = Sim::start();
    let mut c = sim.agent_on_with_app("agt_term", "term-host", APP, "busybox");
    let dialer = crate::exec_tickets::dialer(&sim, "agt_term");
    let failure_png = browser::target_dir().join("dashboard-terminal-failure.png");
    sim.rt.block_on(async {
        let d = Driver::start(&browser_bin, &driver_bin).await;
        d.open(&sim.server().dashboard_url(), "ODAC fleet", &failure_png)
            .await;
        d.click(&format!("#shell-{APP}")).await;
        let req = c
            .recv_until(Duration::from_secs(10), |m| match m {
                Incoming::Message(ControlMessage::ExecRequest(r)) => Some(r.clone()),
                _ => None,
            })
            .await
            .unwrap();
        assert_eq!(req.app, APP);
        assert_eq!(req.cmd, ["/bin/sh"]);
        assert!(req.tty);
        assert_eq!((req.cols, req.rows), (Some(100), Some(24)));
        let mut ws = dialer.dial_exec(&req.ticket).await.unwrap();
        let out = [&[STREAM_STDOUT][..], b"hello from the container\r\n/ # "].concat();
        ws.send(Message::Binary(out.into())).await.unwrap();
        let p: Panel = d
            .wait_for(
                "the agent's bytes in the terminal",
                Duration::from_secs(10),
                &failure_png,
                || d.eval(PANEL_JS, vec![]),
                |p: &Panel| p.screen.contains("hello from the container"),
            )
            .await;
        assert!(!p.hidden);
        assert_eq!(p.status, "connected", "{p:?}");
        assert_eq!(p.screen, "hello from the container\n/ #", "{p:?}");

        // keys typed in the terminal reach the agent as stdin
        d.type_text("#term-screen textarea", "ls\u{E007}").await;
        let mut typed = Vec::new();
        while !typed.ends_with(b"\r") {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
                Ok(Some(Ok(Message::Binary(b)))) if b.first() == Some(&STREAM_STDIN) => {
                    typed.extend_from_slice(&b[1..]);
                }
                Ok(Some(Ok(_))) => {}
                other => panic!("no stdin from the terminal: {other:?}, typed so far {typed:?}"),
            }
        }
        assert_eq!(typed, b"ls\r");

        let exit = ExecFrame::Exit(ExecExit {
            reason: ExecEndReason::Exited,
            code: Some(0),
            message: "the command exited with code 0".into(),
        });
        ws.send(Message::Text(exit.encode().into())).await.unwrap();
        let p: Panel = d
            .wait_for(
                "the end of the session",
                Duration::from_secs(10),
                &failure_png,
                || d.eval(PANEL_JS, vec![]),
                |p: &Panel| p.status.starts_with("ended"),
            )
            .await;
        assert_eq!(
            p.status,
            "ended: exited (exit code 0) — the command exited with code 0"
        );
        d.screenshot(&browser::target_dir().join("dashboard-terminal.png"))
            .await;
        d.close().await;
    });
}
