//! Exec in [`FakeEngine`]: recorded as [`EngineCall::Exec`], refused like a real engine for a
//! container that is missing or not running, and otherwise an echo: what is written to the
//! exec's input comes back on its output (stdout), and once the input is closed the command
//! exits with the code [`FakeEngine::set_exec_exit_code`] set (0 by default). Resizes are
//! recorded ([`FakeEngine::exec_resizes`]).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::io::AsyncReadExt;

use super::{EngineCall, FakeEngine};
use crate::engine::error::EngineError;
use crate::engine::exec::{ExecChunk, ExecControl, ExecProcess, ExecSpec};
use crate::engine::types::ContainerState;
use crate::lock::lock;

/// What the fake's execs share with the test.
#[derive(Debug, Default)]
pub(super) struct ExecRecord {
    pub(super) resizes: Vec<(u16, u16)>,
    pub(super) exit_code: i64,
    pub(super) finished: bool,
}

struct FakeExec {
    record: Arc<Mutex<ExecRecord>>,
}

#[async_trait]
impl ExecControl for FakeExec {
    async fn resize(&self, cols: u16, rows: u16) -> Result<(), EngineError> {
        lock(&self.record).resizes.push((cols, rows));
        Ok(())
    }

    async fn exit_code(&self) -> Result<Option<i64>, EngineError> {
        let r = lock(&self.record);
        Ok(r.finished.then_some(r.exit_code))
    }
}

impl FakeEngine {
    /// The exit code of every later exec (once its input is closed).
    pub fn set_exec_exit_code(&self, code: i64) {
        lock(&self.lock().exec).exit_code = code;
    }

    /// Every TTY size execs were set to, in order.
    pub fn exec_resizes(&self) -> Vec<(u16, u16)> {
        lock(&self.lock().exec).resizes.clone()
    }

    pub(super) fn fake_exec(
        &self,
        container: &str,
        spec: &ExecSpec,
    ) -> Result<ExecProcess, EngineError> {
        let mut state = self.enter(EngineCall::Exec(container.to_owned(), spec.clone()))?;
        let c = Self::container(&mut state, container)?;
        if c.details.status != ContainerState::Running {
            return Err(EngineError::Conflict(format!(
                "Container {container} is not running"
            )));
        }
        let record = Arc::clone(&state.exec);
        {
            let mut r = lock(&record);
            r.finished = false;
            if let Some((cols, rows)) = spec.size {
                r.resizes.push((cols, rows));
            }
        }
        let (input, output) = tokio::io::duplex(64 * 1024);
        let done = Arc::clone(&record);
        let output = futures_util::stream::unfold(output, move |mut out| {
            let done = Arc::clone(&done);
            async move {
                let mut buf = vec![0u8; 8192];
                match out.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        lock(&done).finished = true;
                        None
                    }
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok(ExecChunk::Stdout(buf.into())), out))
                    }
                }
            }
        });
        Ok(ExecProcess {
            id: format!("fake-exec-{}", state.calls.len()),
            output: Box::pin(output),
            input: Box::pin(input),
            control: Arc::new(FakeExec { record }),
        })
    }
}
