//! Saving the hub's state without blocking the runtime and without rewriting the whole fleet.
//! Every change marks what it touched — the part outside hosts and apps (events, secrets,
//! bindings), a host, an app — and a save writes only those (see `store.rs`: one file per
//! host and per app). Agent reports are saved by the debounced background writer; changes a
//! caller must not lose (desired state, enrollment, bindings) are saved before the caller
//! answers, on a blocking thread. Saves never interleave, so a newer copy of a file is never
//! replaced by an older one.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use odac_host::lock::lock;

use super::Hub;
use crate::error::SimError;
use crate::state::store::Changes;

/// How long the background writer waits after a change, gathering more, before it saves.
pub const WRITE_DELAY: Duration = Duration::from_millis(200);

/// What changed since the last save.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    everything: bool,
    rest: bool,
    hosts: BTreeSet<String>,
    apps: BTreeSet<String>,
}

impl Dirty {
    /// Everything marked when `yes` (a fleet loaded from an older layout), else nothing.
    pub(super) fn everything_if(yes: bool) -> Self {
        Self {
            everything: yes,
            ..Self::default()
        }
    }

    /// Marks the part outside hosts and apps.
    pub(super) fn rest(&mut self) -> &mut Self {
        self.rest = true;
        self
    }

    /// Marks host `id`.
    pub(super) fn host(&mut self, id: &str) -> &mut Self {
        self.hosts.insert(id.to_owned());
        self
    }

    /// Marks app `name`.
    pub(super) fn app(&mut self, name: &str) -> &mut Self {
        self.apps.insert(name.to_owned());
        self
    }

    fn is_empty(&self) -> bool {
        !self.everything && !self.rest && self.hosts.is_empty() && self.apps.is_empty()
    }

    fn merge(&mut self, other: Dirty) {
        self.everything |= other.everything;
        self.rest |= other.rest;
        self.hosts.extend(other.hosts);
        self.apps.extend(other.apps);
    }
}

impl Hub {
    /// Marks what a change touched and wakes the background writer.
    pub(super) fn mark(&self, f: impl FnOnce(&mut Dirty) -> &mut Dirty) {
        f(&mut lock(&self.dirty));
        self.dirty_notify.notify_one();
    }

    /// Marks the fleet changed outside hosts and apps; the background writer saves it shortly.
    pub fn mark_dirty(&self) {
        self.mark(Dirty::rest);
    }

    /// Saves what changed since the last save, on this thread (blocking file IO: call it on a
    /// blocking thread or at shutdown). A failed save keeps its changes marked for the next.
    pub fn persist_now(&self) {
        if let Err(e) = self.save_changes() {
            tracing::error!(error = %e, "cannot persist the fleet");
        }
    }

    fn save_changes(&self) -> Result<(), SimError> {
        let _saving = lock(&self.save_lock);
        let Some((changes, taken)) = self.take_changes() else {
            return Ok(());
        };
        let saved = self.store.save(&changes);
        if saved.is_err() {
            lock(&self.dirty).merge(taken);
        }
        saved
    }

    /// Takes the marks and copies what they name, under the data lock.
    fn take_changes(&self) -> Option<(Changes, Dirty)> {
        let data = lock(&self.data);
        let taken = std::mem::take(&mut *lock(&self.dirty));
        if taken.is_empty() {
            return None;
        }
        let changes = if taken.everything {
            Changes::everything(&data)
        } else {
            Changes {
                rest: taken.rest.then(|| data.without_hosts_and_apps()),
                hosts: (taken.hosts.iter())
                    .map(|id| (id.clone(), data.hosts.get(id).cloned()))
                    .collect(),
                apps: (taken.apps.iter())
                    .map(|name| (name.clone(), data.apps.get(name).cloned()))
                    .collect(),
            }
        };
        Some((changes, taken))
    }

    /// Saves what changed on a blocking thread and waits for it: once this returns, every
    /// change made before the call is on disk (or its failure logged).
    pub async fn flush(self: &Arc<Self>) {
        let hub = Arc::clone(self);
        if let Err(e) = tokio::task::spawn_blocking(move || hub.persist_now()).await {
            tracing::error!(error = %e, "the fleet save did not finish");
        }
    }

    /// Runs the debounced writer until the hub is dropped elsewhere (call in a task).
    pub async fn run_writer(self: Arc<Self>) {
        loop {
            self.dirty_notify.notified().await;
            tokio::time::sleep(WRITE_DELAY).await;
            self.flush().await;
        }
    }
}
