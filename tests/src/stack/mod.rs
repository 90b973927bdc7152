//! [`Stack`]: one scenario's world — a temp dir, the simulator, optionally a TCP proxy between
//! agent and simulator and a unix proxy in front of the Docker socket, the agent, and the
//! label-based cleanup of the agent's containers. Fields drop in an order that matters: the
//! agent dies first (so it cannot recreate containers), then its containers are removed, then
//! the simulator and the proxies; on a panic the temp dir is kept and its path printed.
//!
//! The comparisons every fault scenario ends with live here too: the control plane's view
//! (`GET /api/apps`) equals the agent's (`statuses.json`), the desired state the agent holds
//! equals the control plane's apps, and exactly one container exists per app.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use odac_protocol::AppStatus;
use odac_simulator::state::views::AppView;
use serde_json::{Value, json};

use crate::agent::{Agent, AgentOptions};
use crate::bins::workspace_root;
use crate::docker::{Container, LabelCleanup, containers};
use crate::error::{Error, Result};
use crate::image::ensure_sleeper_image;
use crate::poll::poll;
use crate::sim::Sim;
use crate::tcp_proxy::TcpProxy;
use crate::unix_proxy::UnixProxy;

/// The agent token the scenarios' simulators accept.
mod converge;

pub const TOKEN: &str = "odac_e2e_token_0123456789";

/// A fixture host tree under `tests/fixtures/hosts/`.
pub fn fixture_host(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures/hosts").join(name)
}

/// How many instance names this process has handed out: the tests of one binary run as
/// threads of one process under `cargo test`, so the pid alone is not unique per test.
static INSTANCES: AtomicU32 = AtomicU32::new(0);

/// A container instance name unique to this call: the scenario (recognisable in `docker ps`
/// and in kept logs), the process id and a process-wide counter, so two stacks of one scenario
/// in one process (threads under `cargo test`, or one test starting two) never share an
/// instance, a temp dir or an instance lock. Call it once per stack and keep the name.
pub fn instance_name(scenario: &str) -> String {
    let slug: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let n = INSTANCES.fetch_add(1, Ordering::Relaxed);
    format!("e2e-{slug}-{}-{n}", std::process::id())
}

/// How to build a [`Stack`].
#[derive(Debug, Clone)]
pub struct StackBuilder {
    scenario: String,
    tcp_proxy: bool,
    docker_proxy: bool,
    start_agent: bool,
    tweak: Option<fn(&mut AgentOptions)>,
    host_root: Option<PathBuf>,
    heartbeat_secs: Option<u32>,
    hosts_per_token: Option<u32>,
    instance: Option<String>,
}

impl StackBuilder {
    /// Puts a [`TcpProxy`] between agent and simulator.
    pub fn tcp_proxy(mut self) -> Self {
        self.tcp_proxy = true;
        self
    }

    /// Puts a [`UnixProxy`] between agent and Docker engine.
    pub fn docker_proxy(mut self) -> Self {
        self.docker_proxy = true;
        self
    }

    /// Reads host facts under a fixture host tree.
    pub fn host_root(mut self, root: PathBuf) -> Self {
        self.host_root = Some(root);
        self
    }

    /// Changes the agent's options before it starts.
    pub fn agent_options(mut self, f: fn(&mut AgentOptions)) -> Self {
        self.tweak = Some(f);
        self
    }

    /// Has the simulator ask agents for a ping every `secs` (its `welcome.heartbeat_secs`).
    pub fn heartbeat_secs(mut self, secs: u32) -> Self {
        self.heartbeat_secs = Some(secs);
        self
    }

    /// Lets the simulator's token register `hosts` agent ids (the agent and, e.g., a bare
    /// protocol client beside it); by default a static token registers one.
    pub fn hosts_per_token(mut self, hosts: u32) -> Self {
        self.hosts_per_token = Some(hosts);
        self
    }

    /// Uses `instance` (from [`instance_name`]) instead of a new one: for a test that needs the
    /// name before the stack exists (e.g. an image clean-up declared first, so it drops last).
    pub fn instance(mut self, instance: &str) -> Self {
        self.instance = Some(instance.to_owned());
        self
    }

    /// Does not start the agent (the scenario starts it with [`Stack::start_agent`]).
    pub fn no_agent(mut self) -> Self {
        self.start_agent = false;
        self
    }

    /// Starts the world.
    pub fn start(self) -> Result<Stack> {
        ensure_sleeper_image()?;
        let instance = self
            .instance
            .clone()
            .unwrap_or_else(|| instance_name(&self.scenario));
        let dir = tempfile::Builder::new()
            .prefix(&format!("odac-e2e-{instance}-"))
            .tempdir()
            .map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
        let cleanup = LabelCleanup::new(format!("odac.instance={instance}"));
        let mut sim = Sim::start_with(dir.path(), TOKEN, self.heartbeat_secs)?;
        if let Some(hosts) = self.hosts_per_token {
            sim.allow_hosts_per_token(hosts)?;
        }
        let proxy = if self.tcp_proxy {
            Some(TcpProxy::start(sim.addr())?)
        } else {
            None
        };
        let docker_proxy = if self.docker_proxy {
            Some(UnixProxy::docker(dir.path())?)
        } else {
            None
        };
        let url = match &proxy {
            Some(p) => sim.agents_url_via(p.port()),
            None => sim.agents_url(),
        };
        let mut options = AgentOptions::new(url, Some(sim.ca_path()), TOKEN, &instance);
        if let Some(root) = &self.host_root {
            options.host_root = root.clone();
        }
        if let Some(p) = &docker_proxy {
            options.docker_host = Some(p.url());
        }
        if let Some(f) = self.tweak {
            f(&mut options);
        }
        let mut stack = Stack {
            agent: None,
            options,
            cleanup,
            sim,
            proxy,
            docker_proxy,
            instance,
            scenario: self.scenario,
            dir: Some(dir),
        };
        if self.start_agent {
            stack.start_agent()?;
        }
        Ok(stack)
    }
}

/// One scenario's processes, proxies and files.
pub struct Stack {
    /// The agent (dropped first: killed).
    pub agent: Option<Agent>,
    /// The options the agent is started with.
    pub options: AgentOptions,
    /// Removes the agent's containers (dropped second).
    pub cleanup: LabelCleanup,
    /// The simulator.
    pub sim: Sim,
    /// The agent ↔ simulator proxy.
    pub proxy: Option<TcpProxy>,
    /// The agent ↔ engine proxy.
    pub docker_proxy: Option<UnixProxy>,
    /// `apps.instance` of the agent.
    pub instance: String,
    /// The scenario's name.
    pub scenario: String,
    dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("scenario", &self.scenario)
            .field("instance", &self.instance)
            .finish()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            let kept = dir.keep();
            eprintln!(
                "{}: kept logs and state in {}",
                self.scenario,
                kept.display()
            );
        }
    }
}

impl Stack {
    /// A builder for scenario `name`.
    pub fn builder(name: &str) -> StackBuilder {
        StackBuilder {
            scenario: name.to_owned(),
            tcp_proxy: false,
            docker_proxy: false,
            start_agent: true,
            tweak: None,
            host_root: None,
            heartbeat_secs: None,
            hosts_per_token: None,
            instance: None,
        }
    }

    /// The scenario's temp dir.
    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// Starts the agent with [`Stack::options`].
    pub fn start_agent(&mut self) -> Result<()> {
        self.agent = Some(Agent::start(self.dir(), self.options.clone())?);
        Ok(())
    }

    /// [`start_agent`](Self::start_agent) with the extra settings `env` (`ODAC_AGENT__…`
    /// pairs), then [`wait_connected`](Self::wait_connected) for 30 s; the host's id.
    pub fn start_agent_connected(&mut self, env: &[(&str, &str)]) -> Result<String> {
        for (k, v) in env {
            self.options.env.push(((*k).to_owned(), (*v).to_owned()));
        }
        self.start_agent()?;
        self.wait_connected(Duration::from_secs(30))
    }

    /// A stack whose agent sees the fixture host `fixture`, once its host is connected.
    pub fn on_fixture_host(scenario: &str, fixture: &str) -> Result<Stack> {
        let stack = Stack::builder(scenario)
            .host_root(fixture_host(fixture))
            .start()?;
        stack.wait_connected(Duration::from_secs(30))?;
        Ok(stack)
    }

    /// The agent.
    pub fn agent(&self) -> Result<&Agent> {
        self.agent
            .as_ref()
            .ok_or_else(|| Error::Other("no agent started".to_owned()))
    }

    /// The agent, mutably.
    pub fn agent_mut(&mut self) -> Result<&mut Agent> {
        self.agent
            .as_mut()
            .ok_or_else(|| Error::Other("no agent started".to_owned()))
    }

    /// The agent ↔ simulator proxy.
    pub fn proxy(&self) -> Result<&TcpProxy> {
        self.proxy
            .as_ref()
            .ok_or_else(|| Error::Other("the stack has no tcp proxy".to_owned()))
    }

    /// Waits until the simulator lists exactly one host and it is connected; returns its id.
    pub fn wait_connected(&self, timeout: Duration) -> Result<String> {
        poll("the agent's host to be connected", timeout, || {
            let hosts = self.sim.hosts().map_err(|e| e.to_string())?;
            crate::sim::only_host(&hosts, true).map(|h| h.id)
        })
    }

    /// Waits until the simulator's host shows as disconnected.
    pub fn wait_disconnected(&self, timeout: Duration) -> Result<()> {
        poll("the agent's host to be disconnected", timeout, || {
            let hosts = self.sim.hosts().map_err(|e| e.to_string())?;
            if hosts.iter().all(|h| !h.connected) {
                Ok(())
            } else {
                Err("still connected".to_owned())
            }
        })
    }

    /// An app body for `POST /api/apps` running the sleeper image.
    pub fn app_body(name: &str) -> Value {
        json!({ "name": name, "image": crate::image::SLEEPER_IMAGE })
    }

    /// Waits until app `name` as the control plane shows it satisfies `pred`.
    pub fn wait_app(
        &self,
        name: &str,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&AppView) -> bool,
    ) -> Result<AppView> {
        poll(&format!("app {name}: {what}"), timeout, || {
            match self.sim.app(name).map_err(|e| e.to_string())? {
                Some(a) if pred(&a) => Ok(a),
                Some(a) => Err(format!(
                    "state={} restart_required={} status={:?}",
                    a.state, a.restart_required, a.status
                )),
                None => Err("no such app".to_owned()),
            }
        })
    }

    /// The agent's containers (label `odac.instance=<instance>`).
    pub fn containers(&self) -> Result<Vec<Container>> {
        containers(self.cleanup.label())
    }

    /// The agent's containers grouped by app.
    pub fn containers_by_app(&self) -> Result<BTreeMap<String, Vec<Container>>> {
        let mut m: BTreeMap<String, Vec<Container>> = BTreeMap::new();
        for c in self.containers()? {
            m.entry(c.app.clone()).or_default().push(c);
        }
        Ok(m)
    }

    /// Lets traffic through the TCP proxy again and waits up to 20 s for the agent to log a new
    /// session after its log position `mark`; returns when the link was restored.
    pub fn restore_link(&self, mark: usize) -> Result<std::time::Instant> {
        self.proxy()?.restore();
        let restored = std::time::Instant::now();
        self.agent()?.process()?.wait_for_line_after(
            mark,
            crate::agent::SESSION_UP,
            Duration::from_secs(20),
        )?;
        Ok(restored)
    }

    /// `docker kill`s the container of each app in `apps`.
    pub fn crash(&self, apps: &[&str]) -> Result<()> {
        let by_app = self.containers_by_app()?;
        for app in apps {
            let id = by_app
                .get(*app)
                .and_then(|c| c.first())
                .map(|c| c.id.clone())
                .ok_or_else(|| Error::Other(format!("no container for app {app}")))?;
            let out = std::process::Command::new("docker")
                .args(["kill", &id])
                .output()
                .map_err(|e| Error::Other(format!("cannot run docker kill: {e}")))?;
            if !out.status.success() {
                return Err(Error::Other(format!(
                    "docker kill {id}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
        Ok(())
    }

    /// Waits up to `timeout` for the agent to report every app in `apps` running again in a
    /// new container or after a restart, compared with `before`; returns the agent's statuses.
    pub fn wait_restarted(
        &self,
        apps: &[&str],
        before: &BTreeMap<String, AppStatus>,
        timeout: Duration,
    ) -> Result<BTreeMap<String, AppStatus>> {
        let agent = self.agent()?;
        poll("the agent to restart the crashed apps", timeout, || {
            let now = agent.statuses().map_err(|e| e.to_string())?;
            let restarted = apps.iter().all(|a| {
                now.get(*a).is_some_and(|s| {
                    s.state.as_str() == "running"
                        && before.get(*a).is_none_or(|b| {
                            s.restart_count > b.restart_count || s.container_id != b.container_id
                        })
                })
            });
            if restarted {
                Ok(now)
            } else {
                Err(format!("{now:?}"))
            }
        })
    }
}
