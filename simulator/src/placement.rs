//! Where a new app goes, and how automatic vendor detection is reported back. `host` may be
//! omitted when exactly one host is connected; otherwise the refusal says what to do (connect
//! an agent, or choose among the connected hosts, listed by name).

use odac_protocol::{Reason, Vendor};
use serde::{Deserialize, Serialize};

use crate::gpu_auto::Detected;
use crate::state::hub::Hub;
use crate::state::views::HostView;

/// How many connected hosts a refusal lists by name.
const LISTED: usize = 5;

/// Why a new app has no host to go to (the API answers 400 naming `host`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// No host given and none connected.
    #[error(
        "no host is connected, so there is nowhere to place the app: start an agent \
         against this control plane (odac-agent run), check `odac host list`, or give \
         \"host\" (odac: --host) to place it on a known host that is offline"
    )]
    NoHostConnected,
    /// No host given and several connected.
    #[error(
        "{count} hosts are connected: choose one with \"host\" (odac: --host), a host \
         id or host name: {names}"
    )]
    ManyConnected {
        /// How many are connected.
        count: usize,
        /// The first few by name, and how many more there are.
        names: String,
    },
}

/// The host a new app goes to: `key` (host id or host name) as given, else the one connected
/// host. Returns the key to hand to [`Hub::create_app`] (which resolves names itself).
pub fn pick_host(hub: &Hub, key: Option<&str>) -> Result<String, PlacementError> {
    if let Some(key) = key {
        return Ok(hub.host(key).map_or_else(|| key.to_owned(), |h| h.id));
    }
    let connected = hub.connected_hosts();
    match connected.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(PlacementError::NoHostConnected),
        many => {
            let names: Vec<String> = many
                .iter()
                .take(LISTED)
                .map(|id| hub.host(id).map_or_else(|| id.clone(), |h| label(&h)))
                .collect();
            let more = if many.len() > LISTED {
                format!(", … ({} more in `odac host list`)", many.len() - LISTED)
            } else {
                String::new()
            };
            Err(PlacementError::ManyConnected {
                count: many.len(),
                names: format!("{}{more}", names.join(", ")),
            })
        }
    }
}

/// A host as people name it: its host name, else its id.
pub fn label(h: &HostView) -> String {
    if h.hostname.is_empty() {
        h.id.clone()
    } else {
        h.hostname.clone()
    }
}

/// What automatic vendor detection chose, as the API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detection {
    /// The vendor chosen.
    pub vendor: Vendor,
    /// The host it was detected on (host name, else id).
    pub host: String,
    /// Why that vendor's GPUs cannot be used now (absent when they can): the agent reports
    /// the same when it tries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unusable: Option<Reason>,
}

impl Detection {
    /// From what [`crate::gpu_auto::detect`] chose on `host`.
    pub fn new(d: Detected, host: &str) -> Self {
        Self {
            vendor: d.vendor,
            host: host.to_owned(),
            unusable: d.unusable,
        }
    }
}
