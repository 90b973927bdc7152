//! One reconcile pass: make the engine's containers match the desired state.
//!
//! - The agent's containers are those labelled `odac.instance=<instance>`; nothing else is
//!   touched. Containers of apps no longer desired are stopped and removed (their named
//!   volumes stay).
//! - An app whose container carries the spec hash and restart token of its spec is left
//!   alone; if only the GPU intent changed, `restart_required` is set and the container keeps
//!   running until a new restart token arrives (devices are bound at creation). Any other
//!   change recreates the container.
//! - A missing container is created: policy check, pre-flight [`resolve_with`], then
//!   [`start_with_gpu_fallback`]. A refusal that cannot change by retrying (policy, pre-flight
//!   refusal, required intent refused by the engine) is held, not retried, until the spec or
//!   the plan changes, so nothing churns. Other failures are retried with the crash-loop
//!   backoff.
//! - A container that exited is restarted after the crash-loop backoff.
//! - GPU allocations are rebuilt from the containers' labels at the start of every pass.
//!
//! Engine calls that find the engine unreachable end the pass with
//! [`EngineError::Unavailable`]; the manager keeps the last statuses and retries.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use odac_protocol::{
    AppSpec, AppState, AppStatus, DesiredState, Fallback, FallbackTier, GpuStatus, Mechanism,
    Reason,
};
use tokio::time::Instant;

use super::container::{self, container_spec};
use super::crashloop::CrashGuard;
use super::fallback::{StartOutcome, is_device_refusal, start_plain, start_with_gpu_fallback};
use super::labels::{self, Identity};
use super::policy;
use super::settings::AppManagerConfig;
use crate::engine::{ContainerEngine, ContainerState, ContainerSummary, EngineError};
use crate::gpu::{Allocations, Plan, attached_from, resolve_with};
use crate::sysinfo::{Assessment, HostScan};

/// Where the host facts come from: a root directory to scan (`/` in production, a fixture
/// tree in tests), or a function returning a scan (tests that need device paths of their own).
#[derive(Clone)]
pub enum HostSource {
    /// Scan the tree under this root.
    Root(std::path::PathBuf),
    /// Call this for every pass.
    Fixed(Arc<dyn Fn() -> HostScan + Send + Sync>),
}

impl std::fmt::Debug for HostSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Root(root) => f.debug_tuple("Root").field(root).finish(),
            Self::Fixed(_) => f.write_str("Fixed(..)"),
        }
    }
}

impl HostSource {
    fn scan(&self) -> HostScan {
        match self {
            Self::Root(root) => crate::sysinfo::scan(root),
            Self::Fixed(f) => f(),
        }
    }
}

/// A failure held until the spec or the plan changes.
#[derive(Debug, Clone)]
struct Hold {
    identity: Identity,
    plan: Option<Plan>,
    status: AppStatus,
}

/// What the manager remembers about one app between passes.
#[derive(Debug, Default)]
struct AppRecord {
    guard: CrashGuard,
    container_id: Option<String>,
    last_error: Option<String>,
    hold: Option<Hold>,
    /// A failed creation waiting for its retry (`guard.next_start`).
    retry: Option<(Identity, AppStatus)>,
}

/// The reconcile state kept between passes.
#[derive(Debug, Default)]
pub(crate) struct Reconciler {
    apps: BTreeMap<String, AppRecord>,
}

/// The inputs of a pass.
pub(crate) struct PassInput<'a> {
    pub config: &'a AppManagerConfig,
    pub engine: &'a dyn ContainerEngine,
    pub host: &'a HostSource,
    pub desired: Option<&'a DesiredState>,
}

struct Pass<'a> {
    config: &'a AppManagerConfig,
    engine: &'a dyn ContainerEngine,
    assessment: Assessment,
    allocations: Allocations,
    generation: u64,
    now: Instant,
}

impl Reconciler {
    /// Run one pass; the statuses of the desired apps, sorted by name.
    pub(crate) async fn pass(
        &mut self,
        input: &PassInput<'_>,
    ) -> Result<Vec<AppStatus>, EngineError> {
        let caps = input.engine.capabilities().await;
        if !caps.reachable {
            return Err(EngineError::Unavailable(
                caps.error.unwrap_or_else(|| "engine did not answer".into()),
            ));
        }
        let filter = format!("{}={}", labels::INSTANCE, input.config.instance);
        let containers = input.engine.list_by_label(&filter).await?;
        let mut apps: Vec<&AppSpec> = input
            .desired
            .map(|d| d.apps.iter().collect())
            .unwrap_or_default();
        apps.sort_by(|a, b| a.name.cmp(&b.name));
        let mut pass = Pass {
            config: input.config,
            engine: input.engine,
            assessment: Assessment::new(input.host.scan(), caps),
            allocations: Allocations::new(),
            generation: input.desired.map_or(0, |d| d.generation),
            now: Instant::now(),
        };

        let mut by_app: BTreeMap<String, Vec<ContainerSummary>> = BTreeMap::new();
        for c in containers {
            if let Some(app) = c.labels.get(labels::APP).cloned() {
                by_app.entry(app).or_default().push(c);
            }
        }
        for (app, cs) in &by_app {
            if !apps.iter().any(|a| &a.name == app) {
                for c in cs {
                    tracing::info!(app = %app, container = %c.id, "removing the container of an app no longer desired");
                    pass.remove(&c.id).await?;
                }
            }
        }
        by_app.retain(|app, _| apps.iter().any(|a| &a.name == app));
        self.apps
            .retain(|name, _| apps.iter().any(|a| &a.name == name));
        for c in by_app.values().flatten() {
            pass.allocations.add(&labels::gpus(&c.labels));
        }

        let mut out = Vec::with_capacity(apps.len());
        for spec in apps {
            let existing = by_app.remove(&spec.name).unwrap_or_default();
            let rec = self.apps.entry(spec.name.clone()).or_default();
            out.push(pass.app(rec, spec, existing).await?);
        }
        Ok(out)
    }

    /// The earliest scheduled restart or retry.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.apps.values().filter_map(|r| r.guard.next_start).min()
    }
}

impl Pass<'_> {
    fn base_status(&self, spec: &AppSpec) -> AppStatus {
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

    fn failed(&self, spec: &AppSpec, error: String, fallback: Option<Fallback>) -> AppStatus {
        let mut status = self.base_status(spec);
        status.state = AppState::Failed;
        status.last_error = Some(error);
        status.gpu.fallback = fallback;
        status
    }

    /// Stop (bounded) and remove a container of ours; release its GPUs.
    async fn remove(&mut self, id: &str) -> Result<(), EngineError> {
        let timeout = Duration::from_secs(self.config.stop_timeout_secs);
        let gpus = match self.engine.inspect(id).await {
            Ok(d) => labels::gpus(&d.labels),
            Err(e) if e.is_unavailable() => return Err(e),
            Err(_) => Vec::new(),
        };
        match self.engine.stop(id, timeout).await {
            Err(e) if e.is_unavailable() => return Err(e),
            _ => {}
        }
        match self.engine.remove(id, true).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                if e.is_unavailable() {
                    return Err(e);
                }
                tracing::warn!(container = %id, error = %e, "could not remove container");
            }
        }
        self.allocations.remove(&gpus);
        Ok(())
    }

    async fn app(
        &mut self,
        rec: &mut AppRecord,
        spec: &AppSpec,
        mut existing: Vec<ContainerSummary>,
    ) -> Result<AppStatus, EngineError> {
        let identity = Identity::of(spec);
        if let Err(v) = policy::check(spec, &self.config.policy) {
            for c in &existing {
                self.remove(&c.id).await?;
            }
            *rec = AppRecord::default();
            let detail = v.to_string();
            return Ok(self.failed(
                spec,
                format!("{}: {detail}", Reason::PolicyDenied),
                Some(Fallback {
                    tier: FallbackTier::Preflight,
                    reason: Reason::PolicyDenied,
                    detail: Some(detail),
                }),
            ));
        }
        // Keep one container: an up-to-date one, running by preference.
        existing.sort_by_key(|c| {
            let theirs = Identity::from_labels(&c.labels);
            (
                theirs.spec_hash != identity.spec_hash
                    || theirs.restart_token != identity.restart_token,
                c.state != ContainerState::Running,
            )
        });
        let mut existing = existing.into_iter();
        let keep = existing.next();
        for extra in existing {
            self.remove(&extra.id).await?;
        }
        if let Some(c) = keep {
            let theirs = Identity::from_labels(&c.labels);
            if theirs.spec_hash == identity.spec_hash
                && theirs.restart_token == identity.restart_token
            {
                if let Some(status) = self
                    .existing(rec, spec, &identity, &c.id, &theirs.gpu_hash)
                    .await?
                {
                    return Ok(status);
                }
            } else {
                tracing::info!(app = %spec.name, container = %c.id, "spec or restart token changed: recreating");
                self.remove(&c.id).await?;
            }
            rec.container_id = None;
            rec.guard = CrashGuard::default();
        }
        self.create(rec, spec, &identity).await
    }

    /// Watch an up-to-date container: state, attached devices, crash-loop restarts. `None`
    /// when it is gone (or was removed) and must be created again.
    async fn existing(
        &mut self,
        rec: &mut AppRecord,
        spec: &AppSpec,
        identity: &Identity,
        id: &str,
        their_gpu_hash: &str,
    ) -> Result<Option<AppStatus>, EngineError> {
        let details = match self.engine.inspect(id).await {
            Ok(d) => d,
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                let mut status = self.base_status(spec);
                status.container_id = Some(id.to_owned());
                status.last_error = Some(e.engine_message());
                return Ok(Some(status));
            }
        };
        if rec.container_id.as_deref() != Some(details.id.as_str()) {
            rec.guard = CrashGuard::default();
            rec.container_id = Some(details.id.clone());
            rec.last_error = None;
        }
        rec.hold = None;
        rec.retry = None;
        let mut status = self.base_status(spec);
        status.container_id = Some(details.id.clone());
        status.gpu.attached = attached_from(&details, labels::vendor(&details.labels));
        status.gpu.fallback = labels::fallback(&details.labels);
        status.restart_required =
            their_gpu_hash != identity.gpu_hash || self.gpu_became_available(spec, &status);
        let now = self.now;
        let cfg = &self.config.crash_loop;
        let mut running = details.running;
        if running {
            rec.guard.next_start = None;
            rec.guard.on_running(now, cfg);
            rec.last_error = None;
        } else {
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
            if rec.guard.due(now) {
                match self.engine.start(&details.id).await {
                    Ok(()) => {
                        rec.guard.on_restarted(now);
                        rec.last_error = None;
                        running = true;
                    }
                    Err(e) if e.is_unavailable() => return Err(e),
                    Err(e) if is_device_refusal(&e) => {
                        tracing::warn!(app = %spec.name, error = %e, "the engine refused the device on restart: recreating");
                        self.remove(&details.id).await?;
                        return Ok(None);
                    }
                    Err(e) => {
                        rec.guard.on_exit(now, None, cfg);
                        rec.last_error = Some(e.engine_message());
                    }
                }
            }
        }
        status.state = if running {
            AppState::Running
        } else if rec.last_error.is_some() && details.status == ContainerState::Created {
            AppState::Failed
        } else if rec.guard.in_crash_loop() {
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
        Ok(Some(status))
    }

    /// An app that fell back to the CPU at pre-flight could now get its GPU.
    fn gpu_became_available(&self, spec: &AppSpec, status: &AppStatus) -> bool {
        let (Some(intent), Some(fb)) = (&spec.gpu, &status.gpu.fallback) else {
            return false;
        };
        fb.tier == FallbackTier::Preflight
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

    async fn create(
        &mut self,
        rec: &mut AppRecord,
        spec: &AppSpec,
        identity: &Identity,
    ) -> Result<AppStatus, EngineError> {
        let now = self.now;
        let plan = spec
            .gpu
            .as_ref()
            .map(|g| resolve_with(g, &self.assessment, &self.allocations, &self.config.gpu));
        if let Some(hold) = &rec.hold {
            if hold.identity == *identity && hold.plan == plan {
                let mut status = hold.status.clone();
                status.generation = self.generation;
                return Ok(status);
            }
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
        rec.retry = None;

        let Some(image) = spec.image.clone() else {
            let status = self.failed(
                spec,
                "the app has no image: git sources and catalog apps must be resolved to an image before they reach this agent".into(),
                None,
            );
            rec.hold = Some(Hold {
                identity: identity.clone(),
                plan,
                status: status.clone(),
            });
            return Ok(status);
        };
        let mut base = container_spec(
            &self.config.instance,
            spec,
            &image,
            &self.config.extra_labels,
        );

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
            tracing::warn!(app = %spec.name, reason = %reason, "required gpu refused at pre-flight: nothing created");
            rec.hold = Some(Hold {
                identity: identity.clone(),
                plan,
                status: status.clone(),
            });
            return Ok(status);
        }

        let mut volume_labels = self.config.extra_labels.clone();
        volume_labels.insert(labels::INSTANCE.into(), self.config.instance.clone());
        volume_labels.insert(labels::APP.into(), spec.name.clone());
        for volume in container::volumes(&self.config.instance, spec) {
            if let Err(e) = self.engine.ensure_volume(&volume, &volume_labels).await {
                if e.is_unavailable() {
                    return Err(e);
                }
                return Ok(self.retry_later(rec, spec, identity, e.engine_message(), None));
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
                tracing::info!(app = %spec.name, vendor = %att.vendor, mechanism = %att.mechanism, devices = ?att.devices, "creating with gpu");
                start_with_gpu_fallback(self.engine, &gpu_spec, optional.then_some(base)).await
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
                    tracing::warn!(app = %spec.name, detail = ?fb.detail, "the engine refused the gpu: running on the cpu");
                }
                rec.container_id = Some(id.clone());
                rec.guard = CrashGuard::started(now);
                rec.last_error = None;
                let status = self
                    .existing(rec, spec, identity, &id, &identity.gpu_hash)
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
                    let status = self.failed(spec, error.engine_message(), fallback);
                    tracing::warn!(app = %spec.name, error = %error, "the engine refused the required gpu");
                    rec.hold = Some(Hold {
                        identity: identity.clone(),
                        plan,
                        status: status.clone(),
                    });
                    return Ok(status);
                }
                rec.container_id = id.clone();
                let mut status =
                    self.retry_later(rec, spec, identity, error.engine_message(), fallback);
                status.container_id = id;
                Ok(status)
            }
        }
    }

    /// A creation that failed for a reason that may pass: fail now, retry after the backoff.
    fn retry_later(
        &self,
        rec: &mut AppRecord,
        spec: &AppSpec,
        identity: &Identity,
        error: String,
        fallback: Option<Fallback>,
    ) -> AppStatus {
        let delay = rec.guard.on_exit(self.now, None, &self.config.crash_loop);
        tracing::warn!(app = %spec.name, error = %error, retry_ms = delay.as_millis() as u64, "could not start the app");
        rec.last_error = Some(error.clone());
        let status = self.failed(spec, error, fallback);
        rec.retry = Some((identity.clone(), status.clone()));
        status
    }
}
