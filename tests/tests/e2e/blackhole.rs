//! A silent partition: the link to the control plane is blackholed (nothing flows, nothing
//! closes) while an app crashes. The agent restarts the app offline and writes its new status
//! into the dead session, notices the loss by its heartbeat alone (a ping unanswered for two
//! of the intervals the control plane asked for), and once the link is back every status it
//! sent but never got acked reaches the control plane: the views end equal.

use std::time::{Duration, Instant};

use odac_e2e::agent::SESSION_LOST;
use odac_e2e::figures::{figure, secs};
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;

/// `welcome.heartbeat_secs` the simulator asks for: long enough for the agent to restart the
/// crashed app (and send its status) before the session is declared dead.
const HEARTBEAT_SECS: u32 = 5;

#[test]
fn blackholed_link_is_detected_by_the_heartbeat_and_unacked_statuses_are_resent() {
    const SCENARIO: &str = "blackhole";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO)
        .tcp_proxy()
        .heartbeat_secs(HEARTBEAT_SECS)
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let apps = ["bh0", "bh1"];
    for app in apps {
        stack.sim.create_app(&Stack::app_body(app)).unwrap();
    }
    stack
        .wait_converged(apps.len(), Duration::from_secs(60))
        .unwrap();
    let agent = stack.agent().unwrap();
    let process = agent.process().unwrap();
    let proxy = stack.proxy().unwrap();
    let before = agent.statuses().unwrap();
    let mark = process.mark();

    proxy.blackhole();
    let partitioned = Instant::now();
    stack.crash(&["bh0"]).unwrap();

    // the agent restarts the app while it still believes the session is up, so the new
    // status goes out on that session and is never acked
    let restarted = stack
        .wait_restarted(&["bh0"], &before, Duration::from_secs(20))
        .unwrap()
        .remove("bh0")
        .unwrap();
    let lines = process.lines();
    assert!(
        !lines[mark..].iter().any(|l| l.contains(SESSION_LOST)),
        "the session was declared lost before the restart was reported; lengthen the heartbeat"
    );
    figure(
        SCENARIO,
        "restarted_offline_after",
        secs(partitioned.elapsed()),
    );

    // nothing closed the connection: only the heartbeat can notice
    let lost = process
        .wait_for_line_after(
            mark,
            SESSION_LOST,
            Duration::from_secs(u64::from(HEARTBEAT_SECS) * 4),
        )
        .unwrap();
    let detected = partitioned.elapsed();
    figure(SCENARIO, "loss_detected_after", secs(detected));
    figure(SCENARIO, "loss_logged_as", format!("{lost:?}"));
    // a ping goes out at most one interval after the partition and is given up two later
    assert!(
        detected <= Duration::from_secs(u64::from(HEARTBEAT_SECS) * 3 + 2),
        "loss detected after {detected:?}"
    );
    // what the dead session held is gone, as it would be on a dropped route
    proxy.cut();
    let at_control_plane = stack.sim.app("bh0").unwrap().and_then(|a| a.status);
    assert_ne!(
        at_control_plane.as_ref(),
        Some(&restarted),
        "the control plane already has the restart, so nothing is left to resend"
    );

    let restored = stack.restore_link(mark).unwrap();
    figure(
        SCENARIO,
        "reconnect_after_restore",
        secs(restored.elapsed()),
    );
    let names: Vec<String> = apps.iter().map(|a| a.to_string()).collect();
    let undelivered = stack.wait_statuses_delivered(&names, Duration::from_secs(20));
    assert_eq!(undelivered, Vec::<String>::new(), "statuses lost");
    figure(
        SCENARIO,
        "views_equal_after_restore",
        secs(restored.elapsed()),
    );
    stack
        .wait_converged(apps.len(), Duration::from_secs(60))
        .unwrap();
}
