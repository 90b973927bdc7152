//! From an app spec to the engine's container spec (without GPU devices: the plan adds those):
//! container name `<instance>-<app>`, env, command, ports, resources, labels, and volumes —
//! a named volume `models` of app `ollama` becomes the engine volume `<instance>-ollama-models`,
//! created before the container and kept across recreations and removals.

use std::collections::BTreeMap;

use odac_protocol::{AppSpec, PortProtocol};

use super::labels::{self, Identity};
use crate::engine::{Bind, ContainerSpec, PortMapping};

/// Container name of an app.
pub fn container_name(instance: &str, app: &str) -> String {
    format!("{instance}-{app}")
}

/// Engine name of an app's named volume.
pub fn volume_name(instance: &str, app: &str, source: &str) -> String {
    format!("{instance}-{app}-{source}")
}

/// The engine volumes an app needs (named volumes only).
pub fn volumes(instance: &str, spec: &AppSpec) -> Vec<String> {
    spec.volumes
        .iter()
        .filter(|v| !v.is_bind())
        .map(|v| volume_name(instance, &spec.name, &v.source))
        .collect()
}

/// The container spec of an app on the CPU. `image` is the image to run.
pub fn container_spec(
    instance: &str,
    spec: &AppSpec,
    image: &str,
    extra_labels: &BTreeMap<String, String>,
) -> ContainerSpec {
    let identity = Identity::of(spec);
    ContainerSpec {
        name: container_name(instance, &spec.name),
        image: image.to_owned(),
        env: spec.env.clone(),
        command: (!spec.command.is_empty()).then(|| spec.command.clone()),
        labels: labels::container_labels(instance, &spec.name, &identity, extra_labels),
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
        let c = container_spec("odac", &spec, "ollama/ollama:0.6.2", &BTreeMap::new());
        assert_eq!(c.name, "odac-ollama");
        assert_eq!(c.command, Some(vec!["serve".to_owned()]));
        assert_eq!(c.ports[0].key(), "11434/tcp");
        assert_eq!(c.ports[0].host_port, Some(11434));
        assert_eq!(c.binds[0].source, "odac-ollama-models");
        assert_eq!(c.memory_bytes, Some(1 << 30));
        assert_eq!(c.nano_cpus, Some(1_500_000_000));
        assert_eq!(c.labels[labels::APP], "ollama");
        assert_eq!(c.labels[labels::INSTANCE], "odac");
        assert!(c.devices.is_empty() && c.device_requests.is_empty());
        assert_eq!(
            volumes("odac", &spec),
            vec!["odac-ollama-models".to_owned()]
        );
    }
}
