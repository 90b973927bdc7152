//! Nothing raw reaches a terminal: a container's output that carries terminal escapes (a
//! window title `ESC ]0;`, a clipboard write OSC 52, cursor moves and a screen clear CSI) is
//! printed with its control characters shown as text by `odac app logs` and `odac app show`,
//! and byte for byte by `odac app logs --raw`; the API refuses control characters and
//! malformed references in names, images and env names with a 400 naming the field.

use crate::common;

use std::process::Stdio;

use common::{Sim, stdout};
use odac_protocol::{
    AgentMessage, AppSpec, AppState, ControlMessage, CrashInfo, CrashReason, LogsChunk,
};
use odac_simulator::fake_agent::agent_conn::AgentConn;
use odac_simulator::fake_agent::inventories::profile;

/// A line that retitles the window, writes the clipboard, clears the screen and homes the
/// cursor, then rings the bell.
const HOSTILE: &str =
    "boot \u{1b}]0;pwned\u{7}\u{1b}]52;c;ZWNobyBvd25lZA==\u{7}\u{1b}[2J\u{1b}[1;1H\u{9b}0m\r\tdone";
const SHOWN: &str =
    "boot \\x1b]0;pwned\\x07\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J\\x1b[1;1H\\u{9b}0m\\x0d\tdone";

fn setup(sim: &Sim, id: &str, app: &str) -> AgentConn {
    sim.agent_with_app(id, app, "busybox")
}

/// `odac app logs NAME ARGS` while the agent answers with one chunk of `lines`.
fn logs_through(sim: &Sim, c: &mut AgentConn, args: &[&str], lines: &[&str]) -> Vec<u8> {
    let child = sim.spawn_odac(&[&["app", "logs"], args].concat(), Stdio::null());
    let req = sim
        .recv_control(c, |m| match m {
            ControlMessage::LogsRequest(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    let chunk = AgentMessage::LogsChunk(LogsChunk {
        request_id: req.request_id.clone(),
        lines: lines.iter().map(|l| (*l).to_owned()).collect(),
        dropped: 0,
    });
    let end = common::logs_complete(req.request_id);
    sim.rt.block_on(c.send(&chunk)).unwrap();
    sim.rt.block_on(c.send(&end)).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    out.stdout
}

fn has_control(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
}

#[test]
fn logs_are_printed_escaped_and_raw_only_when_asked() {
    let sim = Sim::start();
    let mut c = setup(&sim, "agt_esc", "web");
    let out = logs_through(&sim, &mut c, &["web"], &[HOSTILE, "plain\tline"]);
    assert!(!has_control(&out), "{:?}", String::from_utf8_lossy(&out));
    assert_eq!(
        String::from_utf8_lossy(&out),
        format!("{SHOWN}\nplain\tline\n")
    );
    let raw = logs_through(&sim, &mut c, &["web", "--raw"], &[HOSTILE]);
    assert_eq!(raw, format!("{HOSTILE}\n").into_bytes());
}

#[test]
fn show_and_list_print_the_app_s_output_and_errors_escaped() {
    let sim = Sim::start();
    let mut c = setup(&sim, "agt_esc", "web");
    let mut st = odac_simulator::fake_agent::sim_agent::status_for(
        &AppSpec::new("web", "busybox"),
        &profile(1, "agt_esc"),
        2,
    );
    st.state = AppState::CrashLoop;
    st.last_error = Some(format!("engine said: {HOSTILE}"));
    st.crash = Some(CrashInfo {
        reason: CrashReason::CrashLoop,
        exit_code: Some(3),
        oom_killed: false,
        next_retry_at_ms: None,
        output_tail: Some(format!("{HOSTILE}\nbye\n")),
    });
    sim.send_status(&mut c, 2, st);
    sim.wait_api("/api/apps/web", |v| v["state"] == "crash_loop");
    let show = sim.odac(&["app", "show", "web"]);
    assert!(!has_control(&show.stdout), "{}", stdout(&show));
    let text = stdout(&show);
    assert!(text.contains(&format!("  {SHOWN}\n  bye\n")), "{text}");
    assert!(text.contains(&format!("engine said: {SHOWN}")), "{text}");
    let list = sim.odac(&["app", "list"]);
    assert!(!has_control(&list.stdout), "{}", stdout(&list));
    let json = sim.odac(&["app", "list", "--json"]);
    assert!(!has_control(&json.stdout), "{}", stdout(&json));
    let back: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        back[0]["status"]["last_error"]
            .as_str()
            .unwrap()
            .ends_with(HOSTILE),
        "the json keeps the text exactly: {back}"
    );
}

#[test]
fn the_api_refuses_control_characters_and_malformed_images() {
    let sim = Sim::start();
    let _a = sim.agent("agt_a", profile(3, "a"));
    for (body, field, says) in [
        (
            r#"{"name":"a","image":"BusyBox:1.36"}"#,
            "image",
            "\"BusyBox\" must be lowercase",
        ),
        (
            r#"{"name":"a","image":"busybox\u001b]0;x\u0007"}"#,
            "image",
            "control characters",
        ),
        (
            r#"{"name":"a","image":"busybox","env":{"A\u001b[2J":"x"}}"#,
            "env",
            "control character",
        ),
        (
            r#"{"name":"a\u001b","image":"busybox"}"#,
            "name",
            "DNS label",
        ),
    ] {
        let (s, e) = sim.call("POST", "/api/apps", Some(body));
        assert_eq!(s, 400, "{body}: {e}");
        assert_eq!(e["field"], field, "{body}: {e}");
        let error = e["error"].as_str().unwrap();
        assert!(error.contains(says), "{body}: {error}");
    }
    let (s, e) = sim.call(
        "POST",
        "/api/apps",
        Some(r#"{"name":"a","image":"localhost:5000/team/web:v1.2"}"#),
    );
    assert_eq!(s, 201, "{e}");
}
