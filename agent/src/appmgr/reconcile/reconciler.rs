//! One reconcile pass: make the engine's containers match the desired state.
//!
//! - The agent's containers are those labelled `odac.instance=<instance>` and owned by it
//!   ([`ownership`](crate::appmgr::policy::ownership): its `odac.owner`, or no owner and an app its
//!   desired state names); nothing else is touched, and nothing at all before a desired state is
//!   known. Other containers of the instance are reported as conflicts. Containers of apps no
//!   longer desired are stopped and removed (their named volumes stay), up to eight at a time
//!   and alongside the creations of the pass.
//! - An app whose container carries the spec hash and restart token of its spec is left
//!   alone; if only the GPU intent or the host-access fields (`shm_size`, `caps`, `sysctls`,
//!   `devices`) changed, `restart_required` is set and the container keeps running until a
//!   new restart token arrives (devices and host access are bound at creation). Any other
//!   change recreates the container.
//! - A missing container is created: policy check, pre-flight [`resolve_with`](odac_host::gpu::resolve_with), then
//!   [`start_with_gpu_fallback`](crate::appmgr::gpu::fallback::start_with_gpu_fallback). A refusal
//!   that cannot change by retrying (policy, pre-flight refusal, required intent refused by the
//!   engine) is held, not retried, until the spec or the plan changes, so nothing churns. Other
//!   failures are retried with the crash-loop backoff.
//! - A container that exited is restarted after the crash-loop backoff, unless its restart
//!   policy makes the exit final ([`diagnosis`](crate::appmgr::crash::diagnosis)); the exit is read
//!   once, with the tail of its output, and the crash counters are kept in the state directory
//!   ([`crashbook`](super::crashbook)).
//! - An app with a git source gets its image from a background build first
//!   ([`source`](super::source)); the container of the previous version keeps running until
//!   the new image is ready; so does that of a registry app while its new image is pulled.
//!   The images of apps no longer desired are removed with them; after each pass the images
//!   the agent pulled or built and no app uses any more are cleaned up
//!   ([`image_gc`](crate::appmgr::gc::image_gc)).
//! - GPU allocations are rebuilt from the containers' labels at the start of every pass.
//! - A quiet pass (a plain poll tick) costs one engine call: it reuses the engine's
//!   capabilities and the host scan of an earlier pass (or of the agent's inventory loop,
//!   [`Facts::offer`]) for up to [`FACTS_TTL`](crate::appmgr::gpu::facts::FACTS_TTL), and the
//!   inspection of a container the listing still shows running (not of one with a health check,
//!   whose verdict changes while it runs). Any other pass (a new desired state, a scheduled
//!   restart, an outage retry) reads everything afresh.
//!
//! Engine calls that find the engine unreachable end the pass with
//! [`EngineError::Unavailable`]; the manager keeps the last statuses and retries. An engine
//! error about one app's request (a 4xx, or a 5xx of an engine that still answers its ping)
//! is that app's own failure, retried on its backoff: the other apps go on in the same pass.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, Fallback, FallbackTier, Reason};
use tokio::time::Instant;

use super::crashbook;
use super::image::ImageReady;
use super::source::{GitImage, with_build};
use crate::appmgr::crash::crashloop::CrashGuard;
use crate::appmgr::gc::image_gc::{ImageGc, SweepInput};
use crate::appmgr::gpu::facts::Facts;
use crate::appmgr::gpu::host::HostSource;
use crate::appmgr::gpu::refusals::Refusals;
use crate::appmgr::images::build::Builds;
use crate::appmgr::images::pull::Pulls;
use crate::appmgr::labels::{self, Identity};
use crate::appmgr::pass::{AppMemory, Pass, stop_and_remove};
use crate::appmgr::policy::binds::desired_uses;
use crate::appmgr::policy::ownership::{self, Ownership};
use crate::appmgr::rollout::rollout_book::Rollouts;
use crate::appmgr::settings::AppManagerConfig;
use crate::appmgr::state::events::EventTx;
use odac_host::engine::{
    ContainerEngine, ContainerState, ContainerSummary, EngineCapabilities, EngineError,
};
use odac_host::gpu::Allocations;
use odac_host::inventory::Assessment;

/// The reconcile state kept between passes.
#[derive(Debug, Default)]
pub(crate) struct Reconciler {
    apps: BTreeMap<String, AppMemory>,
    ownership: Ownership,
    /// The crash bookkeeping read from the state directory at the first pass, until each
    /// app's record takes its part; and what was saved last.
    crashes: Option<(crashbook::Book, crashbook::Book)>,
    refusals: Refusals,
    /// The way back of every app, and the rollouts under way.
    rollouts: Rollouts,
    /// The clean-up of the images the agent pulled or built.
    images: ImageGc,
}

/// The inputs of a pass.
pub(crate) struct PassInput<'a> {
    pub config: &'a AppManagerConfig,
    pub engine: &'a dyn ContainerEngine,
    pub host: &'a HostSource,
    pub desired: Option<&'a DesiredState>,
    pub builds: &'a Builds,
    pub pulls: &'a Pulls,
    pub events: &'a EventTx,
    pub facts: &'a Facts,
    /// A quiet pass: facts younger than [`FACTS_TTL`](crate::appmgr::gpu::facts::FACTS_TTL) and
    /// inspections of containers still running may be reused.
    pub quiet: bool,
    /// Apps an engine event concerned: a quiet pass reads them afresh.
    pub fresh: std::collections::BTreeSet<String>,
    /// The engine's events are streaming: a health verdict change would have been an event,
    /// so a quiet pass need not inspect a running container just to read its health.
    pub events_live: bool,
}

impl Reconciler {
    /// Run one pass; the statuses of the desired apps, sorted by name.
    pub(crate) async fn pass(
        &mut self,
        input: &PassInput<'_>,
    ) -> Result<Vec<AppStatus>, EngineError> {
        let dir = &input.config.state_dir;
        let (restored, _) = self
            .crashes
            .get_or_insert_with(|| (crashbook::load(dir), crashbook::Book::new()));
        for (name, saved) in std::mem::take(restored) {
            self.apps
                .entry(name)
                .or_insert_with(|| crashbook::restore(saved));
        }
        let started = Instant::now();
        let mut result = self.pass_inner(input).await;
        if let Ok(statuses) = &result {
            let sweep = SweepInput {
                config: input.config,
                engine: input.engine,
                events: input.events,
                statuses,
                rollback: self.rollouts.rollback_images(),
                pulled: input.pulls.take_pulled(),
            };
            if let Err(e) = self.images.sweep(sweep).await {
                result = Err(e);
            }
        }
        crate::metrics::events::apply_finished(started.elapsed());
        if result.is_err() {
            input.facts.forget();
        }
        self.save_crashes(dir);
        self.rollouts.save(dir);
        result
    }

    /// Persist the crash bookkeeping when it changed.
    fn save_crashes(&mut self, dir: &std::path::Path) {
        let book: crashbook::Book = self
            .apps
            .iter_mut()
            .filter_map(|(name, rec)| crashbook::snapshot(rec).map(|s| (name.clone(), s)))
            .collect();
        let Some((_, saved)) = self.crashes.as_mut() else {
            return;
        };
        if *saved == book {
            return;
        }
        match crashbook::save(dir, &book) {
            Ok(()) => *saved = book,
            Err(e) => tracing::warn!(error = %e, "could not persist the crash bookkeeping"),
        }
    }

    /// The engine's capabilities and the host's verdicts: those of an earlier pass when
    /// `quiet` and young enough, else read now.
    async fn assessment(&self, input: &PassInput<'_>) -> Result<Assessment, EngineError> {
        if input.quiet
            && let Some(a) = input.facts.fresh(Instant::now())
        {
            return Ok(input.facts.with_free_vram(a, Instant::now()));
        }
        let caps: EngineCapabilities = input.engine.capabilities().await;
        if !caps.reachable {
            return Err(EngineError::Unavailable(
                caps.error.unwrap_or_else(|| "engine did not answer".into()),
            ));
        }
        let mut scan = input.host.scan();
        input.facts.keep_vram(&mut scan);
        let assessment = Assessment::new(scan, caps);
        input.facts.offer(assessment.clone());
        Ok(input.facts.with_free_vram(assessment, Instant::now()))
    }

    async fn pass_inner(&mut self, input: &PassInput<'_>) -> Result<Vec<AppStatus>, EngineError> {
        let assessment = self.assessment(input).await?;
        for app in &input.fresh {
            if let Some(rec) = self.apps.get_mut(app) {
                rec.seen = None;
            }
        }
        // Without any desired state (first start, or a corrupt state file moved aside) the
        // containers are left alone: removing every app is not a safe default.
        if input.desired.is_none() {
            return Ok(Vec::new());
        }
        let filter = format!("{}={}", odac_host::names::INSTANCE, input.config.instance);
        let containers = input.engine.list_by_label(&filter).await?;
        let mut apps: Vec<&AppSpec> = input
            .desired
            .map(|d| d.apps.iter().collect())
            .unwrap_or_default();
        apps.sort_by(|a, b| a.name.cmp(&b.name));
        let mut pass = new_pass(input, assessment, &apps, &mut self.refusals);

        let named: std::collections::BTreeSet<&str> =
            apps.iter().map(|a| a.name.as_str()).collect();
        let split = self
            .ownership
            .split(containers, &input.config.owner, &named);
        for conflict in self.ownership.unreported(&split.conflicts) {
            input
                .events
                .warn(&conflict.app, conflict.message(&input.config.instance));
        }
        pass.allocations.add(&split.foreign_gpus);
        let mut by_app: BTreeMap<String, Vec<ContainerSummary>> = ownership::by_app(split.ours);
        // Apps no longer desired: their containers are stopped and removed in parallel
        // (bounded), alongside the creations below, so a stubborn container never holds up
        // another app by more than its own stop timeout.
        let gone: Vec<(String, String)> = by_app
            .iter()
            .filter(|(app, _)| !apps.iter().any(|a| &a.name == *app))
            .flat_map(|(app, cs)| cs.iter().map(|c| (app.clone(), c.id.clone())))
            .collect();
        let removals = remove_all(input, gone.clone());
        let names: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
        input.builds.retain(&names);
        input.pulls.retain(&names);
        by_app.retain(|app, _| apps.iter().any(|a| &a.name == app));
        self.apps
            .retain(|name, _| apps.iter().any(|a| &a.name == name));
        self.rollouts.retain(&names);
        for c in by_app.values().flatten() {
            pass.allocations.add(&labels::gpus(&c.labels));
        }

        let book = self.rollouts.book(&input.config.state_dir);
        let mut wakes = Vec::with_capacity(apps.len());
        let creations = async {
            let mut out = Vec::with_capacity(apps.len());
            for spec in apps {
                let existing = by_app.remove(&spec.name).unwrap_or_default();
                let rec = self.apps.entry(spec.name.clone()).or_default();
                let record = book.entry(spec.name.clone()).or_default();
                let (status, wake) = pass.rolled_out(rec, record, spec, existing).await?;
                wakes.push((spec.name.clone(), wake));
                out.push(status);
            }
            Ok::<_, EngineError>(out)
        };
        let (removed, out) = tokio::join!(removals, creations);
        removed.into_iter().collect::<Result<(), EngineError>>()?;
        let out = out?;
        for (app, wake) in wakes {
            self.rollouts.wake_at(&app, wake);
        }
        let mut gone_apps: Vec<&String> = gone.iter().map(|(app, _)| app).collect();
        gone_apps.dedup();
        for app in gone_apps {
            pass.remove_built_images(app).await?;
        }
        Ok(out)
    }

    /// The earliest scheduled restart or retry.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let restarts = self.apps.values().filter_map(|r| r.guard.next_start);
        restarts.chain(self.rollouts.next_wake()).min()
    }
}

/// A pass over the desired `apps` (sorted by name) with the facts of `assessment`.
fn new_pass<'a>(
    input: &PassInput<'a>,
    assessment: Assessment,
    apps: &[&AppSpec],
    refusals: &'a mut Refusals,
) -> Pass<'a> {
    Pass {
        config: input.config,
        engine: input.engine,
        assessment,
        allocations: Allocations::new(),
        generation: input.desired.map_or(0, |d| d.generation),
        now: Instant::now(),
        builds: input.builds,
        pulls: input.pulls,
        events: input.events,
        quiet: input.quiet,
        events_live: input.events_live,
        desired_binds: desired_uses(apps, &input.config.policy.allowed_bind_prefixes),
        engine_binds: None,
        refusals,
    }
}

/// Stop and remove the `gone` containers (app, id), [`MAX_PARALLEL_REMOVALS`] at a time.
async fn remove_all(
    input: &PassInput<'_>,
    gone: Vec<(String, String)>,
) -> Vec<Result<(), EngineError>> {
    let stop_timeout = Duration::from_secs(input.config.stop_timeout_secs);
    let engine = input.engine;
    futures_util::stream::iter(gone)
        .map(move |(app, id)| async move {
            tracing::info!(app = %app, container = %id, "removing the container of an app no longer desired");
            stop_and_remove(engine, &id, stop_timeout).await
        })
        .buffer_unordered(MAX_PARALLEL_REMOVALS)
        .collect()
        .await
}

/// Removals of containers of apps no longer desired running at the same time.
const MAX_PARALLEL_REMOVALS: usize = 8;

impl Pass<'_> {
    pub(in crate::appmgr) async fn app(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        mut existing: Vec<ContainerSummary>,
    ) -> Result<AppStatus, EngineError> {
        let identity = Identity::of(spec);
        let admitted = self.check_policy(spec).await?;
        if let Err(v) = &admitted {
            for c in &existing {
                self.remove(&c.id).await?;
            }
            *rec = AppMemory::default();
            return Ok(self.denied(spec, v.to_string()));
        }
        // start_first: the previous version runs on beside the new one
        self.set_aside(rec, &spec.name, &identity, &mut existing);
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
        let mut stale = None;
        if let Some(c) = keep {
            let theirs = Identity::from_labels(&c.labels);
            if theirs.spec_hash == identity.spec_hash
                && theirs.restart_token == identity.restart_token
            {
                self.own_name(rec, &spec.name, &c).await?;
                if let Some(status) = self
                    .existing(rec, spec, &identity, &c, &theirs.gpu_hash)
                    .await?
                {
                    return Ok(status);
                }
                rec.container_id = None;
                rec.guard = CrashGuard::default();
            } else {
                stale = Some(c);
            }
        }
        let built = match spec.source {
            None => None,
            Some(_) => match self.git_image(rec, spec, &identity).await? {
                GitImage::Ready(built) => Some(built),
                GitImage::Wait(status) => return self.building(rec, spec, *status, stale).await,
            },
        };
        // the previous version runs while the new image is pulled (and goes when it fails)
        if stale.is_some()
            && built.is_none()
            && let Some(image) = spec.image.clone()
            && let ImageReady::Wait(status) =
                self.ensure_image(rec, spec, &identity, &image).await?
        {
            return self.building(rec, spec, *status, stale).await;
        }
        if let Some(c) = stale {
            tracing::info!(app = %spec.name, container = %c.id, "spec or restart token changed: recreating");
            self.remove(&c.id).await?;
            rec.container_id = None;
            rec.guard = CrashGuard::default();
        }
        let admitted = admitted.unwrap_or_default();
        let status = self
            .create(rec, spec, &identity, built.as_ref(), &admitted)
            .await?;
        Ok(with_build(status, built.as_ref()))
    }

    /// The status of an app the policy denies (its containers are gone).
    fn denied(&self, spec: &AppSpec, detail: String) -> AppStatus {
        self.failed(
            spec,
            format!("{}: {detail}", Reason::PolicyDenied),
            Some(Fallback {
                tier: FallbackTier::Preflight,
                reason: Reason::PolicyDenied,
                detail: Some(detail),
            }),
        )
    }

    /// The status of an app whose new image is not ready (built or pulled): the previous
    /// version (`stale`) runs meanwhile, or is removed when the new one did not build or pull.
    async fn building(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        mut status: AppStatus,
        stale: Option<ContainerSummary>,
    ) -> Result<AppStatus, EngineError> {
        let Some(c) = stale else {
            return Ok(status);
        };
        if status.state == AppState::Failed {
            tracing::info!(app = %spec.name, container = %c.id, "the new version did not build: removing the previous one");
            self.remove(&c.id).await?;
            rec.container_id = None;
        } else {
            // the previous version runs until the new image is ready
            status.container_id = Some(c.id.clone());
            status.commit = c.labels.get(odac_host::names::GIT_COMMIT).cloned();
            status.image = Some(c.image.clone());
        }
        Ok(status)
    }
}
