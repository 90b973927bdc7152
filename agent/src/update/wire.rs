//! How `run` plugs self-update in: the offers channel into the uplink, the update task with
//! the real seams (the agent's HTTP client with the link's TLS trust, `statvfs`, the
//! uplink's outbox) beside the other tasks.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::UpdateConfig;
use super::fetch::HttpFetch;
use super::launch::LAUNCHED_ENV;
use super::stage::RealDisk;
use super::task::{ReportUpdate, UpdateTask};
use crate::uplink::{UpdateSink, Uplink};

/// Offers waiting for the task (one runs at a time; more are refused at once).
const OFFER_QUEUE: usize = 1;

/// The version this process runs: the launched (staged) version when the launcher started
/// it, else this binary's own.
pub fn running_version() -> String {
    std::env::var(LAUNCHED_ENV).unwrap_or_else(|_| crate::AGENT_VERSION.to_owned())
}

/// Spawns the update task on `tasks` and returns `uplink` passing offers to it.
/// `reconciled` turns true once the first reconcile pass is done.
pub fn attach(
    tasks: &mut JoinSet<()>,
    (state_dir, config): (&std::path::Path, &UpdateConfig),
    tls: Arc<rustls::ClientConfig>,
    uplink: Uplink,
    reconciled: watch::Receiver<bool>,
    shutdown: &CancellationToken,
) -> Uplink {
    let (tx, rx) = mpsc::channel(OFFER_QUEUE);
    let task = UpdateTask {
        state_dir: state_dir.to_owned(),
        config: config.clone(),
        running: running_version(),
        launched: std::env::var_os(LAUNCHED_ENV).is_some(),
        fetch: Arc::new(HttpFetch(tls)),
        disk: Arc::new(RealDisk),
        reports: Arc::new(uplink.updates()),
    };
    tasks.spawn(task.run(rx, uplink.link_events(), reconciled, shutdown.clone()));
    uplink
        .with_updates(tx)
        .with_agent_version(running_version())
}

impl ReportUpdate for UpdateSink {
    fn report(&self, status: odac_protocol::UpdateStatusReport) {
        self.put(status);
    }
}
