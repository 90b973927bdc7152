//! `odac-agent status`: the app statuses last persisted in the state directory, next to what
//! the engine runs now, for the agent set named by [`TargetArgs`]. It never creates anything:
//! a missing state dir is an error (exit 1). It says when the record may be stale (no agent
//! runs for the instance, or the engine could not be asked). Exit 0, 1 on a missing or
//! unreadable state dir, 2 when the output cannot be printed, 78 for an unusable `--config`.

use std::collections::BTreeMap;

use odac_protocol::AppStatus;

use super::output::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, emit, fail};
use super::table::{print, render_with_engine};
use crate::appmgr::local::engine_view;
use crate::appmgr::state::store::Store;
use crate::cli::target::TargetArgs;
use crate::instance_lock::InstanceLock;
use odac_host::engine::ContainerSummary;

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
    let live = match super::output::local_runtime() {
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
        return fail(e, EXIT_USAGE);
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
                    c.labels
                        .get(odac_host::names::APP)
                        .map_or("?", String::as_str),
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
    EXIT_OK
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
