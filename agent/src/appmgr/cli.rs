//! The bodies of `odac-agent apply -f desired.json` (one reconcile of a local desired-state
//! file against the local engine, for air-gapped hosts and debugging) and `odac-agent status`
//! (the statuses last persisted in the state directory). `main.rs` only dispatches here.
//!
//! `apply` waits for the images of apps built from git sources (bounded by the build
//! timeouts). Exit codes: 0 when every app is running (or waiting on its restart backoff),
//! 1 when an app failed or the engine is unreachable, 2 for usage errors (unreadable or
//! invalid file).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use odac_protocol::{AppState, AppStatus, DesiredState};

use super::manager::AppManager;
use super::settings::AppManagerConfig;
use super::store::Store;
use crate::engine::DockerEngine;

/// Exit code for usage errors.
pub const EXIT_USAGE: i32 = 2;

/// `odac-agent apply` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    /// The desired state: the body of a `desired_state` message,
    /// `{"generation": N, "apps": [AppSpec, ...]}`.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,
    /// State directory (desired state and statuses).
    #[arg(long, value_name = "DIR", default_value = "/var/lib/odac-agent")]
    pub state_dir: PathBuf,
    /// Read host paths under this directory instead of `/` (e.g. a fixture host).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Print the statuses as JSON.
    #[arg(long)]
    pub json: bool,
    /// Docker endpoint (default: DOCKER_HOST or the local socket).
    #[arg(long, value_name = "URL", env = "DOCKER_HOST")]
    pub docker_host: Option<String>,
}

/// `odac-agent status` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Print the statuses as JSON.
    #[arg(long)]
    pub json: bool,
    /// State directory.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/odac-agent")]
    pub state_dir: PathBuf,
}

fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn usage(message: &str) -> i32 {
    eprintln!("odac-agent: {message}");
    EXIT_USAGE
}

/// The GPU column: what is attached, or the fallback taken.
fn gpu_cell(s: &AppStatus) -> String {
    if let Some(a) = &s.gpu.attached {
        return format!("{} {} [{}]", a.vendor, a.mechanism, a.devices.join(","));
    }
    match (&s.gpu.fallback, &s.gpu.requested) {
        (Some(f), _) => {
            let tier = match f.tier {
                odac_protocol::FallbackTier::Preflight => "preflight",
                odac_protocol::FallbackTier::Engine => "engine",
            };
            let on = if s.state == AppState::Failed {
                "none"
            } else {
                "cpu"
            };
            format!("{on} ({tier}: {})", f.reason)
        }
        (None, Some(_)) => "requested".into(),
        (None, None) => "-".into(),
    }
}

/// A plain table of statuses.
pub fn render_table(statuses: &[AppStatus]) -> String {
    let rows: Vec<[String; 6]> = statuses
        .iter()
        .map(|s| {
            [
                s.name.clone(),
                s.state.to_string(),
                gpu_cell(s),
                if s.restart_required { "yes" } else { "-" }.into(),
                s.restart_count.to_string(),
                s.last_error.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "STATE",
        "GPU",
        "RESTART-REQUIRED",
        "RESTARTS",
        "LAST ERROR",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut text = line(&header.map(str::to_owned));
    for row in &rows {
        text.push_str(&line(row));
    }
    if rows.is_empty() {
        text.push_str("(no apps)\n");
    }
    text
}

fn print(statuses: &[AppStatus], json: bool) -> Result<(), String> {
    if json {
        let text = serde_json::to_string_pretty(statuses)
            .map_err(|e| format!("cannot serialise statuses: {e}"))?;
        emit(&format!("{text}\n"));
    } else {
        emit(&render_table(statuses));
    }
    Ok(())
}

/// `odac-agent apply`.
pub fn apply_command(args: &ApplyArgs) -> i32 {
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => return usage(&format!("cannot read {}: {e}", args.file.display())),
    };
    let state: DesiredState = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            return usage(&format!(
                "{} is not a desired state ({{\"generation\": N, \"apps\": [...]}}): {e}",
                args.file.display()
            ));
        }
    };
    if !args.root.is_dir() {
        return usage(&format!("root {} is not a directory", args.root.display()));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return usage(&format!("cannot start the async runtime: {e}")),
    };
    runtime.block_on(async {
        let engine = match DockerEngine::lazy(args.docker_host.as_deref()) {
            Ok(e) => e,
            Err(e) => return usage(&e.to_string()),
        };
        let config = AppManagerConfig {
            state_dir: args.state_dir.clone(),
            ..AppManagerConfig::default()
        };
        let bound = config.build.git_timeout() + config.build.build_timeout();
        let manager = match AppManager::open(config, Arc::new(engine), args.root.clone()) {
            Ok(m) => m,
            Err(e) => return usage(&e.to_string()),
        };
        for problem in manager.problems() {
            eprintln!("odac-agent: warning: {problem}");
        }
        if let Err(e) = manager.set_desired(state).await {
            return usage(&e.to_string());
        }
        let mut statuses = manager.reconcile_once().await;
        // Apps built from git sources are `creating` while their image builds: wait for it.
        let deadline = tokio::time::Instant::now() + bound;
        while statuses.iter().any(|s| s.state == AppState::Creating)
            && manager.engine_problem().is_none()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            statuses = manager.reconcile_once().await;
        }
        if let Err(e) = print(&statuses, args.json) {
            return usage(&e);
        }
        let engine_down = manager.engine_problem().is_some();
        if engine_down || statuses.iter().any(|s| s.state == AppState::Failed) {
            1
        } else {
            0
        }
    })
}

/// `odac-agent status`.
pub fn status_command(args: &StatusArgs) -> i32 {
    let store = match Store::open(&args.state_dir) {
        Ok(s) => s,
        Err(e) => return usage(&e.to_string()),
    };
    let statuses = match store.load_statuses() {
        Ok(s) => s,
        Err(e) => return usage(&e.to_string()),
    };
    match print(&statuses, args.json) {
        Ok(()) => 0,
        Err(e) => usage(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use odac_protocol::{Fallback, FallbackTier, Reason};

    #[test]
    fn table_shows_state_gpu_and_error() {
        let s = AppStatus {
            name: "llm".into(),
            generation: 3,
            state: AppState::Running,
            gpu: odac_protocol::GpuStatus {
                fallback: Some(Fallback {
                    tier: FallbackTier::Preflight,
                    reason: Reason::NoDevice,
                    detail: None,
                }),
                ..Default::default()
            },
            ..AppStatus::default()
        };
        let table = render_table(&[s]);
        assert!(table.starts_with("NAME"), "{table}");
        assert!(
            table.contains("llm   running  cpu (preflight: no_device)"),
            "{table}"
        );
        assert!(render_table(&[]).contains("(no apps)"));
    }
}
