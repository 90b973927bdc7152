//! [`Agent`]: the real `odac-agent run --config FILE` as a child process. The test writes the
//! `agent.toml` (control-plane URL, CA, token file with mode 0600, state dir, host root, Docker
//! endpoint, a per-test container instance and labels, short heartbeats and backoffs so faults
//! resolve in seconds) and reads the agent's own view back from its state dir
//! (`statuses.json`, `desired.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use odac_protocol::{AppStatus, DesiredState};

use crate::bins::{AGENT, bin};
use crate::docker::{RUN_LABEL, TEST_LABEL};
use crate::error::{Error, Result};
use crate::process::Process;

/// The agent's log line once a control-plane session is up.
pub const SESSION_UP: &str = "control plane session established";
/// The agent's log line when a control-plane session ends unasked.
pub const SESSION_LOST: &str = "control plane session lost";

/// The agent's settings a scenario may change.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// `control_plane.url`.
    pub url: String,
    /// `control_plane.ca_file` (none: the public web roots).
    pub ca_file: Option<PathBuf>,
    /// The bearer token written to the token file.
    pub token: String,
    /// `host_root`: `/` or a fixture host tree.
    pub host_root: PathBuf,
    /// `docker.host` (none: the default socket).
    pub docker_host: Option<String>,
    /// `apps.instance`: container names are `<instance>-<app>`.
    pub instance: String,
    /// `control_plane.heartbeat_secs`.
    pub heartbeat_secs: u64,
    /// `control_plane.connect_timeout_secs`.
    pub connect_timeout_secs: u64,
    /// `control_plane.backoff_base_ms`.
    pub backoff_base_ms: u64,
    /// `control_plane.backoff_max_secs`.
    pub backoff_max_secs: u64,
    /// `control_plane.auth_retry_secs`.
    pub auth_retry_secs: u64,
    /// `apps.poll_interval_ms`.
    pub poll_interval_ms: u64,
    /// `apps.stop_timeout_secs`.
    pub stop_timeout_secs: u64,
    /// `inventory.interval_secs`.
    pub inventory_secs: u64,
    /// `log_level`.
    pub log_level: String,
    /// Extra environment of the agent process (e.g. `GIT_CONFIG_GLOBAL` for its git runs).
    pub env: Vec<(String, String)>,
}

impl AgentOptions {
    /// Test defaults: fast heartbeats, backoff capped at 5 s, 500 ms app polling.
    pub fn new(url: String, ca_file: Option<PathBuf>, token: &str, instance: &str) -> Self {
        AgentOptions {
            url,
            ca_file,
            token: token.to_owned(),
            host_root: PathBuf::from("/"),
            docker_host: None,
            instance: instance.to_owned(),
            heartbeat_secs: 5,
            connect_timeout_secs: 5,
            backoff_base_ms: 500,
            backoff_max_secs: 5,
            auth_retry_secs: 300,
            poll_interval_ms: 500,
            stop_timeout_secs: 2,
            inventory_secs: 2,
            log_level: "info,odac_agent=debug".to_owned(),
            env: Vec::new(),
        }
    }

    /// The `agent.toml` text for state dir `state_dir` and token file `token_file`.
    pub fn toml(&self, state_dir: &Path, token_file: &Path) -> String {
        let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
        let p = |p: &Path| q(&p.to_string_lossy());
        let mut t = String::new();
        t.push_str(&format!("state_dir = {}\n", p(state_dir)));
        t.push_str(&format!("host_root = {}\n", p(&self.host_root)));
        t.push_str(&format!("log_level = {}\n", q(&self.log_level)));
        t.push_str("\n[control_plane]\n");
        t.push_str(&format!("url = {}\n", q(&self.url)));
        if let Some(ca) = &self.ca_file {
            t.push_str(&format!("ca_file = {}\n", p(ca)));
        }
        t.push_str(&format!("token_file = {}\n", p(token_file)));
        t.push_str(&format!("heartbeat_secs = {}\n", self.heartbeat_secs));
        t.push_str(&format!(
            "connect_timeout_secs = {}\n",
            self.connect_timeout_secs
        ));
        t.push_str(&format!("backoff_base_ms = {}\n", self.backoff_base_ms));
        t.push_str(&format!("backoff_max_secs = {}\n", self.backoff_max_secs));
        t.push_str(&format!("auth_retry_secs = {}\n", self.auth_retry_secs));
        t.push_str("\n[docker]\n");
        if let Some(h) = &self.docker_host {
            t.push_str(&format!("host = {}\n", q(h)));
        }
        t.push_str("\n[inventory]\n");
        t.push_str(&format!("interval_secs = {}\n", self.inventory_secs));
        t.push_str("\n[apps]\n");
        t.push_str(&format!("instance = {}\n", q(&self.instance)));
        t.push_str(&format!("poll_interval_ms = {}\n", self.poll_interval_ms));
        t.push_str(&format!("stop_timeout_secs = {}\n", self.stop_timeout_secs));
        t.push_str("\n[apps.extra_labels]\n");
        t.push_str(&format!("{} = \"1\"\n", q(TEST_LABEL)));
        t.push_str(&format!("{} = {}\n", q(RUN_LABEL), q(&self.instance)));
        t
    }
}

/// A running (or stopped) agent with its files under one directory.
#[derive(Debug)]
pub struct Agent {
    dir: PathBuf,
    options: AgentOptions,
    starts: usize,
    process: Option<Process>,
}

impl Agent {
    /// Writes the configuration under `dir/agent` and starts the agent.
    pub fn start(dir: &Path, options: AgentOptions) -> Result<Agent> {
        let mut a = Agent {
            dir: dir.to_owned(),
            options,
            starts: 0,
            process: None,
        };
        a.spawn()?;
        Ok(a)
    }

    /// The agent's directory (`config`, `token`, `state/`).
    pub fn home(&self) -> PathBuf {
        self.dir.join("agent")
    }

    /// Its state dir.
    pub fn state_dir(&self) -> PathBuf {
        self.home().join("state")
    }

    /// Its configuration file.
    pub fn config_path(&self) -> PathBuf {
        self.home().join("agent.toml")
    }

    /// The options it was (last) started with.
    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    fn write_files(&self) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let home = self.home();
        std::fs::create_dir_all(self.state_dir())
            .map_err(|e| Error::io("create", self.state_dir(), e))?;
        let token = home.join("token");
        std::fs::write(&token, format!("{}\n", self.options.token))
            .map_err(|e| Error::io("write", &token, e))?;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io("chmod 600", &token, e))?;
        let config = self.config_path();
        std::fs::write(&config, self.options.toml(&self.state_dir(), &token))
            .map_err(|e| Error::io("write", &config, e))
    }

    fn spawn(&mut self) -> Result<()> {
        self.write_files()?;
        self.starts += 1;
        let name = format!("odac-agent-{}", self.starts);
        let mut cmd = run_command(&self.config_path())?;
        cmd.envs(self.options.env.iter().map(|(k, v)| (k, v)));
        self.process = Some(Process::spawn(&name, &mut cmd, &self.dir.join("logs"))?);
        Ok(())
    }

    /// Restarts it (SIGKILL first if it still runs) with `options` changed by `change`.
    pub fn restart_with(&mut self, change: impl FnOnce(&mut AgentOptions)) -> Result<()> {
        if let Some(mut p) = self.process.take() {
            let _ = p.sigkill();
        }
        change(&mut self.options);
        self.spawn()
    }

    /// Restarts it with the same options.
    pub fn restart(&mut self) -> Result<()> {
        self.restart_with(|_| {})
    }

    /// How many times it was started.
    pub fn starts(&self) -> usize {
        self.starts
    }

    /// The current process.
    pub fn process(&self) -> Result<&Process> {
        self.process
            .as_ref()
            .ok_or_else(|| Error::Other("the agent was not started".to_owned()))
    }

    /// The current process, mutably (signals).
    pub fn process_mut(&mut self) -> Result<&mut Process> {
        self.process
            .as_mut()
            .ok_or_else(|| Error::Other("the agent was not started".to_owned()))
    }

    /// The statuses the agent last persisted, by app name.
    pub fn statuses(&self) -> Result<BTreeMap<String, AppStatus>> {
        let path = self.state_dir().join("statuses.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let list: Vec<AppStatus> = serde_json::from_str(&text)
            .map_err(|e| Error::Other(format!("{}: not a status list: {e}", path.display())))?;
        Ok(list.into_iter().map(|s| (s.name.clone(), s)).collect())
    }

    /// The desired state the agent last persisted.
    pub fn desired(&self) -> Result<Option<DesiredState>> {
        let path = self.state_dir().join("desired.json");
        match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| Error::Other(format!("{}: not a desired state: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("read", &path, e)),
        }
    }
}

/// `odac-agent run --config CONFIG` with none of this process's agent settings: no token,
/// systemd notify socket, watchdog or `ODAC_AGENT__…` variable reaches it.
pub fn run_command(config: &Path) -> Result<Command> {
    let mut cmd = Command::new(bin(AGENT)?);
    cmd.arg("run")
        .arg("--config")
        .arg(config)
        .env_remove("ODAC_AGENT_TOKEN")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC");
    for (k, _) in std::env::vars() {
        if k.starts_with("ODAC_AGENT__") {
            cmd.env_remove(k);
        }
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn config_text_is_valid_toml_for_the_agent() {
        let o = AgentOptions::new(
            "wss://127.0.0.1:1/agent/v1".into(),
            Some(PathBuf::from("/tmp/ca \"x\".pem")),
            "t",
            "e2e-x",
        );
        let text = o.toml(Path::new("/tmp/state"), Path::new("/tmp/token"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.toml");
        std::fs::write(&file, &text).unwrap();
        let c = odac_agent::config::Config::load_with_env(Some(&file), Vec::new()).unwrap();
        assert_eq!(c.control_plane.url, "wss://127.0.0.1:1/agent/v1");
        assert_eq!(c.apps.instance, "e2e-x");
        assert_eq!(
            c.apps.extra_labels.get(RUN_LABEL).map(String::as_str),
            Some("e2e-x")
        );
        assert_eq!(c.state_dir, PathBuf::from("/tmp/state"));
        assert_eq!(
            c.control_plane.ca_file,
            Some(PathBuf::from("/tmp/ca \"x\".pem"))
        );
    }
}
