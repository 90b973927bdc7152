//! The ownership checks of `odac-agent doctor` (which adds them to the host checks of
//! [`inventory::doctor`](odac_host::inventory::doctor)): the ownership of the agent's instance on the
//! live engine — which agent runs it now (the
//! instance lock), and every container of the instance that is not this agent's (a
//! [`Conflict`]: another owner's, or one without owner label whose app the saved desired state
//! does not name). Conflicts are warnings: they do not change the exit code. Also the `images`
//! check: the agent's image record and whether the low-disk clean-up can read the data root.

use std::collections::BTreeSet;

use odac_protocol::DesiredState;

use super::{Target, engine_view};
use crate::appmgr::gc::image_gc::{DataRoot, read_root};
use crate::appmgr::images::image_book;
use crate::appmgr::images::pull_disk::free_bytes;
use crate::appmgr::manager::watch::StreamReport;
use crate::appmgr::policy::ownership::{Conflict, conflicts};
use crate::appmgr::state::store::DESIRED_FILE;
use crate::identity::AGENT_ID_FILE;
use crate::instance_lock::InstanceLock;
use odac_host::engine::DockerEngine;
use odac_host::inventory::doctor::{Check, CheckStatus};

/// One `ownership` check.
pub fn check(status: CheckStatus, message: String, fix: Option<&str>) -> Check {
    Check {
        name: "ownership".to_owned(),
        status,
        message,
        reason: None,
        fix: fix.map(str::to_owned),
    }
}

const FIX: &str = "give every agent on one engine its own apps.instance; remove another \
                   agent's containers only once that agent is gone for good";

/// The ownership checks of `target` against the live engine.
pub async fn ownership_checks(target: &Target) -> Vec<Check> {
    let instance = &target.apps.instance;
    let mut checks = Vec::new();
    match InstanceLock::holder(&target.apps.lock_dir, &target.engine_endpoint(), instance) {
        Some(h) => {
            checks.push(check(
                CheckStatus::Info,
                format!("instance {instance} is managed by a running agent ({h})"),
                None,
            ));
            checks.extend(events_check(target));
        }
        None => checks.push(check(
            CheckStatus::Info,
            format!("no agent runs instance {instance} on this engine now"),
            None,
        )),
    }
    checks.push(images_check(target).await);
    let id_file = target.apps.state_dir.join(AGENT_ID_FILE);
    let me = std::fs::read_to_string(&id_file)
        .map(|t| t.trim().to_owned())
        .unwrap_or_default();
    let desired: Option<DesiredState> = std::fs::read(target.apps.state_dir.join(DESIRED_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let names: BTreeSet<&str> = desired
        .as_ref()
        .map(|d| d.apps.iter().map(|a| a.name.as_str()).collect())
        .unwrap_or_default();
    let live = match engine_view(target).await {
        Ok(live) => live,
        Err(e) => {
            checks.push(check(
                CheckStatus::Info,
                format!("containers of instance {instance} not listed: {e}"),
                None,
            ));
            return checks;
        }
    };
    let total = live.len();
    let found: Vec<Conflict> = conflicts(live.into_values().collect(), &me, &names);
    if found.is_empty() {
        let message = if total == 0 {
            format!("no containers of instance {instance} on this engine")
        } else {
            format!("{total} container(s) of instance {instance}, all owned by agent {me}")
        };
        checks.push(check(CheckStatus::Ok, message, None));
    }
    for c in &found {
        checks.push(check(CheckStatus::Warn, c.message(instance), Some(FIX)));
    }
    checks
}

/// The `events` check of a running agent: whether it follows the engine's event stream or,
/// while the stream is down, polls (the state it keeps in
/// [`STREAM_FILE`](crate::appmgr::manager::watch::STREAM_FILE)).
pub fn events_check(target: &Target) -> Option<Check> {
    let report = StreamReport::load(&target.apps.state_dir)?;
    let since = crate::appmgr::gpu::refusals::utc(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(report.since_ms),
    );
    let (status, message, fix) = if report.live {
        (
            CheckStatus::Ok,
            format!(
                "the running agent follows the engine's events since {since} (a full pass every {} s)",
                target.apps.backstop_secs
            ),
            None,
        )
    } else {
        (
            CheckStatus::Warn,
            format!(
                "the engine's event stream is down since {since} ({}): the running agent polls the engine every {} ms until it is resubscribed",
                report.problem.as_deref().unwrap_or("no reason recorded"),
                report.poll_interval_ms
            ),
            Some(
                "check that `docker events` answers on the agent's docker.host; the agent resubscribes on its own",
            ),
        )
    };
    Some(Check {
        name: "events".to_owned(),
        status,
        message,
        reason: None,
        fix: fix.map(str::to_owned),
    })
}

/// The `images` check: how many images the agent keeps a record of for clean-up, and whether
/// the low-disk clean-up can read the engine's data root (and how much is free there).
pub async fn images_check(target: &Target) -> Check {
    let apps = &target.apps;
    let kept = image_book::load(&apps.state_dir).len();
    let root = match DockerEngine::lazy(target.docker_host.as_deref()) {
        Ok(engine) => read_root(&engine).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let (status, disk) = match root {
        Ok(DataRoot::At(root)) => {
            let free = free_bytes(&root).unwrap_or_default() / 1_000_000;
            let min = apps.image_gc_min_free_mb;
            let status = if free < min {
                CheckStatus::Warn
            } else {
                CheckStatus::Ok
            };
            let disk = format!(
                "the engine's data root {} has {free} MB free (clean-up below {min} MB, apps.image_gc_min_free_mb)",
                root.display()
            );
            (status, disk)
        }
        Ok(DataRoot::Unreadable(why)) => (CheckStatus::Info, why),
        Ok(DataRoot::Unknown) => (CheckStatus::Info, "the data root is not known".into()),
        Err(e) => (CheckStatus::Info, format!("engine not asked: {e}")),
    };
    Check {
        name: "images".to_owned(),
        status,
        message: format!(
            "{kept} image(s) pulled or built by this agent on record (removed {} s after their last use, apps.image_gc_delay_secs); {disk}",
            apps.image_gc_delay_secs
        ),
        reason: None,
        fix: None,
    }
}
