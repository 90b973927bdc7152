//! An exec session whose reader stops reading, with the real engine, agent, simulator and CLI:
//! the command writes 50 MB at once to a CLI whose standard output nobody reads. The session
//! stalls and, once more than `[exec] max_unsent_bytes` (8 MiB) of output is left unsent, the
//! agent closes it with reason `backpressure` (the event says so). Meanwhile the main link goes
//! on: the agent keeps being heard (the host's `last_seen` moves, it stays connected) and a
//! crash of another app is reported. The agent's peak RSS (`VmHWM`) grows by less than 10 MiB.

use std::process::Stdio;
use std::time::{Duration, Instant};

use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;

use crate::app_logs::agent_hwm_kib;

const SCENARIO: &str = "app-exec-backpressure";
const BURST_BYTES: u64 = 50 * 1000 * 1000;

fn last_seen(stack: &Stack) -> (bool, String) {
    let hosts = stack.sim.hosts().unwrap();
    let h = &hosts[0];
    (h.connected, h.last_seen.clone())
}

#[test]
fn a_reader_that_stops_reading_closes_its_session_and_nothing_else() {
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    for name in ["burst", "victim"] {
        stack.sim.create_app(&Stack::app_body(name)).unwrap();
    }
    for name in ["burst", "victim"] {
        stack
            .wait_app(name, Duration::from_secs(90), "running", |a| {
                a.state == "running"
            })
            .unwrap();
    }
    let before = stack.agent().unwrap().statuses().unwrap()["victim"].clone();
    let hwm_before = agent_hwm_kib(&stack);

    // the CLI's stdout is a pipe nobody reads
    let started = Instant::now();
    let mut stalled = stack
        .sim
        .odac_command()
        .unwrap()
        .args(["app", "exec", "burst", "--", "sh", "-c"])
        .arg(format!("head -c {BURST_BYTES} /dev/zero"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // while it stalls, the main link goes on: heard, and a crash reported
    std::thread::sleep(Duration::from_millis(300));
    stack.crash(&["victim"]).unwrap();
    let crashed = Instant::now();
    let mut seen = vec![last_seen(&stack)];
    let restart = poll(
        "the victim's restart reported",
        Duration::from_secs(60),
        || {
            seen.push(last_seen(&stack));
            let app = stack.sim.app("victim").map_err(|e| e.to_string())?;
            match app.and_then(|a| a.status) {
                Some(s)
                    if s.restart_count > before.restart_count
                        || s.container_id != before.container_id =>
                {
                    Ok((crashed.elapsed(), started.elapsed()))
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .unwrap();

    let ended = poll(
        "the stalled session to end with backpressure",
        Duration::from_secs(120),
        || {
            seen.push(last_seen(&stack));
            let log = stack.sim.event_log().map_err(|e| e.to_string())?;
            log.as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["message"].as_str())
                .find(|m| m.starts_with("exec ended: ") && m.contains("backpressure after"))
                .map(str::to_owned)
                .ok_or_else(|| "not yet".to_owned())
        },
    )
    .unwrap();
    let stall_took = started.elapsed();
    let hwm_after = agent_hwm_kib(&stack);
    let moves = seen.windows(2).filter(|w| w[0].1 != w[1].1).count();
    let always_connected = seen.iter().all(|(c, _)| *c);
    println!(
        "stalled reader: session closed after {stall_took:?}: {ended}\n\
         victim's restart reported (after the crash, after the burst began) {restart:?}; host last_seen moved {moves} times \
         over {} looks, connected throughout: {always_connected}\n\
         agent VmHWM {hwm_before} KiB -> {hwm_after} KiB (+{} KiB)",
        seen.len(),
        hwm_after.saturating_sub(hwm_before)
    );
    assert!(
        ended.contains("the reader stopped reading: more than 8388608 bytes of output unsent"),
        "{ended}"
    );
    assert!(moves >= 1, "the agent is heard during the stall");
    assert!(always_connected, "the main link stays up");
    assert!(
        hwm_after.saturating_sub(hwm_before) < 10 * 1024,
        "peak RSS grew by {} KiB",
        hwm_after.saturating_sub(hwm_before)
    );
    let _ = stalled.kill();
    let _ = stalled.wait();
}
