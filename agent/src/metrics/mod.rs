//! Prometheus metrics (`[metrics] listen`, off by default): GPU figures under the names of
//! NVIDIA's DCGM exporter with the app holding each GPU ([`gpu`]), the agent's own health
//! (`odac_agent_…`: [`agent`] read at scrape time, [`events`] counted where they happen),
//! one registry ([`registry`]) and the HTTP endpoint that serves it ([`server`]); the
//! `listen` setting is [`config`]. [`Endpoint`] is what `run` starts.

pub mod agent;
pub mod config;
pub mod events;
pub mod gpu;
pub mod registry;
pub mod server;

use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

pub use agent::{AgentCollector, LinkMetrics};
pub use config::{Listen, MetricsConfig};
pub use gpu::{GpuMetrics, Statuses};
pub use registry::MetricsRegistry;
pub use server::{BindError, MetricsListener};

use crate::uplink::{LinkEvent, Outbox};

/// A bound endpoint and what it serves, before it runs.
pub struct Endpoint {
    listener: MetricsListener,
    /// The GPU metrics, fed by the telemetry loop.
    pub gpu: GpuMetrics,
    link: LinkMetrics,
    statuses: Statuses,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The endpoint on `listener` (bound first, so that a bad `metrics.listen` stops the
    /// agent before it does anything); `hostname` and `instance` label the GPU series,
    /// `statuses` are the app manager's.
    pub fn new(
        listener: MetricsListener,
        hostname: &str,
        instance: &str,
        statuses: Statuses,
    ) -> Endpoint {
        Endpoint {
            listener,
            gpu: GpuMetrics::new(hostname, instance, Arc::clone(&statuses)),
            link: LinkMetrics::default(),
            statuses,
        }
    }

    /// The TCP address bound, if any.
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown`, following the link through `link_events` and reading the
    /// outbox at scrape time.
    pub async fn run(
        self,
        outbox: Arc<Mutex<Outbox>>,
        link_events: broadcast::Receiver<LinkEvent>,
        shutdown: CancellationToken,
    ) {
        let registry = Arc::new(MetricsRegistry::new(
            self.gpu,
            AgentCollector {
                statuses: self.statuses,
                outbox: Some(outbox),
            },
            &self.link,
        ));
        tokio::join!(
            agent::watch_link(self.link.clone(), link_events, shutdown.clone()),
            server::serve(self.listener, registry, shutdown),
        );
    }
}
