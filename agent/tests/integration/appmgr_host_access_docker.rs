//! The spec's host-access fields against the real Docker engine: `shm_size`, `caps`,
//! `sysctls` and `devices` reach the container's HostConfig (read back with inspect, and seen
//! from inside); a spec that breaks a rule, sent in a desired-state frame as any control plane
//! could, is decoded, and only that app is `failed` (`policy_denied`, the field named) while
//! the others run; a device outside `[apps.policy] allowed_device_prefixes` is refused naming
//! that key. Each test has its own instance and removes what it made.

use crate::docker_support;

use docker_support::{logs_with, remove_run_objects, run_containers, run_labels, with_run};
use std::future::Future;
use std::sync::Arc;

use odac_agent::appmgr::{AppManager, AppManagerConfig, HostSource, PolicyConfig};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{ContainerDetails, ContainerEngine, ContainerSummary, DockerEngine};
use odac_protocol::{AppState, AppStatus, ControlMessage, DesiredState, Reason, decode_control};
use serde_json::{Value, json};

struct Run {
    id: String,
    real: Arc<DockerEngine>,
    tmp: tempfile::TempDir,
}

impl Run {
    fn open(&self, allowed_device_prefixes: &[&str]) -> AppManager {
        let config = AppManagerConfig {
            state_dir: self.tmp.path().join("state"),
            instance: format!("odac-x{}", self.id),
            stop_timeout_secs: 0,
            poll_interval_ms: 200,
            policy: PolicyConfig {
                allowed_device_prefixes: allowed_device_prefixes.iter().map(Into::into).collect(),
                ..PolicyConfig::default()
            },
            extra_labels: run_labels(&self.id),
            ..AppManagerConfig::default()
        };
        AppManager::open_with_host(config, self.real.clone(), HostSource::Root("/".into())).unwrap()
    }

    async fn containers(&self) -> Vec<ContainerSummary> {
        run_containers(self.real.as_ref(), &self.id).await
    }

    async fn cleanup(&self) {
        remove_run_objects(self.real.as_ref(), &self.id, false).await;
    }

    async fn inspect(&self, status: &AppStatus) -> ContainerDetails {
        let id = status.container_id.as_deref().expect("a container");
        self.real.inspect(id).await.unwrap()
    }
}

async fn with_engine<F, Fut>(test: &str, body: F)
where
    F: FnOnce(&'static Run) -> Fut,
    Fut: Future<Output = ()>,
{
    let make = |real, id| Run {
        id,
        real: Arc::new(real),
        tmp: tempfile::tempdir().unwrap(),
    };
    with_run(test, make, |run| run.cleanup(), body).await;
}

/// An app of the busybox test image running `script`, with `extra` fields, as JSON.
fn app(name: &str, script: &str, extra: Value) -> Value {
    let mut app = json!({"name": name, "image": BUSYBOX_TEST_IMAGE,
        "command": ["sh", "-c", script]});
    if let (Some(map), Value::Object(extra)) = (app.as_object_mut(), extra) {
        map.extend(extra);
    }
    app
}

/// The desired state as the agent's uplink gets it: a `desired_state` frame decoded.
fn over_the_wire(generation: u64, apps: Vec<Value>) -> DesiredState {
    let frame = json!({"type": "desired_state", "seq": 1, "generation": generation, "apps": apps});
    match decode_control(frame.to_string().as_bytes()) {
        Ok(ControlMessage::DesiredState(m)) => DesiredState {
            generation: m.generation,
            apps: m.apps,
        },
        other => panic!("the frame must decode: {other:?}"),
    }
}

use crate::appmgr_support::status;

/// `failed` with `policy_denied`, and the error naming every one of `words`.
fn assert_denied(s: &AppStatus, words: &[&str]) {
    assert_eq!(s.state, AppState::Failed, "{s:?}");
    assert_eq!(
        s.gpu.fallback.as_ref().map(|f| f.reason),
        Some(Reason::PolicyDenied),
        "{s:?}"
    );
    assert!(s.container_id.is_none(), "nothing created: {s:?}");
    let error = s.last_error.clone().unwrap_or_default();
    for word in words {
        assert!(error.contains(word), "{word:?} not in {error:?}");
    }
}

#[tokio::test]
async fn host_access_reaches_the_container_and_bad_specs_fail_alone() {
    with_engine("host_access", |run| async move {
        let m = run.open(&["/dev/null"]);
        let script = "cat /proc/sys/net/ipv4/ip_forward; df -k /dev/shm; sleep 3600";
        let good = app(
            "media",
            script,
            json!({"shm_size": "512m", "caps": ["net_admin"],
                   "sysctls": {"net.ipv4.ip_forward": true}, "devices": ["/dev/null"]}),
        );
        let plain = app("plain", "sleep 3600", json!({}));
        let apps = vec![
            good,
            plain,
            app("admin", "sleep 3600", json!({"caps": ["SYS_ADMIN"]})),
            app(
                "core",
                "sleep 3600",
                json!({"sysctls": {"kernel.core_pattern": "|/tmp/x"}}),
            ),
            app("shm", "sleep 3600", json!({"shm_size": "512"})),
            app(
                "gpu-node",
                "sleep 3600",
                json!({"devices": ["/dev/dri/renderD128"]}),
            ),
        ];
        m.set_desired(over_the_wire(1, apps)).await.unwrap();
        let s = m.reconcile_once().await;

        let media = status(&s, "media");
        assert_eq!(media.state, AppState::Running, "{media:?}");
        assert_eq!(
            media.gpu.attached, None,
            "/dev/null is not a GPU: {media:?}"
        );
        let details = run.inspect(media).await;
        assert_eq!(details.shm_size, Some(536_870_912), "{details:?}");
        assert_eq!(details.cap_add, vec!["NET_ADMIN".to_owned()]);
        assert_eq!(
            details
                .sysctls
                .get("net.ipv4.ip_forward")
                .map(String::as_str),
            Some("1")
        );
        assert!(
            details
                .devices
                .iter()
                .any(|d| d.host_path == "/dev/null" && d.container_path == "/dev/null"),
            "{details:?}"
        );
        // seen from inside: the sysctl is set, /dev/shm is 512 MiB (524288 KiB)
        let id = media.container_id.clone().unwrap();
        let logs = logs_with(run.real.as_ref(), &id, "524288", 10).await;
        assert!(logs.starts_with('1'), "{logs}");
        assert!(logs.contains("524288"), "{logs}");

        assert_eq!(status(&s, "plain").state, AppState::Running);
        let plain = run.inspect(status(&s, "plain")).await;
        assert!(plain.cap_add.is_empty() && plain.sysctls.is_empty());
        assert_ne!(plain.shm_size, Some(536_870_912));

        assert_denied(
            status(&s, "admin"),
            &[
                "caps[0]",
                "SYS_ADMIN",
                "NET_ADMIN, NET_RAW, NET_BIND_SERVICE, IPC_LOCK, SYS_NICE",
            ],
        );
        assert_denied(
            status(&s, "core"),
            &["sysctls.kernel.core_pattern", "not a namespaced sysctl"],
        );
        assert_denied(status(&s, "shm"), &["shm_size", "no unit"]);
        assert_denied(status(&s, "gpu-node"), &["devices[0]", "gpu device"]);
        let names: Vec<String> = run.containers().await.into_iter().map(|c| c.name).collect();
        assert_eq!(
            names.len(),
            2,
            "only media and plain have containers: {names:?}"
        );

        // fixed at creation, like the GPUs: a change alone waits for a restart token
        let first = media.container_id.clone().unwrap();
        let plain_id = status(&s, "plain").container_id.clone();
        let fields = json!({"shm_size": "1g", "caps": ["net_admin", "sys_nice"],
               "sysctls": {"net.ipv4.ip_forward": true}, "devices": ["/dev/null"]});
        let changed = app("media", script, fields.clone());
        let plain = app("plain", "sleep 3600", json!({}));
        m.set_desired(over_the_wire(2, vec![changed, plain.clone()]))
            .await
            .unwrap();
        let s = m.reconcile_once().await;
        let media = status(&s, "media");
        assert!(media.restart_required, "{media:?}");
        assert_eq!(media.container_id.as_deref(), Some(first.as_str()), "kept");
        let mut restarted = fields;
        restarted["restart_token"] = json!("2026-01-01T00:00:00Z");
        m.set_desired(over_the_wire(
            3,
            vec![app("media", script, restarted), plain],
        ))
        .await
        .unwrap();
        let s = m.reconcile_once().await;
        let media = status(&s, "media");
        assert_eq!(media.state, AppState::Running, "{media:?}");
        assert!(!media.restart_required, "{media:?}");
        assert_ne!(
            media.container_id.as_deref(),
            Some(first.as_str()),
            "recreated at the restart"
        );
        let details = run.inspect(media).await;
        assert_eq!(details.shm_size, Some(1 << 30));
        assert_eq!(
            details.cap_add,
            vec!["NET_ADMIN".to_owned(), "SYS_NICE".to_owned()]
        );
        assert_eq!(
            status(&s, "plain").container_id,
            plain_id,
            "plain left alone"
        );
    })
    .await;
}

#[tokio::test]
async fn a_device_needs_the_device_policy() {
    with_engine("device_policy", |run| async move {
        let m = run.open(&[]);
        let apps = vec![
            app("coral", "sleep 3600", json!({"devices": ["/dev/null"]})),
            app("plain", "sleep 3600", json!({})),
        ];
        m.set_desired(over_the_wire(1, apps)).await.unwrap();
        let s = m.reconcile_once().await;
        assert_denied(
            status(&s, "coral"),
            &[
                "devices[0]",
                "/dev/null",
                "apps.policy.allowed_device_prefixes",
            ],
        );
        assert_eq!(status(&s, "plain").state, AppState::Running);
    })
    .await;
}
