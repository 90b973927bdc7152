//! `GET /metrics` of the control plane: the fleet in the Prometheus text format (OpenMetrics
//! when the `Accept` header asks), behind the API token like the REST API. Read from the hub
//! at scrape time: hosts by connection, apps by state, apps whose GPU fell back by reason,
//! hosts whose vendor cannot take GPU apps by vendor and reason, and the build.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, prometheus_text, text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::state::hub::Hub;

/// The fleet, read at scrape time.
struct Fleet(Arc<Hub>);

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fleet")
    }
}

/// Series of one gauge: label pairs and value.
type Series = Vec<(Vec<(&'static str, String)>, i64)>;

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &'static str,
    help: &'static str,
    series: &Series,
) -> fmt::Result {
    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(*value).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

/// Counts by one label.
fn by(label: &'static str, counts: BTreeMap<String, i64>) -> Series {
    counts
        .into_iter()
        .map(|(v, n)| (vec![(label, v)], n))
        .collect()
}

impl Collector for Fleet {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let hosts = self.0.hosts();
        let apps = self.0.apps();
        let build = vec![(vec![("version", env!("CARGO_PKG_VERSION").to_owned())], 1)];
        gauge(
            &mut encoder,
            "odac_sim_build_info",
            "The simulator's version (always 1).",
            &build,
        )?;

        let mut connection =
            BTreeMap::from([("connected".to_owned(), 0), ("offline".to_owned(), 0)]);
        let mut unschedulable: BTreeMap<(String, String), i64> = BTreeMap::new();
        for h in &hosts {
            let key = if h.connected { "connected" } else { "offline" };
            *connection.entry(key.to_owned()).or_insert(0) += 1;
            for (vendor, reason) in &h.reasons {
                *unschedulable
                    .entry((vendor.as_str().to_owned(), reason.as_str().to_owned()))
                    .or_insert(0) += 1;
            }
        }
        gauge(
            &mut encoder,
            "odac_sim_hosts",
            "Hosts known to the control plane by connection state.",
            &by("state", connection),
        )?;
        if !unschedulable.is_empty() {
            let series = unschedulable
                .into_iter()
                .map(|((vendor, reason), n)| (vec![("vendor", vendor), ("reason", reason)], n))
                .collect();
            gauge(
                &mut encoder,
                "odac_sim_host_gpu_unschedulable",
                "Hosts whose GPUs of a vendor cannot be passed to apps, by vendor and reason.",
                &series,
            )?;
        }

        let mut states: BTreeMap<String, i64> = BTreeMap::new();
        let mut reasons: BTreeMap<String, i64> = BTreeMap::new();
        for a in &apps {
            *states.entry(a.state.clone()).or_insert(0) += 1;
            if let Some(r) = a.reason {
                *reasons.entry(r.as_str().to_owned()).or_insert(0) += 1;
            }
        }
        gauge(
            &mut encoder,
            "odac_sim_apps",
            "Apps of the fleet by state.",
            &by("state", states),
        )?;
        if !reasons.is_empty() {
            gauge(
                &mut encoder,
                "odac_sim_app_gpu_fallbacks",
                "Apps that did not get the GPU they asked for, by reason.",
                &by("reason", reasons),
            )?;
        }
        Ok(())
    }
}

/// `GET /metrics`.
pub async fn metrics(State(hub): State<Arc<Hub>>, headers: HeaderMap) -> Response {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Fleet(hub)));
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let mut body = String::new();
    let (encoded, content_type) = if openmetrics {
        (
            text::encode(&mut body, &registry),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
    } else {
        (
            prometheus_text::encode(&mut body, &registry),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    };
    if let Err(e) = encoded {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the metrics: {e}\n"),
        )
            .into_response();
    }
    let mut r = body.into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
