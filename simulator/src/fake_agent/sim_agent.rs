//! A simulated agent: speaks the protocol like `odac-agent` but runs no containers. It sends
//! `hello` and its inventory, acks and "applies" desired state by computing what a real host
//! with that inventory would report (GPU attached, CPU fallback with the verdict's reason, or
//! a failure for a required GPU: the agent's own `gpu::resolve` decides), keeps `restart_required` until the restart token changes,
//! pings as a heartbeat and reconnects with full-jitter backoff.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use odac_host::gpu::{Allocations, Plan, assessment_from_inventory, resolve};
use odac_protocol::{
    Ack, AgentMessage, AppSpec, AppState, AppStatus, AppStatusReport, Attached, ControlMessage,
    DriverCapabilities, ErrorMessage, Fallback, FallbackTier, GpuRequest, GpuStatus, Inventory,
    InventoryReport, Reason,
};
use tokio::sync::watch;

use crate::fake_agent::agent_conn::{AgentConn, ConnError, Incoming};

/// Counters shared by a fleet of simulated agents.
#[derive(Debug, Default)]
pub struct Stats {
    /// Sessions established (welcome received).
    pub sessions: AtomicU64,
    /// Failed connection attempts.
    pub connect_failures: AtomicU64,
    /// Reports sent.
    pub reports: AtomicU64,
    /// Acks received.
    pub acks: AtomicU64,
    /// Control messages applied (desired state, upserts, deletes).
    pub applied: AtomicU64,
    /// Errors: `error` messages received plus undecodable frames.
    pub errors: AtomicU64,
    /// Sessions currently up.
    pub connected: AtomicU64,
}

/// How to run one simulated agent.
#[derive(Debug, Clone)]
pub struct SimAgentConfig {
    /// `wss://…/agent/v1`.
    pub url: String,
    /// CA to trust, PEM.
    pub ca_pem: Vec<u8>,
    /// Bearer token.
    pub token: String,
    /// Agent id (also the host id).
    pub agent_id: String,
    /// The inventory to report.
    pub inventory: Inventory,
    /// Ping interval.
    pub heartbeat: Duration,
}

struct AppRun {
    applied: AppSpec,
    desired: AppSpec,
    restarts: u32,
}

/// Where a GPU request lands on a host with `inv`: the agent's own pre-flight
/// ([`odac_host::gpu::resolve`]) on the assessment that inventory stands for, with no GPU
/// held by another app.
pub fn place(gpu: &GpuRequest, inv: &Inventory) -> Plan {
    resolve(gpu, &assessment_from_inventory(inv), &Allocations::new())
}

/// The status a host with `inv` reports for `spec` (applied at `generation`).
pub fn status_for(spec: &AppSpec, inv: &Inventory, generation: u64) -> AppStatus {
    let mut st = AppStatus {
        name: spec.name.clone(),
        generation,
        state: AppState::Running,
        container_id: Some(format!("sim{:0>12}", spec.name.len() * 7919 % 1_000_000)),
        image: spec.image.clone(),
        gpu: GpuStatus {
            requested: spec.gpu.clone(),
            ..GpuStatus::default()
        },
        ..AppStatus::default()
    };
    if let Some(gpu) = &spec.gpu {
        // what the agent reports for each plan (its app manager's pre-flight)
        match place(gpu, inv) {
            Plan::Attach(a) => {
                st.gpu.attached = Some(Attached {
                    vendor: a.vendor,
                    mechanism: a.mechanism,
                    devices: a.devices,
                    capabilities: odac_host::gpu::attach::capabilities_for(
                        a.vendor,
                        a.mechanism,
                        &DriverCapabilities::effective(gpu.driver_capabilities().as_ref(), &[]),
                    ),
                });
            }
            Plan::Cpu { reason, detail } => st.gpu.fallback = Some(preflight(reason, detail)),
            Plan::Refuse {
                reason,
                fix,
                detail,
            } => {
                st.state = AppState::Failed;
                st.container_id = None;
                st.last_error = Some(match fix {
                    Some(fix) => format!("{reason}: {detail}; fix: {fix}"),
                    None => format!("{reason}: {detail}"),
                });
                st.gpu.fallback = Some(preflight(reason, detail));
            }
        }
    }
    st
}

/// The fallback a pre-flight decision reports.
fn preflight(reason: Reason, detail: String) -> Fallback {
    Fallback {
        tier: FallbackTier::Preflight,
        reason,
        detail: Some(detail),
    }
}

/// Everything but the restart token.
fn differs(a: &AppSpec, b: &AppSpec) -> bool {
    let mut a = a.clone();
    a.restart_token.clone_from(&b.restart_token);
    a != *b
}

/// One simulated agent's state across sessions.
pub struct SimAgent {
    cfg: SimAgentConfig,
    stats: Arc<Stats>,
    apps: BTreeMap<String, AppRun>,
    generation: u64,
    seq: u64,
}

impl SimAgent {
    /// A new agent.
    pub fn new(cfg: SimAgentConfig, stats: Arc<Stats>) -> Self {
        Self {
            cfg,
            stats,
            apps: BTreeMap::new(),
            generation: 0,
            seq: 0,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn status(&self, name: &str) -> Option<AppStatus> {
        let run = self.apps.get(name)?;
        let mut st = status_for(&run.applied, &self.cfg.inventory, self.generation);
        st.gpu.requested = run.desired.gpu.clone();
        st.restart_required = differs(&run.applied, &run.desired);
        st.restart_count = run.restarts;
        Some(st)
    }

    /// Applies one app; returns whether its status changed.
    fn upsert(&mut self, spec: AppSpec) {
        match self.apps.get_mut(&spec.name) {
            None => {
                self.apps.insert(
                    spec.name.clone(),
                    AppRun {
                        applied: spec.clone(),
                        desired: spec,
                        restarts: 0,
                    },
                );
            }
            Some(run) => {
                if run.applied.restart_token != spec.restart_token {
                    run.applied = spec.clone();
                    run.restarts += 1;
                }
                run.desired = spec;
            }
        }
    }

    async fn report(&mut self, conn: &mut AgentConn, name: &str) -> Result<(), ConnError> {
        if let Some(status) = self.status(name) {
            let seq = self.next_seq();
            conn.send(&AgentMessage::AppStatus(AppStatusReport { seq, status }))
                .await?;
            self.stats.reports.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn on_message(&mut self, conn: &mut AgentConn, m: Incoming) -> Result<(), ConnError> {
        let msg = match m {
            Incoming::Message(msg) => msg,
            Incoming::Undecodable(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                let seq = self.next_seq();
                let mut err = ErrorMessage::new(e.code(), e.reply_text(), None);
                err.seq = Some(seq);
                return conn.send(&AgentMessage::Error(err)).await;
            }
        };
        if let Some(seq) = msg.seq() {
            conn.send(&AgentMessage::Ack(Ack { seq })).await?;
            self.stats.applied.fetch_add(1, Ordering::Relaxed);
        }
        let changed: Vec<String> = match msg {
            ControlMessage::DesiredState(ds) => {
                self.generation = ds.generation;
                let names: Vec<String> = ds.apps.iter().map(|a| a.name.clone()).collect();
                self.apps.retain(|n, _| names.contains(n));
                for app in ds.apps {
                    self.upsert(app);
                }
                names
            }
            ControlMessage::AppUpsert(up) => {
                self.generation = up.generation;
                let name = up.app.name.clone();
                self.upsert(up.app);
                vec![name]
            }
            ControlMessage::AppDelete(del) => {
                self.generation = del.generation;
                self.apps.remove(&del.name);
                Vec::new()
            }
            ControlMessage::Ack(_) => {
                self.stats.acks.fetch_add(1, Ordering::Relaxed);
                Vec::new()
            }
            ControlMessage::Error(_) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                Vec::new()
            }
            ControlMessage::Welcome(_) | ControlMessage::LogsCancel(_) => Vec::new(),
            ControlMessage::UpdateOffer(offer) => {
                // a simulated agent has no binary to replace: it commits what it is offered
                let version =
                    serde_json::from_str::<odac_protocol::ReleaseManifest>(&offer.release.manifest)
                        .map(|m| m.version)
                        .unwrap_or_default();
                let seq = self.next_seq();
                let report = odac_protocol::UpdateStatusReport {
                    seq,
                    version,
                    phase: odac_protocol::UpdatePhase::Committed,
                    ..Default::default()
                };
                conn.send(&AgentMessage::UpdateStatus(report)).await?;
                Vec::new()
            }
            ControlMessage::LogsRequest(r) => {
                let end = odac_protocol::LogsEnd {
                    request_id: r.request_id,
                    reason: odac_protocol::LogsEndReason::NotFound,
                    dropped: 0,
                    message: "a simulated agent has no containers".to_owned(),
                };
                conn.send(&AgentMessage::LogsEnd(end)).await?;
                Vec::new()
            }
            ControlMessage::ExecRequest(r) => {
                let refused = odac_protocol::ExecRefused {
                    session_id: r.session_id,
                    reason: odac_protocol::ExecEndReason::NotFound,
                    message: "a simulated agent has no containers".to_owned(),
                };
                conn.send(&AgentMessage::ExecRefused(refused)).await?;
                Vec::new()
            }
        };
        for name in changed {
            self.report(conn, &name).await?;
        }
        Ok(())
    }

    async fn session(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), ConnError> {
        let mut hello = AgentConn::hello(&self.cfg.agent_id, &self.cfg.inventory.host.hostname);
        hello.last_generation = (self.generation > 0).then_some(self.generation);
        let (mut conn, _welcome) =
            AgentConn::connect_hello(&self.cfg.url, &self.cfg.ca_pem, &self.cfg.token, hello)
                .await?;
        self.stats.sessions.fetch_add(1, Ordering::Relaxed);
        self.stats.connected.fetch_add(1, Ordering::Relaxed);
        let result = self.session_loop(&mut conn, stop).await;
        self.stats.connected.fetch_sub(1, Ordering::Relaxed);
        if *stop.borrow() {
            conn.close().await;
        }
        result
    }

    async fn session_loop(
        &mut self,
        conn: &mut AgentConn,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), ConnError> {
        let seq = self.next_seq();
        conn.send(&AgentMessage::Inventory(InventoryReport {
            seq,
            inventory: self.cfg.inventory.clone(),
        }))
        .await?;
        self.stats.reports.fetch_add(1, Ordering::Relaxed);
        let mut beat = tokio::time::interval(self.cfg.heartbeat);
        beat.tick().await;
        loop {
            tokio::select! {
                m = conn.recv() => self.on_message(conn, m?).await?,
                _ = beat.tick() => conn.ping().await?,
                _ = stop.changed() => return Ok(()),
            }
            if *stop.borrow() {
                return Ok(());
            }
        }
    }

    /// Runs sessions until `stop` turns true, reconnecting with full-jitter backoff
    /// (base 500 ms, cap 30 s), reset after each session that got a `welcome`.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let builder = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(500))
            .with_max_delay(Duration::from_secs(30))
            .with_jitter()
            .without_max_times();
        let mut backoff = builder.build();
        while !*stop.borrow() {
            let before = self.stats.sessions.load(Ordering::Relaxed);
            let result = self.session(&mut stop).await;
            if *stop.borrow() {
                break;
            }
            if let Err(e) = result {
                tracing::debug!(agent = %self.cfg.agent_id, error = %e, "session ended");
            }
            if self.stats.sessions.load(Ordering::Relaxed) == before {
                self.stats.connect_failures.fetch_add(1, Ordering::Relaxed);
            } else {
                backoff = builder.build();
            }
            let delay = backoff.next().unwrap_or(Duration::from_secs(30));
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
