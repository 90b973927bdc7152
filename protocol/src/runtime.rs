//! How an app runs once started, and what the agent reports when it stops: the spec's restart
//! policy ([`RestartPolicy`]), health check ([`HealthCheck`]) and log limits ([`LogLimits`]),
//! and the status's crash part ([`CrashInfo`]: why the last run ended, its exit code, OOM kill,
//! the next retry and a bounded tail of its output) and health part ([`HealthReport`]). A crash
//! reason is its own closed set ([`CrashReason`]), never mixed with the GPU [`Reason`](crate::Reason).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{
    ValidationError, check_bytes, check_command, check_opt_string, check_range,
};

/// Longest output tail an app status carries (4 KiB), cut at a line boundary.
pub const MAX_OUTPUT_TAIL_BYTES: usize = 4 * 1024;

/// Most lines of output an app status carries.
pub const MAX_OUTPUT_TAIL_LINES: usize = 50;

/// Longest health-check output an app status carries.
pub const MAX_HEALTH_OUTPUT_BYTES: usize = 1024;

/// Longest interval, timeout or start period of a health check (one day).
pub const MAX_HEALTH_SECS: u32 = 86_400;

/// Smallest log file size an app may ask for (64 KiB).
pub const MIN_LOG_SIZE_BYTES: u64 = 64 * 1024;

/// Most log files an app may ask for.
pub const MAX_LOG_FILES: u32 = 100;

/// What the agent does when an app's container exits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestartPolicy {
    /// Restart after every exit (with the crash-loop backoff); the default for services.
    #[default]
    Always,
    /// Restart after a non-zero exit; an exit 0 leaves the app `exited`.
    OnFailure,
    /// Never restart: an exit 0 leaves the app `exited`, any other `failed`.
    Never,
}

impl RestartPolicy {
    /// Whether an exit with `code` (`None`: unknown, e.g. killed) is restarted.
    pub fn restarts(self, code: Option<i64>) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => code != Some(0),
            RestartPolicy::Never => false,
        }
    }
}

/// A health check given in the spec, replacing the image's `HEALTHCHECK`. The engine runs
/// `command` inside the container (exec form; `["sh", "-c", "..."]` for a shell); exit 0 is
/// healthy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheck {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// Seconds between checks (engine default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_secs: Option<u32>,
    /// Seconds a check may take (engine default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u32>,
    /// Consecutive failures that make the app unhealthy (engine default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Seconds after start during which failures do not count (engine default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_period_secs: Option<u32>,
}

/// Limits of the container's log files; the agent's configuration caps both (the spec may
/// lower them, never raise them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct LogLimits {
    /// Largest log file, in bytes (at least 64 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size_bytes: Option<u64>,
    /// Log files kept (1..=100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_files: Option<u32>,
}

/// Why an app's last run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrashReason {
    /// The process exited with 0 (see `exit_code`).
    #[default]
    Exited,
    /// The process failed: a non-zero exit code or a signal. A crash, not yet a crash loop;
    /// `next_retry_at_ms` says whether its restart policy restarts it.
    Crashed,
    /// The kernel's OOM killer ended it: the memory limit is too low.
    OomKilled,
    /// It exited again soon after a restart; the agent backs off before the next one.
    CrashLoop,
}

impl CrashReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CrashReason::Exited => "exited",
            CrashReason::Crashed => "crashed",
            CrashReason::OomKilled => "oom_killed",
            CrashReason::CrashLoop => "crash_loop",
        }
    }
}

impl CrashReason {
    /// Every crash reason, in wire order.
    pub const ALL: [CrashReason; 4] = [
        CrashReason::Exited,
        CrashReason::Crashed,
        CrashReason::OomKilled,
        CrashReason::CrashLoop,
    ];

    /// A one-line explanation for an operator.
    pub fn explanation(self) -> &'static str {
        match self {
            CrashReason::Exited => {
                "the app's process exited; its exit code and last output say why"
            }
            CrashReason::Crashed => {
                "the app's process failed (non-zero exit code or a signal); its exit code and last output say why"
            }
            CrashReason::OomKilled => {
                "the kernel's OOM killer ended the app: it needed more memory than its limit"
            }
            CrashReason::CrashLoop => {
                "the app exits again soon after every restart; the agent waits longer each time (up to 5 min)"
            }
        }
    }

    /// What to do about it.
    pub fn fix(self) -> &'static str {
        match self {
            CrashReason::Exited => {
                "read the last output; for a job that is meant to end, give the app restart: on_failure or never"
            }
            CrashReason::Crashed => {
                "read the app's last output and fix what made it fail (its command, env, image or inputs)"
            }
            CrashReason::OomKilled => {
                "raise resources.memory_bytes, or make the app use less memory"
            }
            CrashReason::CrashLoop => {
                "read the app's last output and fix its configuration or image; it is retried meanwhile, waiting longer each time"
            }
        }
    }
}

impl fmt::Display for CrashReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the last run of an app ended, for apps that are not running.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct CrashInfo {
    /// Why (`oom_killed` wins over `crash_loop`, which wins over `crashed`, then `exited`).
    pub reason: CrashReason,
    /// Exit code of the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// The kernel's OOM killer ended the last run.
    #[serde(default)]
    pub oom_killed: bool,
    /// When the agent starts it again, Unix milliseconds; absent when it will not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at_ms: Option<u64>,
    /// The last lines of the run's output (stdout and stderr, at most 50 lines and 4 KiB,
    /// cut at a line boundary), taken when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<String>,
}

/// Health as the engine's health check reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    /// No verdict yet (start period, or fewer checks than `retries` failed).
    #[default]
    Starting,
    /// The last check passed.
    Healthy,
    /// `retries` checks in a row failed.
    Unhealthy,
}

impl HealthState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Starting => "starting",
            HealthState::Healthy => "healthy",
            HealthState::Unhealthy => "unhealthy",
        }
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The health part of an app's status, present when its container has a health check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct HealthReport {
    /// The verdict.
    pub state: HealthState,
    /// Output of the last failed check (at most 1 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_output: Option<String>,
}

impl HealthCheck {
    /// Checks the command and the bounds of every duration.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.command.is_empty() {
            return Err(ValidationError::new("command", "must not be empty"));
        }
        check_command("command", &self.command)?;
        for (field, value, min) in [
            ("interval_secs", self.interval_secs, 1),
            ("timeout_secs", self.timeout_secs, 1),
            ("retries", self.retries, 1),
            ("start_period_secs", self.start_period_secs, 0),
        ] {
            check_range(field, value, min..=MAX_HEALTH_SECS)?;
        }
        Ok(())
    }
}

impl LogLimits {
    /// Checks the size (at least 64 KiB) and the file count (1..=100).
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_bytes(
            "max_size_bytes",
            self.max_size_bytes,
            MIN_LOG_SIZE_BYTES,
            u64::MAX,
        )?;
        check_range("max_files", self.max_files, 1..=MAX_LOG_FILES)
    }
}

impl CrashInfo {
    /// Checks the tail's bound.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(t) = &self.output_tail
            && t.len() > MAX_OUTPUT_TAIL_BYTES
        {
            return Err(ValidationError::new(
                "output_tail",
                format!(
                    "is {} bytes long, the limit is {MAX_OUTPUT_TAIL_BYTES}",
                    t.len()
                ),
            ));
        }
        Ok(())
    }
}

impl HealthReport {
    /// Checks the output's length.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_opt_string("last_output", self.last_output.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_policies() {
        assert!(RestartPolicy::Always.restarts(Some(0)));
        assert!(!RestartPolicy::OnFailure.restarts(Some(0)));
        assert!(RestartPolicy::OnFailure.restarts(Some(3)));
        assert!(RestartPolicy::OnFailure.restarts(None));
        assert!(!RestartPolicy::Never.restarts(Some(3)));
        let p: RestartPolicy = serde_json::from_str("\"on_failure\"").unwrap_or_default();
        assert_eq!(p, RestartPolicy::OnFailure);
    }

    #[test]
    fn crash_reasons_explain_themselves_on_one_line() {
        for r in CrashReason::ALL {
            let wire = serde_json::to_string(&r).unwrap_or_default();
            assert_eq!(wire, format!("\"{}\"", r.as_str()));
            assert!(!r.explanation().contains('\n') && !r.fix().contains('\n'));
        }
    }

    #[test]
    fn bounds_are_checked() {
        let mut h = HealthCheck::default();
        assert_eq!(
            h.validate().map_err(|e| e.to_string()),
            Err("command: must not be empty".into())
        );
        h.command = vec!["true".into()];
        h.interval_secs = Some(0);
        assert!(h.validate().is_err());
        h.interval_secs = Some(5);
        assert!(h.validate().is_ok());
        let l = LogLimits {
            max_size_bytes: Some(1024),
            max_files: None,
        };
        assert!(l.validate().is_err());
        let l = LogLimits {
            max_size_bytes: None,
            max_files: Some(0),
        };
        assert!(l.validate().is_err());
        let c = CrashInfo {
            output_tail: Some("x".repeat(MAX_OUTPUT_TAIL_BYTES + 1)),
            ..CrashInfo::default()
        };
        assert!(c.validate().is_err());
    }
}
