//! Pulls on [`DockerEngine`]: `POST /images/create` (bollard's `create_image`) for one tag of
//! a repository, with the registry's credentials in `X-Registry-Auth`, the stream's layer
//! lines summed into [`PullProgress`] for the caller. An error line of the stream (the
//! registry's own words: unauthorized, manifest unknown, connection refused) is
//! [`EngineError::Rejected`] with status 500, as the engine would answer it up front.

use std::time::Duration;

use bollard::auth::DockerCredentials;
use bollard::query_parameters::CreateImageOptions;
use futures_util::StreamExt;

use super::convert::map_error;
use super::docker::DockerEngine;
use super::error::EngineError;
use super::pull::{ImageInfo, LayerProgress, PullProgress, RegistryAuth, split_reference};

/// Longest a pull may stream.
const PULL_REQUEST_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

impl DockerEngine {
    pub(crate) async fn pull(
        &self,
        image: &str,
        auth: Option<&RegistryAuth>,
        progress: &(dyn Fn(PullProgress) + Send + Sync),
    ) -> Result<(), EngineError> {
        let docker = self.docker().await?.with_timeout(PULL_REQUEST_TIMEOUT);
        let (repo, tag) = split_reference(image);
        let (from_image, tag) = if tag.starts_with("sha256:") {
            (image.to_owned(), String::new())
        } else {
            (repo.to_owned(), tag.to_owned())
        };
        let options = CreateImageOptions {
            from_image: Some(from_image),
            tag: Some(tag).filter(|t| !t.is_empty()),
            ..CreateImageOptions::default()
        };
        let credentials = auth.map(|a| DockerCredentials {
            username: Some(a.username.clone()),
            password: Some(a.password.clone()),
            serveraddress: Some(a.server.clone()),
            ..DockerCredentials::default()
        });
        let mut stream = docker.create_image(Some(options), None, credentials);
        let mut layers = LayerProgress::default();
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    let detail = info.progress_detail.unwrap_or_default();
                    layers.update(
                        info.id.as_deref(),
                        info.status.as_deref().unwrap_or_default(),
                        detail.current,
                        detail.total,
                    );
                    progress(layers.progress());
                }
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Err(EngineError::Rejected {
                        status: 500,
                        message: error.trim_end().to_owned(),
                    });
                }
                Err(e) => return self.observe(Err(map_error(e))),
            }
        }
        Ok(())
    }

    pub(crate) async fn image_info_of(&self, image: &str) -> Result<ImageInfo, EngineError> {
        let docker = self.docker().await?;
        let inspected = docker.inspect_image(image).await.map_err(map_error);
        let inspected = self.observe(inspected)?;
        Ok(ImageInfo {
            id: inspected.id.unwrap_or_default(),
            repo_digests: inspected.repo_digests.unwrap_or_default(),
            env: inspected.config.and_then(|c| c.env).unwrap_or_default(),
            size: inspected
                .size
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or_default(),
        })
    }

    pub(crate) async fn docker_root_dir(&self) -> Result<Option<String>, EngineError> {
        let docker = self.docker().await?;
        let info = docker.info().await.map_err(map_error);
        Ok(self.observe(info)?.docker_root_dir)
    }
}
