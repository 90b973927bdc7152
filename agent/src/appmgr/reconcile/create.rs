//! Creating an app's container: the held refusals (policy, pre-flight, a required GPU the
//! engine refused) that are not retried until the spec or the plan changes, the retry of
//! other failures on the crash-loop backoff, named volumes ([`volumes`](super::volumes)), the GPU plan applied to the
//! container spec (completed with what the image's environment says, [`odac_host::gpu::image`]),
//! and [`start_with_gpu_fallback`] (or, for devices the engine refused
//! before, the [`refusals`](crate::appmgr::gpu::refusals) learned). Every GPU fallback decision is
//! also an event (once per decision: held refusals are not repeated).

use odac_protocol::Compute;
use odac_protocol::{AppSpec, AppStatus, Fallback, FallbackTier, Mechanism, Reason};

use super::image::ImageReady;
use crate::appmgr::container::{self, container_spec};
use crate::appmgr::crash::crashloop::CrashGuard;
use crate::appmgr::crash::diagnosis;
use crate::appmgr::gpu::fallback::{
    StartOutcome, run_on_cpu, start_plain, start_with_gpu_fallback,
};
use crate::appmgr::gpu::refusals::Asker;
use crate::appmgr::images::build::Built;
use crate::appmgr::labels::{self, Identity};
use crate::appmgr::pass::{AppMemory, HandOver, Hold, Pass};
use crate::appmgr::policy::{self, Admitted};
use crate::appmgr::rollout::hand_over::temporary_name;
use crate::appmgr::rollout::update_lock;
use crate::appmgr::state::clip::clip;
use odac_host::engine::ContainerSpec;
use odac_host::engine::{ContainerSummary, EngineError};
use odac_host::gpu::image as gpu_image;
use odac_host::gpu::require::HostNvidia;
use odac_host::gpu::{Attachment, Plan, resolve_with};
use odac_host::inventory::cuda::cuda_for_driver;
use odac_host::inventory::inventory_hash;

impl Pass<'_> {
    /// Create and start the app's container; see the module documentation.
    pub(in crate::appmgr) async fn create(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        identity: &Identity,
        built: Option<&Built>,
        admitted: &Admitted,
    ) -> Result<AppStatus, EngineError> {
        let plan = spec
            .gpu
            .as_ref()
            .map(|g| resolve_with(g, &self.assessment, &self.allocations, &self.config.gpu));
        if let Some(status) = self.held_or_waiting(rec, identity, &plan) {
            return Ok(status);
        }
        let Some(image) = spec
            .image
            .clone()
            .or_else(|| built.map(|b| b.image.clone()))
        else {
            let status = self.failed(
                spec,
                "the app has no image: catalog apps must be resolved to an image before they reach this agent".into(),
                None,
            );
            return Ok(hold(rec, identity, plan, status));
        };
        if built.is_none()
            && let ImageReady::Wait(status) = self.ensure_image(rec, spec, identity, &image).await?
        {
            return Ok(*status);
        }
        let mut base = self.base_spec(spec, &image, built, admitted);
        if rec.hand_over == HandOver::Beside {
            base.name = temporary_name(&self.config.instance, &spec.name);
        }
        // holds compare the pre-flight plan, which the next pass computes before the image
        let preflight_plan = plan.clone();
        let plan = self.with_image(spec, &image, plan).await?;
        if let Some(Plan::Refuse {
            reason,
            fix,
            detail,
        }) = &plan
        {
            let error = match fix {
                Some(fix) => format!("{reason}: {detail}; fix: {fix}"),
                None => format!("{reason}: {detail}"),
            };
            let fallback = preflight_fallback(*reason, detail);
            let status = self.failed(spec, error, Some(fallback));
            self.events.error(
                &spec.name,
                format!("required gpu refused at pre-flight ({reason}): {detail}; nothing created"),
            );
            return Ok(hold(rec, identity, preflight_plan, status));
        }
        match self.ensure_volumes(spec).await {
            Ok(names) => container::use_volumes(&mut base, spec, &names),
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) => {
                return Ok(self.retry_later(rec, spec, identity, clip(e.engine_message()), None));
            }
        }
        let outcome = match self.start(spec, identity, &plan, base).await {
            Ok(outcome) => outcome,
            Err(denied) => return Ok(*denied),
        };
        let plans = (preflight_plan, plan);
        self.settle(rec, spec, identity, plans, outcome).await
    }

    /// `plan` completed with what the image's environment says (an NVIDIA attachment only:
    /// the image is inspected for nothing else): driver capabilities, and `driver_too_old`
    /// for requirements the host's driver cannot meet. An image the engine cannot describe
    /// counts as one without environment.
    async fn with_image(
        &self,
        spec: &AppSpec,
        image: &str,
        plan: Option<Plan>,
    ) -> Result<Option<Plan>, EngineError> {
        let (Some(intent), Some(Plan::Attach(att))) = (&spec.gpu, &plan) else {
            return Ok(plan);
        };
        if att.vendor.facts().compute != Compute::Cuda {
            return Ok(plan);
        }
        let image_env = match self.engine.image_info(image).await {
            Ok(info) => info.env,
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) => {
                tracing::debug!(app = %spec.name, image, error = %e, "the image's environment could not be read");
                Vec::new()
            }
        };
        let env = gpu_image::process_env(&image_env, &spec.env);
        let driver = self.assessment.scan.nvidia.driver_version.clone();
        let host = HostNvidia {
            cuda: driver.as_deref().and_then(cuda_for_driver),
            driver,
        };
        Ok(plan.map(|p| gpu_image::with_image(p, intent, &env, &host)))
    }

    /// The status to report without trying now: a held failure for the same identity and
    /// plan, or a failure whose retry is not due yet. A retry made now spends its deadline.
    fn held_or_waiting(
        &self,
        rec: &mut AppMemory,
        identity: &Identity,
        plan: &Option<Plan>,
    ) -> Option<AppStatus> {
        if let Some(hold) = &rec.hold
            && hold.identity == *identity
            && hold.plan == *plan
        {
            let mut status = hold.status.clone();
            status.generation = self.generation;
            return Some(status);
        }
        rec.hold = None;
        if let Some((retry_identity, status)) = &rec.retry {
            if retry_identity == identity && !rec.guard.due(self.now) && rec.guard.waiting() {
                let mut status = status.clone();
                status.generation = self.generation;
                return Some(status);
            }
            if retry_identity != identity {
                rec.guard = CrashGuard::default();
            }
        }
        if rec.retry.take().is_some() {
            // The retry is made now: its deadline is spent, whatever the retry ends in (a
            // hold, a pull that runs long). Left in the past, it would make the loop run
            // passes back to back.
            rec.guard.next_start = None;
        }
        None
    }

    /// The container spec without GPU: image, checked binds, host access, hardening, health
    /// probe, log rotation and the commit it was built from.
    fn base_spec(
        &self,
        spec: &AppSpec,
        image: &str,
        built: Option<&Built>,
        admitted: &Admitted,
    ) -> ContainerSpec {
        let mut base = container_spec(
            &self.config.instance,
            &self.config.owner,
            spec,
            image,
            &self.config.extra_labels,
        );
        // the engine mounts the paths the policy resolved and checked
        for bind in &admitted.binds {
            if let Some(b) = base.binds.get_mut(bind.index) {
                b.source = bind.source.display().to_string();
            }
        }
        container::apply_host_access(&mut base, &spec.name, &admitted.access);
        base.security_opt = self.config.security_opt();
        base.pids_limit = self.config.pids_limit();
        base.healthcheck = diagnosis::health_probe(spec);
        base.log_rotation = Some(diagnosis::log_rotation(self.config, spec));
        if let Some(built) = built {
            base.labels
                .insert(odac_host::names::GIT_COMMIT.into(), built.commit.clone());
        }
        // after the spec's mounts, which are matched to its volumes by position
        base.binds
            .extend(update_lock::bind(&self.config.state_dir, &spec.name));
        base
    }

    /// Create and start the container per the plan: with its GPU (falling back to the CPU
    /// when optional), or plain. `Err` with the status when the policy denies the GPU spec.
    async fn start(
        &mut self,
        spec: &AppSpec,
        identity: &Identity,
        plan: &Option<Plan>,
        mut base: ContainerSpec,
    ) -> Result<StartOutcome, Box<AppStatus>> {
        if let Some(Plan::Attach(att)) = plan {
            let asker = Asker {
                app: &spec.name,
                restart_token: &identity.restart_token,
            };
            return self.start_with_gpu(spec, att, base, asker).await;
        }
        if let Some(fb) = preflight(plan) {
            labels::set_fallback(&mut base.labels, &fb);
        }
        Ok(match start_plain(self.engine, &base).await {
            Ok(id) => StartOutcome::Started { id, fallback: None },
            Err((id, error)) => StartOutcome::Failed {
                id,
                error,
                fallback: None,
            },
        })
    }

    /// Start with the devices of `att` (or on the CPU right away when the engine refused
    /// them before); a refusal is learned.
    async fn start_with_gpu(
        &mut self,
        spec: &AppSpec,
        att: &Attachment,
        base: ContainerSpec,
        asker: Asker<'_>,
    ) -> Result<StartOutcome, Box<AppStatus>> {
        let mut gpu_spec = base.clone();
        att.apply(&mut gpu_spec);
        labels::set_gpus(&mut gpu_spec.labels, att.vendor, &att.gpus);
        let node_paths: &[String] = if att.mechanism == Mechanism::DeviceNodes {
            &att.devices
        } else {
            &[]
        };
        // the agent's own lock directory is no bind of the spec's
        let mut checked = gpu_spec.clone();
        checked
            .binds
            .retain(|b| !update_lock::is_lock_bind(b, &self.config.state_dir, &spec.name));
        if let Err(v) = policy::check_container(&checked, node_paths, &self.config.policy) {
            let error = format!("{}: {v}", Reason::PolicyDenied);
            return Err(Box::new(self.failed(spec, error, None)));
        }
        let optional = spec.gpu.as_ref().is_some_and(|g| g.is_optional());
        let cpu_spec = optional.then_some(base);
        let memory = self.config.refusal_memory();
        let inventory = inventory_hash(&self.assessment.inventory());
        if let Some(learned) = self
            .refusals
            .recall(att, &inventory, self.now, memory, asker)
        {
            tracing::info!(app = %spec.name, devices = ?att.devices, "the engine refused these devices before: not asking again");
            return Ok(run_on_cpu(self.engine, learned.error(), learned.fallback, cpu_spec).await);
        }
        tracing::info!(app = %spec.name, vendor = %att.vendor, mechanism = %att.mechanism, devices = ?att.devices, "creating with gpu");
        let outcome = start_with_gpu_fallback(self.engine, &gpu_spec, cpu_spec).await;
        if let StartOutcome::Started {
            fallback: Some(fb), ..
        }
        | StartOutcome::Failed {
            fallback: Some(fb), ..
        } = &outcome
            && !memory.is_zero()
        {
            self.refusals.learn(att, inventory, self.now, fb, asker);
        }
        Ok(outcome)
    }

    /// What a start came to: a running container (watched as an existing one), a held
    /// refusal of a required GPU, or a failure retried on the backoff. `plans` are the
    /// pre-flight plan (what a hold compares) and the plan the start was made with.
    async fn settle(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        identity: &Identity,
        (preflight_plan, plan): (Option<Plan>, Option<Plan>),
        outcome: StartOutcome,
    ) -> Result<AppStatus, EngineError> {
        let (id, error, fallback) = match outcome {
            StartOutcome::Started { id, fallback } => {
                return self.started(rec, spec, identity, &plan, id, fallback).await;
            }
            StartOutcome::Failed { error, .. } if error.is_unavailable() => return Err(error),
            StartOutcome::Failed {
                id,
                error,
                fallback,
            } => (id, error, fallback),
        };
        let optional = spec.gpu.as_ref().is_some_and(|g| g.is_optional());
        let refused_required = fallback.is_some() && !optional;
        let fallback = fallback.or(preflight(&plan));
        if refused_required {
            let status = self.failed(spec, clip(error.engine_message()), fallback);
            self.events.error(
                &spec.name,
                clip(format!(
                    "the engine refused the required gpu: {}",
                    error.engine_message()
                )),
            );
            return Ok(hold(rec, identity, preflight_plan, status));
        }
        rec.container_id = id.clone();
        let mut status =
            self.retry_later(rec, spec, identity, clip(error.engine_message()), fallback);
        status.container_id = id;
        Ok(status)
    }

    /// A container started: its GPUs are taken, a CPU fallback is an event, and it is
    /// watched from now on.
    async fn started(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        identity: &Identity,
        plan: &Option<Plan>,
        id: String,
        fallback: Option<Fallback>,
    ) -> Result<AppStatus, EngineError> {
        if let (Some(Plan::Attach(att)), None) = (plan, &fallback) {
            self.allocations.add(&att.gpus);
        }
        if let Some(fb) = &fallback {
            self.events.warn(
                &spec.name,
                format!(
                    "the engine refused the gpu ({}): running on the cpu; {}",
                    fb.reason,
                    fb.detail.as_deref().unwrap_or_default()
                ),
            );
        } else if let Some(fb) = &preflight(plan) {
            self.events.warn(
                &spec.name,
                format!(
                    "no gpu for this app on this host ({}): running on the cpu; {}",
                    fb.reason,
                    fb.detail.as_deref().unwrap_or_default()
                ),
            );
        }
        rec.container_id = Some(id.clone());
        rec.guard = CrashGuard::started(self.now);
        rec.last_error = None;
        rec.last_exit = None;
        let listed = ContainerSummary {
            id,
            ..ContainerSummary::default()
        };
        let status = self
            .existing(rec, spec, identity, &listed, &identity.gpu_hash)
            .await?;
        Ok(status.unwrap_or_else(|| self.base_status(spec)))
    }
}

/// Hold `status` until the spec or the plan changes; the status.
fn hold(
    rec: &mut AppMemory,
    identity: &Identity,
    plan: Option<Plan>,
    status: AppStatus,
) -> AppStatus {
    rec.hold = Some(Hold {
        identity: identity.clone(),
        plan,
        status: status.clone(),
    });
    status
}

/// A pre-flight fallback for `reason`.
fn preflight_fallback(reason: Reason, detail: &str) -> Fallback {
    Fallback {
        tier: FallbackTier::Preflight,
        reason,
        detail: Some(detail.to_owned()),
    }
}

/// The fallback of a plan that runs the app on the CPU at pre-flight.
fn preflight(plan: &Option<Plan>) -> Option<Fallback> {
    match plan {
        Some(Plan::Cpu { reason, detail }) => Some(preflight_fallback(*reason, detail)),
        _ => None,
    }
}
