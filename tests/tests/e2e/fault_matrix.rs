//! The fault matrix: each scenario breaks one thing an edge host meets — the control plane
//! crashing mid-apply, the link cut for 30 s, the agent SIGKILLed mid-apply, the engine socket
//! gone, bad frames, a wrong token, an untrusted certificate — and ends (where the agent can
//! connect at all) with the control plane's view equal to the agent's, the desired state
//! intact and exactly one container per app. Each prints the figures it measured.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use odac_e2e::agent::{SESSION_LOST, SESSION_UP};
use odac_e2e::backoff::{RETRY_LINE, check_envelope, retries};
use odac_e2e::docker::containers;
use odac_e2e::figures::{figure, secs};
use odac_e2e::poll::{holds_for, poll};
use odac_e2e::require_docker;
use odac_e2e::stack::{Stack, TOKEN};
use odac_e2e::tls::write_foreign_ca;
use serde_json::json;

/// The agent's test backoff (see `AgentOptions::new`): base 500 ms, cap 5 s.
const BASE_MS: u64 = 500;
const CAP_MS: u64 = 5_000;

fn create_apps(stack: &Stack, names: &[String]) {
    for n in names {
        stack.sim.create_app(&Stack::app_body(n)).unwrap();
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// No agent log line may contain `secret`.
fn assert_secret_not_logged(stack: &Stack, secret: &str) {
    let logs = stack.dir().join("logs");
    for entry in std::fs::read_dir(&logs).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("odac-agent") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains(secret),
                "{} contains the token",
                path.display()
            );
        }
    }
}

#[test]
fn control_plane_killed_mid_apply_and_restarted() {
    const SCENARIO: &str = "cp-killed-mid-apply";
    require_docker!(SCENARIO);
    let mut stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let apps = names("cpk", 8);
    let mark = stack.agent().unwrap().process().unwrap().mark();
    create_apps(&stack, &apps);
    // kill the control plane while the agent is still applying
    stack.sim.kill().unwrap();
    let offline = Instant::now();
    let at_kill = stack.containers().unwrap().len();
    figure(
        SCENARIO,
        "containers_when_killed",
        format!("{at_kill}/{}", apps.len()),
    );

    // the agent keeps retrying (inside its envelope) and keeps applying what it got
    let agent = stack.agent().unwrap().process().unwrap();
    poll("four reconnect attempts", Duration::from_secs(30), || {
        let n = agent.lines()[mark..]
            .iter()
            .filter(|l| l.contains(RETRY_LINE))
            .count();
        if n >= 4 {
            Ok(())
        } else {
            Err(format!("{n} retries"))
        }
    })
    .unwrap();
    stack.sim.restart().unwrap();
    let restarted = Instant::now();
    let agent = stack.agent().unwrap().process().unwrap();
    agent
        .wait_for_line_after(mark, SESSION_UP, Duration::from_secs(20))
        .unwrap();
    let reconnect = restarted.elapsed();
    figure(SCENARIO, "reconnect_after_restart", secs(reconnect));
    assert!(
        reconnect <= Duration::from_millis(CAP_MS + 3_000),
        "reconnected {reconnect:?} after the restart; the backoff cap is {CAP_MS} ms"
    );
    let retried = retries(&agent.lines()[mark..]);
    figure(SCENARIO, "retries_while_down", retried.len());
    figure(
        SCENARIO,
        "control_plane_down_for",
        secs(restarted - offline),
    );
    check_envelope(&retried, BASE_MS, CAP_MS).unwrap();

    let t = Instant::now();
    stack
        .wait_converged(apps.len(), Duration::from_secs(60))
        .unwrap();
    figure(SCENARIO, "converged_after_reconnect", secs(t.elapsed()));
    assert_secret_not_logged(&stack, TOKEN);
}

#[test]
fn link_cut_for_30s_apps_keep_running_and_no_status_is_lost() {
    const SCENARIO: &str = "link-cut-30s";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).tcp_proxy().start().unwrap();
    let host = stack.wait_connected(Duration::from_secs(30)).unwrap();
    let apps = names("cut", 4);
    create_apps(&stack, &apps);
    stack.wait_converged(4, Duration::from_secs(60)).unwrap();
    let before = stack.agent().unwrap().statuses().unwrap();
    let proxy = stack.proxy().unwrap();
    let mark = stack.agent().unwrap().process().unwrap().mark();
    let refused_before = proxy.refused();

    proxy.cut();
    let cut_at = Instant::now();
    stack.wait_disconnected(Duration::from_secs(10)).unwrap();

    // while the link is down two containers crash; nothing else changes, so what reaches the
    // control plane afterwards can only come from the statuses the agent queued
    stack.crash(&["cut0", "cut1"]).unwrap();

    // the agent restarts the crashed apps on its own, offline
    let agent = stack.agent().unwrap();
    stack
        .wait_restarted(&["cut0", "cut1"], &before, Duration::from_secs(20))
        .unwrap();
    // ...and every app keeps running for the rest of the cut
    let remaining = Duration::from_secs(30).saturating_sub(cut_at.elapsed());
    holds_for("every app running during the cut", remaining, || {
        let by_app = stack.containers_by_app().map_err(|e| e.to_string())?;
        for app in &apps {
            match by_app.get(app).map(Vec::as_slice) {
                Some([c]) if c.state == "running" => {}
                other => return Err(format!("{app}: {other:?}")),
            }
        }
        Ok(())
    })
    .unwrap();

    // statuses the control plane has not seen: queued in the agent
    let agent_view = agent.statuses().unwrap();
    let cp_view: BTreeMap<String, _> = stack
        .sim
        .apps()
        .unwrap()
        .into_iter()
        .map(|a| (a.name.clone(), a.status))
        .collect();
    let queued: Vec<&String> = agent_view
        .iter()
        .filter(|(name, s)| cp_view.get(*name).cloned().flatten().as_ref() != Some(*s))
        .map(|(name, _)| name)
        .collect();
    assert!(
        queued.len() >= 2,
        "the crashed apps' statuses are pending: {queued:?}"
    );
    figure(SCENARIO, "cut_duration", secs(cut_at.elapsed()));
    figure(
        SCENARIO,
        "connection_attempts_during_cut",
        proxy.refused() - refused_before,
    );

    let restored = stack.restore_link(mark).unwrap();
    figure(
        SCENARIO,
        "reconnect_after_restore",
        secs(restored.elapsed()),
    );
    assert!(restored.elapsed() <= Duration::from_millis(CAP_MS + 3_000));
    // every queued status reaches the control plane (no desired-state change happened that
    // would make the agent report them again anyway)
    let queued: Vec<String> = queued.into_iter().cloned().collect();
    let undelivered = stack.wait_statuses_delivered(&queued, Duration::from_secs(20));
    let lost = undelivered.len();
    figure(SCENARIO, "statuses_queued", queued.len());
    figure(SCENARIO, "statuses_delivered", queued.len() - lost);
    figure(SCENARIO, "statuses_lost", lost);
    assert_eq!(lost, 0, "statuses lost: {undelivered:?}");
    stack.wait_converged(4, Duration::from_secs(60)).unwrap();
    figure(
        SCENARIO,
        "converged_after_restore",
        secs(restored.elapsed()),
    );

    // the operator's changes made while the link is down are applied once it is back
    let mark2 = agent.process().unwrap().mark();
    proxy.cut();
    stack.wait_disconnected(Duration::from_secs(10)).unwrap();
    // with no host connected the control plane needs to be told where the app goes
    let mut late = Stack::app_body("cut4");
    late["host"] = json!(host);
    stack.sim.create_app(&late).unwrap();
    stack.sim.delete_app("cut3").unwrap();
    stack.restore_link(mark2).unwrap();
    stack.wait_converged(4, Duration::from_secs(60)).unwrap();
    let mut final_cp: Vec<String> = stack
        .sim
        .apps()
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    final_cp.sort();
    assert_eq!(final_cp, ["cut0", "cut1", "cut2", "cut4"]);
    check_envelope(
        &retries(&agent.process().unwrap().lines()[mark..]),
        BASE_MS,
        CAP_MS,
    )
    .unwrap();
    assert_secret_not_logged(&stack, TOKEN);
}

#[test]
fn agent_sigkilled_mid_apply_converges_without_duplicates() {
    const SCENARIO: &str = "agent-sigkill-mid-apply";
    require_docker!(SCENARIO);
    let mut stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let apps = names("kil", 12);
    create_apps(&stack, &apps);
    // kill as soon as the agent has started creating containers
    let at_kill = poll_every_fast(&stack, |n| n >= 2);
    stack
        .agent_mut()
        .unwrap()
        .process_mut()
        .unwrap()
        .sigkill()
        .unwrap();
    let after_kill = stack.containers().unwrap();
    figure(
        SCENARIO,
        "containers_when_killed",
        format!("{at_kill}/{}", apps.len()),
    );
    assert!(after_kill.len() <= apps.len());

    let t = Instant::now();
    stack.agent_mut().unwrap().restart().unwrap();
    stack
        .wait_converged(apps.len(), Duration::from_secs(90))
        .unwrap();
    figure(SCENARIO, "converged_after_restart", secs(t.elapsed()));
    // containers that survived the kill were adopted, not duplicated
    let now = stack.containers().unwrap();
    assert_eq!(now.len(), apps.len(), "{now:?}");
    let survivors = after_kill
        .iter()
        .filter(|c| now.iter().any(|n| n.id == c.id))
        .count();
    figure(SCENARIO, "containers_adopted", survivors);
}

/// Polls the container count every 20 ms until `ok(count)`; returns the count.
/// Waits for the host's `last_error` on the control plane to name `code`; returns it.
fn reported_error(stack: &Stack, code: &str) -> String {
    poll(
        &format!("the agent's {code} error at the control plane"),
        Duration::from_secs(10),
        || {
            let hosts = stack.sim.hosts().map_err(|e| e.to_string())?;
            match hosts.first().and_then(|h| h.last_error.clone()) {
                Some(e) if e.contains(code) => Ok(e),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .unwrap()
}

fn poll_every_fast(stack: &Stack, ok: impl Fn(usize) -> bool) -> usize {
    odac_e2e::poll::poll_every(
        "containers to appear",
        Duration::from_secs(60),
        Duration::from_millis(20),
        || {
            let n = stack.containers().map_err(|e| e.to_string())?.len();
            if ok(n) {
                Ok(n)
            } else {
                Err(format!("{n} containers"))
            }
        },
    )
    .unwrap()
}

#[test]
fn engine_socket_cut_reports_engine_unavailable_then_converges() {
    const SCENARIO: &str = "engine-socket-cut";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).docker_proxy().start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let apps = names("eng", 2);
    create_apps(&stack, &apps);
    stack.wait_converged(2, Duration::from_secs(60)).unwrap();
    let ids: BTreeMap<String, String> = stack
        .containers()
        .unwrap()
        .into_iter()
        .map(|c| (c.app, c.id))
        .collect();

    let dp = stack.docker_proxy.as_ref().unwrap();
    dp.cut();
    let cut = Instant::now();
    poll(
        "engine_unavailable in every status and the inventory",
        Duration::from_secs(30),
        || {
            let apps = stack.sim.apps().map_err(|e| e.to_string())?;
            let hosts = stack.sim.hosts().map_err(|e| e.to_string())?;
            let statuses_ok = apps.iter().all(|a| {
                a.status
                    .as_ref()
                    .and_then(|s| s.last_error.as_deref())
                    .is_some_and(|e| e.starts_with("engine_unavailable"))
            });
            let inv_ok = hosts.iter().all(|h| h.engine == "unreachable");
            if statuses_ok && inv_ok {
                Ok(())
            } else {
                Err(format!(
                    "engines {:?}, errors {:?}",
                    hosts.iter().map(|h| &h.engine).collect::<Vec<_>>(),
                    apps.iter()
                        .map(|a| a.status.as_ref().and_then(|s| s.last_error.clone()))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .unwrap();
    figure(
        SCENARIO,
        "engine_unavailable_reported_after",
        secs(cut.elapsed()),
    );
    // the containers themselves keep running; a new app waits for the engine
    assert!(
        containers(stack.cleanup.label())
            .unwrap()
            .iter()
            .all(|c| c.state == "running")
    );
    stack.sim.create_app(&Stack::app_body("eng-late")).unwrap();
    stack
        .wait_app(
            "eng-late",
            Duration::from_secs(30),
            "engine_unavailable",
            |a| {
                a.status
                    .as_ref()
                    .and_then(|s| s.last_error.as_deref())
                    .is_some_and(|e| e.starts_with("engine_unavailable"))
            },
        )
        .unwrap();
    figure(SCENARIO, "engine_refused_connections", dp.refused());

    dp.restore();
    let restored = Instant::now();
    stack.wait_converged(3, Duration::from_secs(60)).unwrap();
    figure(
        SCENARIO,
        "converged_after_restore",
        secs(restored.elapsed()),
    );
    for a in stack.sim.apps().unwrap() {
        assert_eq!(
            a.status.as_ref().and_then(|s| s.last_error.clone()),
            None,
            "{}",
            a.name
        );
    }
    let hosts = stack.sim.hosts().unwrap();
    poll(
        "the inventory to see the engine again",
        Duration::from_secs(15),
        || {
            let h = stack.sim.hosts().map_err(|e| e.to_string())?;
            if h.iter().all(|h| h.engine.starts_with("docker")) {
                Ok(())
            } else {
                Err(format!(
                    "{:?}",
                    hosts.iter().map(|h| &h.engine).collect::<Vec<_>>()
                ))
            }
        },
    )
    .unwrap();
    // the running apps were not recreated
    let now: BTreeMap<String, String> = stack
        .containers()
        .unwrap()
        .into_iter()
        .map(|c| (c.app, c.id))
        .collect();
    for (app, id) in &ids {
        assert_eq!(now.get(app), Some(id), "{app} kept its container");
    }
}

#[test]
fn malformed_and_oversize_frames_are_survived_and_reported() {
    const SCENARIO: &str = "bad-frames";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).tcp_proxy().start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    create_apps(&stack, &names("frm", 1));
    stack.wait_converged(1, Duration::from_secs(60)).unwrap();
    let proxy = stack.proxy().unwrap();
    let agent = stack.agent().unwrap().process().unwrap();
    assert_eq!(proxy.forwarded(), 1);

    // malformed: an error goes back, the session stays
    let mark = agent.mark();
    let out = stack.sim.faults(&json!({"send_malformed": true})).unwrap();
    assert_eq!(out["sessions_affected"], json!(1), "{out}");
    agent
        .wait_for_line_after(
            mark,
            "refused a control-plane frame",
            Duration::from_secs(10),
        )
        .unwrap();
    let reported = reported_error(&stack, "malformed");
    figure(SCENARIO, "malformed_reported_as", format!("{reported:?}"));
    stack.sim.create_app(&Stack::app_body("frm-after")).unwrap();
    stack.wait_converged(2, Duration::from_secs(60)).unwrap();
    assert_eq!(
        proxy.forwarded(),
        1,
        "the session survived the malformed frame"
    );
    assert_eq!(agent.count_lines(SESSION_LOST), 0);

    // oversize: close 1009, reconnect, converge
    let mark = agent.mark();
    let out = stack.sim.faults(&json!({"send_oversize": true})).unwrap();
    assert_eq!(out["sessions_affected"], json!(1), "{out}");
    let lost = agent
        .wait_for_line_after(mark, SESSION_LOST, Duration::from_secs(10))
        .unwrap();
    assert!(lost.contains("1009"), "{lost}");
    figure(SCENARIO, "oversize_logged_as", format!("{lost:?}"));
    let reported = reported_error(&stack, "too_large");
    figure(SCENARIO, "oversize_reported_as", format!("{reported:?}"));
    let t = Instant::now();
    agent
        .wait_for_line_after(mark, SESSION_UP, Duration::from_secs(15))
        .unwrap();
    figure(SCENARIO, "reconnect_after_oversize", secs(t.elapsed()));
    assert_eq!(proxy.forwarded(), 2);
    stack.wait_converged(2, Duration::from_secs(30)).unwrap();
    let mut stack = stack;
    assert!(
        stack
            .agent_mut()
            .unwrap()
            .process_mut()
            .unwrap()
            .is_running()
    );
}

#[test]
fn wrong_token_is_refused_with_a_clear_line_and_bounded_attempts() {
    const SCENARIO: &str = "wrong-token";
    require_docker!(SCENARIO);
    const WRONG: &str = "odac_wrong_token_e2e_do_not_log";
    let mut stack = Stack::builder(SCENARIO)
        .tcp_proxy()
        .no_agent()
        .start()
        .unwrap();
    stack.options.token = WRONG.to_owned();
    stack.start_agent().unwrap();
    let agent = stack.agent().unwrap().process().unwrap();
    let line = agent
        .wait_for_line("refused the agent's token", Duration::from_secs(20))
        .unwrap();
    assert!(
        line.contains("token_file"),
        "the line says what to check: {line}"
    );
    figure(SCENARIO, "log_line", format!("{line:?}"));
    let retry = agent
        .wait_for_line(RETRY_LINE, Duration::from_secs(5))
        .unwrap();
    let r = odac_e2e::backoff::parse_retry(&retry).unwrap();
    figure(SCENARIO, "next_attempt_in", format!("{}ms", r.delay_ms));
    let auth_ms = stack.options.auth_retry_secs * 1000;
    assert!(
        r.delay_ms >= auth_ms / 2 && r.delay_ms <= auth_ms,
        "after a refused token the agent waits the long auth delay: {r:?}"
    );
    let proxy = stack.proxy().unwrap();
    holds_for(
        "a single connection attempt",
        Duration::from_secs(5),
        || {
            if proxy.accepted() == 1 {
                Ok(())
            } else {
                Err(format!("{} attempts", proxy.accepted()))
            }
        },
    )
    .unwrap();
    figure(SCENARIO, "connection_attempts_in_window", proxy.accepted());
    assert!(stack.sim.hosts().unwrap().is_empty(), "no host got in");
    assert!(
        stack
            .agent_mut()
            .unwrap()
            .process_mut()
            .unwrap()
            .is_running()
    );
    assert_secret_not_logged(&stack, WRONG);
}

#[test]
fn untrusted_certificate_is_refused_and_the_right_ca_connects() {
    const SCENARIO: &str = "untrusted-cert";
    require_docker!(SCENARIO);
    let mut stack = Stack::builder(SCENARIO).no_agent().start().unwrap();
    let rogue = write_foreign_ca(stack.dir(), "rogue-ca").unwrap();
    let good_ca = stack.options.ca_file.clone();

    for (label, ca) in [("foreign_ca", Some(rogue)), ("web_roots", None)] {
        stack.options.ca_file = ca;
        match stack.agent.as_mut() {
            None => stack.start_agent().unwrap(),
            Some(a) => {
                let ca = stack.options.ca_file.clone();
                a.restart_with(|o| o.ca_file = ca).unwrap();
            }
        }
        let agent = stack.agent().unwrap().process().unwrap();
        let line = agent
            .wait_for_line(
                "cannot connect to the control plane",
                Duration::from_secs(20),
            )
            .unwrap();
        assert!(
            line.to_lowercase().contains("certificate") || line.contains("UnknownIssuer"),
            "the reason names the certificate: {line}"
        );
        figure(SCENARIO, label, format!("{line:?}"));
        agent
            .wait_for_line(RETRY_LINE, Duration::from_secs(5))
            .unwrap();
        assert!(
            stack.sim.hosts().unwrap().is_empty(),
            "no session with an untrusted server"
        );
        assert!(
            stack
                .agent_mut()
                .unwrap()
                .process_mut()
                .unwrap()
                .is_running()
        );
    }
    // the same server with the right CA connects
    stack
        .agent_mut()
        .unwrap()
        .restart_with(|o| o.ca_file = good_ca)
        .unwrap();
    stack.wait_connected(Duration::from_secs(20)).unwrap();
}
