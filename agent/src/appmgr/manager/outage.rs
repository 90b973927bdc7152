//! Engine outages of the app manager: a pass that finds the engine unreachable leaves every
//! app at its last status with `last_error` starting `engine_unavailable: `, and the loop
//! retries with an exponential backoff (1 s to 30 s, jittered) until the engine answers.

use odac_host::lock::lock;
use std::time::Duration;

use backon::ExponentialBackoff;
use odac_protocol::{AppState, AppStatus, DesiredState, Reason};
use tokio::time::Instant;

use super::watch::engine_backoff;
use super::{AppManager, d_generation};
use crate::appmgr::state::clip::clip;

/// An engine outage under way: why, and when to try again.
pub(super) struct Outage {
    pub(super) message: String,
    backoff: ExponentialBackoff,
    pub(super) retry_at: Instant,
}

impl AppManager {
    /// Keep every app at its last status, marked `engine_unavailable`.
    pub(super) fn engine_down(&self, desired: Option<&DesiredState>, message: &str) {
        {
            let mut outage = lock(&self.inner.outage);
            match outage.as_mut() {
                Some(o) => {
                    o.message = message.to_owned();
                    let delay = o.backoff.next().unwrap_or(Duration::from_secs(30));
                    o.retry_at = Instant::now() + delay;
                }
                None => {
                    tracing::warn!(error = %message, "container engine unreachable; keeping the last statuses");
                    let mut backoff = engine_backoff();
                    let delay = backoff.next().unwrap_or(Duration::from_secs(1));
                    *outage = Some(Outage {
                        message: message.to_owned(),
                        backoff,
                        retry_at: Instant::now() + delay,
                    });
                }
            }
        }
        let previous = lock(&self.inner.statuses).clone();
        let statuses = desired
            .map(|d| d.apps.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|spec| {
                let mut status = previous
                    .get(&spec.name)
                    .cloned()
                    .unwrap_or_else(|| AppStatus {
                        name: spec.name.clone(),
                        generation: d_generation(desired),
                        state: AppState::Pending,
                        image: spec.image.clone(),
                        ..AppStatus::default()
                    });
                status.gpu.requested = spec.gpu.clone();
                status.last_error = Some(clip(format!("{}: {message}", Reason::EngineUnavailable)));
                status
            })
            .collect();
        self.publish(statuses);
    }
}
