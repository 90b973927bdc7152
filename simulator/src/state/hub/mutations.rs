//! Desired-state changes in the hub, the REST API's mutations: create, update (whole spec, GPU request,
//! restart), delete, and resending the apps of a registry whose login changed. Each bumps the
//! host's generation, is saved before it is acknowledged (only the host and app it touched,
//! off the runtime worker), then goes to the host's agent session and to SSE clients.

use std::sync::Arc;

use odac_protocol::{
    AppSpec, ControlMessage, DesiredStateMessage, EventLevel, GpuRequest, MAX_FRAME_BYTES,
};

use super::{ChangeKind, DesiredChange, Hub, HubError};
use crate::state::model::{AppRecord, FleetData};
use crate::state::views::AppView;

impl Hub {
    /// Sends a desired-state change to the agent sessions.
    fn change(&self, host: &str, generation: u64, kind: ChangeKind) {
        let _ = self.changes.send(DesiredChange {
            host: host.to_owned(),
            generation,
            kind,
        });
    }

    /// Creates an app (the spec already validated and resolved) on `host` (id or host name;
    /// optional when exactly one host is connected). Saved before the change goes to the agent and before this returns.
    pub async fn create_app(
        self: &Arc<Self>,
        host: Option<&str>,
        spec: AppSpec,
    ) -> Result<AppView, HubError> {
        let connected = self.connected_hosts();
        let name = spec.name.clone();
        let (host_id, generation) = self.write(|d| {
            let host_id = match host {
                Some(key) => resolve_host(d, key)?,
                None => match connected.as_slice() {
                    [one] => one.clone(),
                    [] => return Err(HubError::NoHostConnected),
                    many => return Err(HubError::ManyHostsConnected(many.len())),
                },
            };
            if d.apps.contains_key(&name) {
                return Err(HubError::AppExists(name.clone()));
            }
            self.fits_a_frame(d, &host_id, &spec)?;
            let now = crate::clock::now_ms();
            d.apps.insert(
                name.clone(),
                AppRecord {
                    host: host_id.clone(),
                    spec: spec.clone(),
                    created_ms: now,
                    updated_ms: now,
                    last_restart_request: None,
                    sealed_secret: None,
                },
            );
            let generation = bump(d, &host_id);
            let msg = format!("app {name} created on {host_id}");
            self.log(d, EventLevel::Info, Some(&host_id), Some(&name), msg);
            Ok((host_id, generation))
        })?;
        self.mark(|p| p.host(&host_id).app(&name));
        self.flush().await;
        self.change(&host_id, generation, ChangeKind::Upsert(spec));
        self.emit_app(&name);
        self.emit_host(&host_id);
        self.app(&name).ok_or(HubError::UnknownApp(name))
    }

    /// Replaces an app's spec through `f` (which may refuse, or change nothing with `false`);
    /// saves the change, then sends the upsert.
    async fn update_app(
        self: &Arc<Self>,
        name: &str,
        what: &str,
        f: impl FnOnce(&mut FleetData, &mut AppSpec) -> Result<bool, HubError>,
    ) -> Result<AppView, HubError> {
        let changed = self.write(|d| {
            let mut spec = d
                .apps
                .get(name)
                .map(|a| a.spec.clone())
                .ok_or_else(|| HubError::UnknownApp(name.to_owned()))?;
            if !f(d, &mut spec)? {
                return Ok(None);
            }
            if let Some(host) = d.apps.get(name).map(|a| a.host.clone()) {
                self.fits_a_frame(d, &host, &spec)?;
            }
            let host = {
                let Some(a) = d.apps.get_mut(name) else {
                    return Err(HubError::UnknownApp(name.to_owned()));
                };
                a.spec = spec.clone();
                a.updated_ms = crate::clock::now_ms();
                a.host.clone()
            };
            let generation = bump(d, &host);
            self.log(
                d,
                EventLevel::Info,
                Some(&host),
                Some(name),
                format!("app {name}: {what}"),
            );
            Ok(Some((host, generation, spec)))
        })?;
        if let Some((host, generation, spec)) = changed {
            self.mark(|p| p.host(&host).app(name));
            self.flush().await;
            self.change(&host, generation, ChangeKind::Upsert(spec));
            self.emit_app(name);
        }
        self.app(name)
            .ok_or_else(|| HubError::UnknownApp(name.to_owned()))
    }

    /// Sends again every app whose image names registry `registry` (its login changed), the
    /// new generations saved first.
    pub async fn resend_registry_apps(self: &Arc<Self>, registry: &str) {
        let changed: Vec<(String, u64, AppSpec)> = self.write(|d| {
            let names: Vec<String> = d
                .apps
                .iter()
                .filter(|(_, a)| {
                    a.spec.image.as_deref().map(odac_protocol::registry_host) == Some(registry)
                })
                .map(|(n, _)| n.clone())
                .collect();
            names
                .into_iter()
                .filter_map(|n| {
                    let a = d.apps.get(&n)?;
                    let (host, spec) = (a.host.clone(), a.spec.clone());
                    let generation = bump(d, &host);
                    Some((host, generation, spec))
                })
                .collect()
        });
        if !changed.is_empty() {
            self.mark(|p| {
                for (host, _, _) in &changed {
                    p.host(host);
                }
                p
            });
            self.flush().await;
        }
        for (host, generation, spec) in changed {
            self.change(&host, generation, ChangeKind::Upsert(spec));
        }
    }

    /// Sets or clears an app's GPU request.
    pub async fn set_gpu(
        self: &Arc<Self>,
        name: &str,
        gpu: Option<GpuRequest>,
    ) -> Result<AppView, HubError> {
        let what = match &gpu {
            Some(g) => format!(
                "gpu request set to {}",
                serde_json::to_string(g).unwrap_or_default()
            ),
            None => "gpu request removed".to_owned(),
        };
        self.update_app(name, &what, |_, spec| {
            spec.gpu = gpu;
            Ok(true)
        })
        .await
    }

    /// Replaces an app's whole spec (validated and resolved by the caller): a spec without a
    /// restart token keeps the current one, a git source without an access token keeps the
    /// stored one for the same URL. Nothing changes (no new generation) when the result is
    /// the spec the app already has.
    pub async fn replace_spec(
        self: &Arc<Self>,
        name: &str,
        mut spec: AppSpec,
    ) -> Result<AppView, HubError> {
        self.update_app(name, "spec replaced", |_, current| {
            if spec.restart_token.is_none() {
                spec.restart_token.clone_from(&current.restart_token);
            }
            if let (Some(new), Some(old)) = (spec.source.as_mut(), current.source.as_ref())
                && new.secret.is_none()
                && new.url == old.url
            {
                new.secret.clone_from(&old.secret);
            }
            if spec == *current {
                return Ok(false);
            }
            *current = spec;
            Ok(true)
        })
        .await
    }

    /// Bumps an app's restart token. A `request_id` equal to that of the app's previous
    /// restart changes nothing: a client may retry a request whose answer it lost.
    pub async fn restart(
        self: &Arc<Self>,
        name: &str,
        request_id: Option<&str>,
    ) -> Result<AppView, HubError> {
        self.update_app(name, "restart requested", |d, spec| {
            if let Some(id) = request_id {
                let Some(a) = d.apps.get_mut(name) else {
                    return Err(HubError::UnknownApp(name.to_owned()));
                };
                if a.last_restart_request.as_deref() == Some(id) {
                    return Ok(false);
                }
                a.last_restart_request = Some(id.to_owned());
            }
            d.restarts += 1;
            spec.restart_token = Some(format!(
                "{}-{}",
                crate::clock::rfc3339(crate::clock::now_ms()),
                d.restarts
            ));
            Ok(true)
        })
        .await
    }

    /// Deletes an app, saved before the agent hears of it.
    pub async fn delete_app(self: &Arc<Self>, name: &str) -> Result<(), HubError> {
        let (host, generation) = self.write(|d| {
            let a = d
                .apps
                .remove(name)
                .ok_or_else(|| HubError::UnknownApp(name.to_owned()))?;
            if let Some(h) = d.hosts.get_mut(&a.host) {
                h.statuses.remove(name);
            }
            let generation = bump(d, &a.host);
            self.log(
                d,
                EventLevel::Info,
                Some(&a.host),
                Some(name),
                format!("app {name} removed"),
            );
            Ok::<_, HubError>((a.host, generation))
        })?;
        self.mark(|p| p.host(&host).app(name));
        self.flush().await;
        self.change(&host, generation, ChangeKind::Delete(name.to_owned()));
        self.emit("app_deleted", serde_json::json!({ "name": name }));
        self.emit_host(&host);
        Ok(())
    }
}

impl Hub {
    /// Refuses `spec` (new, or replacing the app of its name) when the desired-state snapshot
    /// of `host` with it, registry credentials attached as they are sent, would not fit a
    /// frame ([`MAX_FRAME_BYTES`]): the agent would close every snapshot with 1009.
    fn fits_a_frame(&self, d: &FleetData, host: &str, spec: &AppSpec) -> Result<(), HubError> {
        let mut apps: Vec<AppSpec> = d
            .host_apps(host)
            .into_iter()
            .filter(|a| a.name != spec.name)
            .collect();
        apps.push(spec.clone());
        let apps = apps
            .into_iter()
            .map(|a| self.registries.attach(a))
            .collect();
        let frame = odac_protocol::encode(&ControlMessage::DesiredState(DesiredStateMessage {
            seq: u64::MAX,
            generation: u64::MAX,
            apps,
        }));
        if frame.len() <= MAX_FRAME_BYTES {
            return Ok(());
        }
        let (field, field_bytes) = match serde_json::to_value(spec) {
            Ok(serde_json::Value::Object(fields)) => fields
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string().len()))
                .max_by_key(|(_, n)| *n)
                .unwrap_or_default(),
            _ => (String::new(), 0),
        };
        Err(HubError::TooLarge {
            app: spec.name.clone(),
            host: host.to_owned(),
            bytes: frame.len(),
            limit: MAX_FRAME_BYTES,
            field,
            field_bytes,
        })
    }
}

fn bump(d: &mut FleetData, host: &str) -> u64 {
    match d.hosts.get_mut(host) {
        Some(h) => {
            h.generation += 1;
            h.generation
        }
        None => 0,
    }
}

/// A host by id, or by host name when exactly one host has it.
pub(super) fn resolve_host(d: &FleetData, key: &str) -> Result<String, HubError> {
    if d.hosts.contains_key(key) {
        return Ok(key.to_owned());
    }
    let named: Vec<&String> = d
        .hosts
        .values()
        .filter(|h| h.hostname == key)
        .map(|h| &h.id)
        .collect();
    match named.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(HubError::UnknownHost(key.to_owned())),
        many => Err(HubError::AmbiguousHost {
            key: key.to_owned(),
            count: many.len(),
        }),
    }
}
