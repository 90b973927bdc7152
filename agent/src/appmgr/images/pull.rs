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
//! Before a pull, [`pull_disk`] checks the image fits in the engine's data root (and bounds the
//! manifest). A pull that makes no progress for `apps.pull_stall_secs` is cancelled and fails
//! the app like a refusal, on the same backoff.
//!
//! Credentials: those sent with the app (`registry_auth`, for the host its image names), else
//! the manager's [`Credentials`] (the host's `docker login`). The registry's words go to the
//! status and the events only through [`redact`]: a registry that echoes what it was sent
//! never gets the user, the password, their base64 or a token shown, and the text is capped.

use odac_host::lock::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::jobs::{Jobs, Polled};
use super::pull_disk;
use super::registry_auth::Credentials;
use crate::appmgr::state::clip::{clip, redact};
use crate::appmgr::state::events::EventTx;
use odac_host::engine::{ContainerEngine, EngineError, PullProgress, RegistryAuth, registry_host};

/// At most one progress event per app in this period.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What a pull is for: the image, and the spec and restart token that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::appmgr) struct PullKey {
    pub(in crate::appmgr) image: String,
    pub(in crate::appmgr) spec_hash: String,
    pub(in crate::appmgr) restart_token: String,
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

struct Shared {
    jobs: Jobs<PullKey, (), String, Arc<Mutex<PullProgress>>>,
    engine: Arc<dyn ContainerEngine>,
    events: EventTx,
    wake: Arc<Notify>,
    credentials: Credentials,
    reserve_mb: u64,
    stall: Duration,
    /// Images pulled since the clean-up last asked ([`Pulls::take_pulled`]).
    pulled: Mutex<Vec<Pulled>>,
}

/// An image a pull brought to the host: (app, reference, image id).
pub(crate) type Pulled = (String, String, String);

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
        stall: Duration,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                jobs: Jobs::new("pull"),
                engine,
                events,
                wake,
                credentials,
                reserve_mb,
                stall,
                pulled: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The credentials pulls use.
    pub(crate) fn credentials(&self) -> &Credentials {
        &self.shared.credentials
    }

    /// The pull of `image` for `app` at `key`; starts one (replacing one for another key)
    /// when none is running or done for it.
    pub(in crate::appmgr) fn poll(
        &self,
        app: &str,
        key: &PullKey,
        sent: Option<RegistryAuth>,
    ) -> PullPoll {
        let polled = self
            .shared
            .jobs
            .poll(app, key.clone(), || self.start(app, key, sent));
        match polled {
            Polled::Running(progress) => PullPoll::Running(*lock(&progress)),
            Polled::Ready(()) => PullPoll::Done,
            Polled::Failed(message) => PullPoll::Failed(message),
        }
    }

    /// Start the pull of `app` at `key`: its abort handle and its progress.
    fn start(
        &self,
        app: &str,
        key: &PullKey,
        sent: Option<RegistryAuth>,
    ) -> (AbortHandle, Arc<Mutex<PullProgress>>) {
        let shared = Arc::clone(&self.shared);
        let (name, job_key) = (app.to_owned(), key.clone());
        let progress = Arc::new(Mutex::new(PullProgress::default()));
        let seen = Arc::clone(&progress);
        let task = tokio::spawn(async move {
            let image = job_key.image.clone();
            let auth = match sent {
                Some(a) => Some(a),
                None => shared.credentials.lookup(registry_host(&image)).await,
            };
            shared.events.info(
                &name,
                match &auth {
                    Some(a) => format!("pulling {image} as {}", a.username),
                    None => format!("pulling {image}"),
                },
            );
            let throttle = Mutex::new(Throttle::new(Instant::now()));
            let events = shared.events.clone();
            let moved = Mutex::new(Instant::now());
            let on_progress = |p: PullProgress| {
                if std::mem::replace(&mut *lock(&seen), p) != p {
                    *lock(&moved) = Instant::now();
                }
                if lock(&throttle).ready(Instant::now()) {
                    events.info(&name, format!("pulling {image}: {}", describe(&p)));
                }
            };
            let started = Instant::now();
            // an image that was on the host already (pulled by hand, say) is not the agent's
            let before = shared.engine.image_info(&image).await.ok().map(|i| i.id);
            let result = match shared.precheck(&image, auth.as_ref()).await {
                Err(message) => Err(message),
                Ok(()) => {
                    *lock(&moved) = Instant::now();
                    let pull = shared
                        .engine
                        .pull_image(&image, auth.as_ref(), &on_progress);
                    match unless_stalled(pull, &moved, shared.stall).await {
                        Some(pulled) => {
                            pulled.map_err(|e| clip(redact(pull_error(&e), auth.as_ref())))
                        }
                        None => Err(format!(
                            "the pull of {image} made no progress for {} s (apps.pull_stall_secs): cancelled",
                            shared.stall.as_secs()
                        )),
                    }
                }
            };
            crate::metrics::events::pull_finished(started.elapsed(), result.is_ok());
            if result.is_ok()
                && let Ok(after) = shared.engine.image_info(&image).await
                && before.as_ref() != Some(&after.id)
            {
                lock(&shared.pulled).push((name.clone(), image.clone(), after.id));
            }
            match &result {
                Ok(()) => shared.events.info(&name, format!("pulled {image}")),
                Err(e) => shared
                    .events
                    .error(&name, format!("could not pull {image}: {e}")),
            }
            shared.jobs.finish(&name, &job_key, result);
            shared.wake.notify_one();
        });
        (task.abort_handle(), progress)
    }

    /// The images pulls brought to the host since the last call.
    pub(crate) fn take_pulled(&self) -> Vec<Pulled> {
        std::mem::take(&mut *lock(&self.shared.pulled))
    }

    /// Drop the pulls of apps not in `apps`, aborting running ones.
    pub(crate) fn retain(&self, apps: &[&str]) {
        self.shared.jobs.retain(apps);
    }
}

impl Shared {
    /// The check before the engine is asked to pull; see [`pull_disk`](super::pull_disk): a
    /// manifest over its limit is refused, and the image must fit in the engine's data root
    /// with the reserve. What cannot be read is not a refusal. An engine that names no data
    /// root (the fake) is not checked at all; one whose data root cannot be read still has
    /// the manifest bounded.
    async fn precheck(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<(), String> {
        let root = match self.engine.data_root().await {
            Ok(Some(root)) => Some(root),
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::debug!(image = %image, error = %e, "no data root from the engine: disk check skipped");
                None
            }
        };
        let size = match pull_disk::compressed_size(image, auth).await {
            Ok(size) => size,
            Err(pull_disk::Precheck::Refused(why)) => return Err(why),
            Err(pull_disk::Precheck::Unknown(e)) => {
                tracing::debug!(image = %image, error = %e, "no compressed size from the registry: disk check skipped");
                return Ok(());
            }
        };
        let Some(root) = root else {
            return Ok(());
        };
        match pull_disk::free_bytes(std::path::Path::new(&root)) {
            Ok(free) => pull_disk::check(image, &root, free, size, self.reserve_mb),
            Err(e) => {
                tracing::debug!(image = %image, error = %e, "disk check skipped");
                Ok(())
            }
        }
    }
}

/// `pull`'s result, or `None` once it has gone `stall` without progress (`moved` is when it
/// last made some): the pull is then dropped, which ends the engine's request and with it the
/// engine's pull.
async fn unless_stalled<F: std::future::Future>(
    pull: F,
    moved: &Mutex<Instant>,
    stall: Duration,
) -> Option<F::Output> {
    tokio::pin!(pull);
    loop {
        let deadline = *lock(moved) + stall;
        tokio::select! {
            out = &mut pull => return Some(out),
            () = tokio::time::sleep_until(deadline) => {
                if *lock(moved) + stall <= Instant::now() {
                    return None;
                }
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

impl Pulls {
    /// Put a pull for `app` at `key` in the table (tests): running (`None`) or done.
    #[cfg(test)]
    pub(crate) fn stage(&self, app: &str, key: PullKey, result: Option<Result<(), String>>) {
        let progress = Arc::new(Mutex::new(PullProgress::default()));
        self.shared.jobs.stage(app, key, progress, result);
    }

    /// Forget a successful pull of `app`: the next poll pulls again.
    pub(in crate::appmgr) fn forget_done(&self, app: &str) {
        self.shared.jobs.forget_done(app);
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
