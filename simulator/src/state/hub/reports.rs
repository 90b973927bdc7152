//! What agents report, recorded in the hub: `hello` (the host record), inventories, app
//! statuses, events, acks, GPU figures and refused messages. Each report changes one host's
//! record, so only that host is saved again (by the background writer, within 200 ms).

use std::sync::Arc;

use odac_host::lock::lock;
use odac_protocol::{AppSpec, AppStatus, EventLevel, Hello, Inventory};

use super::{Hub, to_value};
use crate::state::model::HostRecord;

impl Hub {
    /// Records a `hello`; returns the host id.
    pub fn hello(&self, h: &Hello) -> String {
        let id = h.agent_id.clone();
        let now = crate::clock::now_ms();
        self.write(|d| {
            let rec = d.hosts.entry(id.clone()).or_insert_with(|| HostRecord {
                id: id.clone(),
                first_seen_ms: now,
                ..HostRecord::default()
            });
            rec.hostname.clone_from(&h.hostname);
            rec.agent_version.clone_from(&h.agent_version);
            rec.last_seen_ms = now;
            rec.sessions += 1;
            let msg = format!(
                "host {id} ({}) connected, agent {}, last generation {}",
                h.hostname,
                h.agent_version,
                h.last_generation
                    .map_or_else(|| "none".to_owned(), |g| g.to_string())
            );
            self.log(d, EventLevel::Info, Some(&id), None, msg);
        });
        self.mark(|p| p.host(&id));
        id
    }

    /// The desired-state snapshot of `host`: (generation, apps).
    pub fn snapshot(&self, host: &str) -> (u64, Vec<AppSpec>) {
        self.read(|d| {
            (
                d.hosts.get(host).map_or(0, |h| h.generation),
                d.host_apps(host),
            )
        })
    }

    /// Changes `host`'s record (saved with the next write of that host alone).
    fn touch_host(&self, host: &str, f: impl FnOnce(&mut HostRecord)) {
        if let Some(h) = lock(&self.data).hosts.get_mut(host) {
            h.last_seen_ms = crate::clock::now_ms();
            f(h);
        }
        self.mark(|p| p.host(host));
    }

    /// Records a message seen from `host` (keeps `last_seen` fresh).
    pub fn seen(&self, host: &str) {
        if let Some(h) = lock(&self.data).hosts.get_mut(host) {
            h.last_seen_ms = crate::clock::now_ms();
        }
    }

    /// Records an `update_status`; a final phase is logged.
    pub fn record_update(&self, host: &str, m: odac_protocol::UpdateStatusReport) {
        if m.phase.is_final() {
            let cause = m
                .message
                .as_deref()
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            let msg = format!(
                "host {host} agent update {} {}{cause}",
                m.version,
                m.phase.as_str()
            );
            let level = match m.phase {
                odac_protocol::UpdatePhase::Committed => EventLevel::Info,
                _ => EventLevel::Error,
            };
            self.write(|d| self.log(d, level, Some(host), None, msg));
        }
        self.touch_host(host, |h| {
            h.update = Some(crate::state::model::HostUpdate {
                version: m.version,
                phase: m.phase,
                message: m.message,
                bytes: m.bytes,
                total: m.total,
            });
        });
        self.emit_host(host);
    }

    /// Sends `release` to `host`'s live session and forgets its last update report; `false`
    /// when the host has no live session.
    pub fn offer_update(&self, host: &str, release: odac_protocol::SignedRelease) -> bool {
        let sent = self.send_to_session(host, super::SessionCmd::OfferUpdate(release));
        if sent {
            self.touch_host(host, |h| h.update = None);
            self.emit_host(host);
        }
        sent
    }

    /// Records an inventory.
    pub fn record_inventory(&self, host: &str, inv: Inventory) {
        self.touch_host(host, |h| h.inventory = Some(Arc::new(inv)));
        self.emit_host(host);
    }

    /// Records a `gpu_stats` report and pushes it to SSE clients (`gpu_stats` event).
    pub fn record_gpu_stats(&self, host: &str, stats: odac_protocol::GpuStats) {
        let view = self.gpu_history.record(host, stats, crate::clock::now_ms());
        self.emit("gpu_stats", to_value(&view));
    }

    /// Records an app status; a `removed` one forgets the app's status on that host.
    pub fn record_status(&self, host: &str, status: AppStatus) {
        let name = status.name.clone();
        let removed = status.state == odac_protocol::AppState::Removed;
        self.touch_host(host, |h| {
            if removed {
                h.statuses.remove(&name);
            } else {
                h.statuses.insert(name.clone(), status);
            }
        });
        if removed {
            self.write(|d| {
                let msg = format!("app {name} removed from host {host}");
                self.log(d, EventLevel::Info, Some(host), Some(&name), msg);
            });
            self.emit_host(host);
        }
        let placed_here = self.read(|d| d.apps.get(&name).is_some_and(|a| a.host == host));
        if placed_here {
            self.emit_app(&name);
        }
    }

    /// Records an agent event.
    pub fn record_event(&self, host: &str, ev: &odac_protocol::Event) {
        self.write(|d| {
            let mut msg = ev.message.clone();
            if let Some(n) = ev.dropped {
                msg.push_str(&format!(" ({n} earlier events dropped)"));
            }
            let e = d.push_event(ev.level, "agent", Some(host), ev.app.as_deref(), msg);
            self.emit("event", to_value(&e));
        });
    }

    /// Records that the agent acknowledged `generation`.
    pub fn record_ack(&self, host: &str, generation: u64) {
        self.touch_host(host, |h| {
            h.acked_generation = Some(h.acked_generation.map_or(generation, |g| g.max(generation)));
        });
        self.emit_host(host);
    }

    /// Records an `error` the agent sent about a control-plane message.
    pub fn record_agent_error(&self, host: &str, message: &str) {
        self.touch_host(host, |h| h.last_error = Some(message.to_owned()));
        self.write(|d| {
            self.log(
                d,
                EventLevel::Error,
                Some(host),
                None,
                format!("agent refused a message: {message}"),
            );
        });
        self.emit_host(host);
    }
}
