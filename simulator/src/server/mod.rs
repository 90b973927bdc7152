//! `odac-sim serve`: binds one TLS port and serves the agents' WebSocket (`/agent/v1`), the
//! REST API (`/api/…`) and the dashboard (`/`) on it. [`Server::start`] returns once the port
//! is bound, so tests can start a simulator in-process and read its URLs.
//!
//! This folder is the server side: the TLS listener and HTTP loop ([`listener`],
//! [`http_serve`], [`tls`], [`http_errors`]), the agents' WebSocket ([`ws`], [`agent_auth`],
//! [`ws_frames`], `state::liveness`), the REST API ([`api`], [`admin`], [`body`], [`api_error`], [`sse`],
//! [`logs`], [`reasons`], [`registries`], [`registry_check`], [`gpu_stats`]), exec sessions ([`exec`],
//! [`exec_relay`]) and the dashboard ([`dashboard`]). It reads and changes the fleet
//! only through `crate::state`.

pub mod admin;
pub mod agent_auth;
pub mod agent_update;
pub mod api;
pub mod api_error;
pub mod app_update;
pub mod body;
pub mod dashboard;
pub mod exec;
pub mod exec_relay;
pub mod gpu_stats;
pub mod http_errors;
pub mod http_serve;
pub mod listener;
pub mod logs;
pub mod metrics;
pub mod reasons;
pub mod registries;
pub mod registry_check;
pub mod sse;
pub mod tls;
pub mod ws;
pub mod ws_frames;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::AGENT_PATH;
use crate::error::SimError;
use crate::server::api_error::ApiError;
use crate::server::listener::TlsListener;
use crate::state::hub::{Hub, SessionCmd};
use crate::state::identity::Credentials;
use crate::state::store::Store;

/// File in the state dir holding the agent token generated when no `--token` is given.
pub const TOKEN_FILE: &str = "agent-token";

/// Heartbeat interval told to agents unless `--heartbeat-secs` says otherwise.
pub const DEFAULT_HEARTBEAT_SECS: u32 = 20;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Listen address, e.g. `127.0.0.1:7443` (port 0 picks a free port).
    pub listen: String,
    /// State dir: CA, fleet state, generated token.
    pub state_dir: PathBuf,
    /// Agent bearer tokens accepted; empty = generate one into `DIR/agent-token`.
    pub tokens: Vec<String>,
    /// One-time enrollment codes to accept.
    pub enroll_codes: Vec<String>,
    /// Bearer token the REST API requires (none = open API).
    pub api_token: Option<String>,
    /// Heartbeat interval told to agents in `welcome` (seconds, 1..=3600; default 20).
    pub heartbeat_secs: u32,
    /// Agent ids each static token may register (default 1: the first id it is used with).
    pub hosts_per_token: u32,
    /// Serve an open REST API (no `api_token`) on a non-loopback address anyway.
    pub insecure_open_api: bool,
    /// Mirror (`HOST[:PORT]`, checked by [`crate::catalog::check_registry`]) the catalog's
    /// images are pulled from.
    pub catalog_registry: Option<String>,
    /// Directory of signed agent releases (`odac-sim release sign`) to offer and serve.
    pub releases: Option<PathBuf>,
    /// Release public keys (`ed25519:…`) told to enrolling agents.
    pub release_keys: Vec<String>,
}

impl ServeConfig {
    /// Defaults for `dir` on `listen`.
    pub fn new(listen: impl Into<String>, state_dir: impl Into<PathBuf>) -> Self {
        Self {
            listen: listen.into(),
            state_dir: state_dir.into(),
            tokens: Vec::new(),
            enroll_codes: Vec::new(),
            api_token: None,
            heartbeat_secs: DEFAULT_HEARTBEAT_SECS,
            hosts_per_token: crate::state::identity::DEFAULT_HOSTS_PER_TOKEN,
            insecure_open_api: false,
            catalog_registry: None,
            releases: None,
            release_keys: Vec::new(),
        }
    }
}

/// A running simulator.
pub struct Server {
    /// Bound address.
    pub addr: SocketAddr,
    /// CA certificate clients must trust.
    pub ca_path: PathBuf,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The token file written when no token was given.
    pub token_file: Option<PathBuf>,
    /// Shared state (for tests and the library API: faults, views).
    pub hub: Arc<Hub>,
    stop: Option<oneshot::Sender<()>>,
    serve: JoinHandle<()>,
    writer: JoinHandle<()>,
}

fn url_host(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => Ipv4Addr::LOCALHOST.to_string(),
        IpAddr::V6(ip) if ip.is_unspecified() => format!("[{}]", Ipv6Addr::LOCALHOST),
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

fn load_or_create_token(dir: &std::path::Path) -> Result<(String, PathBuf), SimError> {
    let path = dir.join(TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok((t.trim().to_owned(), path)),
        _ => {
            let token = format!("odac_{}", uuid::Uuid::new_v4().simple());
            crate::files::write_file(&path, format!("{token}\n").as_bytes(), 0o600)?;
            Ok((token, path))
        }
    }
}

/// An open REST API (no `api_token`) is served on loopback only, unless `insecure_open_api`.
fn check_open_api(cfg: &ServeConfig, ip: IpAddr) -> Result<(), SimError> {
    if ip.is_loopback() || cfg.api_token.is_some() || cfg.insecure_open_api {
        return Ok(());
    }
    Err(SimError::Config(format!(
        "--listen {}: refusing to serve an open REST API on a non-loopback address; give --api-token-file FILE (or ODAC_SIM_API_TOKEN), or --insecure-open-api to serve it open anyway",
        cfg.listen
    )))
}

async fn require_api_token(State(hub): State<Arc<Hub>>, req: Request, next: Next) -> Response {
    if let Some(want) = &hub.api_token
        && ws::bearer(req.headers()) != Some(want.as_str())
    {
        return ApiError::new(StatusCode::UNAUTHORIZED, "missing or wrong API token")
            .into_response();
    }
    next.run(req).await
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

/// The router for `hub`.
pub fn router(hub: Arc<Hub>) -> Router {
    let guarded = Router::new()
        .route("/api/hosts", get(api::list_hosts))
        .route("/api/hosts/{id}", get(api::get_host))
        .route("/api/hosts/{id}/gpu-stats", get(gpu_stats::get_gpu_stats))
        .route("/api/gpu-stats", get(gpu_stats::list_gpu_stats))
        .route("/api/apps", get(api::list_apps).post(api::create_app))
        .route(
            "/api/apps/{name}",
            get(api::get_app)
                .put(app_update::replace_app)
                .delete(api::delete_app),
        )
        .route("/api/apps/{name}/gpu", put(api::set_gpu))
        .route("/api/apps/{name}/restart", post(api::restart_app))
        .route("/api/apps/{name}/logs", get(crate::server::logs::app_logs))
        .route("/api/apps/{name}/exec", get(exec::viewer_upgrade))
        .route("/api/events", get(sse::events))
        .route("/api/events/log", get(api::event_log))
        .route("/api/catalog", get(api::list_catalog))
        .route(
            "/api/registries",
            get(registries::list).post(registries::login),
        )
        .route(
            "/api/registries/{host}",
            axum::routing::delete(registries::logout),
        )
        .route("/api/reasons", get(crate::server::reasons::list_reasons))
        .route(
            "/api/hosts/{id}/agent-update",
            post(agent_update::offer_update),
        )
        .route("/metrics", get(metrics::metrics))
        .route("/api/enroll/codes", post(admin::new_enroll_code))
        .route(
            "/api/admin/faults",
            get(admin::get_faults)
                .post(admin::post_faults)
                .delete(admin::clear_faults),
        )
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&hub),
            require_api_token,
        ));
    Router::new()
        .merge(guarded)
        .route("/api/enroll", post(admin::enroll))
        .route(AGENT_PATH, get(ws::upgrade))
        .route("/releases/{file}", get(agent_update::artefact))
        .route(exec::AGENT_EXEC_PATH, get(exec::agent_upgrade))
        .merge(dashboard::routes())
        .fallback(not_found)
        .layer(middleware::from_fn(crate::server::http_errors::json_errors))
        .with_state(hub)
}

impl Server {
    /// Binds, loads the state dir and starts serving.
    pub async fn start(cfg: ServeConfig) -> Result<Server, SimError> {
        // refuse before binding when the address says enough; check the bound one again below
        if let Ok(a) = cfg.listen.parse::<SocketAddr>() {
            check_open_api(&cfg, a.ip())?;
        }
        let tcp = tokio::net::TcpListener::bind(&cfg.listen)
            .await
            .map_err(|e| SimError::Listen {
                addr: cfg.listen.clone(),
                message: e.to_string(),
            })?;
        let addr = tcp.local_addr().map_err(|e| SimError::Listen {
            addr: cfg.listen.clone(),
            message: e.to_string(),
        })?;
        check_open_api(&cfg, addr.ip())?;
        let extra = if addr.ip().is_unspecified() {
            Vec::new()
        } else {
            vec![addr.ip().to_string()]
        };
        let material = tls::load_or_create(&cfg.state_dir, &extra)?;
        let store = Store::open(&cfg.state_dir)?;
        let data = store.load()?;
        let sealer = store.sealer().clone();
        let (tokens, token_file) = if cfg.tokens.is_empty() {
            let (t, path) = load_or_create_token(&cfg.state_dir)?;
            (vec![t], Some(path))
        } else {
            (cfg.tokens.clone(), None)
        };
        let hub = Hub::new(
            store,
            data,
            Credentials::new(&tokens, cfg.hosts_per_token),
            cfg.api_token.clone(),
            cfg.heartbeat_secs,
        );
        hub.registries.load(&cfg.state_dir, sealer)?;
        for code in &cfg.enroll_codes {
            hub.add_enroll_code(code).await;
        }
        if let Some(mirror) = &cfg.catalog_registry {
            let _ = hub.catalog_registry.set(mirror.clone());
        }
        if let Some(dir) = &cfg.releases {
            let _ = hub.releases.set(dir.clone());
        }
        let _ = hub.release_keys.set(cfg.release_keys.clone());
        let writer = tokio::spawn(Arc::clone(&hub).run_writer());
        let listener =
            TlsListener::new(tcp, material.server_config).map_err(|e| SimError::Listen {
                addr: cfg.listen.clone(),
                message: e.to_string(),
            })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let app = router(Arc::clone(&hub));
        let serve = tokio::spawn(crate::server::http_serve::serve(
            listener,
            app,
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(Server {
            addr,
            ca_path: material.ca_path,
            ca_pem: material.ca_pem,
            token_file,
            hub,
            stop: Some(stop),
            serve,
            writer,
        })
    }

    /// `wss://HOST:PORT/agent/v1`.
    pub fn agents_url(&self) -> String {
        format!(
            "wss://{}:{}{AGENT_PATH}",
            url_host(self.addr),
            self.addr.port()
        )
    }

    /// `https://HOST:PORT` (the API lives under `/api/`).
    pub fn api_url(&self) -> String {
        format!("https://{}:{}", url_host(self.addr), self.addr.port())
    }

    /// `https://HOST:PORT/`.
    pub fn dashboard_url(&self) -> String {
        format!("{}/", self.api_url())
    }

    /// The lines `odac-sim serve` prints at start.
    pub fn banner(&self) -> String {
        let mut s = format!(
            "agents: {}\napi: {}/api/\ndashboard: {}\nca: {}\n",
            self.agents_url(),
            self.api_url(),
            self.dashboard_url(),
            self.ca_path.display()
        );
        if let Some(t) = &self.token_file {
            s.push_str(&format!("agent token file: {}\n", t.display()));
        }
        s
    }

    /// Stops gracefully: agents get close 1001, SSE streams end, the fleet is saved.
    pub async fn shutdown(mut self) {
        self.hub.broadcast_cmd(&SessionCmd::Close(
            1001,
            "control plane shutting down".into(),
        ));
        self.hub.close_streams();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(5), &mut self.serve)
            .await
            .is_err()
        {
            self.serve.abort();
        }
        self.writer.abort();
        self.hub.flush().await;
    }

    /// Stops like a crash: connections dropped without close frames, nothing more saved.
    pub async fn kill(self) {
        self.writer.abort();
        self.serve.abort();
        self.hub.broadcast_cmd(&SessionCmd::Drop);
        self.hub.close_streams();
        let _ = self.serve.await;
    }

    /// Serves until SIGINT or SIGTERM, then shuts down gracefully.
    pub async fn run_until_signal(self) {
        wait_for_signal().await;
        self.shutdown().await;
    }
}

/// Resolves on SIGINT or (on Unix) SIGTERM.
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
