//! The image of a registry app, as the reconcile pass sees it: on the host, or pulled in
//! the background ([`Pulls`](crate::appmgr::images::pull::Pulls)) per the spec's pull policy — the
//! app reports `pulling` meanwhile — or failed with `image_pull_failed` and retried after the
//! crash-loop backoff.

use odac_protocol::{AppSpec, AppState, AppStatus, ImageFailure, PullPolicy, Reason};

use crate::appmgr::images::pull::{PullKey, PullPoll};
use crate::appmgr::labels::Identity;
use crate::appmgr::pass::{AppMemory, Pass};
use crate::appmgr::state::clip::clip;
use odac_host::engine::{EngineError, RegistryAuth, registry_host};

/// What the pass can do with an app's image now.
#[derive(Debug)]
pub(in crate::appmgr) enum ImageReady {
    /// The image is on the host: create the container.
    Ready,
    /// Report this status and come back later (pulling, or failed and waiting to retry).
    Wait(Box<AppStatus>),
}

impl Pass<'_> {
    /// Make sure `image` of `spec` is on the host, pulling it per the spec's policy; see the
    /// module documentation.
    pub(in crate::appmgr) async fn ensure_image(
        &mut self,
        rec: &mut AppMemory,
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
                let failure = ImageFailure {
                    reason: Reason::ImagePullFailed,
                    detail: Some(clip(message.clone())),
                };
                let error = clip(format!("{}: {message}", Reason::ImagePullFailed));
                let status = self.retry_image_later(rec, spec, identity, error, failure);
                Ok(ImageReady::Wait(Box::new(status)))
            }
        }
    }
}
