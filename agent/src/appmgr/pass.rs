//! One reconcile pass and what it remembers: [`Pass`] (the inputs and facts of the pass
//! under way, shared by its parts), [`AppMemory`] (what is kept about one app between
//! passes) and [`Hold`] (a failure not retried until the spec or the plan changes).
//!
//! The parts of a pass depend on this module, never the other way:
//! [`reconcile`](super::reconcile::reconciler) drives the pass over the apps,
//! [`existing`](super::reconcile::existing) watches an up-to-date container,
//! [`create`](super::reconcile::create) makes a missing one, [`source`](super::reconcile::source)
//! and [`image`](super::reconcile::image) get its image.

use std::time::Duration;

use odac_protocol::{AppSpec, AppState, AppStatus, Fallback, GpuStatus, ImageFailure};
use tokio::time::Instant;

use super::crash::crashloop::CrashGuard;
use super::crash::diagnosis::{LastExit, wall_ms_of};
use super::gpu::refusals::Refusals;
use super::images::build::Builds;
use super::images::pull::Pulls;
use super::labels::{self, Identity};
use super::policy::binds::HostUse;
use super::settings::AppManagerConfig;
use super::state::clip::clip;
use super::state::events::EventTx;
use odac_host::engine::{ContainerDetails, ContainerEngine, EngineError};
use odac_host::gpu::{Allocations, Plan};
use odac_host::inventory::Assessment;

/// A failure held until the spec or the plan changes.
#[derive(Debug, Clone)]
pub(super) struct Hold {
    pub(super) identity: Identity,
    pub(super) plan: Option<Plan>,
    pub(super) status: AppStatus,
}

/// How this pass replaces an app's container (`update.order`); set by the rollout for each
/// pass, see [`hand_over`](super::rollout::hand_over).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum HandOver {
    /// Stop first: an outdated container goes before the new one is made.
    #[default]
    Off,
    /// Start first is asked for: a running previous version may be set aside.
    Wanted,
    /// The previous version is set aside and runs: a new container gets the temporary name.
    Beside,
}

/// What the manager remembers about one app between passes.
#[derive(Debug, Default)]
pub(super) struct AppMemory {
    pub(super) guard: CrashGuard,
    pub(super) container_id: Option<String>,
    pub(super) last_error: Option<String>,
    pub(super) hold: Option<Hold>,
    /// A failed creation waiting for its retry (`guard.next_start`).
    pub(super) retry: Option<(Identity, AppStatus)>,
    /// The last inspection of its container, kept while the container runs.
    pub(super) seen: Option<ContainerDetails>,
    /// The last exit of its container as first seen, with its output tail.
    pub(super) last_exit: Option<LastExit>,
    /// The next restart (`guard.next_start`) as wall-clock time, Unix milliseconds.
    pub(super) retry_at: Option<(Instant, u64)>,
    /// The image id of its container and that image's repo digest, read once per image.
    pub(super) digest: Option<(String, Option<String>)>,
    /// How this pass replaces its container (`update.order`), set by the rollout.
    pub(super) hand_over: HandOver,
}

/// One pass under way: its inputs and the facts it read.
pub(super) struct Pass<'a> {
    pub(super) config: &'a AppManagerConfig,
    pub(super) engine: &'a dyn ContainerEngine,
    pub(super) assessment: Assessment,
    pub(super) allocations: Allocations,
    pub(super) generation: u64,
    pub(super) now: Instant,
    pub(super) builds: &'a Builds,
    pub(super) pulls: &'a Pulls,
    pub(super) events: &'a EventTx,
    pub(super) quiet: bool,
    /// The engine's events are streaming (health changes arrive as events).
    pub(super) events_live: bool,
    /// Host paths the desired apps bind, by app.
    pub(super) desired_binds: Vec<(String, HostUse)>,
    /// Host paths the engine's containers bind, read once per pass when an app needs them.
    pub(super) engine_binds: Option<Vec<HostUse>>,
    /// Device sets the engine refused.
    pub(super) refusals: &'a mut Refusals,
}

impl Pass<'_> {
    pub(super) fn base_status(&self, spec: &AppSpec) -> AppStatus {
        AppStatus {
            name: spec.name.clone(),
            generation: self.generation,
            state: AppState::Pending,
            gpu: GpuStatus {
                requested: spec.gpu.clone(),
                ..GpuStatus::default()
            },
            image: spec.image.clone(),
            ..AppStatus::default()
        }
    }

    pub(super) fn failed(
        &self,
        spec: &AppSpec,
        error: String,
        fallback: Option<Fallback>,
    ) -> AppStatus {
        let mut status = self.base_status(spec);
        status.state = AppState::Failed;
        status.last_error = Some(error);
        status.gpu.fallback = fallback;
        status
    }

    /// Stop (bounded) and remove a container of ours; release its GPUs.
    pub(super) async fn remove(&mut self, id: &str) -> Result<(), EngineError> {
        let timeout = Duration::from_secs(self.config.stop_timeout_secs);
        let gpus = match self.engine.inspect(id).await {
            Ok(d) => labels::gpus(&d.labels),
            Err(e) if e.is_unavailable() => return Err(e),
            Err(_) => Vec::new(),
        };
        stop_and_remove(self.engine, id, timeout).await?;
        self.allocations.remove(&gpus);
        Ok(())
    }

    /// A creation that failed for a reason that may pass: fail now, retry after the backoff
    /// (the status says when: `next_retry_at_ms`).
    pub(super) fn retry_later(
        &self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        identity: &Identity,
        error: String,
        fallback: Option<Fallback>,
    ) -> AppStatus {
        let delay = rec.guard.on_exit(self.now, None, &self.config.crash_loop);
        tracing::warn!(app = %spec.name, error = %error, retry_ms = delay.as_millis() as u64, "could not start the app");
        rec.last_error = Some(error.clone());
        let mut status = self.failed(spec, error, fallback);
        status.next_retry_at_ms = Some(wall_ms_of(self.now + delay));
        rec.retry = Some((identity.clone(), status.clone()));
        status
    }

    /// [`Self::retry_later`] for an app whose image could not be had (a failed pull or
    /// build): the failure goes in the status's own `image_failure` part, never in the GPU's.
    pub(super) fn retry_image_later(
        &self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        identity: &Identity,
        error: String,
        failure: ImageFailure,
    ) -> AppStatus {
        let mut status = self.retry_later(rec, spec, identity, error, None);
        status.image_failure = Some(failure);
        if let Some((_, kept)) = &mut rec.retry {
            kept.image_failure.clone_from(&status.image_failure);
        }
        status
    }

    /// An engine error met while reconciling one app. An outage ends the pass: the engine
    /// unreachable, or a server error (5xx, an undecodable answer) while the engine no longer
    /// answers its ping. Anything else (a 4xx about this app's request, a server error of an
    /// engine that still answers) is this app's own failure, retried on its own backoff and
    /// never put on other apps' statuses.
    pub(super) async fn own_failure(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        error: EngineError,
    ) -> Result<AppStatus, EngineError> {
        if error.is_unavailable() {
            return Err(error);
        }
        if !error.is_request_error() {
            let caps = self.engine.capabilities().await;
            if !caps.reachable {
                return Err(EngineError::Unavailable(
                    caps.error.unwrap_or_else(|| error.to_string()),
                ));
            }
        }
        let message = match error.http_status() {
            Some(status) => format!(
                "the engine refused this app's request (http {status}): {}",
                error.engine_message()
            ),
            None => format!(
                "the engine failed this app's request: {}",
                error.engine_message()
            ),
        };
        Ok(self.retry_later(rec, spec, &Identity::of(spec), clip(message), None))
    }
}

/// Stop a container (killed after `timeout`) and remove it; only an unreachable engine is an
/// error (a container already gone is fine, anything else is logged).
pub(super) async fn stop_and_remove(
    engine: &dyn ContainerEngine,
    id: &str,
    timeout: Duration,
) -> Result<(), EngineError> {
    match engine.stop(id, timeout).await {
        Err(e) if e.is_unavailable() => return Err(e),
        _ => {}
    }
    match engine.remove(id, true).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) if e.is_unavailable() => Err(e),
        Err(e) => {
            tracing::warn!(container = %id, error = %e, "could not remove container");
            Ok(())
        }
    }
}
