//! How the fake refuses a device request at start, in the real engine's words: an unknown
//! driver (`could not select device driver ...`), CDI disabled or a CDI device it does not
//! know (`CDI device injection failed: unresolvable CDI devices ...`).

use super::State;
use crate::engine::error::EngineError;
use crate::engine::types::DeviceRequest;

/// Format capability sets as Go's `%v` does: `[[gpu]]`.
fn go_caps(caps: &[Vec<String>]) -> String {
    let sets: Vec<String> = caps
        .iter()
        .map(|set| format!("[{}]", set.join(" ")))
        .collect();
    format!("[{}]", sets.join(" "))
}

/// What a real engine says when it cannot deliver this request (checked at start).
pub(super) fn refuse_request(state: &State, request: &DeviceRequest) -> Option<EngineError> {
    if request.driver == "cdi" {
        if !state.capabilities.cdi_enabled() {
            return Some(EngineError::Rejected {
                status: 400,
                message: format!(
                    "could not select device driver \"cdi\" with capabilities: {}",
                    go_caps(&request.capabilities)
                ),
            });
        }
        let unknown: Vec<&str> = request
            .device_ids
            .iter()
            .filter(|id| !state.capabilities.cdi_devices.contains(id))
            .map(String::as_str)
            .collect();
        return (!unknown.is_empty()).then(|| EngineError::Rejected {
            status: 500,
            message: format!(
                "CDI device injection failed: unresolvable CDI devices {}",
                unknown.join(", ")
            ),
        });
    }
    (!state.device_drivers.contains(&request.driver)).then(|| EngineError::Rejected {
        status: 400,
        message: format!(
            "could not select device driver {:?} with capabilities: {}",
            request.driver,
            go_caps(&request.capabilities)
        ),
    })
}
