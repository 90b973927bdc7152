//! Read-only views of the hub's state for the REST API, the dashboard and SSE: every host
//! and app joined with the live session table, one by id or name, and the event log.

use std::collections::{HashMap, HashSet};

use odac_host::lock::lock;

use super::Hub;
use super::mutations::resolve_host;
use crate::state::model::{EventRecord, FleetData};
use crate::state::views::{AppView, HostView, app_view, host_view};

impl Hub {
    /// Every host.
    pub fn hosts(&self) -> Vec<HostView> {
        let connected: HashSet<String> = lock(&self.sessions).keys().cloned().collect();
        self.read(|d| {
            let mut apps: HashMap<&str, Vec<String>> = HashMap::new();
            for (name, a) in &d.apps {
                apps.entry(a.host.as_str()).or_default().push(name.clone());
            }
            d.hosts
                .values()
                .map(|h| {
                    let of_host = apps.remove(h.id.as_str()).unwrap_or_default();
                    host_view(h, connected.contains(&h.id), of_host)
                })
                .collect()
        })
    }

    /// One host, by id or unique host name.
    pub fn host(&self, key: &str) -> Option<HostView> {
        let id = self.read(|d| resolve_host(d, key).ok())?;
        let connected = self.is_connected(&id);
        self.read(|d| {
            d.hosts
                .get(&id)
                .map(|h| host_view(h, connected, apps_of(d, &id)))
        })
    }

    /// Every app.
    pub fn apps(&self) -> Vec<AppView> {
        self.read(|d| {
            d.apps
                .iter()
                .map(|(n, a)| app_view(n, a, d.hosts.get(&a.host)))
                .collect()
        })
    }

    /// One app.
    pub fn app(&self, name: &str) -> Option<AppView> {
        self.read(|d| {
            d.apps
                .get(name)
                .map(|a| app_view(name, a, d.hosts.get(&a.host)))
        })
    }

    /// The latest events, oldest first.
    pub fn events(&self) -> Vec<EventRecord> {
        self.read(|d| d.events.iter().cloned().collect())
    }
}

fn apps_of(d: &FleetData, host: &str) -> Vec<String> {
    d.apps
        .iter()
        .filter(|(_, a)| a.host == host)
        .map(|(n, _)| n.clone())
        .collect()
}
