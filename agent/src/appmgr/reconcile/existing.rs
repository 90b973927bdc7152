//! An up-to-date container in a pass: its state, the devices attached to it, the image it
//! runs, and the crash-loop restarts when it exited (unless its restart policy makes the exit
//! final, [`diagnosis`](crate::appmgr::crash::diagnosis)).

use odac_protocol::{AppSpec, AppState, AppStatus, Attached, FallbackTier, Reason};

use super::crashbook;
use crate::appmgr::crash::crashloop::CrashGuard;
use crate::appmgr::crash::diagnosis::{self, LastExit};
use crate::appmgr::gpu::fallback::is_device_refusal;
use crate::appmgr::labels::{self, Identity};
use crate::appmgr::pass::{AppMemory, Pass};
use crate::appmgr::state::clip::clip;
use odac_host::engine::{
    ContainerDetails, ContainerState, ContainerSummary, EngineError, split_reference,
};
use odac_host::gpu::{Plan, attached_from, resolve_with};

impl Pass<'_> {
    /// Watch an up-to-date container: state, attached devices, crash-loop restarts. `None`
    /// when it is gone (or was removed) and must be created again.
    pub(in crate::appmgr) async fn existing(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        identity: &Identity,
        listed: &ContainerSummary,
        their_gpu_hash: &str,
    ) -> Result<Option<AppStatus>, EngineError> {
        let details = match self.inspect_listed(rec, listed).await {
            Ok(d) => d,
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                let mut status = self.base_status(spec);
                status.container_id = Some(listed.id.clone());
                status.last_error = Some(clip(e.engine_message()));
                return Ok(Some(status));
            }
        };
        if rec.container_id.as_deref() != Some(details.id.as_str()) {
            rec.guard = CrashGuard::default();
            rec.container_id = Some(details.id.clone());
            rec.last_error = None;
            rec.last_exit = None;
        }
        rec.hold = None;
        rec.retry = None;
        let mut status = self.base_status(spec);
        status.container_id = Some(details.id.clone());
        status.gpu.attached = gpu_attached(&details, spec);
        status.gpu.fallback = labels::fallback(&details.labels);
        if let Some(commit) = details.labels.get(odac_host::names::GIT_COMMIT) {
            status.commit = Some(commit.clone());
            status.image = Some(details.image.clone());
        }
        (status.image_id, status.repo_digest) = self.image_digest(rec, &details).await?;
        status.restart_required = their_gpu_hash != identity.gpu_hash
            || labels::Identity::from_labels(&details.labels).access_hash != identity.access_hash
            || self.gpu_became_available(spec, &status);
        if details.running {
            rec.seen = Some(details.clone());
            rec.guard.next_start = None;
            rec.guard.on_running(self.now, &self.config.crash_loop);
            rec.last_error = None;
        } else if diagnosis::is_new_exit(rec.last_exit.as_ref(), &details) {
            let exit = diagnosis::read_exit(self.engine, &details, rec.last_exit.as_ref()).await?;
            if exit.oom_killed {
                self.events.warn(
                    &spec.name,
                    "the kernel's oom killer ended the container: its memory limit (resources.memory_bytes) is too low",
                );
            }
            rec.last_exit = Some(exit);
        }
        let Some(running) = self.after_exit(rec, spec, &details).await? else {
            return Ok(None);
        };
        report(&mut status, rec, spec, &details, running);
        self.on_unhealthy_gpu(&details.labels, &mut status);
        Ok(Some(status))
    }

    /// The listed container's details: the last inspection when a quiet pass finds it still
    /// running (and without a health check, whose verdict changes while it runs, unless the
    /// engine's events stream: a new verdict is then an event, which drops the inspection),
    /// else read.
    async fn inspect_listed(
        &self,
        rec: &mut AppMemory,
        listed: &ContainerSummary,
    ) -> Result<ContainerDetails, EngineError> {
        let id = listed.id.as_str();
        let reuse = rec.seen.take().filter(|d| {
            self.quiet
                && d.id == id
                && d.running
                && listed.state == ContainerState::Running
                && (d.health.is_none() || self.events_live)
        });
        match reuse {
            Some(d) => Ok(d),
            None => self.engine.inspect(id).await,
        }
    }

    /// A container that is not running: the exit is final (its restart policy), or it is
    /// restarted when its crash-loop backoff is due. Whether it runs now; `None` when the
    /// engine refused its devices on restart and it was removed, to be created again.
    async fn after_exit(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        details: &ContainerDetails,
    ) -> Result<Option<bool>, EngineError> {
        if details.running {
            return Ok(Some(true));
        }
        let now = self.now;
        let cfg = &self.config.crash_loop;
        if let Some(exit) = final_exit(rec, spec, details) {
            rec.guard.next_start = None;
            rec.guard.running_since = None;
            if exit.exit_code.is_some() {
                rec.guard.last_exit_code = exit.exit_code;
            }
            return Ok(Some(false));
        }
        if !rec.guard.waiting() {
            let code = matches!(
                details.status,
                ContainerState::Exited | ContainerState::Dead
            )
            .then_some(details.exit_code)
            .flatten();
            let delay = rec.guard.on_exit(now, code, cfg);
            tracing::info!(app = %spec.name, exit_code = ?code, delay_ms = delay.as_millis() as u64, "container not running: restart scheduled");
        }
        if !rec.guard.due(now) {
            return Ok(Some(false));
        }
        match self.engine.start(&details.id).await {
            Ok(()) => {
                rec.guard.on_restarted(now);
                rec.last_error = None;
                Ok(Some(true))
            }
            Err(e) if e.is_unavailable() => Err(e),
            Err(e) if is_device_refusal(&e) => {
                tracing::warn!(app = %spec.name, error = %e, "the engine refused the device on restart: recreating");
                self.remove(&details.id).await?;
                Ok(None)
            }
            Err(e) => {
                rec.guard.on_exit(now, None, cfg);
                rec.last_error = Some(clip(e.engine_message()));
                Ok(Some(false))
            }
        }
    }

    /// An app that fell back to the CPU at pre-flight could now get its GPU. Not for
    /// `driver_too_old`: that fallback comes from the image, which the host's resolve does
    /// not see (a new driver changes the inventory, and the app is recreated on restart).
    fn gpu_became_available(&self, spec: &AppSpec, status: &AppStatus) -> bool {
        let (Some(intent), Some(fb)) = (&spec.gpu, &status.gpu.fallback) else {
            return false;
        };
        fb.tier == FallbackTier::Preflight
            && fb.reason != Reason::DriverTooOld
            && matches!(
                resolve_with(
                    intent,
                    &self.assessment,
                    &self.allocations,
                    &self.config.gpu
                ),
                Plan::Attach(_)
            )
    }
}

impl Pass<'_> {
    /// The image id a container runs and that image's repo digest (the one of the
    /// container's repository when the image has several), read from the engine once per
    /// image id.
    pub(in crate::appmgr) async fn image_digest(
        &self,
        rec: &mut AppMemory,
        details: &ContainerDetails,
    ) -> Result<(Option<String>, Option<String>), EngineError> {
        if details.image_id.is_empty() {
            return Ok((None, None));
        }
        if let Some((id, digest)) = &rec.digest
            && *id == details.image_id
        {
            return Ok((Some(id.clone()), digest.clone()));
        }
        let digest = match self.engine.image_info(&details.image_id).await {
            Ok(info) => {
                let repo = format!("{}@", split_reference(&details.image).0);
                info.repo_digests
                    .iter()
                    .find(|d| d.starts_with(&repo))
                    .or(info.repo_digests.first())
                    .cloned()
            }
            Err(e) if e.is_unavailable() => return Err(e),
            Err(_) => None,
        };
        rec.digest = Some((details.image_id.clone(), digest.clone()));
        Ok((Some(details.image_id.clone()), digest))
    }
}

/// The GPUs a container holds, read from inspect: its devices less the spec's extra host
/// devices (`devices`, never a GPU), so a Coral TPU is not taken for an attached GPU.
fn gpu_attached(details: &ContainerDetails, spec: &AppSpec) -> Option<Attached> {
    let vendor = labels::vendor(&details.labels);
    if spec.devices.is_empty() {
        return attached_from(details, vendor);
    }
    let mut held = details.clone();
    held.devices
        .retain(|d| !spec.devices.contains(&d.host_path));
    attached_from(&held, vendor)
}

/// The exit of a stopped container that its restart policy does not restart (`on_failure`,
/// `never`), as first seen.
fn final_exit(rec: &AppMemory, spec: &AppSpec, details: &ContainerDetails) -> Option<LastExit> {
    rec.last_exit.clone().filter(|e| {
        !details.running
            && diagnosis::has_exited(details)
            && e.container_id == details.id
            && e.finished_at == details.finished_at
            && !diagnosis::restarts(spec, e)
    })
}

/// Whether the container's last exit, as first seen, was clean (0, no OOM kill): under
/// `always` it is restarted on the backoff but is no crash loop.
fn clean_exit(rec: &AppMemory, details: &ContainerDetails) -> bool {
    rec.last_exit
        .as_ref()
        .is_some_and(|e| e.container_id == details.id && e.exit_code == Some(0) && !e.oom_killed)
}

/// Fill the state, restart counters, error, health or crash of the container's status.
fn report(
    status: &mut AppStatus,
    rec: &mut AppMemory,
    spec: &AppSpec,
    details: &ContainerDetails,
    running: bool,
) {
    let final_exit = final_exit(rec, spec, details);
    status.state = if running {
        AppState::Running
    } else if let Some(exit) = &final_exit {
        diagnosis::final_state(exit)
    } else if rec.last_error.is_some() && details.status == ContainerState::Created {
        AppState::Failed
    } else if rec.guard.in_crash_loop() && !clean_exit(rec, details) {
        AppState::CrashLoop
    } else {
        AppState::Restarting
    };
    status.restart_count = rec.guard.restart_count;
    status.last_exit_code =
        rec.guard
            .last_exit_code
            .or(if details.status == ContainerState::Exited {
                details.exit_code
            } else {
                None
            });
    status.last_error = rec.last_error.clone();
    if running {
        // a container restarted in this pass runs: the crash of its previous run is not its
        // state (the restart count and last exit code still tell it)
        if details.running {
            status.health = diagnosis::health_report(details);
        }
    } else {
        let retry = crashbook::retry_at_ms(rec);
        status.crash = rec
            .last_exit
            .as_ref()
            .filter(|e| e.container_id == details.id)
            .map(|e| diagnosis::crash_info(e, &rec.guard, retry));
    }
}
