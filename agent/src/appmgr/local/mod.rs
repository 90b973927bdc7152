//! Which agent's set the local commands (`odac-agent apply`, `status`, `doctor`) work on: a
//! resolved [`Target`] (the app manager's settings, the identity dir, the engine endpoint;
//! the flags that name it are `cli/target.rs`'s), and what the engine really runs for that
//! instance ([`engine_view`]), for `status`.
//!
//! The folder is the app manager as the local commands see it, without a running agent: this
//! module and [`doctor`] (the ownership checks of `odac-agent doctor`).

pub mod doctor;

use std::collections::BTreeMap;
use std::time::Duration;

use super::settings::AppManagerConfig;
use odac_host::engine::{ContainerEngine, ContainerSummary, DockerEngine};

/// How long `status` waits for the engine's container listing.
const ENGINE_BOUND: Duration = Duration::from_secs(5);

/// A resolved target.
#[derive(Debug, Clone)]
pub struct Target {
    /// The app manager's settings (the agent's one state dir, where its id lives too;
    /// instance, lock dir, policy, ...).
    pub apps: AppManagerConfig,
    /// The engine endpoint, if one was named.
    pub docker_host: Option<String>,
}

impl Target {
    /// The canonical engine endpoint (the instance lock's key).
    pub fn engine_endpoint(&self) -> String {
        crate::instance_lock::engine_endpoint(self.docker_host.as_deref())
    }
}

/// The containers the engine runs for the target's instance, by id; `Err` says why the engine
/// could not be asked.
pub async fn engine_view(target: &Target) -> Result<BTreeMap<String, ContainerSummary>, String> {
    let engine = DockerEngine::lazy(target.docker_host.as_deref()).map_err(|e| e.to_string())?;
    let filter = format!("{}={}", odac_host::names::INSTANCE, target.apps.instance);
    match tokio::time::timeout(ENGINE_BOUND, engine.list_by_label(&filter)).await {
        Ok(Ok(list)) => Ok(list.into_iter().map(|c| (c.id.clone(), c)).collect()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", ENGINE_BOUND.as_secs())),
    }
}
