//! Creating an app's container: the held refusals (policy, pre-flight, a required GPU the
//! engine refused) that are not retried until the spec or the plan changes, the retry of
//! other failures on the crash-loop backoff, named volumes ([`volumes`](super::volumes)), the GPU plan applied to the
//! container spec, and [`start_with_gpu_fallback`] (or, for devices the engine refused
//! before, the [`refusals`](super::refusals) learned). Every GPU fallback decision is also an
//! event (once per decision: held refusals are not repeated).

use odac_protocol::{AppSpec, AppStatus, Fallback, FallbackTier, Mechanism, Reason};

use super::binds::HostBind;
use super::build::Built;
use super::clip::clip;
use super::container::{self, container_spec};
use super::crashloop::CrashGuard;
use super::diagnosis;
use super::fallback::{StartOutcome, run_on_cpu, start_plain, start_with_gpu_fallback};
use super::image::ImageReady;
use super::labels::{self, Identity};
use super::pass::{AppRecord, Hold, Pass};
use super::policy;
use crate::engine::{ContainerSummary, EngineError};
use crate::gpu::{Plan, resolve_with};
use crate::sysinfo::inventory_hash;

impl Pass<'_> {
    pub(super) async fn create(
        &mut self,
        rec: &mut AppRecord,
        spec: &AppSpec,
        identity: &Identity,
        built: Option<&Built>,
        binds: &[HostBind],
    ) -> Result<AppStatus, EngineError> {
        let now = self.now;
        let plan = spec
            .gpu
            .as_ref()
            .map(|g| resolve_with(g, &self.assessment, &self.allocations, &self.config.gpu));
        if let Some(hold) = &rec.hold
            && hold.identity == *identity
            && hold.plan == plan
        {
            let mut status = hold.status.clone();
            status.generation = self.generation;
            return Ok(status);
        }
        rec.hold = None;
        if let Some((retry_identity, status)) = &rec.retry {
            if retry_identity == identity && !rec.guard.due(now) && rec.guard.waiting() {
                let mut status = status.clone();
                status.generation = self.generation;
                return Ok(status);
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
            rec.hold = Some(Hold {
                identity: identity.clone(),
                plan,
                status: status.clone(),
            });
            return Ok(status);
        };
        if built.is_none()
            && let ImageReady::Wait(status) = self.ensure_image(rec, spec, identity, &image).await?
        {
            return Ok(*status);
        }
        let mut base = container_spec(
            &self.config.instance,
            &self.config.owner,
            spec,
            &image,
            &self.config.extra_labels,
        );
        // the engine mounts the paths the policy resolved and checked
        for bind in binds {
            if let Some(b) = base.binds.get_mut(bind.index) {
                b.source = bind.source.display().to_string();
            }
        }
        base.security_opt = self.config.security_opt();
        base.pids_limit = self.config.pids_limit();
        base.healthcheck = diagnosis::health_probe(spec);
        base.log_rotation = Some(diagnosis::log_rotation(self.config, spec));
        if let Some(built) = built {
            base.labels
                .insert(labels::GIT_COMMIT.into(), built.commit.clone());
        }

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
            let status = self.failed(
                spec,
                error,
                Some(Fallback {
                    tier: FallbackTier::Preflight,
                    reason: *reason,
                    detail: Some(detail.clone()),
                }),
            );
            self.events.error(
                &spec.name,
                format!("required gpu refused at pre-flight ({reason}): {detail}; nothing created"),
            );
            rec.hold = Some(Hold {
                identity: identity.clone(),
                plan,
                status: status.clone(),
            });
            return Ok(status);
        }

        match self.ensure_volumes(spec).await {
            Ok(names) => container::use_volumes(&mut base, spec, &names),
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) => {
                return Ok(self.retry_later(rec, spec, identity, clip(e.engine_message()), None));
            }
        }

        let preflight = match &plan {
            Some(Plan::Cpu { reason, detail }) => Some(Fallback {
                tier: FallbackTier::Preflight,
                reason: *reason,
                detail: Some(detail.clone()),
            }),
            _ => None,
        };
        let optional = spec.gpu.as_ref().is_some_and(|g| g.is_optional());
        let outcome = match &plan {
            Some(Plan::Attach(att)) => {
                let mut gpu_spec = base.clone();
                att.apply(&mut gpu_spec);
                labels::set_gpus(&mut gpu_spec.labels, att.vendor, &att.gpus);
                let node_paths: &[String] = if att.mechanism == Mechanism::DeviceNodes {
                    &att.devices
                } else {
                    &[]
                };
                if let Err(v) = policy::check_container(&gpu_spec, node_paths, &self.config.policy)
                {
                    return Ok(self.failed(spec, format!("{}: {v}", Reason::PolicyDenied), None));
                }
                let cpu_spec = optional.then_some(base);
                let memory = self.config.refusal_memory();
                let inventory = inventory_hash(&self.assessment.inventory());
                if let Some(learned) = self.refusals.recall(att, &inventory, now, memory) {
                    tracing::info!(app = %spec.name, devices = ?att.devices, "the engine refused these devices before: not asking again");
                    run_on_cpu(self.engine, learned.error(), learned.fallback, cpu_spec).await
                } else {
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
                        self.refusals.learn(att, inventory, now, fb);
                    }
                    outcome
                }
            }
            _ => {
                if let Some(fb) = &preflight {
                    labels::set_fallback(&mut base.labels, fb);
                }
                match start_plain(self.engine, &base).await {
                    Ok(id) => StartOutcome::Started { id, fallback: None },
                    Err((id, error)) => StartOutcome::Failed {
                        id,
                        error,
                        fallback: None,
                    },
                }
            }
        };
        match outcome {
            StartOutcome::Started { id, fallback } => {
                if let (Some(Plan::Attach(att)), None) = (&plan, &fallback) {
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
                } else if let Some(fb) = &preflight {
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
                rec.guard = CrashGuard::started(now);
                rec.last_error = None;
                rec.last_exit = None;
                let listed = ContainerSummary {
                    id: id.clone(),
                    ..ContainerSummary::default()
                };
                let status = self
                    .existing(rec, spec, identity, &listed, &identity.gpu_hash)
                    .await?;
                Ok(status.unwrap_or_else(|| self.base_status(spec)))
            }
            StartOutcome::Failed { error, .. } if error.is_unavailable() => Err(error),
            StartOutcome::Failed {
                id,
                error,
                fallback,
            } => {
                let refused_required = fallback.is_some() && !optional;
                let fallback = fallback.or(preflight);
                if refused_required {
                    let status = self.failed(spec, clip(error.engine_message()), fallback);
                    self.events.error(
                        &spec.name,
                        clip(format!(
                            "the engine refused the required gpu: {}",
                            error.engine_message()
                        )),
                    );
                    rec.hold = Some(Hold {
                        identity: identity.clone(),
                        plan,
                        status: status.clone(),
                    });
                    return Ok(status);
                }
                rec.container_id = id.clone();
                let mut status =
                    self.retry_later(rec, spec, identity, clip(error.engine_message()), fallback);
                status.container_id = id;
                Ok(status)
            }
        }
    }
}
