//! The update task of a running agent: reports the outcome of the last update once (a
//! commit, or the `update_failed` the launcher recorded), keeps a pending version on
//! probation (commit once connected and reconciled, or stop when the window passes), and
//! takes `update_offer`s: verify, stage, record as pending, and stop so that systemd starts
//! the launcher again, which executes the new version.

use std::path::PathBuf;
use std::sync::Arc;

use odac_protocol::{UpdateOffer, UpdatePhase, UpdateStatusReport};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::commit::Probation;
use super::fetch::Fetch;
use super::manifest::{Policy, verify};
use super::stage::{DiskSpace, prune, stage};
use super::state::{self, CurrentUpdate, UpdateState};
use super::{UpdateConfig, target};
use crate::uplink::LinkEvent;

/// Where update reports go (the uplink's outbox; a recording fake in tests).
pub trait ReportUpdate: Send + Sync {
    fn report(&self, status: UpdateStatusReport);
}

/// The task's settings and seams.
pub struct UpdateTask {
    pub state_dir: PathBuf,
    pub config: UpdateConfig,
    /// The version this process runs.
    pub running: String,
    /// Whether the launcher started this process as a staged version (it may be on
    /// probation).
    pub launched: bool,
    pub fetch: Arc<dyn Fetch>,
    pub disk: Arc<dyn DiskSpace>,
    pub reports: Arc<dyn ReportUpdate>,
}

fn status(version: &str, phase: UpdatePhase, message: Option<String>) -> UpdateStatusReport {
    UpdateStatusReport {
        seq: 0,
        version: version.to_owned(),
        phase,
        bytes: None,
        total: None,
        message,
    }
}

impl UpdateTask {
    /// Runs until `shutdown`; cancels `shutdown` itself to restart into a staged version or
    /// out of a version that missed its commit window.
    pub async fn run(
        self,
        mut offers: mpsc::Receiver<UpdateOffer>,
        mut link: broadcast::Receiver<LinkEvent>,
        mut reconciled: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) {
        self.report_outcome();
        let mut probation = Probation::of(&self.state_dir, &self.running).filter(|_| self.launched);
        if let Some(p) = &probation {
            let _ = p.progress("ready");
            self.reports
                .report(status(p.version(), UpdatePhase::Pending, None));
        }
        let deadline = tokio::time::Instant::now() + self.config.commit_within();
        let mut connected = false;
        // a closed input (its sender dropped) answers at once and for ever: its branch is
        // turned off, or the loop would spin
        let mut offers_open = true;
        let mut link_open = true;
        let mut reconciled_open = true;
        loop {
            if let Some(p) = &probation
                && connected
                && *reconciled.borrow()
            {
                self.commit(p);
                probation = None;
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(deadline), if probation.is_some() => {
                    let cause = format!(
                        "missed the commit window of {} s (connected: {connected}, reconciled: {})",
                        self.config.commit_within_secs,
                        *reconciled.borrow()
                    );
                    warn!("version {} {cause}: stopping for the previous version", self.running);
                    if let Some(p) = &probation {
                        let _ = p.progress(&cause);
                    }
                    shutdown.cancel();
                    return;
                }
                ev = link.recv(), if link_open => match ev {
                    Ok(LinkEvent::Connected) => {
                        connected = true;
                        if let Some(p) = &probation {
                            let _ = p.progress("connected");
                        }
                    }
                    Ok(LinkEvent::SessionLost { .. }) => connected = false,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        connected = false;
                        link_open = false;
                    }
                },
                r = reconciled.changed(), if reconciled_open => {
                    if r.is_err() {
                        reconciled_open = false;
                    }
                }
                offer = offers.recv(), if offers_open => match offer {
                    Some(offer) => {
                        if probation.is_some() {
                            self.reports.report(status("", UpdatePhase::Refused, Some(
                                "an update is still on probation; offer again once it committed".into())));
                        } else {
                            // a download in flight does not hold up a shutdown
                            let staged = tokio::select! {
                                () = shutdown.cancelled() => return,
                                staged = self.take_offer(offer) => staged,
                            };
                            if staged {
                                shutdown.cancel();
                                return;
                            }
                        }
                    }
                    None => offers_open = false,
                },
            }
        }
    }

    /// Reports the outcome of the last update (committed, or failed with its cause). Sent
    /// on every start: it is the host's update state, so a report lost with a restart is
    /// sent again, and the control plane's view converges.
    fn report_outcome(&self) {
        let Ok(Some(record)) = state::load(&self.state_dir) else {
            return;
        };
        let phase = match record.state {
            UpdateState::Pending | UpdateState::Superseded => return,
            UpdateState::Committed => UpdatePhase::Committed,
            UpdateState::Failed => UpdatePhase::UpdateFailed,
        };
        self.reports
            .report(status(&record.slot.version, phase, record.cause.clone()));
    }

    fn commit(&self, p: &Probation) {
        match p.commit() {
            Ok(()) => {
                info!(version = p.version(), "update committed");
                self.report_outcome();
                if let Ok(Some(r)) = state::load(&self.state_dir) {
                    let previous = r.previous.as_ref().map(|s| s.version.as_str());
                    prune(
                        &self.state_dir,
                        &[Some(r.slot.version.as_str()), previous]
                            .into_iter()
                            .flatten()
                            .collect::<Vec<_>>(),
                    );
                }
            }
            Err(e) => warn!(version = p.version(), "cannot commit the update: {e}"),
        }
    }

    /// Verifies and stages `offer`; true when it is staged and the agent should restart.
    pub async fn take_offer(&self, offer: UpdateOffer) -> bool {
        let keys = match self.config.trusted_keys() {
            Ok(k) => k,
            Err(e) => {
                self.reports
                    .report(status("", UpdatePhase::Refused, Some(e.to_string())));
                return false;
            }
        };
        let host = target();
        let policy = Policy {
            keys: &keys,
            running: &self.running,
            target: &host,
            allow_downgrade: self.config.allow_downgrade,
        };
        let manifest = match verify(&offer.release, &policy) {
            Ok(m) => m,
            Err(e) => {
                warn!("update refused: {e}");
                self.reports
                    .report(status("", UpdatePhase::Refused, Some(e.to_string())));
                return false;
            }
        };
        let record = state::load(&self.state_dir).ok().flatten();
        if record
            .as_ref()
            .is_some_and(|r| r.has_failed(&manifest.version))
        {
            let why = format!(
                "release {} failed on this host before; offer a newer version",
                manifest.version
            );
            warn!("update refused: {why}");
            self.reports
                .report(status(&manifest.version, UpdatePhase::Refused, Some(why)));
            return false;
        }
        let mut downloading = status(&manifest.version, UpdatePhase::Downloading, None);
        downloading.bytes = Some(0);
        downloading.total = Some(manifest.size);
        self.reports.report(downloading);
        let total = manifest.size;
        let progress = |bytes: u64| {
            let mut report = status(&manifest.version, UpdatePhase::Downloading, None);
            report.bytes = Some(bytes);
            report.total = Some(total);
            self.reports.report(report);
        };
        let slot = match stage(
            &self.state_dir,
            &manifest,
            self.fetch.as_ref(),
            self.disk.as_ref(),
            &progress,
        )
        .await
        {
            Ok(slot) => slot,
            Err(e) => {
                warn!("update refused: {e}");
                self.reports.report(status(
                    &manifest.version,
                    UpdatePhase::Refused,
                    Some(e.to_string()),
                ));
                return false;
            }
        };
        let previous = record.as_ref().and_then(|r| r.active().cloned());
        let failed = record.map(|r| r.failed).unwrap_or_default();
        let staged = CurrentUpdate::staged(slot, previous, failed);
        if let Err(e) = state::save(&self.state_dir, &staged) {
            let why = format!("cannot write the update record: {e}");
            warn!("update refused: {why}");
            let _ = std::fs::remove_dir_all(staged.slot.path.parent().unwrap_or(&staged.slot.path));
            self.reports
                .report(status(&manifest.version, UpdatePhase::Refused, Some(why)));
            return false;
        }
        info!(version = %manifest.version, "update staged: restarting into it");
        self.reports
            .report(status(&manifest.version, UpdatePhase::Staged, None));
        true
    }
}
