//! The whole agent in the test's process: `odac_agent::run::run_with` on an in-memory
//! [`FakeEngine`] against a real `odac-sim`, configured as the `odac-agent` binary would be
//! (an `agent.toml` from [`AgentOptions`], a token file of mode 0600, `ODAC_AGENT__…`
//! settings), on a runtime of its own. No Docker engine is involved; the scenarios that use it
//! read the fake's record of calls.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::config::Config;
use odac_agent::run::RunError;
use odac_host::engine::FakeEngine;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentOptions;
use crate::poll::poll;
use crate::sim::Sim;
use crate::{Error, Result};

/// An agent running in this process until [`InProcessAgent::stop`].
pub struct InProcessAgent {
    runtime: Runtime,
    task: JoinHandle<std::result::Result<(), RunError>>,
    shutdown: CancellationToken,
}

impl InProcessAgent {
    /// Starts the agent of `sim` with token `token` and agent name `name`, its files under
    /// `home`, on `engine`; `settings` are extra `ODAC_AGENT__…` pairs (the lock directory
    /// is always under `home`).
    pub fn start(
        sim: &Sim,
        home: &Path,
        (token, name): (&str, &str),
        engine: Arc<FakeEngine>,
        settings: &[(&str, &str)],
    ) -> Result<InProcessAgent> {
        let state = home.join("state");
        std::fs::create_dir_all(&state).map_err(|e| Error::io("create", &state, e))?;
        let token_file = home.join("token");
        std::fs::write(&token_file, format!("{token}\n"))
            .map_err(|e| Error::io("write", &token_file, e))?;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io("chmod", &token_file, e))?;
        let options = AgentOptions::new(sim.agents_url(), Some(sim.ca_path()), token, name);
        let file = home.join("agent.toml");
        std::fs::write(&file, options.toml(&state, &token_file))
            .map_err(|e| Error::io("write", &file, e))?;
        let mut env = vec![(
            "ODAC_AGENT__APPS__LOCK_DIR".to_owned(),
            home.join("locks").to_string_lossy().into_owned(),
        )];
        env.extend(
            settings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let config = Config::load_with_env(Some(&file), env)
            .map_err(|e| Error::Other(format!("agent config {}: {e}", file.display())))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::Other(format!("cannot build the agent's runtime: {e}")))?;
        let shutdown = CancellationToken::new();
        let task = runtime.spawn(odac_agent::run::run_with(config, engine, shutdown.clone()));
        Ok(InProcessAgent {
            runtime,
            task,
            shutdown,
        })
    }

    /// [`start`](Self::start) with no extra settings on a fake engine that has `image`, then
    /// [`wait_connected`](Self::wait_connected); also returns the engine.
    pub fn start_connected(
        sim: &Sim,
        home: &Path,
        token_and_name: (&str, &str),
        image: &str,
    ) -> Result<(InProcessAgent, Arc<FakeEngine>)> {
        let engine = Arc::new(FakeEngine::new());
        engine.add_image(image);
        let agent = InProcessAgent::start(sim, home, token_and_name, engine.clone(), &[])?;
        agent.wait_connected(sim)?;
        Ok((agent, engine))
    }

    /// Waits until `sim` lists exactly one host and it is connected; an agent that ended
    /// meanwhile is an error naming how it ended.
    pub fn wait_connected(&self, sim: &Sim) -> Result<()> {
        poll(
            "the agent's host to be connected",
            Duration::from_secs(60),
            || {
                if self.task.is_finished() {
                    return Ok(());
                }
                let hosts = sim.hosts().map_err(|e| e.to_string())?;
                match hosts.as_slice() {
                    [h] if h.connected => Ok(()),
                    other => Err(format!("{} host(s), none connected", other.len())),
                }
            },
        )?;
        if self.task.is_finished() {
            return Err(Error::Other(format!(
                "the agent ended early: {:?}",
                self.task
            )));
        }
        Ok(())
    }

    /// Cancels the agent and waits (10 s at most) for it to end cleanly.
    pub fn stop(self) -> Result<()> {
        self.shutdown.cancel();
        let ended = self
            .runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), self.task).await })
            .map_err(|_| Error::Other("the agent did not stop within 10 s of the shutdown".into()))?
            .map_err(|e| Error::Other(format!("the agent task failed: {e}")))?;
        ended.map_err(|e| Error::Other(format!("the agent ended with an error: {e}")))
    }
}
