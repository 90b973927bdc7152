//! Exec through bollard: `POST /containers/{id}/exec` (never privileged), then
//! `POST /exec/{id}/start` upgraded to a raw stream (stdout and stderr demultiplexed, or the
//! TTY's bytes), `POST /exec/{id}/resize` and `GET /exec/{id}/json` for the exit code.

use std::sync::Arc;

use async_trait::async_trait;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::ResizeExecOptions;
use futures_util::StreamExt;

use super::convert::map_error;
use super::docker::DockerEngine;
use super::error::EngineError;
use super::exec::{ExecChunk, ExecControl, ExecProcess, ExecSpec};

/// Largest output chunk read from the engine at once.
const OUTPUT_CAPACITY: usize = 32 * 1024;

struct DockerExec {
    docker: Docker,
    id: String,
}

#[async_trait]
impl ExecControl for DockerExec {
    async fn resize(&self, cols: u16, rows: u16) -> Result<(), EngineError> {
        let options = ResizeExecOptions {
            h: i32::from(rows),
            w: i32::from(cols),
        };
        self.docker
            .resize_exec(&self.id, options)
            .await
            .map_err(map_error)
    }

    async fn exit_code(&self) -> Result<Option<i64>, EngineError> {
        let inspect = self
            .docker
            .inspect_exec(&self.id)
            .await
            .map_err(map_error)?;
        if inspect.running == Some(true) {
            return Ok(None);
        }
        Ok(inspect.exit_code)
    }
}

impl DockerEngine {
    /// Creates and starts an exec in `container`.
    pub(super) async fn start_exec(
        &self,
        container: &str,
        spec: &ExecSpec,
    ) -> Result<ExecProcess, EngineError> {
        let docker = self.docker().await?;
        let options = CreateExecOptions::<String> {
            attach_stdin: Some(spec.stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(spec.tty),
            cmd: Some(spec.cmd.clone()),
            privileged: Some(false),
            user: spec.user.clone(),
            ..CreateExecOptions::default()
        };
        let created = docker.create_exec(container, options).await;
        let created = self.observe(created.map_err(map_error))?;
        let start = StartExecOptions {
            detach: false,
            tty: spec.tty,
            output_capacity: Some(OUTPUT_CAPACITY),
        };
        let started = docker.start_exec(&created.id, Some(start)).await;
        let StartExecResults::Attached { output, input } =
            self.observe(started.map_err(map_error))?
        else {
            return Err(EngineError::Other(format!(
                "exec {} started detached",
                created.id
            )));
        };
        let control = Arc::new(DockerExec {
            docker,
            id: created.id.clone(),
        });
        if let (true, Some((cols, rows))) = (spec.tty, spec.size) {
            // the shell may not be ready for a resize yet; a failure here is not fatal
            let _ = control.resize(cols, rows).await;
        }
        let output = output.filter_map(|item| async move {
            match item {
                Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                    Some(Ok(ExecChunk::Stdout(message)))
                }
                Ok(LogOutput::StdErr { message }) => Some(Ok(ExecChunk::Stderr(message))),
                Ok(LogOutput::StdIn { .. }) => None,
                Err(e) => Some(Err(map_error(e))),
            }
        });
        Ok(ExecProcess {
            id: created.id,
            output: Box::pin(output),
            input,
            control,
        })
    }
}
