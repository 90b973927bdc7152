//! What the container engine can do for GPUs, as read from its `GET /info` answer: server and
//! API version, registered runtimes, CDI spec directories and the CDI devices it discovered.
//! Parsing is a pure function of the JSON so captured `docker info` bodies can be tested.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The engine's GPU-relevant capabilities, or the reason it could not be asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineCapabilities {
    /// Whether the engine answered.
    pub reachable: bool,
    /// Why the engine could not be reached (never contains secrets).
    pub error: Option<String>,
    /// `ServerVersion`, e.g. `28.2.2` or `20.10.24+dfsg1`.
    pub server_version: Option<String>,
    /// The API version negotiated with the engine, e.g. `1.41`.
    pub api_version: Option<String>,
    /// Names of the registered OCI runtimes (`runc`, `nvidia`, ...), sorted.
    pub runtimes: Vec<String>,
    /// `DefaultRuntime`.
    pub default_runtime: Option<String>,
    /// `CDISpecDirs`; empty means CDI is off (or the engine predates it).
    pub cdi_spec_dirs: Vec<String>,
    /// Fully-qualified CDI device ids from `DiscoveredDevices` (engine >= 28.2).
    pub cdi_devices: Vec<String>,
    /// `Warnings` reported by the engine (CDI spec errors show up here).
    pub warnings: Vec<String>,
}

impl EngineCapabilities {
    /// Capabilities of an engine that could not be reached, with the reason.
    pub fn unreachable(error: impl Into<String>) -> Self {
        Self {
            reachable: false,
            error: Some(error.into()),
            ..Self::default()
        }
    }

    /// Parse a `GET /info` body. Missing or oddly typed fields are treated as absent, never
    /// as an error: engines of every age answer this endpoint differently.
    pub fn from_info_json(info: &Value, api_version: Option<String>) -> Self {
        let string = |key: &str| info.get(key).and_then(Value::as_str).map(str::to_owned);
        let strings = |key: &str| -> Vec<String> {
            info.get(key)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut runtimes: Vec<String> = info
            .get("Runtimes")
            .and_then(Value::as_object)
            .map(|map| map.keys().cloned().collect())
            .unwrap_or_default();
        runtimes.sort();
        let mut cdi_devices: Vec<String> = info
            .get("DiscoveredDevices")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter(|d| {
                        d.get("Source")
                            .and_then(Value::as_str)
                            .is_none_or(|s| s.eq_ignore_ascii_case("cdi"))
                    })
                    .filter_map(|d| d.get("ID").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        cdi_devices.sort();
        Self {
            reachable: true,
            error: None,
            server_version: string("ServerVersion"),
            api_version,
            runtimes,
            default_runtime: string("DefaultRuntime"),
            cdi_spec_dirs: strings("CDISpecDirs"),
            cdi_devices,
            warnings: strings("Warnings"),
        }
    }

    /// Major version of the server, when it parses (`20.10.24+dfsg1` → 20).
    pub fn server_major(&self) -> Option<u32> {
        self.server_version
            .as_deref()
            .and_then(|v| v.split('.').next())
            .and_then(|major| major.parse().ok())
    }

    /// CDI is usable: the engine is reachable, new enough (>= 25) and has spec dirs.
    pub fn cdi_enabled(&self) -> bool {
        self.reachable
            && self.server_major().is_some_and(|m| m >= 25)
            && !self.cdi_spec_dirs.is_empty()
    }

    /// Whether a runtime of this name is registered (e.g. `nvidia`).
    pub fn has_runtime(&self, name: &str) -> bool {
        self.runtimes.iter().any(|r| r == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_cdi_devices_and_runtimes() {
        let info = json!({
            "ServerVersion": "28.2.2",
            "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
            "DefaultRuntime": "runc",
            "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"],
            "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"}],
        });
        let caps = EngineCapabilities::from_info_json(&info, Some("1.50".into()));
        assert!(caps.reachable);
        assert_eq!(caps.runtimes, vec!["nvidia", "runc"]);
        assert!(caps.has_runtime("nvidia"));
        assert_eq!(caps.cdi_devices, vec!["nvidia.com/gpu=0"]);
        assert!(caps.cdi_enabled());
    }

    #[test]
    fn old_engine_without_cdi_fields() {
        let info = json!({"ServerVersion": "20.10.24+dfsg1", "CDISpecDirs": null});
        let caps = EngineCapabilities::from_info_json(&info, None);
        assert_eq!(caps.server_major(), Some(20));
        assert!(!caps.cdi_enabled());
        assert!(caps.cdi_devices.is_empty());
    }

    #[test]
    fn old_engine_with_spec_dirs_still_no_cdi() {
        let info = json!({"ServerVersion": "17.06.1-ce", "CDISpecDirs": ["/etc/cdi"]});
        assert!(!EngineCapabilities::from_info_json(&info, None).cdi_enabled());
    }
}
