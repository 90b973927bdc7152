//! `odac-agent run`: the service. [`run`] wires the pieces together — token and TLS settings,
//! the agent id, the instance lock (one live agent per engine and instance, else a
//! configuration error), the Docker engine, the app manager, the inventory scanner (every
//! ≤ 10 s), the uplink (with the app manager's diagnostic events forwarded to it as `event`
//! messages) and systemd notifications — and returns when `shutdown` is cancelled.
//! [`run_with`] does the same on a given engine (tests run the whole agent in process against
//! the fake). The command around it (configuration, logging, signals) is `crate::cli::run`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use odac_protocol::{AppSpec, AppStatus, DesiredState, ErrorCode};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::appmgr::{AppEvent, AppManager, AppMgrError};
use crate::config::Config;
use crate::gpu_health::kmsg::{self, KmsgState};
use crate::gpu_health::{GpuHealthMonitor, health_loop};
use crate::identity;
use crate::instance_lock::{self, InstanceLock};
use crate::uplink::exec::ExecService;
use crate::uplink::logs::LogSource;
use crate::uplink::{
    AppControl, ApplyError, Dialer, Endpoint, EventSink, TOKEN_ENV, Token, Uplink, UplinkConfig,
    tls,
};
use odac_host::engine::{ContainerEngine, DockerEngine};

/// How long READY=1 waits for the first reconcile before it is sent anyway.
const FIRST_RECONCILE_BOUND: Duration = Duration::from_secs(60);

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

/// Runs the agent until `shutdown` is cancelled. Never returns because the control plane is
/// unreachable; only a bad configuration or an unusable state directory end it early.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), RunError> {
    let docker = DockerEngine::lazy(config.docker.host.as_deref())
        .map_err(|e| RunError::Config(format!("docker.host: {e}")))?;
    run_with(config, Arc::new(docker), shutdown).await
}

/// [`run`] on `engine` instead of the Docker engine `docker.host` names (the instance lock is
/// still keyed by `docker.host`).
pub async fn run_with(
    config: Config,
    engine: Arc<dyn ContainerEngine>,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
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
    // the metrics endpoint is bound before anything starts: a taken port is exit 78
    let metrics_listener = match config
        .metrics
        .listen()
        .map_err(|e| RunError::Config(e.to_string()))?
    {
        Some(listen) => Some(
            crate::metrics::MetricsListener::bind(&listen)
                .await
                .map_err(|e| RunError::Config(e.to_string()))?,
        ),
        None => None,
    };
    let mut apps = config.apps.clone();
    apps.owner = agent_id.clone();
    let manager = AppManager::open(apps, engine.clone(), config.host_root.clone())
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
    let mut first = crate::inventory_loop::assess(&config.host_root, engine.as_ref()).await;
    let mut nvml_facts = crate::telemetry::NvmlFacts::default();
    nvml_facts.fill_scan(&mut first.scan);
    let health = GpuHealthMonitor::new(&config.host_root, config.gpu.recovery());
    manager.offer_facts(first.clone());
    let first_caps = first.engine.clone();
    let mut first = nvml_facts.fill(first.inventory());
    health.apply(&mut first);
    let hostname = non_empty(&first.host.hostname)
        .unwrap_or("unknown")
        .to_owned();
    let metrics = metrics_listener.map(|listener| {
        let statuses = manager.clone();
        crate::metrics::Endpoint::new(
            listener,
            &hostname,
            &config.apps.instance,
            odac_host::names::container_name,
            Arc::new(move || statuses.statuses()),
        )
    });
    let (inventory_tx, inventory_rx) = watch::channel(Some(Arc::new(first)));
    let first_pass = tokio::spawn({
        let manager = manager.clone();
        async move { manager.reconcile_once().await }
    });

    let mut tasks = tokio::task::JoinSet::new();
    let (reconciled_tx, reconciled) = watch::channel(false);
    tasks.spawn(async move {
        match tokio::time::timeout(FIRST_RECONCILE_BOUND, first_pass).await {
            Ok(_) => {
                info!("first inventory and reconcile done");
                reconciled_tx.send_replace(true);
            }
            Err(_) => warn!("first reconcile still running after 60s; reporting ready anyway"),
        }
        crate::notify::ready();
    });
    // the watchdog pings only while the uplink and the app manager both make progress
    let mut liveness = crate::liveness::Liveness::for_watchdog(crate::notify::watchdog_interval());
    let uplink_beat = liveness.register("uplink");
    let manager_beat = liveness.register("app manager");
    tasks.spawn(crate::notify::watchdog_loop(shutdown.clone(), liveness));
    tasks.spawn(crate::inventory_loop::inventory_loop(
        config.host_root.clone(),
        (engine.clone(), first_caps),
        Duration::from_secs(config.inventory.interval_secs),
        inventory_tx,
        (manager.clone(), health.clone()),
        nvml_facts,
        shutdown.clone(),
    ));
    spawn_health_watch(&mut tasks, &config, &health, &manager, &shutdown);
    tasks.spawn(manager.clone().run_with(shutdown.clone(), manager_beat));

    let app_events = manager.subscribe_events();
    let telemetry_manager = manager.clone();
    let telemetry_feed = inventory_rx.clone();
    let update_tls = tls.clone();
    let exec_agent_id = agent_id.clone();
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
    .with_logs(LogSource::new(engine.clone(), config.apps.instance.clone()))
    .with_exec(ExecService::new(
        engine,
        config.apps.instance.clone(),
        exec_agent_id,
        config.exec.clone(),
    ));
    let uplink = crate::update::wire::attach(
        &mut tasks,
        (&config.state_dir, &config.update),
        update_tls,
        uplink,
        reconciled,
        &shutdown,
    );
    tasks.spawn(forward_events(
        app_events,
        uplink.events(),
        shutdown.clone(),
    ));
    tasks.spawn(forward_events(
        health.subscribe_events(),
        uplink.events(),
        shutdown.clone(),
    ));
    tasks.spawn(crate::telemetry::task::spawn_for(
        &config.telemetry,
        &config.host_root,
        telemetry_feed,
        Arc::new(ManagerControl(telemetry_manager)),
        uplink.gpu_stats(),
        metrics.as_ref().map(|m| {
            let gpu = m.gpu.clone();
            Box::new(move |gpus: &[_], stats: &_, engines: &_| gpu.offer(gpus, stats, engines))
                as crate::telemetry::task::SampleObserver
        }),
        shutdown.clone(),
    ));
    if let Some(metrics) = metrics {
        tasks.spawn(crate::metrics_feed::run(
            metrics,
            uplink.outbox(),
            uplink.link_events(),
            shutdown.clone(),
        ));
    }
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

/// Starts following the kernel log under `host_root` (its own thread) and the health loop
/// that reads it; without a kernel log there is nothing to follow (`doctor` says why).
fn spawn_health_watch(
    tasks: &mut tokio::task::JoinSet<()>,
    config: &Config,
    health: &GpuHealthMonitor,
    manager: &AppManager,
    shutdown: &CancellationToken,
) {
    let (line_tx, line_rx) = tokio::sync::mpsc::channel(256);
    match kmsg::spawn(&config.host_root, line_tx, shutdown.clone()) {
        KmsgState::Absent { path, why } => warn!(
            path = %path.display(),
            "gpu health: no kernel log to follow ({why}); gpu errors are not watched"
        ),
        KmsgState::Device(path) | KmsgState::File(path) => {
            info!(path = %path.display(), "gpu health: following the kernel log");
        }
    }
    let manager = manager.clone();
    let statuses: crate::gpu_health::task::Statuses = Arc::new(move || manager.statuses());
    tasks.spawn(health_loop(
        health.clone(),
        line_rx,
        statuses,
        shutdown.clone(),
    ));
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
            Ok(e) => {
                let removed = e.image_removed.map(crate::appmgr::ImageRemoved::wire);
                sink.push_with(e.level, e.app.as_deref(), e.message, removed);
            }
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

    fn offer_gpu_samples(&self, samples: &[odac_protocol::GpuSample]) {
        let free = samples
            .iter()
            .filter_map(|s| {
                let free = s.vram_total_mib?.checked_sub(s.vram_used_mib?)?;
                Some((s.id.clone(), free))
            })
            .collect::<std::collections::BTreeMap<_, _>>();
        if !free.is_empty() {
            self.0.offer_free_vram(free);
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<AppStatus>> {
        self.0.subscribe()
    }
}
