//! From an app spec to the engine's container spec (without GPU devices: the plan adds those):
//! container name `<instance>_<app>`, env, command, ports, resources, labels, the host access
//! the policy admitted (`/dev/shm`, capabilities, sysctls, extra devices), and volumes —
//! a named volume `models` of app `ollama` becomes the engine volume `<instance>_ollama_models`,
//! created before the container and kept across recreations and removals.
//!
//! Names are injective: app names are DNS labels and instance names contain no `_` either, so
//! the first `_` ends the instance and the second the app, whatever the volume name holds. The
//! earlier scheme (`<instance>-<app>-<volume>`) was not: app `fa` with volume `b-data` and app
//! `fa-b` with volume `data` shared one volume. [`legacy_volume_name`] is that scheme's name,
//! which [`volumes`](super::reconcile::volumes) keeps using for a volume made before the change.

use std::collections::BTreeMap;

use odac_protocol::{AppSpec, HostAccess, PortProtocol};

use odac_host::names::{container_name, volume_name};

use super::labels::{self, Identity};
use odac_host::engine::{Bind, ContainerSpec, DeviceMapping, PortMapping};

/// The engine name the same volume had before names were made injective.
pub fn legacy_volume_name(instance: &str, app: &str, source: &str) -> String {
    format!("{instance}-{app}-{source}")
}

/// The named volumes of an app (their `source` in the spec), in spec order.
pub fn volume_sources(spec: &AppSpec) -> Vec<String> {
    spec.volumes
        .iter()
        .filter(|v| !v.is_bind())
        .map(|v| v.source.clone())
        .collect()
}

/// The engine volumes an app needs (named volumes only), by the current scheme.
pub fn volumes(instance: &str, spec: &AppSpec) -> Vec<String> {
    volume_sources(spec)
        .iter()
        .map(|source| volume_name(instance, &spec.name, source))
        .collect()
}

/// Point the named-volume binds of `container` (made by [`container_spec`] from `spec`) at
/// the engine volumes in `engine_names` (by spec source); others keep their names.
pub fn use_volumes(
    container: &mut ContainerSpec,
    spec: &AppSpec,
    engine_names: &BTreeMap<String, String>,
) {
    for (bind, mount) in container.binds.iter_mut().zip(&spec.volumes) {
        if !mount.is_bind()
            && let Some(name) = engine_names.get(&mount.source)
        {
            bind.source = name.clone();
        }
    }
}

/// The container spec of an app on the CPU, owned by agent `owner`. `image` is the image to
/// run.
pub fn container_spec(
    instance: &str,
    owner: &str,
    spec: &AppSpec,
    image: &str,
    extra_labels: &BTreeMap<String, String>,
) -> ContainerSpec {
    let identity = Identity::of(spec);
    let mut labels = labels::container_labels(instance, &spec.name, &identity, extra_labels);
    labels::set_owner(&mut labels, owner);
    ContainerSpec {
        name: container_name(instance, &spec.name),
        image: image.to_owned(),
        env: spec.env.clone(),
        command: (!spec.command.is_empty()).then(|| spec.command.clone()),
        labels,
        ports: spec
            .ports
            .iter()
            .map(|p| PortMapping {
                container_port: u16::try_from(p.container).unwrap_or_default(),
                protocol: match p.protocol.unwrap_or_default() {
                    PortProtocol::Tcp => "tcp".into(),
                    PortProtocol::Udp => "udp".into(),
                },
                host_port: p.host.and_then(|h| u16::try_from(h).ok()),
                host_ip: None,
            })
            .collect(),
        binds: spec
            .volumes
            .iter()
            .map(|v| Bind {
                source: if v.is_bind() {
                    v.source.clone()
                } else {
                    volume_name(instance, &spec.name, &v.source)
                },
                target: v.target.clone(),
                read_only: v.read_only,
            })
            .collect(),
        memory_bytes: spec
            .resources
            .memory_bytes
            .and_then(|m| i64::try_from(m).ok()),
        #[allow(clippy::cast_possible_truncation)]
        nano_cpus: spec.resources.cpus.map(|c| (c * 1e9).round() as i64),
        ..ContainerSpec::default()
    }
}

/// Give the container the host access the policy admitted: `/dev/shm` size, capabilities,
/// sysctls and extra devices (same path, `rwm`). Every capability granted is logged.
pub fn apply_host_access(container: &mut ContainerSpec, app: &str, access: &HostAccess) {
    container.shm_size = access.shm_size_bytes.and_then(|b| i64::try_from(b).ok());
    for cap in &access.caps {
        tracing::info!(app = %app, capability = %cap, "granting a capability to the app's container");
    }
    container.cap_add = access.caps.clone();
    container.sysctls = access.sysctls.clone();
    container
        .devices
        .extend(access.devices.iter().map(DeviceMapping::same_path));
}

#[cfg(test)]
mod tests {
    use super::*;
    use odac_protocol::{PortMapping as WirePort, Resources, VolumeMount};

    #[test]
    fn maps_every_field() {
        let mut spec = AppSpec::new("ollama", "ollama/ollama:0.6.2");
        spec.env.insert("OLLAMA_HOST".into(), "0.0.0.0".into());
        spec.command = vec!["serve".into()];
        spec.ports.push(WirePort {
            host: Some(11434),
            container: 11434,
            protocol: None,
        });
        spec.volumes.push(VolumeMount {
            source: "models".into(),
            target: "/root/.ollama".into(),
            read_only: false,
        });
        spec.resources = Resources {
            memory_bytes: Some(1 << 30),
            cpus: Some(1.5),
        };
        let c = container_spec(
            "odac",
            "agent-1",
            &spec,
            "ollama/ollama:0.6.2",
            &BTreeMap::new(),
        );
        assert_eq!(c.name, "odac_ollama");
        assert_eq!(c.labels[odac_host::names::OWNER], "agent-1");
        assert_eq!(c.command, Some(vec!["serve".to_owned()]));
        assert_eq!(c.ports[0].key(), "11434/tcp");
        assert_eq!(c.ports[0].host_port, Some(11434));
        assert_eq!(c.binds[0].source, "odac_ollama_models");
        assert_eq!(c.memory_bytes, Some(1 << 30));
        assert_eq!(c.nano_cpus, Some(1_500_000_000));
        assert_eq!(c.labels[odac_host::names::APP], "ollama");
        assert_eq!(c.labels[odac_host::names::INSTANCE], "odac");
        assert!(c.devices.is_empty() && c.device_requests.is_empty());
        assert_eq!(
            volumes("odac", &spec),
            vec!["odac_ollama_models".to_owned()]
        );
        let mut moved = c.clone();
        let old = legacy_volume_name("odac", "ollama", "models");
        use_volumes(
            &mut moved,
            &spec,
            &BTreeMap::from([("models".to_owned(), old.clone())]),
        );
        assert_eq!(moved.binds[0].source, old);
        assert_eq!(old, "odac-ollama-models");
    }

    #[test]
    fn names_of_different_triples_differ() {
        // the pair that collided under the earlier scheme
        assert_eq!(
            legacy_volume_name("odac", "fa", "b-data"),
            legacy_volume_name("odac", "fa-b", "data")
        );
        assert_ne!(
            volume_name("odac", "fa", "b-data"),
            volume_name("odac", "fa-b", "data")
        );
        assert_ne!(container_name("a-b", "c"), container_name("a", "b-c"));
        assert_ne!(
            volume_name("odac", "fa", "b_data"),
            volume_name("odac", "fa-b", "data")
        );
        // exhaustive over short names: instance, app and volume come back out of a name
        let instances = ["o", "o-a", "a"];
        let apps = ["f", "f-a", "a", "a-b"];
        let vols = ["d", "a-d", "b_d", "a.d", "a_b-d"];
        let mut seen = std::collections::BTreeSet::new();
        for i in instances {
            for a in apps {
                assert!(seen.insert(container_name(i, a)));
                for v in vols {
                    assert!(seen.insert(volume_name(i, a, v)), "{i} {a} {v}");
                }
            }
        }
    }
}
