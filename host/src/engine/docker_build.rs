//! Images on [`DockerEngine`]: building from a tar context with the classic builder
//! (`POST /build`, builder version 1: Docker 20.10 may have no BuildKit, and the agent never
//! pulls), listing images by label and removing them. The build keeps the last lines of the
//! builder's output so a failure can be reported with its context.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bollard::query_parameters::{
    BuildImageOptions, BuilderVersion, ListImagesOptions, RemoveImageOptions,
};
use futures_util::StreamExt;

use super::convert::map_error;
use super::docker::{DockerEngine, label_filter, label_map};
use super::error::EngineError;
use super::types::{BuildOutput, ImageSummary};

/// Lines of build output kept for reports.
pub const BUILD_LOG_LINES: usize = 30;
/// Longest a build request may stream (callers bound builds more tightly).
const BUILD_REQUEST_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// The last `max` lines of a stream of output chunks.
#[derive(Debug, Default)]
pub(crate) struct LogTail {
    lines: VecDeque<String>,
    partial: String,
    max: usize,
}

impl LogTail {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            ..Self::default()
        }
    }

    pub(crate) fn push(&mut self, chunk: &str) {
        self.partial.push_str(chunk);
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            let line = line.trim_end().to_owned();
            if line.is_empty() {
                continue;
            }
            self.lines.push_back(line);
            if self.lines.len() > self.max {
                self.lines.pop_front();
            }
        }
    }

    pub(crate) fn text(&self) -> String {
        let mut lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        let partial = self.partial.trim_end();
        if !partial.is_empty() {
            lines.push(partial);
        }
        let skip = lines.len().saturating_sub(self.max);
        lines[skip..].join("\n")
    }
}

impl DockerEngine {
    pub(crate) async fn build(
        &self,
        tag: &str,
        context_tar: Vec<u8>,
        dockerfile: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<BuildOutput, EngineError> {
        let docker = self.docker().await?.with_timeout(BUILD_REQUEST_TIMEOUT);
        let options = BuildImageOptions {
            dockerfile: dockerfile.to_owned(),
            t: Some(tag.to_owned()),
            rm: true,
            forcerm: true,
            labels: Some(label_map(labels)),
            version: BuilderVersion::BuilderV1,
            ..BuildImageOptions::default()
        };
        let body = bollard::body_full(bytes::Bytes::from(context_tar));
        let mut stream = docker.build_image(options, None, Some(body));
        let mut tail = LogTail::new(BUILD_LOG_LINES);
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(text) = info.stream.as_deref() {
                        tail.push(text);
                    }
                }
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    tail.push(&format!("{error}\n"));
                    return Err(EngineError::BuildFailed {
                        message: error.trim_end().to_owned(),
                        log_tail: tail.text(),
                    });
                }
                Err(e) => return self.observe(Err(map_error(e))),
            }
        }
        let inspected = docker.inspect_image(tag).await.map_err(map_error);
        let image = self.observe(inspected).map_err(|e| match e {
            EngineError::NotFound(_) => EngineError::BuildFailed {
                message: format!("the build ended without producing image {tag:?}"),
                log_tail: tail.text(),
            },
            other => other,
        })?;
        Ok(BuildOutput {
            image_id: image.id.unwrap_or_default(),
            log_tail: tail.text(),
        })
    }

    pub(crate) async fn images_by_label(
        &self,
        label: &str,
    ) -> Result<Vec<ImageSummary>, EngineError> {
        let docker = self.docker().await?;
        let options = ListImagesOptions {
            all: false,
            filters: Some(label_filter(label)),
            ..ListImagesOptions::default()
        };
        let list = docker.list_images(Some(options)).await.map_err(map_error);
        Ok(self
            .observe(list)?
            .into_iter()
            .map(|i| ImageSummary {
                id: i.id,
                tags: i
                    .repo_tags
                    .into_iter()
                    .filter(|t| t != "<none>:<none>")
                    .collect(),
                labels: i.labels.into_iter().collect(),
                created: i.created,
            })
            .collect())
    }

    pub(crate) async fn delete_image(&self, image: &str, force: bool) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let options = RemoveImageOptions {
            force,
            noprune: false,
            ..RemoveImageOptions::default()
        };
        let removed = docker
            .remove_image(image, Some(options), None)
            .await
            .map(|_| ())
            .map_err(map_error);
        self.observe(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::LogTail;

    #[test]
    fn tail_keeps_the_last_lines_across_chunks() {
        let mut t = LogTail::new(3);
        t.push("Step 1/4 : FROM x\n ---> abc\nStep 2/4 : RU");
        t.push("N make\n\n");
        t.push("make: *** [all] Error 2\nThe command returned 2");
        assert_eq!(
            t.text(),
            "Step 2/4 : RUN make\nmake: *** [all] Error 2\nThe command returned 2"
        );
        assert_eq!(LogTail::new(5).text(), "");
    }
}
