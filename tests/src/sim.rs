//! [`Sim`]: the real `odac-sim serve` as a child process on a fixed loopback port (so it can be
//! killed and restarted at the same address), with its state dir — and so its CA, generated at
//! first start — under the test's directory. It wraps the REST API (apps, hosts, the admin
//! fault API) through the simulator's own client, and the `odac` CLI as a real process.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use odac_simulator::cli::client::Client;
use odac_simulator::state::views::{AppView, HostView};
use serde_json::Value;

use crate::bins::{CLI, SIM, bin};
use crate::command::output_with_stdin;
use crate::error::{Error, Result};
use crate::ports::free_port;
use crate::process::Process;

/// How long the simulator may take to print its banner.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running (or stopped) simulator.
#[derive(Debug)]
pub struct Sim {
    port: u16,
    state_dir: PathBuf,
    log_dir: PathBuf,
    token: String,
    heartbeat_secs: Option<u32>,
    hosts_per_token: Option<u32>,
    starts: usize,
    extra_args: Vec<String>,
    process: Option<Process>,
}

/// What a run of the `odac` CLI printed.
#[derive(Debug, Clone)]
pub struct CliOutput {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Stdout.
    pub stdout: String,
    /// Stderr.
    pub stderr: String,
}

impl CliOutput {
    /// The stdout as JSON.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_str(&self.stdout)
            .map_err(|e| Error::Other(format!("odac printed no JSON ({e}): {}", self.stdout)))
    }
}

impl Sim {
    /// Starts a simulator with state in `dir/sim`, logs in `dir/logs`, accepting agent
    /// `token`.
    pub fn start(dir: &Path, token: &str) -> Result<Sim> {
        Sim::start_with(dir, token, None)
    }

    /// [`Sim::start`], telling agents to ping every `heartbeat_secs` (`--heartbeat-secs`;
    /// none: the simulator's default, 20 s).
    pub fn start_with(dir: &Path, token: &str, heartbeat_secs: Option<u32>) -> Result<Sim> {
        let mut last = None;
        for _ in 0..3 {
            let mut sim = Sim {
                port: free_port()?,
                state_dir: dir.join("sim"),
                log_dir: dir.join("logs"),
                token: token.to_owned(),
                heartbeat_secs,
                hosts_per_token: None,
                starts: 0,
                extra_args: Vec::new(),
                process: None,
            };
            match sim.spawn() {
                Ok(()) => return Ok(sim),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Other("odac-sim did not start".to_owned())))
    }

    /// [`Sim::start`] for a simulated fleet sharing `token`: it may register `hosts` agent
    /// ids (`--hosts-per-token`; a static token registers one by default).
    pub fn start_fleet(dir: &Path, token: &str, hosts: u32) -> Result<Sim> {
        let mut sim = Sim::start(dir, token)?;
        sim.allow_hosts_per_token(hosts)?;
        Ok(sim)
    }

    /// Restarts the simulator letting its static token register `hosts` agent ids
    /// (`--hosts-per-token`), e.g. an agent and a bare protocol client sharing the token.
    pub fn allow_hosts_per_token(&mut self, hosts: u32) -> Result<()> {
        self.hosts_per_token = Some(hosts);
        self.restart()
    }

    /// Restarts the simulator with more `odac-sim serve` arguments (e.g.
    /// `--catalog-registry HOST:PORT`).
    pub fn serve_with(&mut self, args: &[&str]) -> Result<()> {
        self.extra_args = args.iter().map(|a| (*a).to_owned()).collect();
        self.restart()
    }

    fn spawn(&mut self) -> Result<()> {
        self.starts += 1;
        let name = format!("odac-sim-{}", self.starts);
        let mut cmd = Command::new(bin(SIM)?);
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--state")
            .arg(&self.state_dir)
            .env("ODAC_SIM_TOKENS", &self.token)
            .env("ODAC_SIM_LOG", "info");
        if let Some(secs) = self.heartbeat_secs {
            cmd.arg("--heartbeat-secs").arg(secs.to_string());
        }
        if let Some(n) = self.hosts_per_token {
            cmd.arg("--hosts-per-token").arg(n.to_string());
        }
        cmd.args(&self.extra_args);
        let mut p = Process::spawn(&name, &mut cmd, &self.log_dir)?;
        match p.wait_for_line("agents: wss://", START_TIMEOUT) {
            Ok(_) => {
                self.process = Some(p);
                Ok(())
            }
            Err(e) => {
                let _ = p.sigkill();
                Err(Error::Other(format!(
                    "odac-sim did not start: {e}; output: {:?}",
                    p.tail(20)
                )))
            }
        }
    }

    /// Starts it again at the same address with the same state dir.
    pub fn restart(&mut self) -> Result<()> {
        if let Some(mut p) = self.process.take() {
            let _ = p.sigkill();
        }
        self.spawn()
    }

    /// SIGKILL: a crash; the fleet state persisted so far stays on disk.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(p) = self.process.as_mut() {
            p.sigkill()?;
        }
        Ok(())
    }

    /// The process, while one was started.
    pub fn process(&self) -> Option<&Process> {
        self.process.as_ref()
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `wss://127.0.0.1:PORT/agent/v1`.
    pub fn agents_url(&self) -> String {
        format!(
            "wss://127.0.0.1:{}{}",
            self.port,
            odac_simulator::AGENT_PATH
        )
    }

    /// The agents' URL as seen through a proxy on `port`.
    pub fn agents_url_via(&self, port: u16) -> String {
        format!("wss://127.0.0.1:{port}{}", odac_simulator::AGENT_PATH)
    }

    /// `https://127.0.0.1:PORT`.
    pub fn api_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The simulator's CA certificate (generated at first start).
    pub fn ca_path(&self) -> PathBuf {
        self.state_dir.join("ca.pem")
    }

    /// The accepted agent token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A REST client trusting the simulator's CA.
    pub fn client(&self) -> Result<Client> {
        Client::new(&self.api_url(), Some(&self.ca_path()), None)
            .map_err(|e| Error::Other(e.to_string()))
    }

    fn call<T>(
        &self,
        what: &str,
        f: impl FnOnce(&Client) -> std::result::Result<T, odac_simulator::cli::client::ClientError>,
    ) -> Result<T> {
        let c = self.client()?;
        f(&c).map_err(|e| Error::Other(format!("{what}: {e}")))
    }

    /// `GET /api/apps`.
    pub fn apps(&self) -> Result<Vec<AppView>> {
        self.call("GET /api/apps", |c| c.get_as("/api/apps"))
    }

    /// One app from `GET /api/apps`, if it exists.
    pub fn app(&self, name: &str) -> Result<Option<AppView>> {
        Ok(self.apps()?.into_iter().find(|a| a.name == name))
    }

    /// `GET /api/hosts`.
    pub fn hosts(&self) -> Result<Vec<HostView>> {
        self.call("GET /api/hosts", |c| c.get_as("/api/hosts"))
    }

    /// `POST /api/apps` with `body` (an app spec, optionally with `host`).
    pub fn create_app(&self, body: &Value) -> Result<Value> {
        self.call("POST /api/apps", |c| c.post("/api/apps", body))
    }

    /// `DELETE /api/apps/{name}`.
    pub fn delete_app(&self, name: &str) -> Result<Value> {
        let path = format!("/api/apps/{name}");
        self.call(&format!("DELETE {path}"), |c| c.delete(&path))
    }

    /// `POST /api/admin/faults` with `body` (see the simulator's fault API).
    pub fn faults(&self, body: &Value) -> Result<Value> {
        self.call("POST /api/admin/faults", |c| {
            c.post("/api/admin/faults", body)
        })
    }

    /// `GET /api/events/log`: the fleet's recorded events.
    pub fn event_log(&self) -> Result<Value> {
        self.call("GET /api/events/log", |c| c.get("/api/events/log"))
    }

    /// The `odac` CLI against this simulator (`--api`, `--ca-file` set; none of this
    /// process's `ODAC_API`, `ODAC_CA_FILE`, `ODAC_TOKEN`), for a test to add arguments to.
    pub fn odac_command(&self) -> Result<Command> {
        let mut cmd = Command::new(bin(CLI)?);
        cmd.arg("--api")
            .arg(self.api_url())
            .arg("--ca-file")
            .arg(self.ca_path())
            .env_remove("ODAC_API")
            .env_remove("ODAC_CA_FILE")
            .env_remove("ODAC_TOKEN");
        Ok(cmd)
    }

    /// Runs the `odac` CLI against this simulator (`--api`, `--ca-file` set).
    pub fn odac(&self, args: &[&str]) -> Result<CliOutput> {
        let out = self
            .odac_command()?
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::command(format!("odac {}", args.join(" ")), e.to_string()))?;
        Ok(CliOutput {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Runs a command line exactly as a user types it (`odac app gpu my-app`, split on
    /// spaces; `stdin` fed to it), with the simulator given through `ODAC_API` and
    /// `ODAC_CA_FILE` as a user's shell would, so that the arguments are the line's own.
    pub fn odac_line(&self, line: &str, stdin: Option<&str>) -> Result<CliOutput> {
        let mut words = line.split_whitespace();
        if words.next() != Some("odac") {
            return Err(Error::Other(format!("not an odac command line: {line}")));
        }
        let mut cmd = Command::new(bin(CLI)?);
        cmd.args(words)
            .env("ODAC_API", format!("{}/api/", self.api_url()))
            .env("ODAC_CA_FILE", self.ca_path())
            .env_remove("ODAC_TOKEN");
        let out = output_with_stdin(&mut cmd, line, stdin.map(str::as_bytes))?;
        let out = CliOutput {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        if out.code == 0 {
            Ok(out)
        } else {
            Err(Error::command(
                line,
                format!("exit {}: {}{}", out.code, out.stdout, out.stderr),
            ))
        }
    }

    /// Runs the `odac` CLI and requires exit 0.
    pub fn odac_ok(&self, args: &[&str]) -> Result<CliOutput> {
        let out = self.odac(args)?;
        if out.code == 0 {
            Ok(out)
        } else {
            Err(Error::command(
                format!("odac {}", args.join(" ")),
                format!("exit {}: {}{}", out.code, out.stdout, out.stderr),
            ))
        }
    }
}

/// The one host of `hosts` where it is the only one and its `connected` is `connected`;
/// otherwise, for a poll's error, each host's name and whether it is connected.
pub fn only_host(hosts: &[HostView], connected: bool) -> std::result::Result<HostView, String> {
    match hosts {
        [h] if h.connected == connected => Ok(h.clone()),
        other => Err(format!(
            "hosts: {:?}",
            other
                .iter()
                .map(|h| (&h.hostname, h.connected))
                .collect::<Vec<_>>()
        )),
    }
}
