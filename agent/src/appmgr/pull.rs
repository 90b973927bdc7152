//! Images from registries, pulled on demand. [`Pulls`] runs at most one pull per app in the
//! background (through the engine's `pull_image`), so a long pull never holds up the reconcile
//! of other apps: the pass asks ([`Pulls::poll`]) and gets "done", "still pulling" with the
//! layer totals, or the failure — handed out once, so the pass fails the app with
//! `image_pull_failed` and the registry's own words and schedules the retry on the
//! crash-loop backoff, never in a tight loop. A finished pull wakes the reconcile loop.
//! Progress goes out as `info` events, at most one per app every [`PROGRESS_EVERY`].
//!
//! The pull policy of the spec decides when to pull: `if_not_present` when the engine lacks
//! the image, `always` before every creation of the container (once per spec and restart
//! token, so a new digest is picked up by a new restart token), `never` not at all (a missing
//! image fails the app).
//!
//! Before a pull, [`pull_disk`] checks the image fits in the engine's data root.
//!
//! Credentials: those sent with the app (`registry_auth`, for the host its image names), else
//! the manager's [`Credentials`] (the host's `docker login`).

use crate::lock::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use odac_protocol::{AppSpec, AppState, AppStatus, Fallback, FallbackTier, PullPolicy, Reason};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::events::EventTx;
use super::fallback::clip;
use super::labels::Identity;
use super::pull_disk;
use super::reconcile::{AppRecord, Pass};
use super::registry_auth::Credentials;
use crate::engine::{
    ContainerDetails, ContainerEngine, EngineError, PullProgress, RegistryAuth, registry_host,
    split_reference,
};

/// At most one progress event per app in this period.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What a pull is for: the image, and the spec and restart token that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PullKey {
    image: String,
    spec_hash: String,
    restart_token: String,
}

/// The answer of [`Pulls::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PullPoll {
    /// The image is there.
    Done,
    /// A pull is running (or was just started); the totals so far.
    Running(PullProgress),
    /// The pull failed, in the registry's words; handed out once.
    Failed(String),
}

enum State {
    Running(AbortHandle, Arc<Mutex<PullProgress>>),
    Done(Result<(), String>),
}

struct Job {
    key: PullKey,
    state: State,
}

struct Shared {
    jobs: Mutex<BTreeMap<String, Job>>,
    engine: Arc<dyn ContainerEngine>,
    events: EventTx,
    wake: Arc<Notify>,
    credentials: Credentials,
    reserve_mb: u64,
}

/// The pulls of one app manager; see the module documentation.
#[derive(Clone)]
pub(crate) struct Pulls {
    shared: Arc<Shared>,
}

/// At most one progress event per [`PROGRESS_EVERY`], the first one that long after the
/// pull's start (the start has its own event).
#[derive(Debug)]
struct Throttle {
    last: Instant,
}

impl Throttle {
    fn new(start: Instant) -> Self {
        Self { last: start }
    }

    /// Whether an event may go out at `now` (and, if so, counts it).
    fn ready(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.last) >= PROGRESS_EVERY {
            self.last = now;
            true
        } else {
            false
        }
    }
}

/// A progress line for events: `12.5 of 80.0 MB, 2/5 layers`.
fn describe(p: &PullProgress) -> String {
    let mb = |b: u64| b as f64 / 1_000_000.0;
    format!(
        "{:.1} of {:.1} MB, {}/{} layers",
        mb(p.bytes_done),
        mb(p.bytes_total),
        p.layers_done,
        p.layers_total
    )
}

impl Pulls {
    pub(crate) fn new(
        engine: Arc<dyn ContainerEngine>,
        events: EventTx,
        wake: Arc<Notify>,
        credentials: Credentials,
        reserve_mb: u64,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                jobs: Mutex::new(BTreeMap::new()),
                engine,
                events,
                wake,
                credentials,
                reserve_mb,
            }),
        }
    }

    /// The credentials pulls use.
    pub(crate) fn credentials(&self) -> &Credentials {
        &self.shared.credentials
    }

    /// The pull of `image` for `app` at `key`; starts one (replacing one for another key)
    /// when none is running or done for it.
    fn poll(&self, app: &str, key: &PullKey, sent: Option<RegistryAuth>) -> PullPoll {
        let mut jobs = lock(&self.shared.jobs);
        if let Some(job) = jobs.get(app).filter(|j| j.key == *key) {
            match &job.state {
                State::Running(_, progress) => return PullPoll::Running(*lock(progress)),
                State::Done(Ok(())) => return PullPoll::Done,
                State::Done(Err(message)) => {
                    let message = message.clone();
                    jobs.remove(app);
                    return PullPoll::Failed(message);
                }
            }
        }
        if let Some(Job {
            state: State::Running(handle, _),
            ..
        }) = jobs.remove(app)
        {
            tracing::info!(app = %app, "image or restart token changed: abandoning the running pull");
            handle.abort();
        }
        let shared = Arc::clone(&self.shared);
        let (name, job_key) = (app.to_owned(), key.clone());
        let progress = Arc::new(Mutex::new(PullProgress::default()));
        let seen = Arc::clone(&progress);
        let task = tokio::spawn(async move {
            let image = job_key.image.clone();
            let auth = sent.or_else(|| shared.credentials.for_host(registry_host(&image)));
            shared.events.info(
                &name,
                match &auth {
                    Some(a) => format!("pulling {image} as {}", a.username),
                    None => format!("pulling {image}"),
                },
            );
            let throttle = Mutex::new(Throttle::new(Instant::now()));
            let events = shared.events.clone();
            let on_progress = |p: PullProgress| {
                *lock(&seen) = p;
                if lock(&throttle).ready(Instant::now()) {
                    events.info(&name, format!("pulling {image}: {}", describe(&p)));
                }
            };
            let result = match shared.disk_check(&image, auth.as_ref()).await {
                Err(message) => Err(message),
                Ok(()) => shared
                    .engine
                    .pull_image(&image, auth.as_ref(), &on_progress)
                    .await
                    .map_err(|e| pull_error(&e)),
            };
            match &result {
                Ok(()) => shared.events.info(&name, format!("pulled {image}")),
                Err(e) => shared
                    .events
                    .error(&name, format!("could not pull {image}: {e}")),
            }
            if let Some(job) = lock(&shared.jobs)
                .get_mut(&name)
                .filter(|j| j.key == job_key)
            {
                job.state = State::Done(result);
            }
            shared.wake.notify_one();
        });
        jobs.insert(
            app.to_owned(),
            Job {
                key: key.clone(),
                state: State::Running(task.abort_handle(), progress),
            },
        );
        PullPoll::Running(PullProgress::default())
    }

    /// Drop the pulls of apps not in `apps`, aborting running ones.
    pub(crate) fn retain(&self, apps: &[&str]) {
        lock(&self.shared.jobs).retain(|name, job| {
            let keep = apps.contains(&name.as_str());
            if let (false, State::Running(handle, _)) = (keep, &job.state) {
                handle.abort();
            }
            keep
        });
    }
}

impl Shared {
    /// Whether the image fits in the engine's data root with the reserve; see
    /// [`pull_disk`](super::pull_disk). What cannot be read is not a refusal.
    async fn disk_check(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<(), String> {
        let root = match self.engine.data_root().await {
            Ok(Some(root)) => root,
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::debug!(image = %image, error = %e, "no data root from the engine: disk check skipped");
                return Ok(());
            }
        };
        let free = match pull_disk::free_bytes(std::path::Path::new(&root)) {
            Ok(free) => free,
            Err(e) => {
                tracing::debug!(image = %image, error = %e, "disk check skipped");
                return Ok(());
            }
        };
        match pull_disk::compressed_size(image, auth).await {
            Ok(size) => pull_disk::check(image, &root, free, size, self.reserve_mb),
            Err(e) => {
                tracing::debug!(image = %image, error = %e, "no compressed size from the registry: disk check skipped");
                Ok(())
            }
        }
    }
}

/// The registry's words for a failed pull (the engine's own text, without our prefixes).
fn pull_error(e: &EngineError) -> String {
    if e.is_unavailable() {
        e.to_string()
    } else {
        e.engine_message()
    }
}

/// What the pass can do with an app's image now.
#[derive(Debug)]
pub(super) enum ImageReady {
    /// The image is on the host: create the container.
    Ready,
    /// Report this status and come back later (pulling, or failed and waiting to retry).
    Wait(Box<AppStatus>),
}

impl Pass<'_> {
    /// Make sure `image` of `spec` is on the host, pulling it per the spec's policy; see the
    /// module documentation.
    pub(super) async fn ensure_image(
        &mut self,
        rec: &mut AppRecord,
        spec: &AppSpec,
        identity: &Identity,
        image: &str,
    ) -> Result<ImageReady, EngineError> {
        let key = PullKey {
            image: image.to_owned(),
            spec_hash: identity.spec_hash.clone(),
            restart_token: identity.restart_token.clone(),
        };
        // Credentials sent with the app, for the registry its image names.
        let sent = spec
            .registry_auth
            .as_ref()
            .filter(|a| a.server == registry_host(image))
            .map(|a| RegistryAuth {
                server: a.server.clone(),
                username: a.username.clone(),
                password: a.password.clone(),
            });
        let poll = match spec.pull {
            PullPolicy::Always => self.pulls.poll(&spec.name, &key, sent),
            PullPolicy::IfNotPresent | PullPolicy::Never => {
                // A pull done earlier is not trusted: the image may have been removed since.
                self.pulls.forget_done(&spec.name);
                if self.engine.image_exists(image).await? {
                    return Ok(ImageReady::Ready);
                }
                if spec.pull == PullPolicy::Never {
                    PullPoll::Failed(format!(
                        "image {image:?} is not on this host and the app's pull policy is never"
                    ))
                } else {
                    self.pulls.poll(&spec.name, &key, sent)
                }
            }
        };
        match poll {
            PullPoll::Done => Ok(ImageReady::Ready),
            PullPoll::Running(_) => {
                let mut status = self.base_status(spec);
                status.state = AppState::Pulling;
                status.last_error = rec.last_error.clone();
                Ok(ImageReady::Wait(Box::new(status)))
            }
            PullPoll::Failed(message) => {
                let fallback = Fallback {
                    tier: FallbackTier::Preflight,
                    reason: Reason::ImagePullFailed,
                    detail: Some(clip(message.clone())),
                };
                let error = clip(format!("{}: {message}", Reason::ImagePullFailed));
                let status = self.retry_later(rec, spec, identity, error, Some(fallback));
                Ok(ImageReady::Wait(Box::new(status)))
            }
        }
    }
}

impl Pass<'_> {
    /// The image id a container runs and that image's repo digest (the one of the
    /// container's repository when the image has several), read from the engine once per
    /// image id.
    pub(super) async fn image_digest(
        &self,
        rec: &mut AppRecord,
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

impl Pulls {
    /// Forget a successful pull of `app`: the next poll pulls again.
    fn forget_done(&self, app: &str) {
        let mut jobs = lock(&self.shared.jobs);
        if jobs
            .get(app)
            .is_some_and(|j| matches!(j.state, State::Done(Ok(()))))
        {
            jobs.remove(app);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn progress_events_are_throttled_to_one_per_two_seconds() {
        let t0 = Instant::now();
        let mut throttle = Throttle::new(t0);
        // progress every 100 ms for 10 s: 5 events, never two within 2 s
        let sent: Vec<Duration> = (1..=100)
            .map(|i| Duration::from_millis(100 * i))
            .filter(|d| throttle.ready(t0 + *d))
            .collect();
        assert_eq!(
            sent,
            (1..=5)
                .map(|i| Duration::from_secs(2 * i))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn progress_lines_read_in_megabytes() {
        let p = PullProgress {
            layers_done: 2,
            layers_total: 5,
            bytes_done: 12_500_000,
            bytes_total: 80_000_000,
        };
        assert_eq!(describe(&p), "12.5 of 80.0 MB, 2/5 layers");
    }
}
