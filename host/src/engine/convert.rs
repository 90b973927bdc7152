//! Conversions between bollard's types and the engine seam's domain types, and the mapping of
//! bollard errors onto [`EngineError`]. Nothing here is public outside `engine/`.

use std::collections::{BTreeMap, HashMap};

use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerSummary as BollardSummary,
    DeviceMapping as BollardDeviceMapping, DeviceRequest as BollardDeviceRequest, HealthConfig,
    HealthStatusEnum, HostConfig, HostConfigLogConfig, PortBinding, RestartPolicy,
    RestartPolicyNameEnum,
};

use super::error::EngineError;
use super::types::{
    Bind, ContainerDetails, ContainerHealth, ContainerSpec, ContainerState, ContainerSummary,
    DeviceMapping, DeviceRequest, HealthProbe, LogRotation,
};

/// The zero time the engine reports for "never".
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

fn hash_map(map: &BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn device_request_to_engine(r: &DeviceRequest) -> BollardDeviceRequest {
    BollardDeviceRequest {
        driver: Some(r.driver.clone()),
        count: r.count,
        device_ids: non_empty(r.device_ids.clone()),
        capabilities: non_empty(r.capabilities.clone()),
        options: (!r.options.is_empty()).then(|| hash_map(&r.options)),
    }
}

fn device_request_from_engine(r: BollardDeviceRequest) -> DeviceRequest {
    DeviceRequest {
        driver: r.driver.unwrap_or_default(),
        count: r.count.filter(|&c| c != 0),
        device_ids: r.device_ids.unwrap_or_default(),
        capabilities: r.capabilities.unwrap_or_default(),
        options: r.options.unwrap_or_default().into_iter().collect(),
    }
}

/// The create body for a spec. Privileged mode, host networking and the host PID namespace
/// are never set; the restart policy is `no` because the agent restarts apps itself.
pub(crate) fn create_body(spec: &ContainerSpec) -> ContainerCreateBody {
    let env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let binds: Vec<String> = spec.binds.iter().map(Bind::engine_form).collect();
    let mut port_bindings: HashMap<String, Option<Vec<PortBinding>>> = HashMap::new();
    for port in &spec.ports {
        port_bindings
            .entry(port.key())
            .or_insert_with(|| Some(Vec::new()))
            .get_or_insert_with(Vec::new)
            .push(PortBinding {
                host_ip: port.host_ip.clone(),
                host_port: port.host_port.map(|p| p.to_string()),
            });
    }
    let exposed: Vec<String> = port_bindings.keys().cloned().collect();
    let devices: Vec<BollardDeviceMapping> = spec
        .devices
        .iter()
        .map(|d| BollardDeviceMapping {
            path_on_host: Some(d.host_path.clone()),
            path_in_container: Some(d.container_path.clone()),
            cgroup_permissions: Some(if d.permissions.is_empty() {
                "rwm".into()
            } else {
                d.permissions.clone()
            }),
        })
        .collect();
    let host_config = HostConfig {
        binds: non_empty(binds),
        port_bindings: (!port_bindings.is_empty()).then_some(port_bindings),
        devices: non_empty(devices),
        device_requests: non_empty(
            spec.device_requests
                .iter()
                .map(device_request_to_engine)
                .collect(),
        ),
        group_add: non_empty(spec.group_add.clone()),
        memory: spec.memory_bytes,
        nano_cpus: spec.nano_cpus,
        security_opt: non_empty(spec.security_opt.clone()),
        pids_limit: spec.pids_limit,
        restart_policy: Some(RestartPolicy {
            name: Some(RestartPolicyNameEnum::NO),
            maximum_retry_count: None,
        }),
        log_config: spec.log_rotation.as_ref().map(log_config),
        shm_size: spec.shm_size,
        cap_add: non_empty(spec.cap_add.clone()),
        sysctls: (!spec.sysctls.is_empty()).then(|| hash_map(&spec.sysctls)),
        ..HostConfig::default()
    };
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        env: non_empty(env),
        cmd: spec.command.clone(),
        entrypoint: spec.entrypoint.clone(),
        working_dir: spec.working_dir.clone(),
        user: spec.user.clone(),
        labels: Some(hash_map(&spec.labels)),
        exposed_ports: non_empty(exposed),
        host_config: Some(host_config),
        healthcheck: spec.healthcheck.as_ref().map(health_config),
        ..ContainerCreateBody::default()
    }
}

fn nanos(d: Option<std::time::Duration>) -> Option<i64> {
    d.map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The engine's health config: the command in exec form (`CMD`).
fn health_config(p: &HealthProbe) -> HealthConfig {
    let mut test = vec!["CMD".to_owned()];
    test.extend(p.command.iter().cloned());
    HealthConfig {
        test: Some(test),
        interval: nanos(p.interval),
        timeout: nanos(p.timeout),
        retries: p.retries.map(i64::from),
        start_period: nanos(p.start_period),
        start_interval: None,
    }
}

/// The json-file driver with `max-size` (bytes) and `max-file`.
fn log_config(r: &LogRotation) -> HostConfigLogConfig {
    HostConfigLogConfig {
        typ: Some("json-file".into()),
        config: Some(HashMap::from([
            ("max-size".to_owned(), r.max_size_bytes.to_string()),
            ("max-file".to_owned(), r.max_files.to_string()),
        ])),
    }
}

/// The health state of an inspected container, with the output of its last check when that
/// check failed.
fn health(state: &bollard::models::ContainerState) -> Option<ContainerHealth> {
    let h = state.health.as_ref()?;
    let status = match h.status? {
        HealthStatusEnum::STARTING => "starting",
        HealthStatusEnum::HEALTHY => "healthy",
        HealthStatusEnum::UNHEALTHY => "unhealthy",
        HealthStatusEnum::EMPTY | HealthStatusEnum::NONE => return None,
    };
    let last_failure = h
        .log
        .as_ref()
        .and_then(|log| log.last())
        .filter(|r| r.exit_code != Some(0))
        .and_then(|r| r.output.clone());
    Some(ContainerHealth {
        status: status.to_owned(),
        last_failure,
    })
}

fn time(value: Option<String>) -> Option<String> {
    value.filter(|t| !t.is_empty() && t != ZERO_TIME)
}

/// What the seam reads back from `GET /containers/{id}/json`.
pub(crate) fn details(resp: ContainerInspectResponse) -> ContainerDetails {
    let state = resp.state.unwrap_or_default();
    let health = health(&state);
    let config = resp.config.unwrap_or_default();
    let host = resp.host_config.unwrap_or_default();
    ContainerDetails {
        id: resp.id.unwrap_or_default(),
        name: resp
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_owned(),
        labels: config.labels.unwrap_or_default().into_iter().collect(),
        image: config.image.unwrap_or_default(),
        status: state
            .status
            .map(|s| ContainerState::parse(s.as_ref()))
            .unwrap_or_default(),
        running: state.running.unwrap_or(false),
        exit_code: state.exit_code,
        error: state.error.filter(|e| !e.is_empty()),
        oom_killed: state.oom_killed.unwrap_or(false),
        restart_count: resp.restart_count.unwrap_or(0),
        started_at: time(state.started_at),
        finished_at: time(state.finished_at),
        device_requests: host
            .device_requests
            .unwrap_or_default()
            .into_iter()
            .map(device_request_from_engine)
            .collect(),
        devices: host
            .devices
            .unwrap_or_default()
            .into_iter()
            .map(|d| DeviceMapping {
                host_path: d.path_on_host.unwrap_or_default(),
                container_path: d.path_in_container.unwrap_or_default(),
                permissions: d.cgroup_permissions.unwrap_or_default(),
            })
            .collect(),
        group_add: host.group_add.unwrap_or_default(),
        binds: host.binds.unwrap_or_default(),
        security_opt: host.security_opt.unwrap_or_default(),
        pids_limit: host.pids_limit,
        shm_size: host.shm_size,
        cap_add: host.cap_add.unwrap_or_default(),
        sysctls: host.sysctls.unwrap_or_default().into_iter().collect(),
        health,
        image_id: resp.image.unwrap_or_default(),
        env: config.env.unwrap_or_default(),
    }
}

/// One line of `GET /containers/json`.
pub(crate) fn summary(s: BollardSummary) -> ContainerSummary {
    ContainerSummary {
        id: s.id.unwrap_or_default(),
        name: s
            .names
            .unwrap_or_default()
            .first()
            .map(|n| n.trim_start_matches('/').to_owned())
            .unwrap_or_default(),
        image: s.image.unwrap_or_default(),
        labels: s.labels.unwrap_or_default().into_iter().collect(),
        state: s
            .state
            .map(|st| ContainerState::parse(st.as_ref()))
            .unwrap_or_default(),
        binds: s
            .mounts
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.typ.as_deref() == Some("bind"))
            .filter_map(|m| {
                let mode = if m.rw == Some(false) { ":ro" } else { "" };
                Some(format!("{}:{}{mode}", m.source?, m.destination?))
            })
            .collect(),
    }
}

/// Map a bollard error onto the seam's error, keeping the engine's exact words; counted in
/// `odac_agent_engine_errors_total`.
pub(crate) fn map_error(err: BollardError) -> EngineError {
    let mapped = map_bollard_error(err);
    super::error_counts::count(mapped.kind());
    mapped
}

fn map_bollard_error(err: BollardError) -> EngineError {
    match err {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => match status_code {
            404 => EngineError::NotFound(message),
            409 => EngineError::Conflict(message),
            status => EngineError::Rejected { status, message },
        },
        BollardError::SocketNotFoundError(path) => {
            EngineError::Unavailable(format!("docker socket not found at {path}"))
        }
        BollardError::RequestTimeoutError => {
            EngineError::Unavailable("request to the docker engine timed out".into())
        }
        e @ (BollardError::IOError { .. }
        | BollardError::HyperLegacyError { .. }
        | BollardError::HttpClientError { .. }
        | BollardError::HyperResponseError { .. }) => EngineError::Unavailable(error_chain(&e)),
        BollardError::DockerStreamError { error } => EngineError::Other(error),
        other => EngineError::Other(error_chain(&other)),
    }
}

/// The error's message followed by its sources, so "client error (Connect)" also says
/// "connection refused" or "no such file or directory".
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_variants() {
        let server = |status_code: u16| BollardError::DockerResponseServerError {
            status_code,
            message: "the engine's words".into(),
        };
        assert_eq!(
            map_error(server(404)),
            EngineError::NotFound("the engine's words".into())
        );
        assert_eq!(
            map_error(server(409)),
            EngineError::Conflict("the engine's words".into())
        );
        assert_eq!(
            map_error(server(500)),
            EngineError::Rejected {
                status: 500,
                message: "the engine's words".into()
            }
        );
        assert!(map_error(BollardError::SocketNotFoundError("/nope".into())).is_unavailable());
        assert!(map_error(BollardError::RequestTimeoutError).is_unavailable());
    }
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use crate::engine::types::{Bind, PortMapping};

    #[test]
    fn create_body_carries_devices_groups_and_no_host_privileges() {
        let spec = ContainerSpec {
            name: "gpu-app".into(),
            image: "odac/busybox:test".into(),
            env: BTreeMap::from([("A".to_owned(), "1".to_owned())]),
            command: Some(vec!["sleep".into(), "1".into()]),
            labels: BTreeMap::from([("odac.app".to_owned(), "gpu-app".to_owned())]),
            ports: vec![PortMapping {
                container_port: 8080,
                protocol: String::new(),
                host_port: Some(18080),
                host_ip: Some("127.0.0.1".into()),
            }],
            binds: vec![Bind {
                source: "models".into(),
                target: "/models".into(),
                read_only: true,
            }],
            devices: vec![DeviceMapping {
                host_path: "/dev/dri/renderD128".into(),
                container_path: "/dev/dri/renderD128".into(),
                permissions: String::new(),
            }],
            device_requests: vec![DeviceRequest {
                driver: "cdi".into(),
                device_ids: vec!["nvidia.com/gpu=0".into()],
                ..DeviceRequest::default()
            }],
            group_add: vec!["44".into(), "105".into()],
            memory_bytes: Some(1 << 30),
            shm_size: Some(536_870_912),
            cap_add: vec!["NET_ADMIN".into()],
            sysctls: BTreeMap::from([("net.ipv4.ip_forward".to_owned(), "1".to_owned())]),
            ..ContainerSpec::default()
        };
        let body = create_body(&spec);
        assert_eq!(body.env, Some(vec!["A=1".to_owned()]));
        assert_eq!(body.exposed_ports, Some(vec!["8080/tcp".to_owned()]));
        let host = body.host_config.unwrap_or_default();
        assert_eq!(host.binds, Some(vec!["models:/models:ro".to_owned()]));
        let devices = host.devices.unwrap_or_default();
        assert_eq!(devices[0].cgroup_permissions.as_deref(), Some("rwm"));
        let request = &host.device_requests.unwrap_or_default()[0];
        assert_eq!(request.driver.as_deref(), Some("cdi"));
        assert_eq!(request.count, None, "no count with CDI ids");
        assert_eq!(request.capabilities, None);
        assert_eq!(
            host.group_add,
            Some(vec!["44".to_owned(), "105".to_owned()])
        );
        let binding = &host.port_bindings.unwrap_or_default()["8080/tcp"];
        assert_eq!(
            binding.as_ref().map(|b| b[0].host_port.clone()),
            Some(Some("18080".to_owned()))
        );
        assert_eq!(host.memory, Some(1 << 30));
        assert_eq!(host.shm_size, Some(536_870_912));
        assert_eq!(host.cap_add, Some(vec!["NET_ADMIN".to_owned()]));
        let sysctls = host.sysctls.clone().unwrap_or_default();
        assert_eq!(
            sysctls.get("net.ipv4.ip_forward").map(String::as_str),
            Some("1")
        );
        assert_eq!(host.privileged, None);
        assert_eq!(host.network_mode, None);
        assert_eq!(host.pid_mode, None);
        assert_eq!(
            host.restart_policy.and_then(|p| p.name),
            Some(RestartPolicyNameEnum::NO)
        );
    }
}
