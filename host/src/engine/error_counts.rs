//! The count of failed engine calls by kind of failure, kept for the whole process and
//! counted where bollard's errors become the seam's errors (`count`); the agent's metrics
//! register the [`family`] as `odac_agent_engine_errors_total`.

use std::sync::LazyLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The label of a failed call: `kind`.
pub type Labels = [(&'static str, &'static str); 1];

static ERRORS: LazyLock<Family<Labels, Counter>> = LazyLock::new(Family::default);

/// One failed engine call, by the kind of failure (`EngineError::kind`: `unavailable`,
/// `not_found`, `conflict`, `rejected`, `build_failed`, `other`).
pub(crate) fn count(kind: &'static str) {
    ERRORS.get_or_create(&[("kind", kind)]).inc();
}

/// The counters, one per kind seen so far (a clone shares them), for a scrape registry.
pub fn family() -> &'static Family<Labels, Counter> {
    &ERRORS
}
