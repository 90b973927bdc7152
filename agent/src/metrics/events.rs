//! The agent's event metrics, counted where the events happen and kept for the whole process (like
//! the default registry of Prometheus' Go client): engine call errors by kind (counted by
//! `odac_host::engine` where bollard's errors become the seam's errors), image pull durations by
//! result, and the duration of each reconcile pass (the app manager applying the desired state).
//! The hooks are one call each and never block; [`register`] adds them to a scrape registry.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = [(&'static str, &'static str); 1];

struct Events {
    pulls: Family<Labels, Histogram>,
    apply: Histogram,
}

static EVENTS: LazyLock<Events> = LazyLock::new(|| Events {
    // 0.5 s .. ~17 min
    pulls: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.5, 2.0, 12))),
    // 5 ms .. ~41 s
    apply: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
});

/// One image pull finished (`ok` false: failed, refused by the pre-check or stalled).
pub fn pull_finished(took: Duration, ok: bool) {
    let result = if ok { "ok" } else { "failed" };
    EVENTS
        .pulls
        .get_or_create(&[("result", result)])
        .observe(took.as_secs_f64());
}

/// One reconcile pass finished.
pub fn apply_finished(took: Duration) {
    EVENTS.apply.observe(took.as_secs_f64());
}

/// Adds the event metrics to `registry`.
pub fn register(registry: &mut Registry) {
    registry.register(
        "odac_agent_engine_errors",
        "Container engine calls that failed, by kind of failure",
        odac_host::engine::error_counts::family().clone(),
    );
    registry.register(
        "odac_agent_pull_duration_seconds",
        "Time image pulls took, by result",
        EVENTS.pulls.clone(),
    );
    registry.register(
        "odac_agent_apply_duration_seconds",
        "Time each reconcile pass took to apply the desired state to the engine",
        EVENTS.apply.clone(),
    );
}
