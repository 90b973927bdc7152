//! `odac-agent apply -f desired.json`: one reconcile of a local desired-state file against the
//! local engine, for air-gapped hosts and debugging, on the agent set named by
//! [`TargetArgs`] (`--config FILE`, `--state-dir`, `--instance`).
//!
//! `apply` takes the instance lock first ([`instance_lock`](crate::instance_lock)): against an
//! instance a running agent manages it refuses and changes nothing. Like the agent, it only
//! touches containers its owner id (the agent id in the state dir) owns. It waits for the
//! images of apps built from git sources (bounded by the build timeouts). Exit codes: 0 when
//! every app is running (or waiting on its restart backoff), 1 when an app failed, the engine
//! is unreachable or a running agent holds the instance, 2 for usage errors (unreadable or
//! invalid file), 78 for an unusable `--config` file.

use std::path::PathBuf;
use std::sync::Arc;

use odac_protocol::{AppState, DesiredState};

use super::output::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, fail};
use super::table::print;
use crate::appmgr::AppManager;
use crate::cli::target::TargetArgs;
use crate::instance_lock::{InstanceLock, LockError};
use odac_host::engine::DockerEngine;

fn usage(message: &str) -> i32 {
    fail(message, EXIT_USAGE)
}

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

/// `odac-agent apply`.
pub fn apply_command(args: &ApplyArgs) -> i32 {
    let bytes = match std::fs::read(&args.file) {
        Ok(t) => t,
        Err(e) => return usage(&format!("cannot read {}: {e}", args.file.display())),
    };
    let state: DesiredState = match odac_protocol::decode_document(&bytes) {
        Ok(s) => s,
        Err(e) => {
            return usage(&format!(
                "{} is not a desired state ({{\"generation\": N, \"apps\": [...]}}): {}",
                args.file.display(),
                e.reply_text()
            ));
        }
    };
    if !args.root.is_dir() {
        return usage(&format!("root {} is not a directory", args.root.display()));
    }
    let runtime = match super::output::local_runtime() {
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
    config.owner = match crate::identity::load_or_create(&target.apps.state_dir) {
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
            EXIT_FAILURE
        } else {
            EXIT_OK
        }
    })
}
