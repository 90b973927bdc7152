//! The image of a git-sourced app, as the reconcile pass sees it: ready (built or reused for
//! the app's current spec and restart token), building (the app reports `creating`, and a
//! container of the previous version keeps running meanwhile), or failed — state `failed`,
//! reason `build_failed` in the status's `image_failure` (never `gpu.fallback`), `last_error`
//! with the builder's words and the last lines of the build log — retried after the
//! crash-loop backoff, never in a tight loop; the failure stays reported while its retry
//! runs.

use odac_protocol::{AppSpec, AppState, AppStatus, ImageFailure, Reason};

use crate::appmgr::images::build::{BuildKey, BuildRequest, Built, Poll};
use crate::appmgr::labels::Identity;
use crate::appmgr::pass::{AppMemory, Pass};
use crate::appmgr::state::clip::clip;
use odac_host::engine::EngineError;

/// What the pass can do with a git-sourced app now.
#[derive(Debug)]
pub(in crate::appmgr) enum GitImage {
    /// Run this image.
    Ready(Built),
    /// Report this status and come back later (building, or waiting to retry a failure).
    Wait(Box<AppStatus>),
}

impl Pass<'_> {
    /// The image of a git-sourced app; see the module documentation.
    pub(in crate::appmgr) async fn git_image(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        identity: &Identity,
    ) -> Result<GitImage, EngineError> {
        let Some(source) = &spec.source else {
            return Ok(GitImage::Wait(Box::new(self.base_status(spec))));
        };
        if let Some((retry_identity, status)) = &rec.retry
            && retry_identity == identity
            && rec.guard.waiting()
            && !rec.guard.due(self.now)
        {
            let mut status = status.clone();
            status.generation = self.generation;
            return Ok(GitImage::Wait(Box::new(status)));
        }
        if rec.guard.due(self.now) {
            // The retry is made now: its deadline is spent while the build runs (which wakes
            // the loop when it ends). Left in the past, it would make the loop run passes back
            // to back.
            rec.guard.next_start = None;
        }
        let key = BuildKey {
            spec_hash: identity.spec_hash.clone(),
            restart_token: identity.restart_token.clone(),
        };
        let request = || BuildRequest {
            app: spec.name.clone(),
            instance: self.config.instance.clone(),
            source: source.clone(),
            dir: self.builds.work_dir(&spec.name),
            config: self.config.build.clone(),
            extra_labels: self.config.extra_labels.clone(),
        };
        let mut poll = self.builds.poll(&spec.name, &key, request);
        if let Poll::Ready(built) = &poll {
            // The image may have been removed behind our back: build it again.
            if !self.engine.image_exists(&built.image).await? {
                tracing::warn!(app = %spec.name, image = %built.image, "built image is gone: building again");
                self.builds.invalidate(&spec.name);
                poll = self.builds.poll(&spec.name, &key, request);
            }
        }
        match poll {
            Poll::Ready(built) => Ok(GitImage::Ready(built)),
            Poll::Running => {
                // A retry keeps reporting the failure it retries until it has an outcome.
                let status = match &rec.retry {
                    Some((retry_identity, failed)) if retry_identity == identity => {
                        let mut status = failed.clone();
                        status.generation = self.generation;
                        status
                    }
                    _ => {
                        let mut status = self.base_status(spec);
                        status.state = AppState::Creating;
                        status
                    }
                };
                Ok(GitImage::Wait(Box::new(status)))
            }
            Poll::Failed(failure) => {
                let mut error = format!("{}: {}", Reason::BuildFailed, failure.message);
                if let Some(tail) = failure.log_tail.as_deref().filter(|t| !t.is_empty()) {
                    error.push('\n');
                    error.push_str(tail);
                }
                let failure = ImageFailure {
                    reason: Reason::BuildFailed,
                    detail: Some(clip(failure.message)),
                };
                let status = self.retry_image_later(rec, spec, identity, clip(error), failure);
                Ok(GitImage::Wait(Box::new(status)))
            }
        }
    }
}

/// Put what was built on a status: the image tag and the commit.
pub(in crate::appmgr) fn with_build(mut status: AppStatus, built: Option<&Built>) -> AppStatus {
    if let Some(built) = built {
        status.commit = Some(built.commit.clone());
        status.image = Some(built.image.clone());
    }
    status
}
