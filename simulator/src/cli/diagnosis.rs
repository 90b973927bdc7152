//! Why an app is down, as the `odac` CLI shows it in tables: the REASON cell of a crashed app
//! (its crash reason and exit code, never a GPU reason left from before), of a running app that
//! crashed before (`restarted 9 times (last exit 3)`), and the health after the state
//! (`running (unhealthy)`), and the rollout of a changed spec (`running (rolled_back)`, with
//! `rolled_back: generation 7 exited with code 3` as its reason). `odac app show` is
//! [`super::show`].

use odac_protocol::{AppStatus, CrashInfo, RolloutReport, RolloutState};

use crate::state::views::AppView;

/// The crash of an app that is not running, if its status has one.
pub fn crash(a: &AppView) -> Option<&CrashInfo> {
    a.status
        .as_ref()
        .filter(|s| s.state != odac_protocol::AppState::Running)
        .and_then(|s| s.crash.as_ref())
}

/// The REASON cell of a crash, e.g. `oom_killed (exit 137)`.
pub fn crash_cell(c: &CrashInfo) -> String {
    match c.exit_code {
        Some(code) => format!("{} (exit {code})", c.reason),
        None => c.reason.to_string(),
    }
}

/// The REASON cell of a running app that crashed before, e.g. `restarted 9 times (last exit
/// 3)`: between two crashes the list tells the same story as `odac app show`.
pub fn restarts_cell(a: &AppView) -> Option<String> {
    let s = a.status.as_ref().filter(|s| s.restart_count > 0)?;
    let times = match s.restart_count {
        1 => "once".to_owned(),
        n => format!("{n} times"),
    };
    Some(match s.last_exit_code {
        Some(code) => format!("restarted {times} (last exit {code})"),
        None => format!("restarted {times}"),
    })
}

/// The state with the health check's verdict when there is one, e.g. `running (unhealthy)`.
pub fn state_with_health(state: &str, status: Option<&AppStatus>) -> String {
    match status.and_then(|s| s.health.as_ref()) {
        Some(h) => format!("{state} ({})", h.state),
        None => state.to_owned(),
    }
}

/// The rollout part of an app's status, when it has one.
pub fn rollout(a: &AppView) -> Option<&RolloutReport> {
    a.status.as_ref().and_then(|s| s.rollout.as_ref())
}

/// The REASON cell of a failed rollout, e.g. `rolled_back: generation 7 exited with code 3`.
pub fn rollout_cell(r: &RolloutReport) -> Option<String> {
    (r.state != RolloutState::RollingOut).then(|| {
        format!(
            "{}: generation {} {}",
            r.state,
            r.generation,
            r.error.as_deref().unwrap_or("failed")
        )
    })
}
