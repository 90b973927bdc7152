//! `start_with_gpu_fallback`: create and start a container that asks for GPU devices, and
//! when the engine refuses the device — at create **or** at start — either run the app on the
//! CPU (optional intent: remove the half-made container, recreate without devices, start,
//! record `fallback {tier: engine, reason: engine_rejected, detail: <the engine's words>}`) or
//! fail with the engine's words (required intent).
//!
//! Refusals are classified by the texts real engines use (Docker 20.10 to 28: NVIDIA, CDI
//! and device-node paths), never by HTTP status or "any error": a busy port, a missing image or a missing executable
//! is reported as what it is and never taken for a device refusal.

use odac_protocol::{Fallback, FallbackTier, Reason};

use crate::appmgr::labels;
use crate::appmgr::state::clip::clip;
use odac_host::engine::{ContainerEngine, ContainerSpec, EngineError};

/// Substrings of the engine's device refusals (unknown runtime, no CDI, missing device node,
/// NVIDIA hook failure, driver missing).
const DEVICE_REFUSALS: &[&str] = &[
    "could not select device driver",
    "no cdi device driver registered",
    "cannot set both count and deviceids on device request",
    "failed to discover gpu vendor from cdi",
    "amd cdi spec not found",
    "cdi device injection failed",
    "unresolvable cdi devices",
    "failed to inject devices",
    "no cdi specification directories specified",
    "cdi registry initialization failure",
    "unexpected count in cdi device request",
    "unexpected options in cdi device request",
    "error gathering device information while adding custom device",
    "unknown or invalid runtime name",
    "unknown runtime specified",
    "nvidia-container-cli",
    "nvml error",
    "load library failed: libnvidia-ml",
    "invoking the nvidia container runtime hook directly",
    "error modifying oci spec",
    "failed to inject cdi devices",
    "failed to create nvidia container runtime",
];

/// Whether the engine refused a device (as opposed to anything else going wrong). Only the
/// engine's own refusals count; an unreachable engine or a missing object never does.
pub fn is_device_refusal(err: &EngineError) -> bool {
    let message = match err {
        EngineError::Rejected { message, .. } | EngineError::Other(message) => message,
        EngineError::Unavailable(_)
        | EngineError::NotFound(_)
        | EngineError::Conflict(_)
        | EngineError::BuildFailed { .. } => {
            return false;
        }
    };
    let lower = message.to_lowercase();
    DEVICE_REFUSALS.iter().any(|key| lower.contains(key))
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOutcome {
    /// The container runs; `fallback` is set when it runs on the CPU after a refusal.
    Started {
        /// Container id.
        id: String,
        /// The engine-tier fallback taken, if any.
        fallback: Option<Fallback>,
    },
    /// The app could not be started.
    Failed {
        /// A container left behind (created, not started), if any.
        id: Option<String>,
        /// The engine's error.
        error: EngineError,
        /// Set when the GPU was refused (required intent, or the CPU retry failed too).
        fallback: Option<Fallback>,
    },
}

/// Create and start `spec`; on a device refusal remove what was made and, when `cpu_spec` is
/// given (optional intent), create and start that instead, labelled with the fallback.
/// An unreachable engine is returned as `Failed` with [`EngineError::Unavailable`].
pub async fn start_with_gpu_fallback(
    engine: &dyn ContainerEngine,
    spec: &ContainerSpec,
    cpu_spec: Option<ContainerSpec>,
) -> StartOutcome {
    let (made, refusal) = match engine.create(spec).await {
        Ok(id) => match engine.start(&id).await {
            Ok(()) => {
                return StartOutcome::Started { id, fallback: None };
            }
            Err(e) if is_device_refusal(&e) => (Some(id), e),
            Err(error) => {
                return StartOutcome::Failed {
                    id: Some(id),
                    error,
                    fallback: None,
                };
            }
        },
        Err(e) if is_device_refusal(&e) => (None, e),
        Err(error) => {
            return StartOutcome::Failed {
                id: None,
                error,
                fallback: None,
            };
        }
    };
    let fallback = Fallback {
        tier: FallbackTier::Engine,
        reason: Reason::EngineRejected,
        detail: Some(clip(refusal.engine_message())),
    };
    if let Some(id) = made
        && let Err(error) = engine.remove(&id, true).await
        && !error.is_not_found()
    {
        return StartOutcome::Failed {
            id: Some(id),
            error,
            fallback: Some(fallback),
        };
    }
    run_on_cpu(engine, refusal, fallback, cpu_spec).await
}

/// After the engine refused the device (`refusal`, reported as `fallback`): create and start
/// `cpu_spec` without devices, labelled with the fallback, or (no `cpu_spec`: required
/// intent) fail with the engine's refusal.
pub async fn run_on_cpu(
    engine: &dyn ContainerEngine,
    refusal: EngineError,
    fallback: Fallback,
    cpu_spec: Option<ContainerSpec>,
) -> StartOutcome {
    let Some(mut cpu) = cpu_spec else {
        return StartOutcome::Failed {
            id: None,
            error: refusal,
            fallback: Some(fallback),
        };
    };
    labels::clear_gpus(&mut cpu.labels);
    labels::set_fallback(&mut cpu.labels, &fallback);
    cpu.devices.clear();
    cpu.device_requests.clear();
    match start_plain(engine, &cpu).await {
        Ok(id) => StartOutcome::Started {
            id,
            fallback: Some(fallback),
        },
        Err((id, error)) => StartOutcome::Failed {
            id,
            error,
            fallback: Some(fallback),
        },
    }
}

/// Create and start a container without any fallback.
pub async fn start_plain(
    engine: &dyn ContainerEngine,
    spec: &ContainerSpec,
) -> Result<String, (Option<String>, EngineError)> {
    let id = engine.create(spec).await.map_err(|e| (None, e))?;
    engine.start(&id).await.map_err(|e| (Some(id.clone()), e))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(message: &str) -> EngineError {
        EngineError::Rejected {
            status: 500,
            message: message.into(),
        }
    }

    #[test]
    fn classifies_by_the_engine_texts() {
        for text in [
            "could not select device driver \"\" with capabilities: [[gpu]]",
            "could not select device driver \"cdi\" with capabilities: []",
            "CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=all",
            "error gathering device information while adding custom device \"/dev/nvidia0\": no such file or directory",
            "error gathering device information while adding custom device \"/dev/x\": not a device node",
            "unknown or invalid runtime name: nvidia",
            "Unknown runtime specified nvidia",
            "failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
            "OCI runtime create failed: load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or directory: unknown",
            "error modifying OCI spec: failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=all",
            "cannot set both Count and DeviceIDs on device request",
            "failed to discover GPU vendor from CDI: no known GPU vendor found",
        ] {
            assert!(is_device_refusal(&rejected(text)), "{text}");
        }
        for text in [
            "driver failed programming external connectivity on endpoint x: Bind for 0.0.0.0:8080 failed: port is already allocated",
            "failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"nope\": executable file not found in $PATH: unknown",
            "OCI runtime create failed: no such file or directory: unknown",
            "Conflict. The container name \"/x\" is already in use",
        ] {
            assert!(!is_device_refusal(&rejected(text)), "{text}");
        }
        assert!(!is_device_refusal(&EngineError::NotFound(
            "No such image: odac/missing:1".into()
        )));
        assert!(!is_device_refusal(&EngineError::Unavailable(
            "could not select device driver".into()
        )));
    }
}
