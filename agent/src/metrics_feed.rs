//! Connects the metrics endpoint ([`crate::metrics`]) to the uplink: the link events become
//! `odac_agent_link_up` and `odac_agent_reconnects_total`, the outbox's counts are read at
//! scrape time. Kept apart from `metrics/` so that folder imports no other part of the agent
//! (the app manager and the engine report into it; it must not reach back).

use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Endpoint, LinkMetrics, ReportCounts};
use crate::uplink::{LinkEvent, Outbox};
use odac_host::lock::lock;

/// Serves `endpoint` until `shutdown`, following `link_events` and reading `outbox`.
pub async fn run(
    endpoint: Endpoint,
    outbox: Arc<Mutex<Outbox>>,
    link_events: broadcast::Receiver<LinkEvent>,
    shutdown: CancellationToken,
) {
    let link = endpoint.link.clone();
    let reports = Arc::new(move || {
        let o = lock(&outbox);
        let (sent, acked) = o.sent_and_acked();
        ReportCounts {
            sent,
            acked,
            pending: o.pending(),
        }
    });
    tokio::join!(
        watch_link(link, link_events, shutdown.clone()),
        endpoint.serve(Some(reports), shutdown),
    );
}

/// Applies one link event.
pub fn apply(link: &LinkMetrics, event: &LinkEvent) {
    match event {
        LinkEvent::Connecting => link.dialling(),
        LinkEvent::Connected => link.up(),
        LinkEvent::SessionLost { .. } | LinkEvent::ConnectFailed { .. } | LinkEvent::Stopped => {
            link.down();
        }
        LinkEvent::BackingOff(_) => {}
    }
}

/// Follows the uplink's link events until `shutdown`.
async fn watch_link(
    link: LinkMetrics,
    mut events: broadcast::Receiver<LinkEvent>,
    shutdown: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            e = events.recv() => e,
        };
        match event {
            Ok(e) => apply(&link, &e),
            // a missed event leaves the gauge stale until the next one
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use prometheus_client::encoding::prometheus_text;
    use prometheus_client::registry::Registry;

    use super::*;

    fn text(link: &LinkMetrics) -> String {
        let mut registry = Registry::default();
        link.register(&mut registry);
        let mut out = String::new();
        prometheus_text::encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn the_link_is_up_only_while_a_session_is_established_and_every_later_dial_counts() {
        let link = LinkMetrics::default();
        apply(&link, &LinkEvent::Connecting);
        assert!(text(&link).contains("odac_agent_link_up 0\n"));
        assert!(text(&link).contains("odac_agent_reconnects_total 0\n"));
        apply(&link, &LinkEvent::Connected);
        assert!(text(&link).contains("odac_agent_link_up 1\n"));
        apply(
            &link,
            &LinkEvent::SessionLost {
                reason: "closed".into(),
                healthy_for: Duration::from_secs(5),
            },
        );
        assert!(text(&link).contains("odac_agent_link_up 0\n"));
        for _ in 0..2 {
            apply(&link, &LinkEvent::Connecting);
            apply(
                &link,
                &LinkEvent::ConnectFailed {
                    error: "refused".into(),
                    unauthorized: false,
                },
            );
        }
        apply(&link, &LinkEvent::Connecting);
        apply(&link, &LinkEvent::Connected);
        let t = text(&link);
        assert!(t.contains("odac_agent_link_up 1\n"), "{t}");
        assert!(t.contains("odac_agent_reconnects_total 3\n"), "{t}");
    }
}
