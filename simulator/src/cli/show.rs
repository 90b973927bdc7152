//! `odac app show NAME`: state, health with the failing check's output, the GPU request, the
//! devices attached and the fallback with its detail (the note of a learned refusal: "the
//! engine was not asked again") and fix, the crash (reason, exit code, OOM kill, next retry),
//! the host access the spec asks for (`/dev/shm`, capabilities, sysctls, devices) and the last
//! lines of output; nothing about a crash while the app runs. A pull, build or
//! policy failure is the app's own `reason` (never a `gpu reason`), with a fix that names the
//! command to run (a refused registry login: `odac registry login HOST`) and when the agent
//! tries again.

use odac_protocol::{AppSpec, FallbackTier, Reason};
use serde_json::Value;

use super::diagnosis::crash;
use super::table::{attached, request};
use crate::clock::{now_ms, rfc3339};
use crate::state::views::AppView;

/// Whether `r` is about the app itself (its image, its build, the host's policy), not its GPU.
fn is_app_reason(r: Reason) -> bool {
    matches!(
        r,
        Reason::ImagePullFailed | Reason::BuildFailed | Reason::PolicyDenied
    )
}

/// What to do about an app's own failure: for a pull, by what the registry answered (a
/// refused login names `odac registry login`, an unreachable registry the catalog mirror).
fn app_fix(a: &AppView, reason: Reason) -> Option<String> {
    let generic = || reason.fix(None).map(str::to_owned);
    if reason != Reason::ImagePullFailed {
        return generic();
    }
    let error = a
        .status
        .as_ref()
        .and_then(|s| s.last_error.as_deref())
        .unwrap_or_default()
        .to_lowercase();
    let image = a
        .image
        .as_deref()
        .or(a.spec.image.as_deref())
        .unwrap_or_default();
    let host = odac_protocol::registry_host(image);
    let said = |words: &[&str]| words.iter().any(|w| error.contains(w));
    if said(&[
        "unauthorized",
        "authentication required",
        "no basic auth",
        "401",
        "denied",
    ]) {
        return Some(format!(
            "log in to the registry: odac registry login {host} (the agent uses it at its next pull)"
        ));
    }
    if said(&[
        "connection refused",
        "no such host",
        "dial tcp",
        "timeout",
        "no route to host",
        "server misbehaving",
    ]) {
        return Some(format!(
            "this host cannot reach the registry {host}: start it or make it reachable from the host; for the catalog's images, point the control plane at a reachable mirror (odac-sim serve --catalog-registry HOST[:PORT])"
        ));
    }
    generic()
}

/// When, relative to now, e.g. `in 4s`.
fn relative(ms: u64, now: u64) -> String {
    if ms <= now {
        return "now".to_owned();
    }
    let secs = (ms - now).div_ceil(1000);
    format!("in {secs}s")
}

/// The spec's host access as asked for, e.g. `shm_size 512m, caps net_admin, sysctls
/// net.ipv4.ip_forward=true, devices /dev/apex_0`; `None` without any.
fn host_access(spec: &AppSpec) -> Option<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut parts = Vec::new();
    if let Some(shm) = &spec.shm_size {
        parts.push(format!("shm_size {}", text(&shm.0)));
    }
    if !spec.caps.is_empty() {
        parts.push(format!("caps {}", spec.caps.join(" ")));
    }
    if !spec.sysctls.is_empty() {
        let kv: Vec<String> = spec
            .sysctls
            .iter()
            .map(|(k, v)| format!("{k}={}", text(&v.0)))
            .collect();
        parts.push(format!("sysctls {}", kv.join(" ")));
    }
    if !spec.devices.is_empty() {
        parts.push(format!("devices {}", spec.devices.join(" ")));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// `odac app show NAME`.
pub fn show(a: &AppView) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: &str| out.push_str(&format!("{k:<13} {v}\n"));
    line("name", &a.name);
    line(
        "host",
        if a.hostname.is_empty() {
            &a.host
        } else {
            &a.hostname
        },
    );
    let status = a.status.as_ref();
    line("state", &a.state);
    line("image", a.image.as_deref().unwrap_or("-"));
    if let Some(access) = host_access(&a.spec) {
        line("host access", &access);
    }
    if let Some(s) = status {
        line("restarts", &s.restart_count.to_string());
        if let Some(h) = &s.health {
            line("health", h.state.as_str());
            if let Some(o) = &h.last_output {
                line(
                    "health check",
                    &o.split_whitespace().collect::<Vec<_>>().join(" "),
                );
            }
        }
        if let Some(e) = &s.last_error {
            line("last error", e);
        }
    }
    if a.requested.is_some() || a.attached.is_some() {
        line("gpu request", &request(a.requested.as_ref()));
        line("gpu attached", &attached(a.attached.as_ref()));
    }
    if let Some(r) = a.reason {
        line(
            if is_app_reason(r) {
                "reason"
            } else {
                "gpu reason"
            },
            r.as_str(),
        );
    }
    if let Some(f) = &a.image_failure {
        // a pull or a build: the app's own failure, in its own part of the status
        if let Some(detail) = &f.detail {
            line("detail", detail);
        }
        if let Some(fix) = app_fix(a, f.reason) {
            line("fix", &fix);
        }
    }
    if let Some(fb) = &a.fallback {
        if is_app_reason(fb.reason) {
            // a pull, a build or the policy: the app's own failure, not a GPU decision
            if let Some(detail) = &fb.detail {
                line("detail", detail);
            }
            if let Some(fix) = app_fix(a, fb.reason) {
                line("fix", &fix);
            }
        } else {
            // the detail holds the engine's words and, for a learned refusal, "(learned …:
            // the engine was not asked again)"
            if let Some(detail) = &fb.detail {
                let tier = match fb.tier {
                    FallbackTier::Preflight => "decided before any container was made",
                    FallbackTier::Engine => "the engine refused",
                };
                line("gpu detail", &format!("{} ({tier}): {detail}", fb.reason));
            }
            let vendor = a
                .attached
                .as_ref()
                .map(|at| at.vendor)
                .or_else(|| a.requested.as_ref().and_then(|g| g.effective_vendor()));
            if let Some(fix) = fb.reason.fix(vendor) {
                line("gpu fix", fix);
            }
        }
    }
    if crash(a).is_none()
        && let Some(ms) = status.and_then(|s| s.next_retry_at_ms)
    {
        line(
            "next retry",
            &format!("{} ({})", rfc3339(ms), relative(ms, now_ms())),
        );
    }
    if crash(a).is_none()
        && let Some(code) = status
            .filter(|s| s.restart_count > 0)
            .and_then(|s| s.last_exit_code)
    {
        line("last exit", &code.to_string());
    }
    // the crash of a run that ended; a running app (restarted since) shows none
    if let Some(c) = crash(a) {
        line(
            "crash",
            &format!("{}: {}", c.reason, c.reason.explanation()),
        );
        line("fix", c.reason.fix());
        if let Some(code) = c.exit_code {
            line("exit code", &code.to_string());
        }
        line("oom killed", if c.oom_killed { "yes" } else { "no" });
        match c.next_retry_at_ms {
            Some(ms) => line(
                "next retry",
                &format!("{} ({})", rfc3339(ms), relative(ms, now_ms())),
            ),
            None => line("next retry", "none (not restarted)"),
        }
        if let Some(tail) = &c.output_tail {
            out.push_str("last output:\n");
            for l in tail.lines() {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    if let Some(r) = crate::cli::diagnosis::rollout(a) {
        rollout_lines(&mut out, r, status.and_then(|s| s.running_generation));
    }
    out
}

/// The rollout of a changed spec: under way with its deadline, or why it was rolled back.
fn rollout_lines(out: &mut String, r: &odac_protocol::RolloutReport, running: Option<u64>) {
    let mut line = |k: &str, v: &str| out.push_str(&format!("{k:<13} {v}\n"));
    line(
        "rollout",
        &format!("{} (generation {})", r.state, r.generation),
    );
    if let Some(ms) = r.deadline_at_ms {
        line(
            "deadline",
            &format!("{} ({})", rfc3339(ms), relative(ms, now_ms())),
        );
    }
    if let Some(g) = running {
        line("running", &format!("generation {g} (the previous version)"));
    }
    if let Some(e) = &r.error {
        line("why", &format!("the new version {e}"));
    }
    if let Some(ms) = r.at_ms {
        line(
            "when",
            &format!("{} ({})", rfc3339(ms), relative(ms, now_ms())),
        );
    }
    if let Some(h) = &r.health
        && let Some(o) = &h.last_output
    {
        line(
            "health check",
            &o.split_whitespace().collect::<Vec<_>>().join(" "),
        );
    }
    if let Some(c) = &r.cause {
        line("cause", &super::diagnosis::crash_cell(c));
        if let Some(tail) = &c.output_tail {
            out.push_str("its last output:\n");
            for l in tail.lines() {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::diagnosis::{crash_cell, state_with_health};
    use odac_protocol::{
        AppSpec, AppState, AppStatus, CrashInfo, CrashReason, HealthReport, HealthState,
    };

    fn view(status: AppStatus) -> AppView {
        AppView {
            name: "svc".into(),
            host: "h1".into(),
            hostname: "gpu-1".into(),
            state: status.state.as_str().into(),
            image: Some("busybox".into()),
            requested: None,
            attached: None,
            fallback: None,
            image_failure: None,
            reason: Some(odac_protocol::Reason::EngineRejected),
            restart_required: false,
            restart_token: None,
            spec: AppSpec::default(),
            status: Some(status),
        }
    }

    #[test]
    fn a_crash_is_shown_with_its_output_and_next_retry() {
        let v = view(AppStatus {
            name: "svc".into(),
            state: AppState::CrashLoop,
            restart_count: 4,
            crash: Some(CrashInfo {
                reason: CrashReason::CrashLoop,
                exit_code: Some(3),
                oom_killed: false,
                next_retry_at_ms: Some(now_ms() + 4_000),
                output_tail: Some("loading\nboom\n".into()),
            }),
            ..AppStatus::default()
        });
        assert_eq!(
            crash(&v).map(crash_cell).as_deref(),
            Some("crash_loop (exit 3)")
        );
        assert_eq!(
            crate::cli::table::reason(&v),
            "crash_loop (exit 3)",
            "never the old gpu reason"
        );
        let text = show(&v);
        assert!(text.contains("gpu reason    engine_rejected\n"), "{text}");
        assert!(
            text.contains("crash         crash_loop: the app exits again"),
            "{text}"
        );
        assert!(
            text.contains("fix           read the app's last output"),
            "{text}"
        );
        assert!(
            !text.contains("odac app show"),
            "a fix never points at the command being read: {text}"
        );
        assert!(text.contains("exit code     3\n"), "{text}");
        assert!(
            text.contains("(in 4s)") || text.contains("(in 3s)"),
            "{text}"
        );
        assert!(
            text.ends_with("last output:\n  loading\n  boom\n"),
            "{text}"
        );
    }

    #[test]
    fn gpu_facts_and_a_learned_refusal_are_shown() {
        let mut v = view(AppStatus {
            name: "svc".into(),
            state: AppState::Running,
            ..AppStatus::default()
        });
        v.requested = serde_json::from_str(r#"{"runtime":"intel","optional":true}"#).ok();
        v.fallback = Some(odac_protocol::Fallback {
            tier: FallbackTier::Engine,
            reason: odac_protocol::Reason::EngineRejected,
            detail: Some(
                "error gathering device information (learned 2026-12-05T12:00:00Z: the engine was not asked again)"
                    .into(),
            ),
        });
        let text = show(&v);
        assert!(text.contains("gpu request   intel"), "{text}");
        assert!(text.contains("gpu attached  -\n"), "{text}");
        assert!(
            text.contains("gpu detail    engine_rejected (the engine refused): error gathering device information (learned 2026-12-05T12:00:00Z: the engine was not asked again)\n"),
            "{text}"
        );
        assert!(text.contains("gpu fix       "), "{text}");
    }

    #[test]
    fn health_follows_the_state() {
        let mut s = AppStatus {
            name: "svc".into(),
            state: AppState::Running,
            ..AppStatus::default()
        };
        assert_eq!(state_with_health("running", Some(&s)), "running");
        s.health = Some(HealthReport {
            state: HealthState::Unhealthy,
            last_output: Some("model not\nloaded".into()),
        });
        assert_eq!(
            state_with_health("running", Some(&s)),
            "running (unhealthy)"
        );
        let text = show(&view(s));
        assert!(text.contains("health check  model not loaded\n"), "{text}");
        assert_eq!(relative(10, 20), "now");
    }

    #[test]
    fn a_rollback_says_what_failed_and_what_runs() {
        let v = view(AppStatus {
            name: "svc".into(),
            generation: 8,
            state: AppState::Running,
            running_generation: Some(5),
            rollout: Some(odac_protocol::RolloutReport {
                state: odac_protocol::RolloutState::RolledBack,
                generation: 8,
                error: Some("exited with code 3".into()),
                cause: Some(CrashInfo {
                    reason: CrashReason::Crashed,
                    exit_code: Some(3),
                    output_tail: Some("starting v2\nbroken config\n".into()),
                    ..CrashInfo::default()
                }),
                at_ms: Some(now_ms()),
                ..odac_protocol::RolloutReport::default()
            }),
            ..AppStatus::default()
        });
        assert_eq!(
            crate::cli::table::reason(&v),
            "rolled_back: generation 8 exited with code 3"
        );
        assert!(
            crate::cli::table::apps(std::slice::from_ref(&v)).contains("running (rolled_back)")
        );
        let text = show(&v);
        for line in [
            "rollout       rolled_back (generation 8)\n",
            "running       generation 5 (the previous version)\n",
            "why           the new version exited with code 3\n",
            "cause         crashed (exit 3)\n",
            "its last output:\n  starting v2\n  broken config\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
    }
}
