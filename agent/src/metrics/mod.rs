//! Prometheus metrics (`[metrics] listen`, off by default): GPU figures under the names of
//! NVIDIA's DCGM exporter with the app holding each GPU ([`gpu`]), the agent's own health
//! (`odac_agent_…`: [`agent`] read at scrape time, [`events`] counted where they happen),
//! one registry ([`registry`]) and the HTTP endpoint that serves it ([`server`]); the
//! `listen` setting is [`config`]. [`Endpoint`] is what `run` starts, through
//! `crate::metrics_feed`, which feeds it from the uplink; this folder imports no other part of
//! the agent, so every part may report into it.

pub mod agent;
pub mod config;
pub mod events;
pub mod gpu;
pub mod registry;
pub mod server;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use agent::{AgentCollector, LinkMetrics, ReportCounts, Reports};
pub use config::{Listen, MetricsConfig};
pub use gpu::{EngineUtil, EngineUtils, GpuMetrics, Statuses};
pub use registry::MetricsRegistry;
pub use server::{BindError, MetricsListener};

/// A bound endpoint and what it serves, before it runs.
pub struct Endpoint {
    listener: MetricsListener,
    /// The GPU metrics, fed by the telemetry loop.
    pub gpu: GpuMetrics,
    /// The link metrics, fed from the uplink's link events.
    pub link: LinkMetrics,
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
    /// `container_name` names an app's container, `statuses` are the app manager's.
    pub fn new(
        listener: MetricsListener,
        hostname: &str,
        instance: &str,
        container_name: gpu::ContainerName,
        statuses: Statuses,
    ) -> Endpoint {
        Endpoint {
            listener,
            gpu: GpuMetrics::new(hostname, instance, container_name, Arc::clone(&statuses)),
            link: LinkMetrics::default(),
            statuses,
        }
    }

    /// The TCP address bound, if any.
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown`, reading `reports` at scrape time.
    pub async fn serve(self, reports: Option<Reports>, shutdown: CancellationToken) {
        let registry = Arc::new(MetricsRegistry::new(
            self.gpu,
            AgentCollector {
                statuses: self.statuses,
                reports,
            },
            &self.link,
        ));
        server::serve(self.listener, registry, shutdown).await;
    }
}
