//! The live log stream of [`DockerEngine`]: `GET /containers/{id}/logs` with `follow`,
//! `tail` and `since`, its frames split into bounded lines. The request's own timeout covers
//! only the answer's headers, so a followed stream lasts as long as the container runs or the
//! caller keeps it.

use std::collections::VecDeque;

use bollard::query_parameters::LogsOptions;
use futures_util::StreamExt;
use futures_util::stream;

use super::convert::map_error;
use super::docker::DockerEngine;
use super::error::EngineError;
use super::log_stream::{LineSplitter, LogLines, LogStreamOptions};

/// Longest line handed out; longer ones are cut (the protocol's limit).
const MAX_LINE: usize = odac_protocol::MAX_LOGS_LINE;

impl DockerEngine {
    /// Streams `id`'s stdout and stderr as lines.
    pub(super) async fn stream_logs(
        &self,
        id: &str,
        opts: LogStreamOptions,
    ) -> Result<LogLines, EngineError> {
        let docker = self.docker().await?;
        let options = LogsOptions {
            follow: opts.follow,
            stdout: true,
            stderr: true,
            since: opts
                .since_unix
                .map_or(0, |s| i32::try_from(s).unwrap_or(i32::MAX)),
            tail: opts
                .tail
                .map_or_else(|| "all".to_owned(), |t| t.to_string()),
            ..LogsOptions::default()
        };
        let frames = Box::pin(docker.logs(id, Some(options)));
        let state = (
            frames,
            LineSplitter::default(),
            VecDeque::<String>::new(),
            false,
        );
        let lines = stream::unfold(
            state,
            |(mut frames, mut split, mut ready, mut done)| async move {
                loop {
                    if let Some(line) = ready.pop_front() {
                        return Some((Ok(line), (frames, split, ready, done)));
                    }
                    if done {
                        return None;
                    }
                    let mut out = Vec::new();
                    match frames.next().await {
                        Some(Ok(frame)) => split.feed(&frame.into_bytes(), MAX_LINE, &mut out),
                        Some(Err(e)) => {
                            done = true;
                            return Some((Err(map_error(e)), (frames, split, ready, done)));
                        }
                        None => {
                            done = true;
                            out.extend(split.finish());
                        }
                    }
                    ready.extend(out);
                }
            },
        );
        Ok(Box::pin(lines))
    }
}
