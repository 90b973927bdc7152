//! `odac-agent run`: the service. [`run`] wires the pieces together — token and TLS settings,
//! the agent id, the instance lock (one live agent per engine and instance, else exit 78),
//! the Docker engine, the app manager, the inventory scanner (every ≤ 10 s),
//! the uplink (with the app manager's diagnostic events forwarded to it as `event` messages)
//! and systemd notifications — and returns when `shutdown` is cancelled.
//! [`run_command`] is the subcommand's body: configuration (exit 78 on a bad one), logging,
//! the runtime, SIGTERM/SIGINT, and the 5-second shutdown bound. Exit codes: 0 ok, 1 runtime
//! failure, 2 usage (clap), 78 bad configuration.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use odac_protocol::{AppSpec, AppStatus, DesiredState, ErrorCode, Inventory};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::appmgr::{AppEvent, AppManager, AppMgrError};
use crate::config::Config;
use crate::engine::{ContainerEngine, DockerEngine};
use crate::instance_lock::{self, InstanceLock};
use crate::sysinfo::{Assessment, scan};
use crate::uplink::logs::LogSource;
use crate::uplink::{
    AppControl, ApplyError, Dialer, Endpoint, EventSink, TOKEN_ENV, Token, Uplink, UplinkConfig,
    identity, tls,
};

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: runtime failure.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: bad configuration (systemd: `RestartPreventExitStatus=78`).
pub const EXIT_CONFIG: i32 = 78;

/// How long shutdown may take from the signal to the exit.
pub const SHUTDOWN_BOUND: Duration = Duration::from_millis(4_500);
/// How long READY=1 waits for the first reconcile before it is sent anyway.
const FIRST_RECONCILE_BOUND: Duration = Duration::from_secs(60);

/// Flags of `odac-agent run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Configuration file (default /etc/odac/agent.toml, which may be absent when the
    /// environment carries the configuration).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Why the agent stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A configuration problem (exit 78); the message names the key.
    #[error("{0}")]
    Config(String),
    /// Anything else (exit 1).
    #[error("{0}")]
    Runtime(String),
}

impl RunError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Config(_) => EXIT_CONFIG,
            RunError::Runtime(_) => EXIT_FAILURE,
        }
    }
}

/// The body of `odac-agent run`; returns the exit code.
pub fn run_command(args: &RunArgs) -> i32 {
    let config = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("odac-agent: {e}");
            return EXIT_CONFIG;
        }
    };
    if let Err(e) = crate::logging::init(&config.log_level, config.log_format) {
        eprintln!("odac-agent: {e}");
        return EXIT_CONFIG;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error!("cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let code = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        if let Err(e) = spawn_signal_handler(shutdown.clone()) {
            error!("cannot install signal handlers: {e}");
            return EXIT_FAILURE;
        }
        let agent = run(config, shutdown.clone());
        tokio::pin!(agent);
        let result = tokio::select! {
            r = &mut agent => r,
            () = shutdown.cancelled() => {
                match tokio::time::timeout(SHUTDOWN_BOUND, &mut agent).await {
                    Ok(r) => r,
                    Err(_) => {
                        warn!("shutdown did not finish within {}s; exiting", SHUTDOWN_BOUND.as_secs_f32());
                        Ok(())
                    }
                }
            }
        };
        match result {
            Ok(()) => EXIT_OK,
            Err(e) => {
                error!("{e}");
                e.exit_code()
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_millis(300));
    code
}

fn spawn_signal_handler(shutdown: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        info!("{name} received; shutting down");
        crate::notify::stopping();
        shutdown.cancel();
    });
    Ok(())
}

/// Runs the agent until `shutdown` is cancelled. Never returns because the control plane is
/// unreachable; only a bad configuration or an unusable state directory end it early.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), RunError> {
    let cp = &config.control_plane;
    let endpoint = Endpoint::parse(&cp.url).map_err(|e| RunError::Config(e.to_string()))?;
    let token = Token::resolve(std::env::var(TOKEN_ENV).ok(), cp.token_file.as_deref())
        .map_err(|e| RunError::Config(format!("control_plane.token_file: {e}")))?;
    let tls =
        tls::client_config(&config.tls_settings()).map_err(|e| RunError::Config(e.to_string()))?;
    let agent_id = identity::load_or_create(&config.state_dir).map_err(|e| {
        if e.is_config() {
            RunError::Config(e.to_string())
        } else {
            RunError::Runtime(e.to_string())
        }
    })?;
    // one live agent per engine and instance: refuse before touching anything
    let engine_endpoint = instance_lock::engine_endpoint(config.docker.host.as_deref());
    let _lock = InstanceLock::acquire(
        &config.apps.lock_dir,
        &engine_endpoint,
        &config.apps.instance,
        &format!("agent {agent_id}"),
    )
    // held elsewhere, or an unusable apps.lock_dir: a restart cannot fix either (exit 78)
    .map_err(|e| RunError::Config(e.to_string()))?;
    let mut apps = config.apps.clone();
    apps.owner = agent_id.clone();
    let docker = Arc::new(
        DockerEngine::lazy(config.docker.host.as_deref())
            .map_err(|e| RunError::Config(format!("docker.host: {e}")))?,
    );
    let engine: Arc<dyn ContainerEngine> = docker.clone();
    let manager = AppManager::open(apps, engine, config.host_root.clone())
        .map_err(|e| RunError::Runtime(format!("app manager: {e}")))?;
    for problem in manager.problems() {
        warn!("app manager: {problem}");
    }
    info!(
        agent_id = %agent_id,
        control_plane = %endpoint.authority(),
        instance = %config.apps.instance,
        engine = %engine_endpoint,
        state_dir = %config.state_dir.display(),
        version = crate::AGENT_VERSION,
        "odac-agent starting"
    );

    // local work first: the agent is useful without the control plane
    let first = assess(&config.host_root, &docker).await;
    manager.offer_facts(first.clone());
    let mut nvml_facts = crate::telemetry::NvmlFacts::default();
    let first = nvml_facts.fill(first.inventory());
    let hostname = non_empty(&first.host.hostname)
        .unwrap_or("unknown")
        .to_owned();
    let (inventory_tx, inventory_rx) = watch::channel(Some(Arc::new(first)));
    let first_pass = tokio::spawn({
        let manager = manager.clone();
        async move { manager.reconcile_once().await }
    });

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(async move {
        match tokio::time::timeout(FIRST_RECONCILE_BOUND, first_pass).await {
            Ok(_) => info!("first inventory and reconcile done"),
            Err(_) => warn!("first reconcile still running after 60s; reporting ready anyway"),
        }
        crate::notify::ready();
    });
    // the watchdog pings only while the uplink and the app manager both make progress
    let mut liveness = crate::liveness::Liveness::new();
    let uplink_beat = liveness.register("uplink");
    let manager_beat = liveness.register("app manager");
    tasks.spawn(crate::notify::watchdog_loop(shutdown.clone(), liveness));
    tasks.spawn(inventory_loop(
        config.host_root.clone(),
        docker.clone(),
        Duration::from_secs(config.inventory.interval_secs),
        inventory_tx,
        manager.clone(),
        nvml_facts,
        shutdown.clone(),
    ));
    tasks.spawn(manager.clone().run_with(shutdown.clone(), manager_beat));

    let app_events = manager.subscribe_events();
    let telemetry_manager = manager.clone();
    let telemetry_feed = inventory_rx.clone();
    let uplink = Uplink::new(
        UplinkConfig {
            dialer: Dialer::new(
                endpoint,
                tls,
                token,
                Duration::from_secs(cp.connect_timeout_secs),
            )
            .with_agent_id(&agent_id),
            agent_id,
            hostname,
            heartbeat: Duration::from_secs(cp.heartbeat_secs),
            welcome_timeout: Duration::from_secs(cp.connect_timeout_secs),
            backoff: config.backoff(),
            outbox: config.outbox(),
            state_dir: Some(config.state_dir.clone()),
            jitter_seed: None,
        },
        Arc::new(ManagerControl(manager)),
        inventory_rx,
    )
    .with_heartbeat(uplink_beat)
    .with_logs(LogSource::new(docker.clone(), config.apps.instance.clone()));
    tasks.spawn(forward_events(
        app_events,
        uplink.events(),
        shutdown.clone(),
    ));
    tasks.spawn(crate::telemetry::task::spawn_for(
        &config,
        telemetry_feed,
        Arc::new(ManagerControl(telemetry_manager)),
        uplink.gpu_stats(),
        shutdown.clone(),
    ));
    uplink.run(shutdown.clone()).await;
    crate::notify::stopping();
    // the other tasks watch the same token; the caller bounds how long this may take
    shutdown.cancel();
    while tasks.join_next().await.is_some() {}
    info!("odac-agent stopped");
    Ok(())
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.trim().is_empty()).then_some(s)
}

/// One assessment: host scan (blocking reads, off the runtime threads) plus the engine's
/// capabilities.
async fn assess(root: &std::path::Path, docker: &DockerEngine) -> Assessment {
    let root = root.to_owned();
    let host = match tokio::task::spawn_blocking(move || scan(&root)).await {
        Ok(h) => h,
        Err(e) => {
            warn!("inventory scan failed: {e}");
            Default::default()
        }
    };
    let engine = docker.probe().await;
    Assessment::new(host, engine)
}

/// Rescans every `every` and publishes the result; the uplink sends it only when it changed.
/// The app manager's quiet passes reuse the same facts rather than reading them again.
async fn inventory_loop(
    root: PathBuf,
    docker: Arc<DockerEngine>,
    every: Duration,
    tx: watch::Sender<Option<Arc<Inventory>>>,
    manager: AppManager,
    mut nvml_facts: crate::telemetry::NvmlFacts,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let assessment = tokio::select! {
            () = shutdown.cancelled() => return,
            a = assess(&root, &docker) => a,
        };
        let inventory = nvml_facts.fill(assessment.inventory());
        manager.offer_facts(assessment);
        tx.send_replace(Some(Arc::new(inventory)));
    }
}

/// Moves the app manager's diagnostic events (build progress, GPU fallbacks) into the
/// uplink's outbox until `shutdown`.
async fn forward_events(
    mut events: broadcast::Receiver<AppEvent>,
    sink: EventSink,
    shutdown: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            e = events.recv() => e,
        };
        match event {
            Ok(e) => sink.push(e.level, e.app.as_deref(), e.message),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                warn!(missed = n, "app manager events lagged; some were not sent");
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// The app manager as the uplink sees it: a stale change is fine (acked, nothing changed).
pub struct ManagerControl(pub AppManager);

/// The error sent back: `<field>: <problem>` (the field of the message, or the state file).
fn apply_error(e: AppMgrError) -> ApplyError {
    match e {
        AppMgrError::Invalid(v) => ApplyError::new(ErrorCode::Invalid, v.to_string()),
        AppMgrError::Store(s) => ApplyError::new(ErrorCode::Internal, s.to_string()),
        AppMgrError::Identity(e) => ApplyError::new(ErrorCode::Internal, e.to_string()),
    }
}

#[async_trait]
impl AppControl for ManagerControl {
    async fn set_desired(&self, state: DesiredState) -> Result<(), ApplyError> {
        self.0
            .set_desired(state)
            .await
            .map(|_| ())
            .map_err(apply_error)
    }

    async fn upsert(&self, generation: u64, app: AppSpec) -> Result<(), ApplyError> {
        self.0
            .upsert(generation, app)
            .await
            .map(|_| ())
            .map_err(apply_error)
    }

    async fn delete(&self, generation: u64, name: String) -> Result<(), ApplyError> {
        self.0
            .delete(generation, &name)
            .await
            .map(|_| ())
            .map_err(apply_error)
    }

    fn generation(&self) -> Option<u64> {
        self.0.generation()
    }

    fn statuses(&self) -> Vec<AppStatus> {
        self.0.statuses()
    }

    fn subscribe(&self) -> broadcast::Receiver<AppStatus> {
        self.0.subscribe()
    }
}
