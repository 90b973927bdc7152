//! What the image says about its GPU, once it is on the host: the NVIDIA driver capabilities
//! its environment asks for, and its `NVIDIA_REQUIRE_*` constraints ([`super::require`]),
//! which a host whose driver is too old fails with `driver_too_old` before any create or
//! start. Pure: the pre-flight [`Plan`], the intent, the image's and app's environments and
//! the host's driver in, the plan the container is created with out.

use odac_protocol::Compute;
use std::collections::BTreeMap;

use odac_protocol::{DriverCapabilities, GpuRequest, Reason};

use super::require::{HostNvidia, unmet};
use super::resolve::Plan;

/// The image's `KEY=VALUE` environment followed by the app's own (which the engine lays over
/// it), as the toolkit sees it in the container.
pub fn process_env(image_env: &[String], app_env: &BTreeMap<String, String>) -> Vec<String> {
    image_env
        .iter()
        .cloned()
        .chain(app_env.iter().map(|(k, v)| format!("{k}={v}")))
        .collect()
}

/// `plan` with what the image says: an NVIDIA attachment whose requirements the host cannot
/// meet becomes [`Plan::Refuse`] (required) or [`Plan::Cpu`] (optional) with
/// `driver_too_old`; else an attachment gets the effective driver capabilities (the
/// intent's, else `NVIDIA_DRIVER_CAPABILITIES` of `env`, else `compute,utility`). `env` is
/// [`process_env`]'s.
pub fn with_image(plan: Plan, intent: &GpuRequest, env: &[String], host: &HostNvidia) -> Plan {
    match plan {
        Plan::Attach(att)
            if att.vendor.facts().compute == Compute::Cuda && unmet(env, host).is_some() =>
        {
            let Some(u) = unmet(env, host) else {
                return Plan::Attach(att);
            };
            if intent.is_optional() {
                Plan::Cpu {
                    reason: Reason::DriverTooOld,
                    detail: format!("{}; fix: {}", u.detail, u.fix),
                }
            } else {
                Plan::Refuse {
                    reason: Reason::DriverTooOld,
                    fix: Some(u.fix),
                    detail: u.detail,
                }
            }
        }
        Plan::Attach(mut att) => {
            att.capabilities =
                DriverCapabilities::effective(intent.driver_capabilities().as_ref(), env);
            Plan::Attach(att)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use odac_protocol::{Mechanism, Vendor};

    use super::*;
    use crate::gpu::Attachment;

    fn attach() -> Plan {
        Plan::Attach(Attachment {
            vendor: Vendor::Nvidia,
            mechanism: Mechanism::NvidiaRuntime,
            devices: vec!["GPU-1".into()],
            gpus: vec!["0000:01:00.0".into()],
            group_add: vec![],
            capabilities: DriverCapabilities::toolkit_default(),
        })
    }

    fn caps(plan: &Plan) -> String {
        match plan {
            Plan::Attach(a) => a.capabilities.to_string(),
            _ => String::new(),
        }
    }

    #[test]
    fn the_image_sets_capabilities_unless_the_intent_does() {
        let nvidia: GpuRequest =
            serde_json::from_str(r#"{"runtime":"nvidia"}"#).unwrap_or_default();
        let video: GpuRequest =
            serde_json::from_str(r#"{"runtime":"nvidia","capabilities":"video"}"#)
                .unwrap_or_default();
        let all = vec!["NVIDIA_DRIVER_CAPABILITIES=all".to_owned()];
        let h = HostNvidia::default();
        assert_eq!(
            caps(&with_image(attach(), &nvidia, &[], &h)),
            "compute,utility"
        );
        assert_eq!(
            caps(&with_image(attach(), &nvidia, &all, &h))
                .split(',')
                .count(),
            6
        );
        assert_eq!(caps(&with_image(attach(), &video, &all, &h)), "video");
        let app = BTreeMap::from([("NVIDIA_DRIVER_CAPABILITIES".to_owned(), "video".to_owned())]);
        let env = process_env(&all, &app);
        assert_eq!(
            caps(&with_image(attach(), &nvidia, &env, &h)),
            "video",
            "the app's env lies over the image's"
        );
    }

    #[test]
    fn an_unmet_cuda_requirement_refuses_or_runs_on_the_cpu() {
        let host = HostNvidia {
            driver: Some("535.183.01".into()),
            cuda: crate::inventory::cuda::cuda_for_driver("535.183.01"),
        };
        let env = vec!["NVIDIA_REQUIRE_CUDA=cuda>=12.4".to_owned()];
        let required: GpuRequest =
            serde_json::from_str(r#"{"runtime":"nvidia"}"#).unwrap_or_default();
        let Plan::Refuse {
            reason,
            fix,
            detail,
        } = with_image(attach(), &required, &env, &host)
        else {
            unreachable!("refused")
        };
        assert_eq!(reason, Reason::DriverTooOld);
        assert!(
            detail.contains("cuda>=12.4") && detail.contains("CUDA 12.2"),
            "{detail}"
        );
        assert!(
            fix.unwrap_or_default()
                .starts_with("install NVIDIA driver ≥ 550 for CUDA 12.4")
        );
        let optional = required.clone().with_optional(true);
        assert!(matches!(
            with_image(attach(), &optional, &env, &host),
            Plan::Cpu {
                reason: Reason::DriverTooOld,
                ..
            }
        ));
        let newer = HostNvidia {
            driver: Some("550.54.14".into()),
            cuda: crate::inventory::cuda::cuda_for_driver("550.54.14"),
        };
        assert!(matches!(
            with_image(attach(), &required, &env, &newer),
            Plan::Attach(_)
        ));
    }
}
