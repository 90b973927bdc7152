//! `odac-sim fleet`: N simulated agents (no Docker) against a control plane, each with one of
//! the realistic inventory profiles, heartbeating and reconnecting; a line of counters is
//! printed periodically, for capacity and reconnect-storm tests.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::fake_agent::inventories::profile;
use crate::fake_agent::sim_agent::{SimAgent, SimAgentConfig, Stats};

/// How to run a fleet.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Number of agents.
    pub agents: usize,
    /// `wss://…/agent/v1`.
    pub url: String,
    /// CA to trust, PEM.
    pub ca_pem: Vec<u8>,
    /// Bearer token every agent uses.
    pub token: String,
    /// Host name prefix: agents are `PREFIX-0000`, `PREFIX-0001`, …
    pub prefix: String,
    /// Ping interval.
    pub heartbeat: Duration,
}

/// A running fleet.
pub struct Fleet {
    /// Shared counters.
    pub stats: Arc<Stats>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Fleet {
    /// Starts every agent.
    pub fn start(cfg: &FleetConfig) -> Fleet {
        let stats = Arc::new(Stats::default());
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        for i in 0..cfg.agents {
            let hostname = format!("{}-{i:04}", cfg.prefix);
            let agent = SimAgent::new(
                SimAgentConfig {
                    url: cfg.url.clone(),
                    ca_pem: cfg.ca_pem.clone(),
                    token: cfg.token.clone(),
                    agent_id: format!("agt_{hostname}"),
                    inventory: profile(i, &hostname),
                    heartbeat: cfg.heartbeat,
                },
                Arc::clone(&stats),
            );
            tasks.spawn(agent.run(stop_rx.clone()));
        }
        Fleet { stats, stop, tasks }
    }

    /// One line of counters.
    pub fn summary(&self) -> String {
        let s = &self.stats;
        format!(
            "connected {} | sessions {} | connect failures {} | reports {} | acks {} | applied {} | errors {}",
            s.connected.load(Ordering::Relaxed),
            s.sessions.load(Ordering::Relaxed),
            s.connect_failures.load(Ordering::Relaxed),
            s.reports.load(Ordering::Relaxed),
            s.acks.load(Ordering::Relaxed),
            s.applied.load(Ordering::Relaxed),
            s.errors.load(Ordering::Relaxed),
        )
    }

    /// Stops every agent (close frames sent) and waits for them.
    pub async fn stop(mut self) {
        self.stop.send_replace(true);
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        self.tasks.abort_all();
    }
}
