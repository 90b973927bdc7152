//! Apps built from git sources. [`Builds`] runs at most one build job per app in the
//! background, so a long clone or build never holds up the reconcile of other apps: the pass
//! asks ([`Builds::poll`]) and gets the image when the job for the app's current spec and
//! restart token is done, "still running" otherwise (a new job is started when there is
//! none, or when the spec or the token changed — the old job is aborted). A finished job
//! wakes the reconcile loop. A failure is handed out once, so the pass can fail the app and
//! schedule the retry on the crash-loop backoff; a success stays until the spec or token
//! changes, so recreating a container never rebuilds.
//!
//! [`git`] fetches, [`job`] builds, reuses and prunes; the table of jobs is
//! [`Jobs`](super::jobs::Jobs), shared with the pulls.

pub mod git;
pub mod job;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Notify, Semaphore};

pub use job::{BuildFailure, BuildRequest, Built, image_tag};

use super::jobs::{Jobs, Polled};
use crate::appmgr::state::events::EventTx;
use odac_host::engine::ContainerEngine;

/// What a build is for: the app's spec hash and restart token. A new token fetches again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildKey {
    /// Spec hash (the source is part of the spec).
    pub spec_hash: String,
    /// Restart token.
    pub restart_token: String,
}

/// The answer of [`Builds::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll {
    /// The image to run.
    Ready(Built),
    /// A job is running (or was just started).
    Running,
    /// The job failed; handed out once.
    Failed(BuildFailure),
}

struct Shared {
    jobs: Jobs<BuildKey, Built, BuildFailure>,
    engine: Arc<dyn ContainerEngine>,
    events: EventTx,
    wake: Arc<Notify>,
    permits: Arc<Semaphore>,
    next_dir: AtomicU64,
}

/// The build jobs of one app manager; see the module documentation.
#[derive(Clone)]
pub(crate) struct Builds {
    shared: Arc<Shared>,
    state_dir: PathBuf,
}

impl Builds {
    pub(crate) fn new(
        engine: Arc<dyn ContainerEngine>,
        events: EventTx,
        wake: Arc<Notify>,
        state_dir: PathBuf,
        max_parallel: usize,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                jobs: Jobs::new("build"),
                engine,
                events,
                wake,
                permits: Arc::new(Semaphore::new(max_parallel.max(1))),
                next_dir: AtomicU64::new(0),
            }),
            state_dir,
        }
    }

    /// A fresh scratch directory for one fetch of `app` (an aborted job may still be
    /// letting go of its own).
    pub(crate) fn work_dir(&self, app: &str) -> PathBuf {
        let n = self.shared.next_dir.fetch_add(1, Ordering::Relaxed);
        self.state_dir.join("builds").join(format!("{app}.{n}"))
    }

    /// Remove what fetches interrupted by an agent stop left behind.
    pub(crate) fn clear_leftovers(&self) {
        let dir = self.state_dir.join("builds");
        if let Err(e) = git::clear_dir(&dir) {
            tracing::warn!(error = %e, "could not clear old build directories");
        }
    }

    /// The image for `app` at `key`; starts a job (replacing one for another key) when none
    /// is running or done for it. `request` is called only when a job starts.
    pub(crate) fn poll(
        &self,
        app: &str,
        key: &BuildKey,
        request: impl FnOnce() -> BuildRequest,
    ) -> Poll {
        let shared = &self.shared;
        let polled = shared.jobs.poll(app, key.clone(), || {
            let request = request();
            let shared = Arc::clone(shared);
            let (name, key) = (app.to_owned(), key.clone());
            let task = tokio::spawn(async move {
                let _permit = Arc::clone(&shared.permits).acquire_owned().await;
                let result = job::run(&request, shared.engine.as_ref(), &shared.events).await;
                shared.jobs.finish(&name, &key, result);
                shared.wake.notify_one();
            });
            (task.abort_handle(), ())
        });
        match polled {
            Polled::Running(()) => Poll::Running,
            Polled::Ready(built) => Poll::Ready(built),
            Polled::Failed(failure) => Poll::Failed(failure),
        }
    }

    /// Forget a finished image (it vanished from the engine): the next poll builds again.
    pub(crate) fn invalidate(&self, app: &str) {
        self.shared.jobs.forget_done(app);
    }

    /// Drop the jobs of apps not in `apps`, aborting running ones.
    pub(crate) fn retain(&self, apps: &[&str]) {
        self.shared.jobs.retain(apps);
    }

    /// Put a job for `app` at `key` in the table (tests): running (`None`) or done.
    #[cfg(test)]
    pub(crate) fn stage(
        &self,
        app: &str,
        key: &BuildKey,
        result: Option<Result<Built, BuildFailure>>,
    ) {
        self.shared.jobs.stage(app, key.clone(), (), result);
    }
}
