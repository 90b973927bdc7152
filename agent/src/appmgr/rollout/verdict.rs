//! Where a rollout under way stands: not proven yet (look again at its deadline), proven, or
//! failed with the reason in one line; from the new version's status and the update policy.

use odac_protocol::{AppSpec, AppState, AppStatus, HealthState, UpdatePolicy};

use super::rollout_book::Pending;

/// What a pass made of a rollout under way.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Not proven yet; look again at this time (Unix ms), if any.
    Waiting(Option<u64>),
    /// Proven: the new version is the way back from now on.
    Good,
    /// Failed: why, in one line.
    Failed(String),
}

/// Where the rollout `p` stands given the new version's `status` at `now_ms`.
pub(super) fn verdict(
    p: &mut Pending,
    status: &AppStatus,
    policy: &UpdatePolicy,
    spec: &AppSpec,
    now_ms: u64,
) -> Verdict {
    let secs = |s: u32| u64::from(s) * 1000;
    match status.state {
        AppState::Running if status.restart_count == 0 => {
            let first_sight = p.container_id != status.container_id || p.seen_at_ms.is_none();
            if first_sight {
                p.container_id.clone_from(&status.container_id);
                p.seen_at_ms = Some(now_ms);
            }
            let since = p.seen_at_ms.unwrap_or(now_ms);
            let proven_at = since + secs(policy.min_healthy_secs());
            let checked = spec.healthcheck.is_some() || status.health.is_some();
            let healthy = status
                .health
                .as_ref()
                .is_some_and(|h| h.state == HealthState::Healthy);
            if !checked {
                return if !first_sight && now_ms >= proven_at {
                    Verdict::Good
                } else {
                    Verdict::Waiting(Some(proven_at))
                };
            }
            let deadline = since + secs(policy.healthy_deadline_secs());
            if healthy && !first_sight && now_ms >= proven_at {
                Verdict::Good
            } else if !healthy && now_ms >= deadline {
                let health = status
                    .health
                    .as_ref()
                    .map_or(HealthState::Starting, |h| h.state);
                Verdict::Failed(format!(
                    "was not healthy {} s after it started (health {health})",
                    policy.healthy_deadline_secs()
                ))
            } else if healthy {
                Verdict::Waiting(Some(proven_at))
            } else {
                Verdict::Waiting(Some(deadline))
            }
        }
        AppState::Running | AppState::Restarting | AppState::CrashLoop | AppState::Stopped => {
            let how = match (status.crash.as_ref(), status.last_exit_code) {
                (Some(c), _) if c.oom_killed => "was killed by the kernel's oom killer".to_owned(),
                (Some(c), _) if c.exit_code.is_some() => {
                    format!("exited with code {}", c.exit_code.unwrap_or_default())
                }
                (_, Some(code)) => format!("exited with code {code}"),
                _ => "stopped".to_owned(),
            };
            Verdict::Failed(how)
        }
        AppState::Failed => Verdict::Failed(format!(
            "could not be started: {}",
            status.last_error.as_deref().unwrap_or("no reason given")
        )),
        // a job that ran to its end has proven what it can
        AppState::Exited => Verdict::Good,
        AppState::Pending | AppState::Creating | AppState::Pulling | AppState::Removed => {
            Verdict::Waiting(None)
        }
    }
}
