//! Test harness: an in-process `odac-sim` on a loopback port with its own runtime, helpers to
//! run the `odac` binary against it, and protocol-level fake agents to make hosts exist.

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use odac_protocol::{AgentMessage, ControlMessage, Inventory, InventoryReport};
use odac_simulator::cli::client::Client;
use odac_simulator::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};
use odac_simulator::{ServeConfig, Server};
use serde_json::Value;

pub const TOKEN: &str = "test-agent-token";

/// Hosts the shared test token may register (the tests' fake fleets use one token).
pub const HOSTS_PER_TOKEN: u32 = 64;

pub struct Sim {
    pub rt: tokio::runtime::Runtime,
    pub server: Option<Server>,
    pub dir: tempfile::TempDir,
    pub listen: String,
}

impl Sim {
    pub fn start() -> Sim {
        Self::start_with(|_| {})
    }

    pub fn start_with(f: impl FnOnce(&mut ServeConfig)) -> Sim {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ServeConfig::new("127.0.0.1:0", dir.path().join("state"));
        cfg.tokens = vec![TOKEN.to_owned()];
        cfg.hosts_per_token = HOSTS_PER_TOKEN;
        f(&mut cfg);
        let server = rt.block_on(Server::start(cfg)).unwrap();
        let listen = server.addr.to_string();
        Sim {
            rt,
            server: Some(server),
            dir,
            listen,
        }
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    /// Stops gracefully and starts again on the same port and state dir.
    pub fn restart(&mut self) {
        self.restart_with(|_| {});
    }

    /// [`Sim::restart`] with `f` changing the configuration.
    pub fn restart_with(&mut self, f: impl FnOnce(&mut ServeConfig)) {
        let server = self.server.take().unwrap();
        self.rt.block_on(server.shutdown());
        let mut cfg = ServeConfig::new(self.listen.clone(), self.dir.path().join("state"));
        cfg.tokens = vec![TOKEN.to_owned()];
        cfg.hosts_per_token = HOSTS_PER_TOKEN;
        f(&mut cfg);
        self.server = Some(self.rt.block_on(Server::start(cfg)).unwrap());
    }

    pub fn api(&self) -> String {
        self.server().api_url()
    }

    pub fn ca_path(&self) -> String {
        self.server().ca_path.display().to_string()
    }

    pub fn client(&self) -> Client {
        Client::new(&self.api(), Some(&self.server().ca_path), None).unwrap()
    }

    /// Runs `odac ARGS` against this simulator.
    pub fn odac(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_odac"))
            .args(args)
            .env("ODAC_API", self.api())
            .env("ODAC_CA_FILE", self.ca_path())
            .env_remove("ODAC_TOKEN")
            .output()
            .unwrap()
    }

    /// Starts a simulated agent `id` (computes statuses like a real host) with inventory
    /// profile `p` and waits until the API shows it connected; dropping the sender stops it.
    pub fn sim_agent(&self, id: &str, p: usize) -> tokio::sync::watch::Sender<bool> {
        use odac_simulator::fake_agent::sim_agent::{SimAgent, SimAgentConfig};
        let (stop, rx) = tokio::sync::watch::channel(false);
        let agent = SimAgent::new(
            SimAgentConfig {
                url: self.server().agents_url(),
                ca_pem: self.server().ca_pem.clone().into_bytes(),
                token: TOKEN.to_owned(),
                agent_id: id.to_owned(),
                inventory: odac_simulator::fake_agent::inventories::profile(p, id),
                heartbeat: Duration::from_secs(20),
            },
            std::sync::Arc::default(),
        );
        self.rt.spawn(agent.run(rx));
        self.wait_api("/api/hosts", |h| {
            h.as_array()
                .unwrap()
                .iter()
                .any(|h| h["id"] == id && h["connected"] == true && h["inventory"].is_object())
        });
        stop
    }

    /// A fake agent `id` (`profile(1, id)`) with the app `app` of `image` assigned to it.
    pub fn agent_with_app(&self, id: &str, app: &str, image: &str) -> AgentConn {
        self.agent_on_with_app(id, id, app, image)
    }

    /// [`agent_with_app`](Self::agent_with_app) on a host named `hostname`.
    pub fn agent_on_with_app(&self, id: &str, hostname: &str, app: &str, image: &str) -> AgentConn {
        let c = self.agent(
            id,
            odac_simulator::fake_agent::inventories::profile(1, hostname),
        );
        self.rt
            .block_on(
                self.server()
                    .hub
                    .create_app(Some(id), odac_protocol::AppSpec::new(app, image)),
            )
            .unwrap();
        c
    }

    /// Sends the fake agent `c`'s `app_status` report `seq` with `status`.
    pub fn send_status(&self, c: &mut AgentConn, seq: u64, status: odac_protocol::AppStatus) {
        let report = AgentMessage::AppStatus(odac_protocol::AppStatusReport { seq, status });
        self.rt.block_on(c.send(&report)).unwrap();
    }

    /// Creates an app through the API (`POST /api/apps` with `body`, answered 201); its spec.
    pub fn create_app(&self, body: &Value) -> odac_protocol::AppSpec {
        self.create_app_text(&body.to_string())
    }

    /// [`create_app`](Self::create_app) with the body as JSON text.
    pub fn create_app_text(&self, body: &str) -> odac_protocol::AppSpec {
        let (s, v) = self.call("POST", "/api/apps", Some(body));
        assert_eq!(s, 201, "{v}");
        serde_json::from_value(v["spec"].clone()).unwrap()
    }

    /// A connection to the agents endpoint with the test token, nothing sent on it yet (await
    /// it on [`rt`](Self::rt)).
    pub fn raw_conn(&self) -> impl std::future::Future<Output = AgentConn> + 'static {
        let url = self.server().agents_url();
        let ca = self.server().ca_pem.clone();
        async move {
            AgentConn::connect(&url, ca.as_bytes(), TOKEN)
                .await
                .unwrap()
        }
    }

    /// Starts `odac ARGS` against this simulator with `stdin` and piped stdout and stderr.
    pub fn spawn_odac(&self, args: &[&str], stdin: Stdio) -> Child {
        Command::new(env!("CARGO_BIN_EXE_odac"))
            .args(args)
            .env("ODAC_API", self.api())
            .env("ODAC_CA_FILE", self.ca_path())
            .env_remove("ODAC_TOKEN")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The first control message to the fake agent `c` within 10 s that `pick` maps to a value.
    pub fn recv_control<T>(
        &self,
        c: &mut AgentConn,
        pick: impl Fn(&ControlMessage) -> Option<T>,
    ) -> Result<T, ConnError> {
        self.rt
            .block_on(c.recv_until(Duration::from_secs(10), |m| match m {
                Incoming::Message(msg) => pick(msg),
                _ => None,
            }))
    }

    /// Connects a fake agent, does the handshake and sends `inv` (seq 1); returns the
    /// connection with the welcome's desired state and the inventory's ack consumed.
    pub fn agent(&self, id: &str, inv: Inventory) -> AgentConn {
        let url = self.server().agents_url();
        let ca = self.server().ca_pem.clone();
        self.rt.block_on(async move {
            let (mut c, w) = AgentConn::connect_hello(
                &url,
                ca.as_bytes(),
                TOKEN,
                AgentConn::hello(id, &inv.host.hostname),
            )
            .await
            .unwrap();
            assert_eq!(w.host_id, id);
            c.send(&AgentMessage::Inventory(InventoryReport {
                seq: 1,
                inventory: inv,
            }))
            .await
            .unwrap();
            let mut got = 0;
            while got < 2 {
                match c.recv_timeout(Duration::from_secs(5)).await.unwrap() {
                    Incoming::Message(odac_protocol::ControlMessage::DesiredState(_)) => got += 1,
                    Incoming::Message(odac_protocol::ControlMessage::Ack(a)) if a.seq == 1 => {
                        got += 1
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            c
        })
    }

    /// Waits until `f` holds for the API's JSON at `path`.
    pub fn wait_api(&self, path: &str, f: impl Fn(&Value) -> bool) -> Value {
        let client = self.client();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let v = client.get(path).unwrap();
            if f(&v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting on {path}: {v}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

impl Sim {
    /// An HTTP client that trusts this simulator's CA and returns error statuses as answers.
    fn http_agent(&self) -> ureq::Agent {
        use ureq::tls::{Certificate, RootCerts, TlsConfig};
        let ca = Certificate::from_pem(self.server().ca_pem.as_bytes()).unwrap();
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .tls_config(
                TlsConfig::builder()
                    .root_certs(RootCerts::new_with_certs(&[ca]))
                    .build(),
            )
            .build()
            .into()
    }

    /// `GET path` as text: (status, content type, body).
    pub fn get_text(&self, path: &str) -> (u16, String, String) {
        let agent = self.http_agent();
        let mut resp = agent.get(&format!("{}{path}", self.api())).call().unwrap();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let status = resp.status().as_u16();
        (status, ct, resp.body_mut().read_to_string().unwrap())
    }

    /// A raw request: (status, JSON body or Null).
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        self.call_auth(method, path, body, None)
    }

    pub fn call_auth(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> (u16, Value) {
        self.try_call_auth(method, path, body, token).unwrap()
    }

    /// A raw request that may fail in transport (a server that answers before reading all of a
    /// large body may reset the connection under the client's feet).
    pub fn try_call_auth(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> Result<(u16, Value), ureq::Error> {
        let agent = self.http_agent();
        let url = format!("{}{path}", self.api());
        let auth = token.map(|t| format!("Bearer {t}"));
        let resp = match (method, body) {
            ("GET", _) => {
                let mut r = agent.get(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            ("DELETE", _) => {
                let mut r = agent.delete(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            (m, b) => {
                let mut r = match m {
                    "POST" => agent.post(&url),
                    "PUT" => agent.put(&url),
                    other => panic!("method {other}"),
                };
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.header("Content-Type", "application/json")
                    .send(b.unwrap_or("").as_bytes())
            }
        };
        let mut resp = resp?;
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string()?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }
}

/// Makes `st` a crash loop (exit code 3, next retry in 2100, output "loading", "boom") that
/// still carries an engine refusal of an earlier run.
pub fn crash_loop_after_an_old_refusal(st: &mut odac_protocol::AppStatus) {
    st.gpu.fallback = Some(engine_refusal("an old refusal"));
    st.crash = crash_info("loading\nboom\n");
}

/// The engine's refusal of a GPU device with `words`.
pub fn engine_refusal(words: &str) -> odac_protocol::Fallback {
    odac_protocol::Fallback {
        tier: odac_protocol::FallbackTier::Engine,
        reason: odac_protocol::Reason::EngineRejected,
        detail: Some(words.to_owned()),
    }
}

/// Makes `st` an app in `state` with no GPU attached because the engine refused it (`words`).
pub fn engine_refused(
    st: &mut odac_protocol::AppStatus,
    state: odac_protocol::AppState,
    words: &str,
) {
    st.state = state;
    st.gpu.attached = None;
    st.gpu.fallback = Some(engine_refusal(words));
}

/// A crash loop's crash: exit code 3, not OOM-killed, next retry in 2100, output `tail`.
pub fn crash_info(tail: &str) -> Option<odac_protocol::CrashInfo> {
    Some(odac_protocol::CrashInfo {
        reason: odac_protocol::CrashReason::CrashLoop,
        exit_code: Some(3),
        oom_killed: false,
        next_retry_at_ms: Some(4_102_444_800_000),
        output_tail: Some(tail.to_owned()),
    })
}

/// The agent's end of the log stream `request_id`: complete, nothing dropped.
pub fn logs_complete(request_id: String) -> AgentMessage {
    AgentMessage::LogsEnd(odac_protocol::LogsEnd {
        request_id,
        reason: odac_protocol::LogsEndReason::Complete,
        dropped: 0,
        message: String::new(),
    })
}
