//! Local policy: what an app spec may ask of this host, decided by the agent's configuration,
//! not by the control plane. Host bind mounts only under the configured prefixes (none by
//! default). Privileged mode, host networking and the host PID namespace cannot be asked for
//! at all (neither the spec nor the engine seam can express them), and devices come only from
//! the GPU plan: [`check_container`] re-checks the final container spec as a second line.
//! What a host bind resolves to on this host, and who else can write around it, is
//! [`binds`](super::binds)' part.

use std::path::{Component, Path};

use odac_protocol::AppSpec;

use super::binds::{self, HostBind};
use super::settings::PolicyConfig;
use crate::engine::ContainerSpec;

pub use super::error::PolicyViolation;

/// Whether `path` lies under one of the allowed prefixes (as written, or resolved), by whole
/// components.
fn bind_allowed(path: &str, policy: &PolicyConfig) -> bool {
    let path = Path::new(path);
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return false;
    }
    policy.allowed_bind_prefixes.iter().any(|prefix| {
        prefix.is_absolute()
            && (path.starts_with(prefix)
                || std::fs::canonicalize(prefix).is_ok_and(|p| path.starts_with(p)))
    })
}

fn not_allowed(
    i: usize,
    source: &str,
    policy: &PolicyConfig,
    why: Option<String>,
) -> PolicyViolation {
    let allowed = if policy.allowed_bind_prefixes.is_empty() {
        "no bind mounts are allowed on this host".to_owned()
    } else {
        let list: Vec<String> = policy
            .allowed_bind_prefixes
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!("allowed prefixes: {}", list.join(", "))
    };
    let message = match why {
        Some(why) => format!(
            "host bind mount of {source:?} is not allowed by the local policy: {why} ({allowed})"
        ),
        None => {
            format!("host bind mount of {source:?} is not allowed by the local policy ({allowed})")
        }
    };
    PolicyViolation {
        field: format!("volumes[{i}].source"),
        message,
    }
}

/// Check an app spec against the policy and resolve its host binds on this host (see
/// [`binds::resolve`]): the binds to give the engine, with the paths it will mount.
pub fn check(spec: &AppSpec, policy: &PolicyConfig) -> Result<Vec<HostBind>, PolicyViolation> {
    let mut out = Vec::new();
    for (i, v) in spec.volumes.iter().enumerate() {
        if v.target.contains([':', ',']) || v.target.chars().any(char::is_control) {
            return Err(PolicyViolation {
                field: format!("volumes[{i}].target"),
                message: format!(
                    "{:?}: ':', ',' and control characters are not allowed in a mount target",
                    v.target
                ),
            });
        }
        if !v.is_bind() {
            continue;
        }
        if !bind_allowed(&v.source, policy) {
            return Err(not_allowed(i, &v.source, policy, None));
        }
        let source = binds::resolve(&v.source, &policy.allowed_bind_prefixes)
            .map_err(|why| not_allowed(i, &v.source, policy, Some(why)))?;
        out.push(HostBind {
            index: i,
            source,
            target: v.target.clone(),
            read_only: v.read_only,
        });
    }
    Ok(out)
}

/// Second line of defence on the container spec about to be created: binds under the allowed
/// prefixes, device nodes only those the GPU plan chose.
pub fn check_container(
    spec: &ContainerSpec,
    plan_devices: &[String],
    policy: &PolicyConfig,
) -> Result<(), PolicyViolation> {
    for (i, b) in spec.binds.iter().enumerate() {
        if b.is_host_path() && !bind_allowed(&b.source, policy) {
            return Err(PolicyViolation {
                field: format!("volumes[{i}].source"),
                message: format!("host bind mount of {:?} is not allowed", b.source),
            });
        }
    }
    for d in &spec.devices {
        if !plan_devices.contains(&d.host_path) {
            return Err(PolicyViolation {
                field: "gpu".into(),
                message: format!("device {:?} was not chosen by the gpu plan", d.host_path),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use odac_protocol::VolumeMount;

    fn with_volume(source: &str) -> AppSpec {
        let mut spec = AppSpec::new("web", "busybox");
        spec.volumes.push(VolumeMount {
            source: "models".into(),
            target: "/models".into(),
            read_only: false,
        });
        spec.volumes.push(VolumeMount {
            source: source.into(),
            target: "/host".into(),
            read_only: true,
        });
        spec
    }

    #[test]
    fn default_policy_refuses_every_bind_and_names_the_field() {
        let policy = PolicyConfig::default();
        for source in ["/", "/etc", "/srv/data"] {
            let err = check(&with_volume(source), &policy).err();
            let err = err.map(|e| e.to_string()).unwrap_or_default();
            assert!(
                err.starts_with("volumes[1].source: host bind mount of"),
                "{err}"
            );
        }
        assert_eq!(
            check(&AppSpec::new("web", "busybox"), &policy),
            Ok(Vec::new())
        );
        assert_eq!(check(&with_volume("named"), &policy), Ok(Vec::new()));
    }

    #[test]
    fn prefixes_match_whole_components() {
        #![allow(clippy::unwrap_used)]
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let data = root.join("srv/data");
        std::fs::create_dir_all(data.join("models")).unwrap();
        std::fs::create_dir_all(root.join("srv/database")).unwrap();
        let policy = PolicyConfig {
            allowed_bind_prefixes: vec![data.clone()],
        };
        let at = |p: &str| root.join(p).display().to_string();
        let ok = check(&with_volume(&at("srv/data")), &policy).unwrap();
        assert_eq!((ok[0].index, ok[0].source.clone()), (1, data.clone()));
        let ok = check(&with_volume(&at("srv/data/models")), &policy).unwrap();
        assert_eq!(ok[0].source, data.join("models"));
        assert!(check(&with_volume(&at("srv/database")), &policy).is_err());
        assert!(check(&with_volume(&at("srv")), &policy).is_err());
        assert!(check(&with_volume("/"), &policy).is_err());
        let e = check(&with_volume(&at("srv/data/../database")), &policy).unwrap_err();
        assert_eq!(e.field, "volumes[1].source");
        let e = check(&with_volume(&at("srv/data/missing")), &policy).unwrap_err();
        assert!(e.message.contains("does not exist"), "{e}");
        let mut colon = with_volume(&at("srv/data"));
        colon.volumes[1].target = "/x:/etc".into();
        assert_eq!(
            check(&colon, &policy).unwrap_err().field,
            "volumes[1].target"
        );
    }

    #[test]
    fn container_devices_must_come_from_the_plan() {
        let mut spec = ContainerSpec::default();
        spec.devices.push(crate::engine::DeviceMapping::same_path(
            "/dev/dri/renderD128",
        ));
        let policy = PolicyConfig::default();
        assert!(check_container(&spec, &["/dev/dri/renderD128".into()], &policy).is_ok());
        assert!(check_container(&spec, &[], &policy).is_err());
    }
}
