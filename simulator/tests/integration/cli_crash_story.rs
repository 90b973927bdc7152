//! One crash story in every view of the `odac` CLI: a running app that crashed before shows
//! no crash block and no "next retry none" in `odac app show` (an older agent may still send
//! the crash of the previous run), and `odac app list` says how often it was restarted; a
//! crash loop's fix never points at the command being read; `odac app logs --follow` on an app
//! that is not running says so (and that it waits for the next run) instead of ending without
//! a word.

use crate::common;

use std::process::Stdio;

use common::{Sim, stdout};
use odac_protocol::{AppSpec, AppState, AppStatus, ControlMessage, CrashInfo, CrashReason};
use odac_simulator::fake_agent::agent_conn::AgentConn;
use odac_simulator::fake_agent::inventories::profile;

fn setup(sim: &Sim, id: &str, app: &str) -> AgentConn {
    sim.agent_with_app(id, app, "busybox")
}

fn report(sim: &Sim, c: &mut AgentConn, seq: u64, edit: impl FnOnce(&mut AppStatus)) {
    let mut st = odac_simulator::fake_agent::sim_agent::status_for(
        &AppSpec::new("web", "busybox"),
        &profile(1, "agt_crash"),
        2,
    );
    edit(&mut st);
    let want = st.state.as_str().to_owned();
    let restarts = st.restart_count;
    sim.send_status(c, seq, st);
    sim.wait_api("/api/apps/web", |v| {
        v["state"] == want.as_str() && v["status"]["restart_count"] == restarts
    });
}

fn crash(reason: CrashReason, next: Option<u64>) -> Option<CrashInfo> {
    Some(CrashInfo {
        reason,
        exit_code: Some(3),
        oom_killed: false,
        next_retry_at_ms: next,
        output_tail: Some("boom\n".into()),
    })
}

#[test]
fn show_and_list_agree_between_crashes_and_fixes_point_elsewhere() {
    let sim = Sim::start();
    let mut c = setup(&sim, "agt_crash", "web");
    // between two crashes: running, restarted 9 times, an old crash part still attached
    report(&sim, &mut c, 2, |st| {
        st.state = AppState::Running;
        st.restart_count = 9;
        st.last_exit_code = Some(3);
        st.crash = crash(CrashReason::CrashLoop, None);
    });
    let show = stdout(&sim.odac(&["app", "show", "web"]));
    assert!(show.contains("state         running\n"), "{show}");
    assert!(show.contains("restarts      9\n"), "{show}");
    assert!(show.contains("last exit     3\n"), "{show}");
    for never in ["crash ", "next retry", "none (not restarted)"] {
        assert!(!show.contains(never), "{never:?} while running:\n{show}");
    }
    let list = stdout(&sim.odac(&["app", "list"]));
    let row = list.lines().find(|l| l.starts_with("web")).unwrap();
    assert!(row.ends_with("restarted 9 times (last exit 3)"), "{list}");

    // in the loop: the crash, its next retry, and a fix that is not "read odac app show"
    report(&sim, &mut c, 3, |st| {
        st.state = AppState::CrashLoop;
        st.restart_count = 10;
        st.last_exit_code = Some(3);
        st.crash = crash(CrashReason::CrashLoop, Some(4_102_444_800_000));
    });
    let show = stdout(&sim.odac(&["app", "show", "web"]));
    assert!(show.contains("crash         crash_loop: "), "{show}");
    assert!(
        show.contains("next retry    2100-01-01T00:00:00.000Z"),
        "{show}"
    );
    let fix = show.lines().find(|l| l.starts_with("fix ")).unwrap();
    assert!(!fix.contains("odac app show"), "{fix}");
    let list = stdout(&sim.odac(&["app", "list"]));
    let row = list.lines().find(|l| l.starts_with("web")).unwrap();
    assert!(row.ends_with("crash_loop (exit 3)"), "{list}");
}

#[test]
fn following_the_logs_of_an_app_that_is_not_running_says_so() {
    let sim = Sim::start();
    let mut c = setup(&sim, "agt_crash", "web");
    report(&sim, &mut c, 2, |st| {
        st.state = AppState::CrashLoop;
        st.restart_count = 2;
        st.crash = crash(CrashReason::CrashLoop, Some(4_102_444_800_000));
    });
    let child = sim.spawn_odac(&["app", "logs", "--follow", "web"], Stdio::null());
    let req = sim
        .recv_control(&mut c, |m| match m {
            ControlMessage::LogsRequest(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert!(req.follow);
    // the agent's stream of a stopped container ends at once
    let end = common::logs_complete(req.request_id);
    sim.rt.block_on(c.send(&end)).unwrap();
    // it waits for the agent's next run and says so, with when that is, instead of ending
    // without a word (it follows the new run once it comes: tests/tests/e2e/logs_follow.rs)
    let mut child = child;
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.contains("web stopped (crash_loop)")
            && line.contains("waiting to follow its next run"),
        "{line}"
    );
    assert!(line.contains("2100-01-01T00:00:00.000Z"), "{line}");
}
