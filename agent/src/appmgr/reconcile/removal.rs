//! Removals: the apps that left the desired state and whose container may still exist. Each
//! is noted with the generation that removed it when the change is committed; after a pass,
//! once the engine lists no container of ours for that app any more, the manager reports
//! one final status with `state: "removed"` and that generation, and forgets it. Another
//! agent's container of the same app (another `odac.owner`) is not ours and does not hold the
//! removal back; an unowned one (made before owner labels) does, since the pass may have
//! adopted it. An app that comes back before its container is gone is simply no longer a
//! removal.

use odac_host::lock::lock;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use odac_protocol::{AppState, AppStatus};

use crate::appmgr::labels;
use odac_host::engine::ContainerEngine;

/// Apps on their way out, by name, with the generation that removed them.
#[derive(Debug, Default)]
pub(in crate::appmgr) struct Removals {
    pending: Mutex<BTreeMap<String, u64>>,
}

impl Removals {
    fn pending(&self) -> MutexGuard<'_, BTreeMap<String, u64>> {
        lock(&self.pending)
    }

    /// A committed change moved the desired apps from `before` to `after` at `generation`.
    pub(in crate::appmgr) fn left(&self, before: &[String], after: &[String], generation: u64) {
        let mut pending = self.pending();
        for name in after {
            pending.remove(name);
        }
        for name in before {
            if !after.contains(name) {
                pending.insert(name.clone(), generation);
            }
        }
    }

    /// Whether `name` is on its way out.
    pub(in crate::appmgr) fn contains(&self, name: &str) -> bool {
        self.pending().contains_key(name)
    }

    /// The final `removed` status of every pending app that has no container of this
    /// `instance` left but other owners' (`owner` is this agent's); those are forgotten. An
    /// engine that cannot list its containers settles nothing (the next pass tries again).
    pub(in crate::appmgr) async fn settle(
        &self,
        engine: &dyn ContainerEngine,
        instance: &str,
        owner: &str,
    ) -> Vec<AppStatus> {
        let waiting: Vec<(String, u64)> = self
            .pending()
            .iter()
            .map(|(n, g)| (n.clone(), *g))
            .collect();
        if waiting.is_empty() {
            return Vec::new();
        }
        let filter = format!("{}={instance}", odac_host::names::INSTANCE);
        let containers = match engine.list_by_label(&filter).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "cannot list containers to confirm removals");
                return Vec::new();
            }
        };
        let present: BTreeSet<&str> = containers
            .iter()
            .filter(|c| labels::owner(&c.labels).is_none_or(|o| o == owner))
            .filter_map(|c| c.labels.get(odac_host::names::APP))
            .map(String::as_str)
            .collect();
        let mut pending = self.pending();
        let mut out = Vec::new();
        for (name, generation) in waiting {
            if present.contains(name.as_str()) || pending.get(&name) != Some(&generation) {
                continue;
            }
            pending.remove(&name);
            tracing::info!(app = %name, generation, "app removed");
            out.push(AppStatus {
                name,
                generation,
                state: AppState::Removed,
                ..AppStatus::default()
            });
        }
        out
    }
}
