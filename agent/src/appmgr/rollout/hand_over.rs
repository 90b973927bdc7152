//! `update.order = start_first`: the hand-over. While a rollout is under way the previous
//! version's container (under the app's own name, running) is set aside and keeps serving; the
//! new one is created beside it under a temporary name derived from the app's container name
//! ([`temporary_name`]: `<instance>_<app>_next`, which no app's own name can be since app
//! names have no `_`). Once the new one has proven itself the rollout reconciles the app once
//! more without the hand-over: the previous container is an extra and is stopped and removed,
//! and the new one is renamed to the app's own name ([`Pass::own_name`]). When the new one
//! fails, it alone is removed and the previous one never stopped.
//!
//! Nothing is lost in a crash mid-hand-over: the rollout under way is on disk, so the next pass
//! sets the previous container aside again and watches the new one; a temporary container
//! that is up to date and alone is adopted (renamed); one of an older version is an extra and
//! removed like any other.

use crate::appmgr::labels::Identity;
use crate::appmgr::pass::{AppMemory, HandOver, Pass};
use odac_host::engine::{ContainerState, ContainerSummary, EngineError};
use odac_host::names::{SEPARATOR, container_name};

/// The temporary name of an app's new container during a hand-over.
pub(in crate::appmgr) fn temporary_name(instance: &str, app: &str) -> String {
    format!("{}{SEPARATOR}next", container_name(instance, app))
}

impl Pass<'_> {
    /// With a hand-over wanted, take the running previous version (an outdated container under
    /// the app's own name) out of `existing`, so it is neither kept nor removed by this pass.
    pub(in crate::appmgr) fn set_aside(
        &self,
        rec: &mut AppMemory,
        app: &str,
        identity: &Identity,
        existing: &mut Vec<ContainerSummary>,
    ) {
        if rec.hand_over != HandOver::Wanted {
            return;
        }
        let own = container_name(&self.config.instance, app);
        let previous = existing.iter().position(|c| {
            let theirs = Identity::from_labels(&c.labels);
            c.name == own
                && c.state == ContainerState::Running
                && (theirs.spec_hash != identity.spec_hash
                    || theirs.restart_token != identity.restart_token)
        });
        if let Some(i) = previous {
            let c = existing.remove(i);
            tracing::debug!(app, container = %c.id, "start_first: the previous version runs on beside the new one");
            rec.hand_over = HandOver::Beside;
        }
    }

    /// The app's up-to-date container `c` under the app's own name: a container left with the
    /// temporary name (a hand-over that finished, or one cut short by a crash) is renamed,
    /// unless the previous version still runs beside it. A failed rename is logged and tried
    /// again on the next pass; only an unreachable engine is an error.
    pub(in crate::appmgr) async fn own_name(
        &self,
        rec: &AppMemory,
        app: &str,
        c: &ContainerSummary,
    ) -> Result<(), EngineError> {
        if rec.hand_over == HandOver::Beside || c.name != temporary_name(&self.config.instance, app)
        {
            return Ok(());
        }
        let own = container_name(&self.config.instance, app);
        match self.engine.rename(&c.id, &own).await {
            Ok(()) => {
                tracing::info!(app, container = %c.id, name = %own, "hand-over done: the new container has the app's name");
                Ok(())
            }
            Err(e) if e.is_unavailable() => Err(e),
            Err(e) => {
                tracing::warn!(app, container = %c.id, error = %e, "could not give the new container the app's name; trying again next pass");
                Ok(())
            }
        }
    }
}
