//! `odac agent update --version V (--hosts H,… | --all) [--max-parallel N]`: rolls a signed
//! agent release out in waves of at most N hosts. Each host of a wave is offered the release
//! and watched until its agent reports the outcome: `committed` on V, or `update_failed` /
//! `refused` (or no outcome within `--timeout-secs`). The first failed host halts the rollout
//! once its wave is over: later waves are never offered the release, and the command exits 1
//! naming the host, its cause and the hosts left untouched. Hosts already on V are skipped.

use std::time::{Duration, Instant};

use clap::Args;
use odac_protocol::UpdatePhase;
use serde_json::json;

use super::client::{Client, ClientError};
use super::term;
use crate::state::model::HostUpdate;
use crate::state::views::HostView;

/// How often a host's update is polled.
const POLL: Duration = Duration::from_millis(300);

/// `odac agent update`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["hosts", "all"])))]
pub struct AgentUpdateArgs {
    /// The release version to install (`odac-sim release sign --version`).
    #[arg(long)]
    pub version: String,
    /// Hosts (ids or host names), comma-separated, updated in this order.
    #[arg(long, value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// Every host, by host name.
    #[arg(long)]
    pub all: bool,
    /// Hosts updated at the same time (the size of a wave).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_parallel: u32,
    /// How long one host may take to report its outcome, in seconds.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout_secs: u64,
}

/// A host's update state in a cell: `0.2.0 committed`, `0.2.0 downloading 40%`,
/// `0.2.0 update_failed: why`, or `-`.
pub fn update_state(update: Option<&HostUpdate>) -> String {
    let Some(u) = update else {
        return "-".to_owned();
    };
    let progress = match (u.phase, u.bytes, u.total) {
        (UpdatePhase::Downloading, Some(b), Some(t)) if t > 0 => {
            format!(" {}%", b.saturating_mul(100) / t)
        }
        _ => String::new(),
    };
    let why = u
        .message
        .as_deref()
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    let version = if u.version.is_empty() {
        "?"
    } else {
        &u.version
    };
    format!("{version} {}{progress}{why}", u.phase.as_str())
}

/// How one host's update ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Committed,
    Failed(String),
}

/// Runs the rollout.
pub fn run(client: &Client, args: &AgentUpdateArgs) -> Result<(), ClientError> {
    odac_protocol::check_version("--version", &args.version)
        .map_err(|e| ClientError::new(e.to_string()))?;
    let hosts: Vec<HostView> = client.get_as("/api/hosts")?;
    let mut targets = pick(&hosts, args)?;
    targets.retain(|h| {
        let on = h.agent_version == args.version;
        if on {
            term::println(&format!("host {}: already on {}", h.hostname, args.version));
        }
        !on
    });
    let waves: Vec<&[HostView]> = targets.chunks(args.max_parallel as usize).collect();
    let timeout = Duration::from_secs(args.timeout_secs);
    for (n, wave) in waves.iter().enumerate() {
        let names: Vec<&str> = wave.iter().map(|h| h.hostname.as_str()).collect();
        term::println(&format!(
            "wave {}/{}: {}",
            n + 1,
            waves.len(),
            names.join(", ")
        ));
        let mut failed = Vec::new();
        let mut offered = Vec::new();
        for h in *wave {
            let path = format!("/api/hosts/{}/agent-update", h.id);
            match client.post(&path, &json!({"version": args.version})) {
                Ok(_) => offered.push(h),
                Err(e) => failed.push((h.hostname.clone(), e.message)),
            }
        }
        for h in offered {
            match watch(client, h, &args.version, timeout)? {
                Outcome::Committed => {
                    term::println(&format!("host {}: committed {}", h.hostname, args.version));
                }
                Outcome::Failed(why) => failed.push((h.hostname.clone(), why)),
            }
        }
        if let Some((host, why)) = failed.first() {
            for (h, w) in &failed {
                term::println(&format!("host {h}: failed: {w}"));
            }
            let left: Vec<&str> = waves[n + 1..]
                .iter()
                .flat_map(|w| w.iter().map(|h| h.hostname.as_str()))
                .collect();
            let left = if left.is_empty() {
                "none".to_owned()
            } else {
                left.join(", ")
            };
            return Err(ClientError::new(format!(
                "rollout of {} halted at wave {}: host {host} failed ({why}); hosts not offered the update: {left}",
                args.version,
                n + 1
            )));
        }
    }
    term::println(&format!(
        "rollout of {} done: {} host(s) updated",
        args.version,
        targets.len()
    ));
    Ok(())
}

/// The hosts the flags name, in order.
fn pick(hosts: &[HostView], args: &AgentUpdateArgs) -> Result<Vec<HostView>, ClientError> {
    if args.all {
        let mut all = hosts.to_vec();
        all.sort_by(|a, b| a.hostname.cmp(&b.hostname).then(a.id.cmp(&b.id)));
        return Ok(all);
    }
    args.hosts
        .iter()
        .map(|want| {
            hosts
                .iter()
                .find(|h| h.id == *want || h.hostname == *want)
                .cloned()
                .ok_or_else(|| ClientError::new(format!("--hosts: no host {want:?}")))
        })
        .collect()
}

/// Whether `u` is about the rollout of `version` (a refusal before the manifest was read names
/// no version).
fn about(u: &HostUpdate, version: &str) -> bool {
    u.version == version || u.version.is_empty()
}

/// The outcome `u` gives the rollout of `version`, if it is a final one.
fn outcome_of(u: &HostUpdate, version: &str) -> Option<Outcome> {
    if !about(u, version) {
        return None;
    }
    match u.phase {
        UpdatePhase::Committed => Some(Outcome::Committed),
        UpdatePhase::UpdateFailed | UpdatePhase::Refused => {
            let why = u
                .message
                .clone()
                .unwrap_or_else(|| u.phase.as_str().to_owned());
            Some(Outcome::Failed(format!("{}: {why}", u.phase.as_str())))
        }
        _ => None,
    }
}

/// Polls `host` until its agent reports the outcome of `version`.
fn watch(
    client: &Client,
    host: &HostView,
    version: &str,
    timeout: Duration,
) -> Result<Outcome, ClientError> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let now: HostView = client.get_as(&format!("/api/hosts/{}", host.id))?;
        // an agent reports its last outcome again on every start: a report about another
        // version (an earlier update that failed) is not this rollout's
        let ours = now.update.as_ref().filter(|u| about(u, version));
        let state = update_state(ours);
        if state != last && ours.is_some() {
            term::println(&format!("host {}: {state}", host.hostname));
            last = state;
        }
        if let Some(outcome) = ours.and_then(|u| outcome_of(u, version)) {
            return Ok(outcome);
        }
        if start.elapsed() >= timeout {
            return Ok(Outcome::Failed(format!(
                "no outcome within {} s",
                timeout.as_secs()
            )));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(version: &str, phase: UpdatePhase) -> HostUpdate {
        HostUpdate {
            version: version.to_owned(),
            phase,
            ..HostUpdate::default()
        }
    }

    #[test]
    fn an_earlier_versions_failure_reported_again_is_not_this_rollouts_outcome() {
        assert_eq!(
            outcome_of(&update("0.4.0", UpdatePhase::UpdateFailed), "0.2.0"),
            None
        );
        assert_eq!(
            outcome_of(&update("0.4.0", UpdatePhase::Committed), "0.2.0"),
            None
        );
        assert_eq!(
            outcome_of(&update("0.2.0", UpdatePhase::Committed), "0.2.0"),
            Some(Outcome::Committed)
        );
        assert_eq!(
            outcome_of(&update("0.2.0", UpdatePhase::UpdateFailed), "0.2.0"),
            Some(Outcome::Failed("update_failed: update_failed".into()))
        );
        // a refusal before the manifest was read names no version: it is this offer's
        assert!(matches!(
            outcome_of(&update("", UpdatePhase::Refused), "0.2.0"),
            Some(Outcome::Failed(_))
        ));
        assert_eq!(
            outcome_of(&update("0.2.0", UpdatePhase::Downloading), "0.2.0"),
            None
        );
    }
}
