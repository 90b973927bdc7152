//! Persistence of the fleet in the state dir, one file per host (`DIR/hosts/`) and per app
//! (`DIR/apps/`) beside `DIR/fleet.json` (everything else: events, enrollment secrets,
//! bindings, counters), so a change rewrites only what it touched. Every file is replaced
//! atomically (`odac_host::atomic_file`) so a killed simulator never leaves half a file. A
//! `fleet.json` of the older single-file layout (hosts and apps inside) still loads; the hub
//! then writes it whole in the new layout. Git secrets are sealed on the way out and opened on
//! the way in (`secrets.rs`): no file ever holds one in clear.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::state::model::{AppRecord, FleetData, HostRecord};
use crate::state::secrets::Sealer;

/// File name of the fleet state (all but hosts and apps) in the state dir.
pub const FLEET_FILE: &str = "fleet.json";

/// Folder of the state dir holding one file per host.
pub const HOSTS_DIR: &str = "hosts";

/// Folder of the state dir holding one file per app.
pub const APPS_DIR: &str = "apps";

/// Version of the layout written; `fleet.json` files with a lower one hold hosts and apps.
pub const FORMAT_VERSION: u32 = 2;

/// What a save writes: the part outside hosts and apps when it changed, and the hosts and
/// apps that changed (`None`: it is gone, its file is removed).
#[derive(Debug, Default)]
pub struct Changes {
    /// Everything but hosts and apps (those maps empty), when it changed.
    pub rest: Option<FleetData>,
    /// Changed hosts by id.
    pub hosts: Vec<(String, Option<HostRecord>)>,
    /// Changed apps by name.
    pub apps: Vec<(String, Option<AppRecord>)>,
}

impl Changes {
    /// All of `data`.
    pub fn everything(data: &FleetData) -> Self {
        Self {
            rest: Some(data.without_hosts_and_apps()),
            hosts: (data.hosts.iter())
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
            apps: (data.apps.iter())
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
        }
    }
}

/// A host or app file: its key (host id, app name) and record.
#[derive(Serialize)]
struct KeyedRef<'a, T> {
    key: &'a str,
    value: &'a T,
}

#[derive(Deserialize)]
struct Keyed<T> {
    key: String,
    value: T,
}

/// The fleet files of one state dir.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    path: PathBuf,
    sealer: Sealer,
}

/// The file name of `key`: the key itself when it is a plain name, else `_` and its hex.
fn file_name(key: &str) -> String {
    let plain = key.len() <= 128
        && key.starts_with(|c: char| c.is_ascii_alphanumeric())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if plain {
        format!("{key}.json")
    } else {
        format!("_{}.json", hex::encode(key))
    }
}

fn parse_error(path: &Path, e: &serde_json::Error) -> SimError {
    SimError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

impl Store {
    /// The store in `dir` (created if missing).
    pub fn open(dir: &Path) -> Result<Self, SimError> {
        for sub in [dir.to_owned(), dir.join(HOSTS_DIR), dir.join(APPS_DIR)] {
            std::fs::create_dir_all(&sub).map_err(|e| SimError::io("create", &sub, e))?;
        }
        Ok(Self {
            dir: dir.to_owned(),
            path: dir.join(FLEET_FILE),
            sealer: Sealer::load_or_create(dir)?,
        })
    }

    /// The state dir's sealer (git secrets, registry passwords).
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// The path of `fleet.json`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file that holds host `id`.
    pub fn host_path(&self, id: &str) -> PathBuf {
        self.dir.join(HOSTS_DIR).join(file_name(id))
    }

    /// The file that holds app `name`.
    pub fn app_path(&self, name: &str) -> PathBuf {
        self.dir.join(APPS_DIR).join(file_name(name))
    }

    /// Loads the fleet; missing files are an empty fleet. A sealed secret that does not open
    /// (the key file was replaced) is dropped with an error event naming the app.
    pub fn load(&self) -> Result<FleetData, SimError> {
        let mut data = match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| parse_error(&self.path, &e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FleetData {
                version: FORMAT_VERSION,
                ..FleetData::default()
            },
            Err(e) => return Err(SimError::io("read", &self.path, e)),
        };
        load_dir(&self.dir.join(HOSTS_DIR), &mut data.hosts)?;
        load_dir(&self.dir.join(APPS_DIR), &mut data.apps)?;
        self.unseal(&mut data);
        Ok(data)
    }

    fn unseal(&self, data: &mut FleetData) {
        let mut lost = Vec::new();
        for (name, app) in &mut data.apps {
            let Some(sealed) = app.sealed_secret.take() else {
                continue;
            };
            let opened = self.sealer.open(name, &sealed);
            match (opened, app.spec.source.as_mut()) {
                (Some(secret), Some(source)) => {
                    source.secret = Some(odac_protocol::GitSecret::new(secret));
                }
                _ => lost.push(name.clone()),
            }
        }
        for name in lost {
            let msg = format!(
                "app {name}: its git secret could not be unsealed with {}; set the app's source secret again",
                self.sealer.path().display()
            );
            tracing::error!("{msg}");
            data.push_event(
                odac_protocol::EventLevel::Error,
                "control_plane",
                None,
                Some(&name),
                msg,
            );
        }
    }

    /// `app` as written: its git secret moved out of the spec and sealed.
    fn sealed(&self, name: &str, app: &AppRecord) -> Result<AppRecord, SimError> {
        let mut out = app.clone();
        out.sealed_secret = None;
        if let Some(secret) = out.spec.source.as_mut().and_then(|s| s.secret.take()) {
            out.sealed_secret = Some(self.sealer.seal(name, secret.expose())?);
        }
        Ok(out)
    }

    /// Writes `changes`: hosts first, then apps, then `fleet.json`, each file atomically, git
    /// secrets sealed. (A crash between files leaves a host at a newer generation than its
    /// apps, which an agent takes as a resend; never apps ahead of their host.)
    pub fn save(&self, changes: &Changes) -> Result<(), SimError> {
        for (id, host) in &changes.hosts {
            put(&self.host_path(id), id, host.as_ref())?;
        }
        for (name, app) in &changes.apps {
            let sealed = app.as_ref().map(|a| self.sealed(name, a)).transpose()?;
            put(&self.app_path(name), name, sealed.as_ref())?;
        }
        if let Some(rest) = &changes.rest {
            let mut rest = rest.clone();
            rest.version = FORMAT_VERSION;
            let json = serde_json::to_vec_pretty(&rest).map_err(|e| parse_error(&self.path, &e))?;
            crate::files::write_file(&self.path, &json, 0o600)?;
        }
        Ok(())
    }

    /// Writes all of `data`.
    pub fn save_all(&self, data: &FleetData) -> Result<(), SimError> {
        self.save(&Changes::everything(data))
    }
}

/// Writes `value` under `key` to `path`, or removes the file when `value` is `None`.
fn put<T: Serialize>(path: &Path, key: &str, value: Option<&T>) -> Result<(), SimError> {
    match value {
        Some(value) => {
            let json = serde_json::to_vec_pretty(&KeyedRef { key, value })
                .map_err(|e| parse_error(path, &e))?;
            crate::files::write_file(path, &json, 0o600)
        }
        None => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(SimError::io("remove", path, e))
            }
            _ => Ok(()),
        },
    }
}

/// Adds every `*.json` record file of `dir` to `into` (a missing dir adds nothing).
fn load_dir<T: DeserializeOwned>(
    dir: &Path,
    into: &mut BTreeMap<String, T>,
) -> Result<(), SimError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(SimError::io("read", dir, e)),
    };
    for entry in entries {
        let path = entry.map_err(|e| SimError::io("read", dir, e))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if !name.is_some_and(|n| n.ends_with(".json") && !n.starts_with('.')) {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| SimError::io("read", &path, e))?;
        let record: Keyed<T> =
            serde_json::from_slice(&bytes).map_err(|e| parse_error(&path, &e))?;
        into.insert(record.key, record.value);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
