//! Why an app is down, and how its containers run: the crash part of a status (exit code, OOM
//! kill, the next retry as wall-clock time, the bounded tail of the last run's output taken
//! once when the exit is first seen), the health part read back from the engine, and the run
//! options every container gets (the spec's health check; json-file log rotation capped by
//! the agent's `[apps]` limits, which a spec may lower but never raise).
//!
//! The restart policy decides what an exit means: under `always` every exit is restarted (a
//! clean one is `exited`, never a crash or a crash loop; a non-zero one is `crashed`);
//! under `on_failure` an exit 0 and under `never` any exit is final, `exited` for an exit 0
//! and `failed` otherwise.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use odac_protocol::{
    AppSpec, AppState, CrashInfo, CrashReason, HealthReport, HealthState, MAX_HEALTH_OUTPUT_BYTES,
    MAX_OUTPUT_TAIL_BYTES, MAX_OUTPUT_TAIL_LINES,
};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::crashloop::CrashGuard;
use crate::appmgr::settings::AppManagerConfig;
use odac_host::engine::{
    ContainerDetails, ContainerEngine, ContainerState, EngineError, HealthProbe, LogRotation,
    tail::cut_tail,
};

/// The last exit of an app's container as first seen, kept (and persisted) until the next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LastExit {
    /// The container that exited.
    pub container_id: String,
    /// The engine's exit time: a different one is a new exit.
    pub finished_at: Option<String>,
    /// Exit code.
    pub exit_code: Option<i64>,
    /// Killed by the OOM killer.
    pub oom_killed: bool,
    /// The bounded tail of its output.
    pub output_tail: Option<String>,
}

/// Now, in Unix milliseconds.
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// The wall-clock time of `at`, a monotonic deadline, in Unix milliseconds.
pub(crate) fn wall_ms_of(at: Instant) -> u64 {
    let now = Instant::now();
    let ahead = u64::try_from(at.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX);
    wall_ms().saturating_add(ahead)
}

/// The monotonic deadline of `ms`, a wall-clock time in Unix milliseconds (now if past).
pub(crate) fn instant_of(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms.saturating_sub(wall_ms()))
}

/// Whether the engine's inspection shows a process that ended (not a container that never
/// started).
pub(crate) fn has_exited(details: &ContainerDetails) -> bool {
    matches!(
        details.status,
        ContainerState::Exited | ContainerState::Dead
    ) && !details.running
}

/// Whether `details` shows an exit not yet in `last`.
/// An exit first read without an OOM kill is read again once the engine reports one: the
/// engine records the kill from the kernel's OOM event, which can come after the exit.
pub(crate) fn is_new_exit(last: Option<&LastExit>, details: &ContainerDetails) -> bool {
    has_exited(details)
        && last.is_none_or(|l| {
            l.container_id != details.id
                || l.finished_at != details.finished_at
                || (details.oom_killed && !l.oom_killed)
        })
}

/// Read the exit just seen, with the tail of the output of the run that ended, between
/// `previous` (the container's exit before, the end of the previous run) and the exit seen
/// now, so no earlier run's output; a container without one known ran once. The same exit read again
/// (the engine recorded its OOM kill late) keeps the tail read then. Only an unreachable
/// engine is an error: a tail that cannot be read is left out.
pub(crate) async fn read_exit(
    engine: &dyn ContainerEngine,
    details: &ContainerDetails,
    previous: Option<&LastExit>,
) -> Result<LastExit, EngineError> {
    let previous = previous.filter(|p| p.container_id == details.id);
    if let Some(p) = previous.filter(|p| p.finished_at == details.finished_at) {
        return Ok(LastExit {
            oom_killed: details.oom_killed,
            exit_code: details.exit_code,
            ..p.clone()
        });
    }
    let runs = previous
        .and_then(|p| p.finished_at.as_deref())
        .zip(details.started_at.as_deref());
    let output_tail = match engine
        .output_tail(
            &details.id,
            runs,
            MAX_OUTPUT_TAIL_LINES,
            MAX_OUTPUT_TAIL_BYTES,
        )
        .await
    {
        Ok(text) => Some(cut_tail(
            &text,
            MAX_OUTPUT_TAIL_LINES,
            MAX_OUTPUT_TAIL_BYTES,
        ))
        .filter(|t| !t.is_empty()),
        Err(e) if e.is_unavailable() => return Err(e),
        Err(e) => {
            tracing::warn!(container = %details.id, error = %e, "could not read the output of the exited container");
            None
        }
    };
    Ok(LastExit {
        container_id: details.id.clone(),
        finished_at: details.finished_at.clone(),
        exit_code: details.exit_code,
        oom_killed: details.oom_killed,
        output_tail,
    })
}

/// Whether the restart policy of `spec` restarts after `exit`.
pub(crate) fn restarts(spec: &AppSpec, exit: &LastExit) -> bool {
    let code = if exit.oom_killed {
        None
    } else {
        exit.exit_code
    };
    spec.restart.unwrap_or_default().restarts(code)
}

/// The state of an app whose last exit is final (not restarted): `exited` after a clean exit,
/// `failed` otherwise.
pub(crate) fn final_state(exit: &LastExit) -> AppState {
    if exit.exit_code == Some(0) && !exit.oom_killed {
        AppState::Exited
    } else {
        AppState::Failed
    }
}

/// The crash part of the status of an app that is not running.
pub(crate) fn crash_info(
    exit: &LastExit,
    guard: &CrashGuard,
    retry_at_ms: Option<u64>,
) -> CrashInfo {
    let reason = if exit.oom_killed {
        CrashReason::OomKilled
    } else if exit.exit_code == Some(0) {
        // a clean exit is no crash, however often `always` restarts it
        CrashReason::Exited
    } else if guard.in_crash_loop() {
        CrashReason::CrashLoop
    } else {
        // a non-zero exit, or none read (killed by a signal): a crash, whatever the policy
        CrashReason::Crashed
    };
    CrashInfo {
        reason,
        exit_code: exit.exit_code,
        oom_killed: exit.oom_killed,
        next_retry_at_ms: retry_at_ms,
        output_tail: exit.output_tail.clone(),
    }
}

/// The health part of a status, from the engine's inspection.
pub(crate) fn health_report(details: &ContainerDetails) -> Option<HealthReport> {
    let h = details.health.as_ref()?;
    let state = match h.status.as_str() {
        "healthy" => HealthState::Healthy,
        "unhealthy" => HealthState::Unhealthy,
        _ => HealthState::Starting,
    };
    let last_output = h
        .last_failure
        .as_deref()
        .map(|o| cut_tail(o.trim_end(), MAX_OUTPUT_TAIL_LINES, MAX_HEALTH_OUTPUT_BYTES))
        .filter(|o| !o.is_empty());
    Some(HealthReport { state, last_output })
}

/// The engine's health probe for the spec's health check (`None`: the image's).
pub(crate) fn health_probe(spec: &AppSpec) -> Option<HealthProbe> {
    let h = spec.healthcheck.as_ref()?;
    let secs = |s: Option<u32>| s.map(|s| Duration::from_secs(u64::from(s)));
    Some(HealthProbe {
        command: h.command.clone(),
        interval: secs(h.interval_secs),
        timeout: secs(h.timeout_secs),
        retries: h.retries,
        start_period: secs(h.start_period_secs),
    })
}

/// The log rotation of an app's container: the agent's limits, lowered by the spec's.
pub(crate) fn log_rotation(config: &AppManagerConfig, spec: &AppSpec) -> LogRotation {
    let limits = spec.logs.unwrap_or_default();
    LogRotation {
        max_size_bytes: limits
            .max_size_bytes
            .map_or(config.log_max_size_bytes, |s| {
                s.min(config.log_max_size_bytes)
            }),
        max_files: limits
            .max_files
            .map_or(config.log_max_files, |n| n.min(config.log_max_files)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use odac_host::engine::ContainerHealth;
    use odac_protocol::{LogLimits, RestartPolicy};

    fn exit(code: i64, oom: bool) -> LastExit {
        LastExit {
            container_id: "c".into(),
            finished_at: Some("t1".into()),
            exit_code: Some(code),
            oom_killed: oom,
            output_tail: Some("boom\n".into()),
        }
    }

    #[test]
    fn restart_policy_decides_what_an_exit_means() {
        let mut spec = AppSpec::new("web", "busybox");
        assert!(restarts(&spec, &exit(0, false)), "always is the default");
        spec.restart = Some(RestartPolicy::OnFailure);
        assert!(!restarts(&spec, &exit(0, false)));
        assert!(restarts(&spec, &exit(3, false)));
        assert!(restarts(&spec, &exit(0, true)), "an oom kill is a failure");
        spec.restart = Some(RestartPolicy::Never);
        assert!(!restarts(&spec, &exit(3, false)));
        assert_eq!(final_state(&exit(0, false)), AppState::Exited);
        assert_eq!(final_state(&exit(3, false)), AppState::Failed);
        assert_eq!(final_state(&exit(0, true)), AppState::Failed);
    }

    #[test]
    fn crash_reasons_do_not_mix() {
        let mut guard = CrashGuard::default();
        let info = crash_info(&exit(3, false), &guard, Some(5));
        assert_eq!(
            (info.reason, info.exit_code, info.next_retry_at_ms),
            (CrashReason::Crashed, Some(3), Some(5)),
            "a first non-zero exit is a crash, not a plain exit"
        );
        assert_eq!(
            crash_info(&exit(0, false), &guard, Some(5)).reason,
            CrashReason::Exited
        );
        guard.consecutive = 2;
        assert_eq!(
            crash_info(&exit(3, false), &guard, None).reason,
            CrashReason::CrashLoop
        );
        assert_eq!(
            crash_info(&exit(137, true), &guard, None).reason,
            CrashReason::OomKilled
        );
        assert_eq!(
            crash_info(&exit(0, false), &guard, None).reason,
            CrashReason::Exited,
            "exits 0 again and again under `always`: restarted, never a crash loop"
        );
    }

    #[test]
    fn new_exits_are_told_apart() {
        let mut d = ContainerDetails {
            id: "c".into(),
            status: ContainerState::Exited,
            finished_at: Some("t1".into()),
            ..ContainerDetails::default()
        };
        let last = exit(3, false);
        assert!(!is_new_exit(Some(&last), &d));
        assert!(is_new_exit(None, &d));
        d.oom_killed = true;
        assert!(
            is_new_exit(Some(&last), &d),
            "the engine recorded the OOM kill after the exit was read: read again"
        );
        assert!(!is_new_exit(Some(&exit(137, true)), &d));
        d.oom_killed = false;
        d.finished_at = Some("t2".into());
        assert!(is_new_exit(Some(&last), &d));
        d.status = ContainerState::Created;
        assert!(
            !is_new_exit(None, &d),
            "a container that never ran did not exit"
        );
    }

    #[test]
    fn spec_limits_lower_but_never_raise() {
        let config = AppManagerConfig::default();
        let mut spec = AppSpec::new("web", "busybox");
        assert_eq!(
            log_rotation(&config, &spec),
            LogRotation {
                max_size_bytes: 10 * 1024 * 1024,
                max_files: 3
            }
        );
        spec.logs = Some(LogLimits {
            max_size_bytes: Some(1 << 20),
            max_files: Some(9),
        });
        assert_eq!(
            log_rotation(&config, &spec),
            LogRotation {
                max_size_bytes: 1 << 20,
                max_files: 3
            }
        );
    }

    #[test]
    fn health_is_read_back_with_the_failing_output() {
        let mut d = ContainerDetails::default();
        assert_eq!(health_report(&d), None);
        d.health = Some(ContainerHealth {
            status: "unhealthy".into(),
            last_failure: Some("not ready\n".into()),
        });
        let h = health_report(&d).unwrap_or_default();
        assert_eq!(
            (h.state, h.last_output.as_deref()),
            (HealthState::Unhealthy, Some("not ready"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn wall_clock_and_monotonic_deadlines_convert() {
        let at = Instant::now() + Duration::from_secs(30);
        let ms = wall_ms_of(at);
        assert!(ms >= wall_ms() + 29_000);
        let back = instant_of(ms);
        assert!(back.saturating_duration_since(at) < Duration::from_secs(1));
        assert!(at.saturating_duration_since(back) < Duration::from_secs(1));
        assert!(instant_of(0) <= Instant::now());
    }
}
