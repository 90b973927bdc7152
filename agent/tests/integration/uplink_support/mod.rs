//! Shared pieces of the uplink tests: a private CA and a server certificate generated at test
//! time, an in-process TLS WebSocket control plane whose behaviour each test steers and whose
//! log each test reads, and an in-memory app manager implementing `AppControl`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::result_large_err,
    dead_code
)]

mod running;
pub use running::{Running, capture_logs, manager_on, run_uplink, spawn_welcomed, unacking_server};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use odac_agent::uplink::{
    AppControl, ApplyError, BackoffPolicy, Dialer, Endpoint, OutboxLimits, Token, UplinkConfig, tls,
};
use odac_protocol::{
    Ack, AgentMessage, AppSpec, AppStatus, ControlMessage, DesiredState, ErrorCode, Hello,
    Inventory, Welcome, decode_agent, encode,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

pub const TOKEN: &str = "tok-7Hq2xZ-secret-9f81";

/// A CA and a server certificate for 127.0.0.1 signed by it.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca_file: PathBuf,
    pub server_chain: Vec<CertificateDer<'static>>,
    pub server_key: Vec<u8>,
    /// A client certificate and key issued by the same CA (mTLS).
    pub client_cert_file: PathBuf,
    pub client_key_file: PathBuf,
}

impl Pki {
    pub fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "odac test ca");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        let client_key = KeyPair::generate().unwrap();
        let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        client_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "agent-test-1");
        let client = client_params.signed_by(&client_key, &issuer).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca_cert.pem()).unwrap();
        let client_cert_file = dir.path().join("client.pem");
        std::fs::write(&client_cert_file, client.pem()).unwrap();
        let client_key_file = dir.path().join("client.key");
        std::fs::write(&client_key_file, client_key.serialize_pem()).unwrap();
        Pki {
            dir,
            ca_file,
            client_cert_file,
            client_key_file,
            server_chain: vec![leaf.der().clone()],
            server_key: leaf_key.serialize_der(),
        }
    }

    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let cfg = rustls::ServerConfig::builder_with_provider(tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(self.server_chain.clone(), key)
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
    }

    /// A server that demands a client certificate issued by this CA.
    pub fn mtls_acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut roots = rustls::RootCertStore::empty();
        let ca = std::fs::read(&self.ca_file).unwrap();
        use rustls::pki_types::pem::PemObject;
        for c in CertificateDer::pem_slice_iter(&ca) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            tls::crypto_provider(),
        )
        .build()
        .unwrap();
        let cfg = rustls::ServerConfig::builder_with_provider(tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.server_chain.clone(), key)
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
    }

    /// Client TLS settings trusting this CA.
    pub fn client_tls(&self) -> Arc<rustls::ClientConfig> {
        tls::client_config(&tls::TlsSettings {
            ca_file: Some(self.ca_file.clone()),
            ..Default::default()
        })
        .unwrap()
    }
}

/// How the fake control plane behaves; tests change it while it runs.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Answer the upgrade with this HTTP status instead of accepting.
    pub reject_status: Option<u16>,
    /// `Retry-After` header value sent with `reject_status`.
    pub retry_after: Option<String>,
    /// Select the `odac.agent.v1` subprotocol when the agent offers it.
    pub select_subprotocol: bool,
    /// Expected bearer token (401 otherwise).
    pub token: String,
    /// Answer `hello` with `welcome`.
    pub welcome: bool,
    /// Ack every report.
    pub auto_ack: bool,
    /// After `welcome`, stop reading the socket (so pings go unanswered).
    pub mute_after_welcome: bool,
    /// Close each session this long after `welcome`.
    pub close_after: Option<Duration>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            reject_status: None,
            retry_after: None,
            select_subprotocol: true,
            token: TOKEN.to_owned(),
            welcome: true,
            auto_ack: true,
            mute_after_welcome: false,
            close_after: None,
        }
    }
}

/// What the fake control plane saw.
#[derive(Debug, Clone, Default)]
pub struct ServerLog {
    /// TCP accepts, with the (virtual) time.
    pub accepts: Vec<Instant>,
    /// Sessions that reached `welcome`.
    pub welcomed: Vec<Instant>,
    /// Every decoded agent message, with its connection number.
    pub messages: Vec<(usize, AgentMessage)>,
    /// Close codes received from the agent.
    pub closes: Vec<(usize, u16)>,
    /// Text frames that did not decode.
    pub undecodable: Vec<String>,
    /// The latest status per app.
    pub view: BTreeMap<String, AppStatus>,
    /// Authorization headers seen (to check the token travels).
    pub auth_ok: usize,
    pub auth_bad: usize,
    /// TLS handshakes that failed, server side.
    pub tls_failures: Vec<String>,
}

impl ServerLog {
    /// What `pick` takes from each message it matches, in the order the messages came.
    fn picked<T>(&self, pick: impl Fn(&AgentMessage) -> Option<T>) -> Vec<T> {
        self.messages.iter().filter_map(|(_, m)| pick(m)).collect()
    }

    pub fn hellos(&self) -> Vec<Hello> {
        self.picked(|m| match m {
            AgentMessage::Hello(h) => Some(h.clone()),
            _ => None,
        })
    }

    pub fn of_conn(&self, conn: usize) -> Vec<AgentMessage> {
        self.messages
            .iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, m)| m.clone())
            .collect()
    }

    pub fn errors(&self) -> Vec<odac_protocol::ErrorMessage> {
        self.picked(|m| match m {
            AgentMessage::Error(e) => Some(e.clone()),
            _ => None,
        })
    }

    pub fn acks(&self) -> Vec<u64> {
        self.picked(|m| match m {
            AgentMessage::Ack(a) => Some(a.seq),
            _ => None,
        })
    }
}

/// An in-process TLS WebSocket control plane.
pub struct TestServer {
    pub addr: SocketAddr,
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub log: Arc<Mutex<ServerLog>>,
    /// Frames to push to the current session.
    outgoing: Arc<Mutex<Option<mpsc::UnboundedSender<Message>>>>,
    tasks: Arc<Mutex<JoinSet<()>>>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(pki: &Pki, behaviour: Behaviour) -> TestServer {
        Self::start_on(pki, "127.0.0.1:0".parse().unwrap(), behaviour, None).await
    }

    /// A server that requires a client certificate from the test CA.
    pub async fn start_mtls(pki: &Pki, behaviour: Behaviour) -> TestServer {
        Self::start_with(
            pki.mtls_acceptor(),
            "127.0.0.1:0".parse().unwrap(),
            behaviour,
            None,
        )
        .await
    }

    /// Starts on `addr`, sharing `log` with an earlier instance if given.
    pub async fn start_on(
        pki: &Pki,
        addr: SocketAddr,
        behaviour: Behaviour,
        log: Option<Arc<Mutex<ServerLog>>>,
    ) -> TestServer {
        Self::start_with(pki.acceptor(), addr, behaviour, log).await
    }

    async fn start_with(
        acceptor: tokio_rustls::TlsAcceptor,
        addr: SocketAddr,
        behaviour: Behaviour,
        log: Option<Arc<Mutex<ServerLog>>>,
    ) -> TestServer {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let behaviour = Arc::new(Mutex::new(behaviour));
        let log = log.unwrap_or_default();
        let outgoing = Arc::new(Mutex::new(None));
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        let accept_task = tokio::spawn({
            let (behaviour, log, outgoing, tasks) = (
                behaviour.clone(),
                log.clone(),
                outgoing.clone(),
                tasks.clone(),
            );
            async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let conn = {
                        let mut l = log.lock().unwrap();
                        l.accepts.push(Instant::now());
                        l.accepts.len()
                    };
                    let fut = serve(
                        conn,
                        acceptor.clone(),
                        tcp,
                        behaviour.clone(),
                        log.clone(),
                        outgoing.clone(),
                    );
                    tasks.lock().unwrap().spawn(fut);
                }
            }
        });
        TestServer {
            addr,
            behaviour,
            log,
            outgoing,
            tasks,
            accept_task,
        }
    }

    /// A copy of the log.
    pub fn snapshot(&self) -> ServerLog {
        self.log.lock().unwrap().clone()
    }

    pub fn url(&self) -> String {
        format!("wss://{}/agent/v1", self.addr)
    }

    /// Sends a frame to the current session.
    pub fn send(&self, msg: Message) {
        let tx = self.outgoing.lock().unwrap().clone();
        tx.expect("no session").send(msg).unwrap();
    }

    pub fn send_text(&self, text: impl Into<String>) {
        self.send(Message::text(text.into()));
    }

    pub fn send_control(&self, msg: &ControlMessage) {
        self.send_text(encode(msg));
    }

    pub fn set(&self, f: impl FnOnce(&mut Behaviour)) {
        f(&mut self.behaviour.lock().unwrap());
    }

    /// Stops listening and drops every connection at once (a crashed control plane).
    pub fn kill(self) -> Arc<Mutex<ServerLog>> {
        self.accept_task.abort();
        self.tasks.lock().unwrap().abort_all();
        self.log
    }
}

async fn serve(
    conn: usize,
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    behaviour: Arc<Mutex<Behaviour>>,
    log: Arc<Mutex<ServerLog>>,
    outgoing: Arc<Mutex<Option<mpsc::UnboundedSender<Message>>>>,
) {
    // no Nagle: with paused time a 40 ms delayed-ack stall on loopback would look like ages
    let _ = tcp.set_nodelay(true);
    let tls = match acceptor.accept(tcp).await {
        Ok(tls) => tls,
        Err(e) => {
            log.lock().unwrap().tls_failures.push(e.to_string());
            return;
        }
    };
    let b = behaviour.lock().unwrap().clone();
    let log2 = log.clone();
    let callback = move |req: &Request, mut resp: Response| -> Result<Response, ErrorResponse> {
        if let Some(status) = b.reject_status {
            let mut r = ErrorResponse::new(Some("refused".into()));
            *r.status_mut() = StatusCode::from_u16(status).unwrap();
            if let Some(v) = &b.retry_after {
                r.headers_mut()
                    .insert("retry-after", HeaderValue::from_str(v).unwrap());
            }
            return Err(r);
        }
        let auth = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if auth != format!("Bearer {}", b.token) {
            log2.lock().unwrap().auth_bad += 1;
            let mut r = ErrorResponse::new(Some("bad token".into()));
            *r.status_mut() = StatusCode::UNAUTHORIZED;
            return Err(r);
        }
        log2.lock().unwrap().auth_ok += 1;
        let proto = req
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if b.select_subprotocol
            && proto
                .split(',')
                .any(|p| p.trim() == odac_protocol::SUBPROTOCOL)
        {
            resp.headers_mut().insert(
                "sec-websocket-protocol",
                HeaderValue::from_static(odac_protocol::SUBPROTOCOL),
            );
        }
        Ok(resp)
    };
    let cfg = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let Ok(mut ws) =
        tokio_tungstenite::accept_hdr_async_with_config(tls, callback, Some(cfg)).await
    else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    *outgoing.lock().unwrap() = Some(tx);
    let mut welcomed_at: Option<Instant> = None;
    loop {
        let b = behaviour.lock().unwrap().clone();
        let muted = b.mute_after_welcome && welcomed_at.is_some();
        let close_at = welcomed_at.and_then(|t| b.close_after.map(|d| t + d));
        tokio::select! {
            frame = ws.next(), if !muted => {
                let Some(Ok(frame)) = frame else { return };
                match frame {
                    Message::Text(t) => match decode_agent(t.as_bytes()) {
                        Ok(msg) => {
                            let mut replies = Vec::new();
                            if let AgentMessage::Hello(_) = &msg
                                && b.welcome {
                                    replies.push(ControlMessage::Welcome(Welcome {
                                        host_id: "host-1".into(),
                                        session_id: Some(format!("s{conn}")),
                                        heartbeat_secs: None,
                                    }));
                                }
                            if let (true, Some(seq)) = (b.auto_ack, msg.seq())
                                && !matches!(msg, AgentMessage::Error(_)) {
                                    replies.push(ControlMessage::Ack(Ack { seq }));
                                }
                            {
                                let mut l = log.lock().unwrap();
                                if let AgentMessage::AppStatus(r) = &msg {
                                    l.view.insert(r.status.name.clone(), r.status.clone());
                                }
                                l.messages.push((conn, msg));
                            }
                            for r in replies {
                                if matches!(r, ControlMessage::Welcome(_)) {
                                    welcomed_at = Some(Instant::now());
                                    log.lock().unwrap().welcomed.push(Instant::now());
                                }
                                if ws.send(Message::text(encode(&r))).await.is_err() {
                                    return;
                                }
                            }
                        }
                        Err(_) => log.lock().unwrap().undecodable.push(t.to_string()),
                    },
                    Message::Close(f) => {
                        let code = f.map(|f| u16::from(f.code)).unwrap_or(1005);
                        log.lock().unwrap().closes.push((conn, code));
                        let _ = ws.close(None).await;
                        return;
                    }
                    _ => {}
                }
            }
            out = rx.recv() => {
                let Some(out) = out else { return };
                if ws.send(out).await.is_err() {
                    return;
                }
            }
            () = sleep_until_opt(close_at) => {
                let _ = ws
                    .close(Some(CloseFrame { code: CloseCode::Normal, reason: "bye".into() }))
                    .await;
                // drain until the agent's close reply
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    while let Some(Ok(m)) = ws.next().await {
                        if matches!(m, Message::Close(_)) { break; }
                    }
                })
                .await;
                return;
            }
        }
    }
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// An in-memory app manager.
pub struct FakeApps {
    pub desired: Mutex<Option<DesiredState>>,
    pub statuses: Mutex<BTreeMap<String, AppStatus>>,
    /// (virtual) time each change finished persisting.
    pub persisted_at: Mutex<Vec<(String, Instant)>>,
    pub apply_delay: Mutex<Duration>,
    /// Refuse every change as if the state directory were read-only.
    pub fail_persist: Mutex<bool>,
    events: broadcast::Sender<std::sync::Arc<AppStatus>>,
}

impl FakeApps {
    pub fn new() -> Arc<FakeApps> {
        Arc::new(FakeApps {
            desired: Mutex::new(None),
            statuses: Mutex::new(BTreeMap::new()),
            persisted_at: Mutex::new(Vec::new()),
            apply_delay: Mutex::new(Duration::ZERO),
            fail_persist: Mutex::new(false),
            events: broadcast::channel(1024).0,
        })
    }

    pub fn set_status(&self, status: AppStatus) {
        self.statuses
            .lock()
            .unwrap()
            .insert(status.name.clone(), status.clone());
        let _ = self.events.send(std::sync::Arc::new(status));
    }

    async fn persist(&self, what: String) -> Result<(), ApplyError> {
        let delay = *self.apply_delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if *self.fail_persist.lock().unwrap() {
            return Err(ApplyError::new(
                ErrorCode::Internal,
                format!("state file /state/desired.json: read-only file system ({what})"),
            ));
        }
        self.persisted_at
            .lock()
            .unwrap()
            .push((what, Instant::now()));
        Ok(())
    }
}

#[async_trait]
impl AppControl for FakeApps {
    async fn set_desired(&self, state: DesiredState) -> Result<(), ApplyError> {
        let what = format!("desired:{}", state.generation);
        self.persist(what).await?;
        *self.desired.lock().unwrap() = Some(state);
        Ok(())
    }

    async fn upsert(&self, generation: u64, app: AppSpec) -> Result<(), ApplyError> {
        if self.generation().is_some_and(|g| generation <= g) {
            return Ok(());
        }
        self.persist(format!("upsert:{}", app.name)).await?;
        let mut d = self.desired.lock().unwrap();
        let d = d.get_or_insert_with(DesiredState::default);
        d.generation = generation;
        d.apps.retain(|a| a.name != app.name);
        d.apps.push(app);
        Ok(())
    }

    async fn delete(&self, generation: u64, name: String) -> Result<(), ApplyError> {
        if self.generation().is_some_and(|g| generation <= g) {
            return Ok(());
        }
        self.persist(format!("delete:{name}")).await?;
        let mut d = self.desired.lock().unwrap();
        let d = d.get_or_insert_with(DesiredState::default);
        d.generation = generation;
        d.apps.retain(|a| a.name != name);
        Ok(())
    }

    fn generation(&self) -> Option<u64> {
        self.desired.lock().unwrap().as_ref().map(|d| d.generation)
    }

    fn statuses(&self) -> Vec<AppStatus> {
        self.statuses.lock().unwrap().values().cloned().collect()
    }

    fn subscribe(&self) -> broadcast::Receiver<std::sync::Arc<AppStatus>> {
        self.events.subscribe()
    }
}

/// Uplink settings against `server` with the test CA, a fixed jitter seed and the given
/// token.
pub fn uplink_config(pki: &Pki, url: &str, token: &str) -> UplinkConfig {
    UplinkConfig {
        dialer: Dialer::new(
            Endpoint::parse(url).unwrap(),
            pki.client_tls(),
            Token::new(token).unwrap(),
            Duration::from_secs(10),
        ),
        agent_id: "agent-test-1".into(),
        hostname: "edge-1".into(),
        heartbeat: Duration::from_secs(20),
        welcome_timeout: Duration::from_secs(10),
        backoff: BackoffPolicy::default(),
        outbox: OutboxLimits::default(),
        state_dir: None,
        jitter_seed: Some(42),
    }
}

/// A small inventory for the feed.
pub fn inventory(cpus: u32) -> Inventory {
    let mut inv = Inventory::default();
    inv.host.hostname = "edge-1".into();
    inv.host.cpus = cpus;
    inv
}

/// Runs `pred` against the server log until it holds, advancing (paused) time in small steps.
pub async fn wait_for(
    log: &Arc<Mutex<ServerLog>>,
    limit: Duration,
    what: &str,
    pred: impl Fn(&ServerLog) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        if pred(&log.lock().unwrap()) {
            return;
        }
        if Instant::now() >= deadline {
            panic!("timed out waiting for {what}: {:#?}", log.lock().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn status(name: &str, state: odac_protocol::AppState, restarts: u32) -> AppStatus {
    AppStatus {
        name: name.into(),
        generation: 1,
        state,
        restart_count: restarts,
        ..Default::default()
    }
}
