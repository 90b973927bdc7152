//! The app manager's reconcile loop: a pass on every desired-state change, at every
//! scheduled restart or retry, on every relevant engine event ([`watch`](super::watch)),
//! every `apps.backstop_secs` while the event stream is up and every poll interval while it
//! is down; engine outages retried with backoff. The watch runs beside the loop.

use odac_host::lock::lock;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::AppManager;
use super::watch::WatchInput;
use crate::liveness::{Heartbeat, STEP_BOUND};

impl AppManager {
    /// How long the loop may sleep before the next pass, and whether that pass is a plain
    /// poll tick (no outage retry, no scheduled restart).
    pub(super) async fn next_delay(&self) -> (Duration, bool) {
        let now = Instant::now();
        if let Some(o) = lock(&self.inner.outage).as_ref() {
            return (o.retry_at.saturating_duration_since(now), false);
        }
        let poll = if self.inner.watch.live() {
            self.inner.config.backstop()
        } else {
            self.inner.config.poll_interval()
        };
        match self.inner.reconciler.lock().await.next_deadline() {
            Some(t) if t.saturating_duration_since(now) <= poll => {
                (t.saturating_duration_since(now), false)
            }
            _ => (poll, true),
        }
    }

    /// The reconcile loop: a pass on every desired-state change, at every scheduled restart,
    /// and every poll interval (which is how container exits are seen); engine outages are
    /// retried with backoff. A poll tick is a quiet pass (see `appmgr/reconcile.rs`). Returns
    /// when `shutdown` is cancelled; containers keep running.
    pub async fn run(self, shutdown: CancellationToken) {
        self.run_with(shutdown, Heartbeat::detached("app manager"))
            .await;
    }

    /// [`Self::run`], stamping `beat` on every turn of the loop and while it waits (see
    /// [`crate::liveness`]); a pass longer than [`STEP_BOUND`] stops the stamps.
    pub async fn run_with(self, shutdown: CancellationToken, beat: Heartbeat) {
        let config = &self.inner.config;
        let watch = self.inner.watch.run(
            WatchInput {
                engine: self.inner.engine.as_ref(),
                instance: &config.instance,
                backstop: config.backstop(),
                poll_interval: config.poll_interval(),
                state_dir: config.state_dir.clone(),
                full_pass: &self.inner.wake,
            },
            &shutdown,
        );
        tokio::join!(watch, self.reconcile_loop(&shutdown, &beat));
        tracing::info!("app manager stopped");
    }

    /// Changes of the engine worth an inventory rescan: a daemon `reload`, and the event
    /// stream resubscribed after a fault (the engine may have restarted).
    pub fn engine_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.watch.engine_changes()
    }

    /// Whether the engine's events are streaming now (else the loop polls).
    pub fn events_live(&self) -> bool {
        self.inner.watch.live()
    }

    async fn reconcile_loop(&self, shutdown: &CancellationToken, beat: &Heartbeat) {
        let mut quiet = false;
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            beat.step(STEP_BOUND, self.reconcile(quiet)).await;
            // waits for the reconciler's lock, which a concurrent `reconcile_once` (the first
            // pass at start-up) may hold
            let (delay, tick) = beat.step(STEP_BOUND, self.next_delay()).await;
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.inner.wake.notified() => quiet = false,
                () = self.inner.watch.event_wake.notified() => quiet = true,
                () = beat.idle(delay) => quiet = tick,
            }
        }
    }
}
