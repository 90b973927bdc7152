//! Real-engine tests of the Docker implementation of the engine seam: capabilities, the
//! container lifecycle, device mappings and the engine's refusals (and the phase, create or
//! start, at which each one surfaces), volumes, and outage handling. They need the local
//! Docker engine: when it is unreachable they fail under `ODAC_REQUIRE_DOCKER=1` and are
//! skipped otherwise. Every object they create carries the label `odac.test=1` plus a
//! per-test run label, and is removed at the end even when an assertion fails.

use crate::docker_support;

use docker_support::{engine_or_skip, remove_run_objects, run_labels, with_run};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{
    ContainerDetails, ContainerEngine, ContainerSpec, ContainerState, DeviceMapping, DeviceRequest,
    DockerEngine, EngineCapabilities, EngineError, probe_capabilities,
};

/// A per-test namespace: unique names and a run label for cleanup.
struct Run {
    engine: DockerEngine,
    id: String,
}

impl Run {
    fn name(&self, what: &str) -> String {
        format!("odac-test-{}-{what}", self.id)
    }

    fn labels(&self) -> BTreeMap<String, String> {
        run_labels(&self.id)
    }

    fn spec(&self, what: &str, command: &[&str]) -> ContainerSpec {
        ContainerSpec {
            name: self.name(what),
            image: BUSYBOX_TEST_IMAGE.to_owned(),
            command: Some(command.iter().map(|s| (*s).to_owned()).collect()),
            labels: self.labels(),
            ..ContainerSpec::default()
        }
    }

    /// Remove every container and volume carrying this run's label.
    async fn cleanup(&self) {
        remove_run_objects(&self.engine, &self.id, false).await;
        for what in ["data"] {
            let _ = self.engine.remove_volume(&self.name(what)).await;
        }
    }

    /// Wait until the container is no longer running (bounded).
    async fn wait_exit(&self, id: &str) -> ContainerDetails {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let details = self.engine.inspect(id).await.expect("inspect");
            if !details.running || Instant::now() > deadline {
                return details;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Run a test body against the real engine with the test image present; clean up afterwards,
/// then re-raise any assertion failure.
async fn with_engine<F, Fut>(test: &str, body: F)
where
    F: FnOnce(&'static Run) -> Fut,
    Fut: Future<Output = ()>,
{
    let make = |engine, id| Run { engine, id };
    with_run(test, make, |run| run.cleanup(), body).await;
}

#[tokio::test]
async fn capabilities_of_the_local_engine() {
    let Some(engine) = engine_or_skip("capabilities_of_the_local_engine").await else {
        return;
    };
    let caps: EngineCapabilities = engine.capabilities().await;
    assert!(caps.reachable, "{caps:?}");
    assert!(caps.error.is_none());
    let version = caps.server_version.clone().unwrap_or_default();
    assert!(caps.server_major().is_some(), "server version {version:?}");
    let api = caps.api_version.clone().unwrap_or_default();
    assert!(api.starts_with("1."), "api version {api:?}");
    assert!(caps.has_runtime("runc"), "runtimes {:?}", caps.runtimes);
    assert!(caps.default_runtime.is_some());
    if version.starts_with("20.10.") {
        // The engine of this project's machines: API 1.41, no CDI.
        assert_eq!(api, "1.41");
        assert!(!caps.cdi_enabled());
        assert!(caps.cdi_spec_dirs.is_empty());
    }
    println!(
        "engine {version}, api {api}, runtimes {:?}, cdi {}",
        caps.runtimes,
        caps.cdi_enabled()
    );
}

#[tokio::test]
async fn missing_socket_is_unavailable_and_probe_unreachable() {
    let host = "unix:///nonexistent/odac-test/docker.sock";
    let started = Instant::now();
    let caps = probe_capabilities(Some(host)).await;
    assert!(!caps.reachable);
    assert!(
        caps.error
            .as_deref()
            .unwrap_or("")
            .contains("/nonexistent/odac-test/docker.sock")
    );
    let engine = DockerEngine::connect(Some(host))
        .await
        .expect("connect tolerates a down engine");
    let spec = ContainerSpec {
        name: "odac-test-never-created".into(),
        image: BUSYBOX_TEST_IMAGE.into(),
        ..ContainerSpec::default()
    };
    assert!(matches!(
        engine.create(&spec).await,
        Err(EngineError::Unavailable(_))
    ));
    assert!(matches!(
        engine.list_by_label("odac.test").await,
        Err(EngineError::Unavailable(_))
    ));
    assert!(matches!(
        engine.image_exists(BUSYBOX_TEST_IMAGE).await,
        Err(EngineError::Unavailable(_))
    ));
    assert!(!engine.capabilities().await.reachable);
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn container_lifecycle_and_labels() {
    with_engine("lifecycle", |run| async move {
        let engine = &run.engine;
        assert!(engine.image_exists(BUSYBOX_TEST_IMAGE).await.unwrap());
        assert!(!engine.image_exists("odac/absent:never").await.unwrap());

        let mut missing_image = run.spec("noimage", &["true"]);
        missing_image.image = "odac/absent:never".into();
        let err = engine.create(&missing_image).await.unwrap_err();
        assert!(matches!(err, EngineError::NotFound(_)), "{err:?}");

        let spec = run.spec("sleeper", &["sleep", "300"]);
        let id = engine.create(&spec).await.unwrap();
        let created = engine.inspect(&id).await.unwrap();
        assert_eq!(created.status, ContainerState::Created);
        assert_eq!(created.name, spec.name);
        assert_eq!(created.image, BUSYBOX_TEST_IMAGE);
        assert_eq!(
            created.labels.get("odac.test").map(String::as_str),
            Some("1")
        );
        assert!(created.started_at.is_none());

        let dup = engine.create(&spec).await.unwrap_err();
        assert!(matches!(dup, EngineError::Conflict(_)), "{dup:?}");

        engine.start(&id).await.unwrap();
        engine
            .start(&id)
            .await
            .expect("starting a running container succeeds");
        let running = engine.inspect(&id).await.unwrap();
        assert!(running.running);
        assert_eq!(running.status, ContainerState::Running);
        assert!(running.started_at.is_some());

        let label = format!("odac.test.run={}", run.id);
        let listed = engine.list_by_label(&label).await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].id, id);
        assert_eq!(listed[0].name, spec.name);
        assert_eq!(listed[0].state, ContainerState::Running);
        assert!(
            engine
                .list_by_label(&format!("{label}-other"))
                .await
                .unwrap()
                .is_empty()
        );

        let busy = engine.remove(&id, false).await.unwrap_err();
        assert!(matches!(busy, EngineError::Conflict(_)), "{busy:?}");

        engine.stop(&id, Duration::from_secs(1)).await.unwrap();
        engine
            .stop(&id, Duration::from_secs(1))
            .await
            .expect("stopping a stopped container succeeds");
        let stopped = engine.inspect(&id).await.unwrap();
        assert!(!stopped.running);
        assert_eq!(stopped.status, ContainerState::Exited);
        assert!(stopped.finished_at.is_some());
        // sleep as PID 1 ignores SIGTERM, so the engine kills it.
        assert_eq!(stopped.exit_code, Some(137));
        let listed = engine.list_by_label(&label).await.unwrap();
        assert_eq!(
            listed[0].state,
            ContainerState::Exited,
            "all states are listed"
        );

        engine.remove(&id, false).await.unwrap();
        assert!(engine.inspect(&id).await.unwrap_err().is_not_found());
        assert!(engine.remove(&id, true).await.unwrap_err().is_not_found());
        assert!(engine.start(&id).await.unwrap_err().is_not_found());
    })
    .await;
}

#[tokio::test]
async fn exit_code_env_and_logs() {
    with_engine("logs", |run| async move {
        let engine = &run.engine;
        let mut spec = run.spec(
            "logs",
            &[
                "sh",
                "-c",
                "echo one; echo two $GREETING; sleep 0.3; echo three >&2; exit 7",
            ],
        );
        spec.env.insert("GREETING".into(), "hello".into());
        let id = engine.create(&spec).await.unwrap();
        engine.start(&id).await.unwrap();
        let done = run.wait_exit(&id).await;
        assert_eq!(done.exit_code, Some(7));
        let logs = engine.logs_tail(&id, 2).await.unwrap();
        assert!(logs.contains("two hello"), "{logs:?}");
        assert!(logs.contains("three"), "{logs:?}");
        assert!(!logs.contains("one"), "only the last 2 lines: {logs:?}");
    })
    .await;
}

#[tokio::test]
async fn device_mapping_is_visible_inside() {
    with_engine("devmap", |run| async move {
        let engine = &run.engine;
        let mut spec = run.spec(
            "devmap",
            &["sh", "-c", "test -c /dev/odac-test && ls -l /dev/odac-test"],
        );
        spec.devices.push(DeviceMapping {
            host_path: "/dev/null".into(),
            container_path: "/dev/odac-test".into(),
            permissions: "rwm".into(),
        });
        let id = engine.create(&spec).await.unwrap();
        engine.start(&id).await.unwrap();
        let done = run.wait_exit(&id).await;
        let logs = engine.logs_tail(&id, 10).await.unwrap();
        assert_eq!(done.exit_code, Some(0), "logs: {logs}");
        assert!(logs.contains("/dev/odac-test"), "{logs:?}");
        assert!(logs.starts_with('c'), "a character device: {logs:?}");
        assert_eq!(done.devices, spec.devices, "inspect reads the mapping back");
    })
    .await;
}

#[tokio::test]
async fn missing_device_node_is_refused_at_start() {
    with_engine("nodev", |run| async move {
        let engine = &run.engine;
        let mut spec = run.spec("nodev", &["true"]);
        spec.devices
            .push(DeviceMapping::same_path("/dev/odac-missing-device"));
        // Phase: create accepts the mapping (the engine checks device paths at start).
        let id = engine
            .create(&spec)
            .await
            .expect("create accepts a missing device path");
        let err = engine.start(&id).await.unwrap_err();
        let EngineError::Rejected { status, message } = &err else {
            panic!("expected Rejected, got {err:?}");
        };
        assert!(
            message.contains("error gathering device information while adding custom device"),
            "{message}"
        );
        assert!(message.contains("/dev/odac-missing-device"), "{message}");
        println!("missing device: phase start, http {status}: {message}");
        let after = engine.inspect(&id).await.unwrap();
        assert!(!after.running);
        assert_eq!(after.status, ContainerState::Created);
    })
    .await;
}

#[tokio::test]
async fn nvidia_device_request_is_refused_without_the_driver() {
    with_engine("nvidia", |run| async move {
        let engine = &run.engine;
        let caps = engine.capabilities().await;
        if caps.has_runtime("nvidia") {
            println!("skip: this engine has the nvidia runtime, the refusal cannot be observed");
            return;
        }
        let mut spec = run.spec("nvidia", &["true"]);
        spec.device_requests.push(DeviceRequest {
            driver: "nvidia".into(),
            device_ids: vec!["0".into()],
            capabilities: vec![vec!["gpu".into()]],
            ..DeviceRequest::default()
        });
        // Phase: create accepts the request; the engine selects device drivers at start.
        let id = engine
            .create(&spec)
            .await
            .expect("create accepts the device request");
        let created = engine.inspect(&id).await.unwrap();
        assert_eq!(created.device_requests, spec.device_requests);
        let err = engine.start(&id).await.unwrap_err();
        let EngineError::Rejected { status, message } = &err else {
            panic!("expected Rejected, got {err:?}");
        };
        assert!(
            message.contains("could not select device driver"),
            "{message}"
        );
        assert!(message.contains("\"nvidia\""), "{message}");
        println!("nvidia request: phase start, http {status}: {message}");
    })
    .await;
}

#[tokio::test]
async fn numeric_group_add_is_applied() {
    with_engine("groups", |run| async move {
        let engine = &run.engine;
        let mut spec = run.spec("groups", &["id", "-G"]);
        spec.group_add.push("4242".into());
        let id = engine.create(&spec).await.unwrap();
        let created = engine.inspect(&id).await.unwrap();
        assert_eq!(created.group_add, vec!["4242".to_owned()]);
        engine.start(&id).await.unwrap();
        let done = run.wait_exit(&id).await;
        assert_eq!(done.exit_code, Some(0));
        let logs = engine.logs_tail(&id, 5).await.unwrap();
        assert!(logs.split_whitespace().any(|g| g == "4242"), "{logs:?}");
    })
    .await;
}

#[tokio::test]
async fn named_volume_survives_container_recreation() {
    with_engine("volume", |run| async move {
        let engine = &run.engine;
        let volume = run.name("data");
        engine.ensure_volume(&volume, &run.labels()).await.unwrap();
        engine
            .ensure_volume(&volume, &run.labels())
            .await
            .expect("idempotent");
        let bind = odac_host::engine::Bind {
            source: volume.clone(),
            target: "/data".into(),
            read_only: false,
        };
        let mut writer = run.spec("writer", &["sh", "-c", "echo kept > /data/file"]);
        writer.binds.push(bind.clone());
        let id = engine.create(&writer).await.unwrap();
        engine.start(&id).await.unwrap();
        assert_eq!(run.wait_exit(&id).await.exit_code, Some(0));
        engine.remove(&id, true).await.unwrap();

        let mut reader = run.spec("reader", &["cat", "/data/file"]);
        reader.binds.push(odac_host::engine::Bind {
            read_only: true,
            ..bind
        });
        let id = engine.create(&reader).await.unwrap();
        engine.start(&id).await.unwrap();
        let done = run.wait_exit(&id).await;
        assert_eq!(done.exit_code, Some(0));
        assert_eq!(engine.logs_tail(&id, 5).await.unwrap().trim(), "kept");
        assert_eq!(done.binds, vec![format!("{volume}:/data:ro")]);
        engine.remove(&id, true).await.unwrap();
        engine.remove_volume(&volume).await.unwrap();
        assert!(
            engine
                .remove_volume(&volume)
                .await
                .unwrap_err()
                .is_not_found()
        );
    })
    .await;
}

/// Forward every connection on `listener` to the real docker socket (a stand-in for an engine
/// that comes up at a path).
async fn proxy_to_docker(listener: tokio::net::UnixListener) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::UnixStream::connect("/var/run/docker.sock").await
            {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[tokio::test]
async fn engine_down_at_connect_recovers_when_it_comes_up() {
    let Some(_real) = engine_or_skip("recovers").await else {
        return;
    };
    if !std::path::Path::new("/var/run/docker.sock").exists() {
        println!("skip recovers: the engine is not at /var/run/docker.sock");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("docker.sock");
    let host = format!("unix://{}", socket.display());
    let engine = DockerEngine::connect(Some(&host))
        .await
        .expect("connect tolerates a down engine");
    assert!(matches!(
        engine.list_by_label("odac.test").await,
        Err(EngineError::Unavailable(_))
    ));
    assert!(!engine.capabilities().await.reachable);

    // The engine comes up at that path: the same DockerEngine now answers.
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let proxy = tokio::spawn(proxy_to_docker(listener));
    let caps = engine.capabilities().await;
    assert!(caps.reachable, "{caps:?}");
    assert!(caps.api_version.is_some());
    engine
        .list_by_label("odac.test.never-set")
        .await
        .expect("list after recovery");

    // It goes away again (socket removed): Unavailable, not a hang or a panic.
    proxy.abort();
    let _ = proxy.await;
    std::fs::remove_file(&socket).unwrap();
    let err = engine
        .list_by_label("odac.test.never-set")
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
}

#[tokio::test]
async fn host_port_taken_is_refused_at_start_and_is_no_device_error() {
    with_engine("ports", |run| async move {
        let engine = &run.engine;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mapping = odac_host::engine::PortMapping {
            container_port: 8080,
            protocol: "tcp".into(),
            host_port: Some(port),
            host_ip: Some("127.0.0.1".into()),
        };
        let mut first = run.spec("port-a", &["sleep", "300"]);
        first.ports.push(mapping.clone());
        let a = engine.create(&first).await.unwrap();
        engine.start(&a).await.unwrap();
        let mut second = run.spec("port-b", &["sleep", "300"]);
        second.ports.push(mapping);
        // Phase: create accepts it; start finds the port taken.
        let b = engine
            .create(&second)
            .await
            .expect("create accepts a taken port");
        let err = engine.start(&b).await.unwrap_err();
        let message = err.engine_message();
        assert!(message.contains("port is already allocated"), "{err:?}");
        assert!(!message.contains("device"), "{message}");
        println!("taken port: phase start, {err}");
    })
    .await;
}
