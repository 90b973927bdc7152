//! Local policy: what an app spec may ask of this host, decided by the agent's configuration,
//! not by the control plane. The spec's host-access fields are checked again whatever the
//! control plane did ([`AppSpec::host_access`]: `shm_size`, the capability allowlist,
//! namespaced sysctls, device paths), host bind mounts only under the configured prefixes and
//! extra host devices only under `allowed_device_prefixes` (none of either by default; never
//! a GPU device, not even through a link). Privileged mode, host networking and the host PID
//! namespace cannot be asked for at all (neither the spec nor the engine seam can express
//! them), and GPU devices come only from the GPU plan: [`check_container`] re-checks the
//! final container spec as a second line. What a host bind resolves to on this host, and who
//! else can write around it, is [`binds`]' part.
//!
//! The folder is what may touch the host and what is the agent's own: this policy, [`binds`]
//! (what a host bind resolves to, and who else can write around it) and [`ownership`] (which
//! containers of the instance are this agent's).

pub mod binds;
pub mod ownership;

use std::path::{Component, Path};

use odac_protocol::{AppSpec, HostAccess, is_gpu_device};

use self::binds::HostBind;
use super::settings::PolicyConfig;
use odac_host::engine::ContainerSpec;

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

/// The configuration key that allows extra host devices.
pub const DEVICE_PREFIXES_KEY: &str = "apps.policy.allowed_device_prefixes";

/// What the policy admitted of an app: its host binds resolved, its host access checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted {
    /// The binds to give the engine, with the paths it will mount.
    pub binds: Vec<HostBind>,
    /// `/dev/shm` size, capabilities, sysctls and host devices, normalised.
    pub access: HostAccess,
}

/// Whether a host device path lies under one of the allowed device prefixes, by whole
/// components.
fn device_allowed(path: &str, policy: &PolicyConfig) -> bool {
    let path = Path::new(path);
    policy
        .allowed_device_prefixes
        .iter()
        .any(|prefix| prefix.is_absolute() && path.starts_with(prefix))
}

/// An extra host device of the spec: under an allowed prefix, and not a GPU device once its
/// links are resolved (the engine follows them).
fn check_device(i: usize, path: &str, policy: &PolicyConfig) -> Result<(), PolicyViolation> {
    let field = format!("devices[{i}]");
    if !device_allowed(path, policy) {
        let allowed = if policy.allowed_device_prefixes.is_empty() {
            "it allows no host devices".to_owned()
        } else {
            let list: Vec<String> = policy
                .allowed_device_prefixes
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            format!("allowed prefixes: {}", list.join(", "))
        };
        return Err(PolicyViolation {
            field,
            message: format!(
                "host device {path:?} is not allowed by the local policy {DEVICE_PREFIXES_KEY} ({allowed})"
            ),
        });
    }
    if let Ok(real) = std::fs::canonicalize(path)
        && is_gpu_device(&real.to_string_lossy())
    {
        return Err(PolicyViolation {
            field,
            message: format!(
                "host device {path:?} resolves to the gpu device {}: gpus come from the gpu intent only",
                real.display()
            ),
        });
    }
    Ok(())
}

/// Check an app spec against the policy: its image reference and host-access fields (checked
/// again, whatever the control plane did), its extra devices, and its host binds resolved on this host (see
/// [`binds::resolve`]).
pub fn check(spec: &AppSpec, policy: &PolicyConfig) -> Result<Admitted, PolicyViolation> {
    spec.check_image().map_err(|e| PolicyViolation {
        field: e.field,
        message: e.message,
    })?;
    let access = spec.host_access().map_err(|e| PolicyViolation {
        field: e.field,
        message: e.message,
    })?;
    for (i, device) in access.devices.iter().enumerate() {
        check_device(i, device, policy)?;
    }
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
    Ok(Admitted { binds: out, access })
}

/// Second line of defence on the container spec about to be created: binds under the allowed
/// prefixes, device nodes only those the GPU plan chose or non-GPU ones under the allowed
/// device prefixes.
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
        let extra = device_allowed(&d.host_path, policy) && !is_gpu_device(&d.host_path);
        if !plan_devices.contains(&d.host_path) && !extra {
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
            Ok(Admitted::default())
        );
        assert_eq!(
            check(&with_volume("named"), &policy),
            Ok(Admitted::default())
        );
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
            ..PolicyConfig::default()
        };
        let at = |p: &str| root.join(p).display().to_string();
        let ok = check(&with_volume(&at("srv/data")), &policy).unwrap().binds;
        assert_eq!((ok[0].index, ok[0].source.clone()), (1, data.clone()));
        let ok = check(&with_volume(&at("srv/data/models")), &policy)
            .unwrap()
            .binds;
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
        spec.devices
            .push(odac_host::engine::DeviceMapping::same_path(
                "/dev/dri/renderD128",
            ));
        let policy = PolicyConfig::default();
        assert!(check_container(&spec, &["/dev/dri/renderD128".into()], &policy).is_ok());
        assert!(check_container(&spec, &[], &policy).is_err());
    }

    fn with_devices(devices: &[&str]) -> AppSpec {
        let mut spec = AppSpec::new("web", "busybox");
        spec.devices = devices.iter().map(|d| (*d).to_owned()).collect();
        spec
    }

    #[test]
    fn devices_need_the_device_policy_and_name_its_key() {
        #![allow(clippy::unwrap_used)]
        let none = PolicyConfig::default();
        let e = check(&with_devices(&["/dev/null"]), &none).unwrap_err();
        assert_eq!(e.field, "devices[0]");
        assert!(
            e.message
                .contains("not allowed by the local policy apps.policy.allowed_device_prefixes"),
            "{e}"
        );
        let policy = PolicyConfig {
            allowed_device_prefixes: vec!["/dev/null".into(), "/dev/bus/usb".into()],
            ..PolicyConfig::default()
        };
        let ok = check(
            &with_devices(&["/dev/null", "/dev/bus/usb/001/002"]),
            &policy,
        )
        .unwrap();
        assert_eq!(ok.access.devices, ["/dev/null", "/dev/bus/usb/001/002"]);
        // whole components only
        let e = check(&with_devices(&["/dev/nullx"]), &policy).unwrap_err();
        assert!(
            e.message
                .contains("allowed prefixes: /dev/null, /dev/bus/usb"),
            "{e}"
        );
        // a gpu device is refused even under a prefix that covers it
        let all = PolicyConfig {
            allowed_device_prefixes: vec!["/dev".into()],
            ..PolicyConfig::default()
        };
        let e = check(&with_devices(&["/dev/dri/renderD128"]), &all).unwrap_err();
        assert!(e.message.contains("gpu device"), "{e}");
        // and so is a link to one: the engine follows links
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join("apex_0");
        std::os::unix::fs::symlink("/dev/kfd", &link).unwrap();
        let link_policy = PolicyConfig {
            allowed_device_prefixes: vec![tmp.path().to_path_buf()],
            ..PolicyConfig::default()
        };
        let field = |p: &str| check_device(0, p, &link_policy).map_err(|e| e.message);
        if std::path::Path::new("/dev/kfd").exists() {
            assert!(field(&link.display().to_string()).is_err());
        }
        assert_eq!(
            field(&tmp.path().join("missing").display().to_string()),
            Ok(())
        );
        // the second line takes the allowed devices and no gpu device outside the plan
        let mut spec = ContainerSpec::default();
        spec.devices
            .push(odac_host::engine::DeviceMapping::same_path("/dev/null"));
        assert!(check_container(&spec, &[], &policy).is_ok());
        assert!(check_container(&spec, &[], &none).is_err());
        spec.devices = vec![odac_host::engine::DeviceMapping::same_path("/dev/kfd")];
        assert!(check_container(&spec, &[], &all).is_err());
    }

    #[test]
    fn host_access_is_checked_again_naming_the_field() {
        let mut spec = AppSpec::new("web", "busybox");
        spec.caps = vec!["SYS_ADMIN".into()];
        let e = check(&spec, &PolicyConfig::default()).err();
        let e = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.starts_with("caps[0]: \"SYS_ADMIN\" is not allowed: caps may only be NET_ADMIN"),
            "{e}"
        );
        spec.caps = vec!["net_admin".into()];
        let ok = check(&spec, &PolicyConfig::default()).map(|a| a.access.caps);
        assert_eq!(ok, Ok(vec!["NET_ADMIN".to_owned()]));
    }
}
