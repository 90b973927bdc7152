//! The uplink: the agent's only link to the control plane, an outbound TLS WebSocket
//! (`wss://`, subprotocol `odac.agent.v1`, bearer token). It keeps reconnecting with full-jitter
//! exponential backoff and never gives up; each session says `hello`, waits for `welcome`,
//! sends the full inventory and every app's status, then passes desired-state changes to the
//! app manager (acked once persisted) and reports changes, with `seq`/`ack` and resend.
//!
//! Pieces: [`token`] (the redacted bearer token), [`tls`] (rustls client config), [`connect`]
//! (dialing), [`backoff`], [`outbox`] (unacked reports) and [`seqmark`] (its persisted
//! `seq`), [`heartbeat`], [`resync`] (refused changes and the
//! `resync` request), [`control`] (the [`AppControl`] seam to the app manager),
//! [`session`] and [`exec`] (exec sessions on sockets of their own); [`Uplink`] ties them
//! together.

mod apply;
pub mod backoff;
pub mod connect;
pub mod control;
pub mod exec;
pub mod heartbeat;
mod inbound;
mod log_pump;
mod log_source;
pub mod logs;
pub mod outbox;
pub mod removal_log;
pub mod resync;
pub mod seqmark;
pub mod session;
mod sinks;
pub mod tls;
pub mod token;
mod ws_io;

use odac_host::lock::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use odac_protocol::{AppStatus, Hello, Inventory, PROTOCOL_VERSION};
use tokio::sync::{Notify, broadcast, watch};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use backoff::{Backoff, BackoffPolicy, Delay};
pub use connect::{ConnectError, Dialer, Endpoint, UrlError};
pub use control::{AppControl, ApplyError};
pub use outbox::{Outbox, OutboxLimits};
pub use session::SessionEnd;
pub use sinks::{EventSink, GpuStatsSink, UpdateOffers, UpdateSink};
pub use tls::{TlsConfigError, TlsSettings};
pub use token::{TOKEN_ENV, Token, TokenError};

use crate::liveness::{Heartbeat, STEP_BOUND};
use odac_host::inventory::ChangeDetector;

/// The latest local inventory, published by the inventory scanner.
pub type InventoryFeed = watch::Receiver<Option<Arc<Inventory>>>;

/// Everything the uplink needs besides the app manager and the inventory feed.
#[derive(Debug, Clone)]
pub struct UplinkConfig {
    /// How to reach the control plane.
    pub dialer: Dialer,
    /// Stable agent id (kept in the state dir).
    pub agent_id: String,
    /// Host name reported in `hello`.
    pub hostname: String,
    /// Ping interval (the control plane may override it in `welcome`).
    pub heartbeat: Duration,
    /// How long to wait for `welcome` after `hello`.
    pub welcome_timeout: Duration,
    /// Reconnect policy.
    pub backoff: BackoffPolicy,
    /// Outbox bounds.
    pub outbox: OutboxLimits,
    /// Where the report `seq` high-water mark is kept (`report_seq`), so that seqs never go
    /// back across restarts; `None` keeps it in memory (seqs restart at 1).
    pub state_dir: Option<std::path::PathBuf>,
    /// Fixed jitter seed (tests); `None` for a random one.
    pub jitter_seed: Option<u64>,
}

/// What the uplink is doing, for tests and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// Dialing the control plane.
    Connecting,
    /// `welcome` received: the session is established.
    Connected,
    /// The attempt failed before a session was established.
    ConnectFailed { error: String, unauthorized: bool },
    /// An established session ended.
    SessionLost {
        reason: String,
        healthy_for: Duration,
    },
    /// Waiting before the next attempt.
    BackingOff(Delay),
    /// Shut down.
    Stopped,
}

/// The uplink task.
pub struct Uplink {
    config: UplinkConfig,
    apps: Arc<dyn AppControl>,
    inventory: InventoryFeed,
    outbox: Arc<Mutex<Outbox>>,
    wake: Arc<Notify>,
    link_events: broadcast::Sender<LinkEvent>,
    resync: Arc<resync::ResyncState>,
    beat: Heartbeat,
    logs: Option<Arc<logs::LogSource>>,
    updates: Option<UpdateOffers>,
    agent_version: String,
    exec: Option<Arc<exec::ExecService>>,
}

impl Uplink {
    /// An uplink that reports `apps` and the inventory published on `inventory`.
    pub fn new(config: UplinkConfig, apps: Arc<dyn AppControl>, inventory: InventoryFeed) -> Self {
        let outbox = match &config.state_dir {
            Some(dir) => Outbox::persistent(config.outbox, dir),
            None => Outbox::new(config.outbox),
        };
        let outbox = Arc::new(Mutex::new(outbox));
        Self {
            config,
            apps,
            inventory,
            outbox,
            wake: Arc::new(Notify::new()),
            link_events: broadcast::channel(256).0,
            resync: Arc::default(),
            beat: Heartbeat::detached("uplink"),
            logs: None,
            updates: None,
            agent_version: crate::AGENT_VERSION.to_owned(),
            exec: None,
        }
    }

    /// Reports `version` in `hello` instead of this binary's own (a staged version started by
    /// the launcher reports the version its signed manifest names).
    pub fn with_agent_version(mut self, version: String) -> Self {
        self.agent_version = version;
        self
    }

    /// Passes `update_offer`s to `offers` (without, each is refused).
    pub fn with_updates(mut self, offers: UpdateOffers) -> Self {
        self.updates = Some(offers);
        self
    }

    /// A handle to queue agent-update reports.
    pub fn updates(&self) -> UpdateSink {
        UpdateSink {
            outbox: Arc::clone(&self.outbox),
            wake: Arc::clone(&self.wake),
        }
    }

    /// Serves exec sessions (`exec_request`) with `service`, dialed like the main link and
    /// audited through the event outbox.
    pub fn with_exec(mut self, mut service: exec::ExecService) -> Self {
        service.attach(self.config.dialer.clone(), self.events());
        self.exec = Some(Arc::new(service));
        self
    }

    /// Serves live logs (`logs_request`) from `source`.
    pub fn with_logs(mut self, source: logs::LogSource) -> Self {
        self.logs = Some(Arc::new(source));
        self
    }

    /// Stamps `beat` on every turn of the connect loop and of a session, and while they wait
    /// (see [`crate::liveness`]).
    pub fn with_heartbeat(mut self, beat: Heartbeat) -> Self {
        self.beat = beat;
        self
    }

    /// A handle to queue diagnostic events.
    pub fn events(&self) -> EventSink {
        EventSink {
            outbox: Arc::clone(&self.outbox),
            wake: Arc::clone(&self.wake),
        }
    }

    /// A handle to queue GPU samples.
    pub fn gpu_stats(&self) -> GpuStatsSink {
        GpuStatsSink {
            outbox: Arc::clone(&self.outbox),
            wake: Arc::clone(&self.wake),
        }
    }

    /// Connection lifecycle events from now on.
    pub fn link_events(&self) -> broadcast::Receiver<LinkEvent> {
        self.link_events.subscribe()
    }

    /// Reports still waiting for an ack.
    pub fn pending_reports(&self) -> usize {
        lock(&self.outbox).pending()
    }

    /// A shared view of the outbox (tests, diagnostics).
    pub fn outbox(&self) -> Arc<Mutex<Outbox>> {
        Arc::clone(&self.outbox)
    }

    /// Runs until `shutdown`: connects, serves sessions, reconnects. Never gives up.
    pub async fn run(self, shutdown: CancellationToken) {
        let statuses = self.apps.subscribe();
        let collector = collect(
            Arc::clone(&self.apps),
            statuses,
            self.inventory.clone(),
            Arc::clone(&self.outbox),
            Arc::clone(&self.wake),
            shutdown.clone(),
        );
        tokio::join!(collector, self.connect_loop(&shutdown));
        if let Some(exec) = &self.exec {
            exec.shut_down();
        }
    }

    async fn connect_loop(&self, shutdown: &CancellationToken) {
        let cfg = &self.config;
        let mut backoff = match cfg.jitter_seed {
            Some(seed) => Backoff::seeded(cfg.backoff, seed),
            None => Backoff::new(cfg.backoff),
        };
        let authority = cfg.dialer.endpoint().authority();
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            self.beat.stamp();
            self.emit(LinkEvent::Connecting);
            let dialed = tokio::select! {
                () = shutdown.cancelled() => break,
                d = self.beat.step(STEP_BOUND, cfg.dialer.dial()) => d,
            };
            let delay = match dialed {
                Err(e) => {
                    let unauthorized = e.is_unauthorized();
                    self.emit(LinkEvent::ConnectFailed {
                        error: e.to_string(),
                        unauthorized,
                    });
                    if unauthorized {
                        error!(control_plane = %authority, "{e}");
                        backoff.next_auth_delay()
                    } else {
                        warn!(control_plane = %authority, "cannot connect to the control plane: {e}");
                        let mut delay = backoff.next_delay();
                        if let Some(wait) = e.retry_after()
                            && wait > delay.delay
                        {
                            delay.delay = wait;
                        }
                        delay
                    }
                }
                Ok(ws) => {
                    let ctx = session::SessionCtx {
                        apps: &self.apps,
                        outbox: &self.outbox,
                        wake: &self.wake,
                        latest_inventory: self.inventory.borrow().as_deref().cloned(),
                        hello: self.hello(),
                        heartbeat: cfg.heartbeat,
                        welcome_timeout: cfg.welcome_timeout,
                        updates: self.updates.as_ref(),
                        shutdown,
                        link_events: &self.link_events,
                        resync: &self.resync,
                        beat: &self.beat,
                        logs: self.logs.clone(),
                        exec: self.exec.clone(),
                    };
                    match session::run_session(ws, ctx).await {
                        SessionEnd::Shutdown => break,
                        SessionEnd::Unauthorized(message) => {
                            error!(control_plane = %authority, "the control plane refused the agent's token: {message}; check control_plane.token_file or ODAC_AGENT_TOKEN, retrying slowly");
                            self.emit(LinkEvent::ConnectFailed {
                                error: message,
                                unauthorized: true,
                            });
                            backoff.next_auth_delay()
                        }
                        SessionEnd::Lost {
                            reason,
                            healthy_for,
                        } => {
                            let healthy_for = healthy_for.unwrap_or_default();
                            if healthy_for >= cfg.backoff.healthy_after {
                                backoff.reset();
                            }
                            warn!(
                                control_plane = %authority,
                                after_secs = healthy_for.as_secs(),
                                "control plane session lost: {reason}"
                            );
                            self.emit(LinkEvent::SessionLost {
                                reason,
                                healthy_for,
                            });
                            backoff.next_delay()
                        }
                    }
                }
            };
            info!(
                attempt = delay.attempt,
                delay_ms = u64::try_from(delay.delay.as_millis()).unwrap_or(u64::MAX),
                ceiling_ms = u64::try_from(delay.ceiling.as_millis()).unwrap_or(u64::MAX),
                "reconnecting to the control plane in {:.1}s",
                delay.delay.as_secs_f64()
            );
            self.emit(LinkEvent::BackingOff(delay));
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.beat.idle(delay.delay) => {}
            }
        }
        info!("uplink stopped");
        self.emit(LinkEvent::Stopped);
    }

    fn hello(&self) -> Hello {
        Hello {
            agent_id: self.config.agent_id.clone(),
            hostname: self.config.hostname.clone(),
            agent_version: self.agent_version.clone(),
            protocol_version: PROTOCOL_VERSION,
            last_generation: self.apps.generation(),
        }
    }

    fn emit(&self, event: LinkEvent) {
        let _ = self.link_events.send(event);
    }
}

/// Moves status changes and changed inventories into the outbox, connected or not, and wakes
/// the session to send them.
async fn collect(
    apps: Arc<dyn AppControl>,
    mut statuses: broadcast::Receiver<Arc<AppStatus>>,
    mut inventory: InventoryFeed,
    outbox: Arc<Mutex<Outbox>>,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let mut detector = ChangeDetector::new();
    let mut statuses_open = true;
    let mut inventory_open = true;
    if let Some(inv) = inventory.borrow_and_update().as_deref() {
        detector.observe(inv);
    }
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            r = statuses.recv(), if statuses_open => match r {
                Ok(status) => {
                    if !lock(&outbox).put_status(Arc::unwrap_or_clone(status)) {
                        warn!("outbox full: dropped the oldest pending app status");
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    warn!(missed = n, "status stream lagged; queueing every app's current status");
                    let mut o = lock(&outbox);
                    for s in apps.statuses() {
                        o.put_status(s);
                    }
                }
                Err(broadcast::error::RecvError::Closed) => statuses_open = false,
            },
            r = inventory.changed(), if inventory_open => match r {
                Ok(()) => {
                    let latest = inventory.borrow_and_update().clone();
                    if let Some(inv) = latest
                        && detector.observe(&inv) {
                            info!("inventory changed; queueing it for the control plane");
                            lock(&outbox).put_inventory((*inv).clone());
                        }
                }
                Err(_) => inventory_open = false,
            },
        }
        wake.notify_one();
    }
}
