//! The scrape registry: the GPU collector, the agent collector, the link metrics and the
//! event metrics in one `prometheus-client` registry, encoded in the Prometheus text format
//! (0.0.4) or, when asked, in OpenMetrics text.

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::registry::Registry;

use super::agent::{AgentCollector, LinkMetrics};
use super::gpu::GpuMetrics;

/// Content type of the Prometheus text format.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of OpenMetrics text.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric the endpoint serves.
#[derive(Debug)]
pub struct MetricsRegistry {
    registry: Registry,
}

impl MetricsRegistry {
    /// A registry over these sources.
    pub fn new(gpu: GpuMetrics, agent: AgentCollector, link: &LinkMetrics) -> Self {
        let mut registry = Registry::default();
        link.register(&mut registry);
        super::events::register(&mut registry);
        registry.register_collector(Box::new(agent));
        registry.register_collector(Box::new(gpu));
        Self { registry }
    }

    /// One scrape: the body and its content type.
    pub fn encode(&self, openmetrics: bool) -> Result<(String, &'static str), std::fmt::Error> {
        let mut body = String::with_capacity(4096);
        if openmetrics {
            text::encode(&mut body, &self.registry)?;
            Ok((body, OPENMETRICS_CONTENT_TYPE))
        } else {
            prometheus_text::encode(&mut body, &self.registry)?;
            Ok((body, PROMETHEUS_CONTENT_TYPE))
        }
    }
}
