//! The bodies of `odac-agent apply -f desired.json` (one reconcile of a local desired-state
//! file against the local engine, for air-gapped hosts and debugging) and `odac-agent status`
//! (the statuses last persisted in the state directory, next to what the engine runs).
//! `main.rs` only dispatches here. Both work on the agent set named by [`TargetArgs`]
//! (`--config FILE`, `--state-dir`, `--instance`).
//!
//! `apply` takes the instance lock first ([`instance_lock`](crate::instance_lock)): against an
//! instance a running agent manages it refuses and changes nothing. Like the agent, it only
//! touches containers its owner id (the agent id in the state dir) owns. It waits for the
//! images of apps built from git sources (bounded by the build timeouts). Exit codes: 0 when
//! every app is running (or waiting on its restart backoff), 1 when an app failed, the engine
//! is unreachable or a running agent holds the instance, 2 for usage errors (unreadable or
//! invalid file), 78 for an unusable `--config` file.
//!
//! `status` never creates anything: a missing state dir is an error (exit 1). It shows, per
//! app, the state of the recorded container on the engine now, and says when the record may
//! be stale (no agent runs for the instance, or the engine could not be asked).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use odac_protocol::{AppState, AppStatus, DesiredState};

use super::local::{TargetArgs, engine_view};
use super::manager::AppManager;
use super::store::Store;
use crate::engine::{ContainerSummary, DockerEngine};
use crate::instance_lock::{InstanceLock, LockError};

/// Exit code for usage errors.
pub const EXIT_USAGE: i32 = 2;
/// Exit code for failures (an app failed, the engine is down, the instance is held).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for an unusable `--config` file.
pub const EXIT_CONFIG: i32 = 78;

/// `odac-agent apply` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    /// The desired state: the body of a `desired_state` message,
    /// `{"generation": N, "apps": [AppSpec, ...]}`.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,
    /// Which agent set to apply to.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Read host paths under this directory instead of `/` (e.g. a fixture host).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Print the statuses as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `odac-agent status` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Print the statuses as JSON.
    #[arg(long)]
    pub json: bool,
    /// Which agent set to show.
    #[command(flatten)]
    pub target: TargetArgs,
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

/// Why an app that is not running stopped, e.g. `oom_killed (exit 137)`.
fn crash_cell(c: &odac_protocol::CrashInfo) -> String {
    match c.exit_code {
        Some(code) => format!("{} (exit {code})", c.reason),
        None => c.reason.to_string(),
    }
}

/// A plain table of statuses.
pub fn render_table(statuses: &[AppStatus]) -> String {
    let rows: Vec<[String; 6]> = statuses
        .iter()
        .map(|s| {
            [
                s.name.clone(),
                match &s.health {
                    Some(h) => format!("{} ({})", s.state, h.state),
                    None => s.state.to_string(),
                },
                gpu_cell(s),
                if s.restart_required { "yes" } else { "-" }.into(),
                s.restart_count.to_string(),
                s.last_error
                    .clone()
                    .or_else(|| s.crash.as_ref().map(crash_cell))
                    .unwrap_or_else(|| "-".into()),
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
    let target = match args.target.resolve() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("odac-agent: {e}");
            return EXIT_CONFIG;
        }
    };
    // a running agent (or another apply) on this instance and engine: change nothing
    let _lock = match InstanceLock::acquire(
        &target.apps.lock_dir,
        &target.engine_endpoint(),
        &target.apps.instance,
        "odac-agent apply",
    ) {
        Ok(lock) => lock,
        Err(e @ LockError::Held { .. }) => {
            eprintln!("odac-agent: refusing to apply: {e}");
            return EXIT_FAILURE;
        }
        Err(e) => {
            eprintln!("odac-agent: {e} (choose another with --lock-dir)");
            return EXIT_FAILURE;
        }
    };
    let mut config = target.apps.clone();
    config.owner = match crate::uplink::identity::load_or_create(&target.identity_dir) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("odac-agent: {e}");
            return EXIT_FAILURE;
        }
    };
    runtime.block_on(async {
        let engine = match DockerEngine::lazy(target.docker_host.as_deref()) {
            Ok(e) => e,
            Err(e) => return usage(&e.to_string()),
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
    let target = match args.target.resolve() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("odac-agent: {e}");
            return EXIT_CONFIG;
        }
    };
    let dir = &target.apps.state_dir;
    if !dir.is_dir() {
        eprintln!(
            "odac-agent: state dir {} does not exist: no agent or apply has used it (choose one with --state-dir or --config)",
            dir.display()
        );
        return EXIT_FAILURE;
    }
    let statuses = match Store::open(dir).and_then(|s| s.load_statuses()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("odac-agent: {e}");
            return EXIT_FAILURE;
        }
    };
    let live = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(engine_view(&target)),
        Err(e) => Err(format!("cannot start the async runtime: {e}")),
    };
    let holder = InstanceLock::holder(
        &target.apps.lock_dir,
        &target.engine_endpoint(),
        &target.apps.instance,
    );
    let printed = if args.json {
        print(&statuses, true)
    } else {
        emit(&render_with_engine(&statuses, live.as_ref().ok()));
        Ok(())
    };
    if let Err(e) = printed {
        return usage(&e);
    }
    let instance = &target.apps.instance;
    match &live {
        Err(e) => {
            eprintln!("odac-agent: the engine could not be asked ({e}): this record may be stale")
        }
        Ok(live) => {
            for c in unrecorded(&statuses, live) {
                eprintln!(
                    "odac-agent: the engine also runs {} (app {}, {}) for instance {instance}, not in this record",
                    c.name,
                    c.labels.get(super::labels::APP).map_or("?", String::as_str),
                    c.state.as_str()
                );
            }
        }
    }
    match holder {
        Some(h) => eprintln!("odac-agent: instance {instance} is managed by a running agent ({h})"),
        None => eprintln!(
            "odac-agent: no agent runs for instance {instance} on this engine: this record may be stale"
        ),
    }
    0
}

/// The instance's containers the record does not mention.
fn unrecorded<'a>(
    statuses: &[AppStatus],
    live: &'a BTreeMap<String, ContainerSummary>,
) -> Vec<&'a ContainerSummary> {
    live.values()
        .filter(|c| {
            !statuses
                .iter()
                .any(|s| s.container_id.as_deref() == Some(c.id.as_str()))
        })
        .collect()
}

/// The ENGINE cell: the recorded container's state on the engine now.
fn engine_cell(s: &AppStatus, live: Option<&BTreeMap<String, ContainerSummary>>) -> String {
    match (live, &s.container_id) {
        (None, _) => "?".into(),
        (Some(_), None) => "-".into(),
        (Some(live), Some(id)) => live
            .get(id)
            .map_or_else(|| "missing".to_owned(), |c| c.state.as_str().to_owned()),
    }
}

/// The status table with an ENGINE column (`?` when the engine was not asked).
pub fn render_with_engine(
    statuses: &[AppStatus],
    live: Option<&BTreeMap<String, ContainerSummary>>,
) -> String {
    let cells: Vec<String> = statuses.iter().map(|s| engine_cell(s, live)).collect();
    let table = render_table(statuses);
    let mut lines = table.lines();
    let Some(header) = lines.next() else {
        return table;
    };
    let width = cells.iter().map(String::len).max().unwrap_or(0).max(6);
    let mut out = format!("{:<width$}  {header}\n", "ENGINE");
    for (i, line) in lines.enumerate() {
        let cell = cells.get(i).map_or("", String::as_str);
        let cell = if statuses.is_empty() { "" } else { cell };
        out.push_str(format!("{cell:<width$}  {line}").trim_end());
        out.push('\n');
    }
    out
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
        let crashed = AppStatus {
            name: "oom".into(),
            state: AppState::CrashLoop,
            crash: Some(odac_protocol::CrashInfo {
                reason: odac_protocol::CrashReason::OomKilled,
                exit_code: Some(137),
                oom_killed: true,
                ..Default::default()
            }),
            ..AppStatus::default()
        };
        let table = render_table(&[crashed]);
        assert!(table.contains("oom_killed (exit 137)"), "{table}");
        let mut s = AppStatus {
            name: "web".into(),
            container_id: Some("c1".into()),
            ..AppStatus::default()
        };
        let live = BTreeMap::from([(
            "c1".to_owned(),
            ContainerSummary {
                id: "c1".into(),
                state: crate::engine::ContainerState::Exited,
                ..ContainerSummary::default()
            },
        )]);
        let t = render_with_engine(std::slice::from_ref(&s), Some(&live));
        assert!(t.starts_with("ENGINE  NAME"), "{t}");
        assert!(t.lines().nth(1).unwrap().starts_with("exited  web"), "{t}");
        s.container_id = Some("gone".into());
        let t = render_with_engine(std::slice::from_ref(&s), Some(&live));
        assert!(t.lines().nth(1).unwrap().starts_with("missing  web"), "{t}");
        let t = render_with_engine(&[s], None);
        assert!(t.lines().nth(1).unwrap().starts_with("?"), "{t}");
    }
}
