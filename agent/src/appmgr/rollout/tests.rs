//! The rollout verdict as a table: a new version proves itself by running
//! `min_healthy_secs` (healthy, with a health check), fails by exiting, crash-looping, being
//! OOM-killed, not starting or not being healthy by the deadline, and is waited on otherwise.

use odac_protocol::{
    AppSpec, AppState, AppStatus, CrashInfo, CrashReason, HealthCheck, HealthReport, HealthState,
    UpdatePolicy,
};

use super::{Verdict, verdict};
use crate::appmgr::labels::Identity;
use crate::appmgr::rollout::rollout_book::Pending;

fn pending() -> Pending {
    Pending {
        identity: Identity::of(&AppSpec::new("web", "busybox:2")),
        generation: 7,
        container_id: None,
        seen_at_ms: None,
        lock_seen: false,
        lock_expired: false,
    }
}

fn running(id: &str) -> AppStatus {
    AppStatus {
        name: "web".into(),
        state: AppState::Running,
        container_id: Some(id.into()),
        ..AppStatus::default()
    }
}

fn policy(min: u32, deadline: u32) -> UpdatePolicy {
    UpdatePolicy {
        min_healthy_secs: Some(min),
        healthy_deadline_secs: Some(deadline),
        auto_revert: None,
        max_lock_secs: None,
        order: None,
    }
}

#[test]
fn a_version_that_keeps_running_proves_itself_after_min_healthy_secs() {
    let spec = AppSpec::new("web", "busybox:2");
    let mut p = pending();
    let s = running("c1");
    assert_eq!(
        verdict(&mut p, &s, &policy(10, 120), &spec, 1_000),
        Verdict::Waiting(Some(11_000))
    );
    assert_eq!(
        verdict(&mut p, &s, &policy(10, 120), &spec, 10_999),
        Verdict::Waiting(Some(11_000))
    );
    assert_eq!(
        verdict(&mut p, &s, &policy(10, 120), &spec, 11_000),
        Verdict::Good
    );
    // another container (recreated) starts the clock again
    let s2 = running("c2");
    assert_eq!(
        verdict(&mut p, &s2, &policy(10, 120), &spec, 20_000),
        Verdict::Waiting(Some(30_000))
    );
    // never proven in the pass that first saw it, even with min_healthy_secs 0
    let mut p = pending();
    assert_eq!(
        verdict(&mut p, &s, &policy(0, 120), &spec, 5),
        Verdict::Waiting(Some(5))
    );
    assert_eq!(
        verdict(&mut p, &s, &policy(0, 120), &spec, 6),
        Verdict::Good
    );
}

#[test]
fn exits_crashes_and_oom_kills_fail_the_rollout_with_their_cause() {
    let spec = AppSpec::new("web", "busybox:2");
    for (state, crash, restarts, expected) in [
        (
            AppState::Restarting,
            Some((CrashReason::Crashed, Some(3), false)),
            0,
            "exited with code 3",
        ),
        (
            AppState::CrashLoop,
            Some((CrashReason::OomKilled, Some(137), true)),
            1,
            "was killed by the kernel's oom killer",
        ),
        (AppState::Running, None, 1, "stopped"),
        (
            AppState::Stopped,
            Some((CrashReason::Crashed, Some(1), false)),
            0,
            "exited with code 1",
        ),
    ] {
        let mut s = running("c1");
        s.state = state;
        s.restart_count = restarts;
        s.crash = crash.map(|(reason, exit_code, oom_killed)| CrashInfo {
            reason,
            exit_code,
            oom_killed,
            ..CrashInfo::default()
        });
        assert_eq!(
            verdict(&mut pending(), &s, &policy(10, 120), &spec, 1),
            Verdict::Failed(expected.into()),
            "{state:?}"
        );
    }
    let mut s = running("c1");
    s.state = AppState::Failed;
    s.last_error = Some("image_pull_failed: not found".into());
    assert_eq!(
        verdict(&mut pending(), &s, &policy(10, 120), &spec, 1),
        Verdict::Failed("could not be started: image_pull_failed: not found".into())
    );
    for waiting in [AppState::Pulling, AppState::Creating, AppState::Pending] {
        let mut s = running("c1");
        s.state = waiting;
        assert_eq!(
            verdict(&mut pending(), &s, &policy(10, 120), &spec, 1),
            Verdict::Waiting(None)
        );
    }
}

#[test]
fn with_a_health_check_it_must_be_healthy_by_the_deadline() {
    let mut spec = AppSpec::new("web", "busybox:2");
    spec.healthcheck = Some(HealthCheck {
        command: vec!["false".into()],
        ..HealthCheck::default()
    });
    let mut s = running("c1");
    s.health = Some(HealthReport {
        state: HealthState::Starting,
        last_output: None,
    });
    let mut p = pending();
    let pol = policy(2, 30);
    assert_eq!(
        verdict(&mut p, &s, &pol, &spec, 0),
        Verdict::Waiting(Some(30_000))
    );
    // running long enough is not enough without a healthy verdict
    assert_eq!(
        verdict(&mut p, &s, &pol, &spec, 5_000),
        Verdict::Waiting(Some(30_000))
    );
    s.health = Some(HealthReport {
        state: HealthState::Unhealthy,
        last_output: Some("nope".into()),
    });
    assert_eq!(
        verdict(&mut p, &s, &pol, &spec, 30_000),
        Verdict::Failed("was not healthy 30 s after it started (health unhealthy)".into())
    );
    // healthy in time: proven once min_healthy_secs have passed too
    let mut p = pending();
    s.health = Some(HealthReport {
        state: HealthState::Healthy,
        last_output: None,
    });
    assert_eq!(
        verdict(&mut p, &s, &pol, &spec, 0),
        Verdict::Waiting(Some(2_000))
    );
    assert_eq!(verdict(&mut p, &s, &pol, &spec, 2_000), Verdict::Good);
}
