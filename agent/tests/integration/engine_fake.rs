//! Tests of [`FakeEngine`]: it behaves like the real engine where the app manager depends on
//! it (devices are refused at start with the engine's texts, names conflict, running
//! containers cannot be removed without force), records every call, fails on demand and can
//! be held as `Arc<dyn ContainerEngine>`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use odac_host::engine::test_image::{BUSYBOX_TEST_IMAGE, ensure_busybox_image};
use odac_host::engine::{
    ContainerEngine, ContainerSpec, ContainerState, DeviceMapping, DeviceRequest, EngineCall,
    EngineCapabilities, EngineError, FakeEngine, Op,
};

fn spec(name: &str) -> ContainerSpec {
    ContainerSpec {
        name: name.into(),
        image: "odac/busybox:test".into(),
        labels: BTreeMap::from([("odac.app".to_owned(), name.to_owned())]),
        ..ContainerSpec::default()
    }
}

/// Creates `s` (accepted) and starts it, which the engine refuses: the container's id and
/// the engine's words.
async fn refused_at_start(fake: &FakeEngine, s: &ContainerSpec) -> (String, String) {
    let id = fake.create(s).await.expect("create accepts the request");
    let err = fake.start(&id).await.unwrap_err();
    (id, err.engine_message())
}

fn fake() -> FakeEngine {
    let fake = FakeEngine::new();
    fake.add_image("odac/busybox:test");
    fake
}

#[tokio::test]
async fn lifecycle_and_call_record() {
    let fake = fake();
    let id = fake.create(&spec("web")).await.unwrap();
    assert_eq!(
        fake.inspect(&id).await.unwrap().status,
        ContainerState::Created
    );
    fake.start(&id).await.unwrap();
    let running = fake.inspect("web").await.unwrap();
    assert!(running.running);
    assert!(running.started_at.is_some());
    let listed = fake.list_by_label("odac.app=web").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, ContainerState::Running);
    assert!(fake.list_by_label("odac.app=db").await.unwrap().is_empty());
    assert!(matches!(
        fake.remove(&id, false).await,
        Err(EngineError::Conflict(_))
    ));
    fake.stop(&id, Duration::from_secs(5)).await.unwrap();
    fake.remove(&id, false).await.unwrap();
    assert!(fake.inspect(&id).await.unwrap_err().is_not_found());

    let ops: Vec<Op> = fake.calls().iter().map(EngineCall::op).collect();
    assert_eq!(
        ops,
        vec![
            Op::Create,
            Op::Inspect,
            Op::Start,
            Op::Inspect,
            Op::ListByLabel,
            Op::ListByLabel,
            Op::Remove,
            Op::Stop,
            Op::Remove,
            Op::Inspect
        ]
    );
    let EngineCall::Create(created) = &fake.calls_of(Op::Create)[0] else {
        panic!("create not recorded");
    };
    assert_eq!(created.name, "web");
    assert_eq!(
        fake.calls_of(Op::Stop),
        vec![EngineCall::Stop(id.clone(), Duration::from_secs(5))]
    );
    fake.clear_calls();
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn missing_image_and_name_conflict() {
    let fake = FakeEngine::new();
    assert!(fake.create(&spec("a")).await.unwrap_err().is_not_found());
    fake.add_image("odac/busybox:test");
    fake.create(&spec("a")).await.unwrap();
    let err = fake.create(&spec("a")).await.unwrap_err();
    assert!(
        matches!(&err, EngineError::Conflict(m) if m.contains("is already in use")),
        "{err:?}"
    );
}

#[tokio::test]
async fn fail_next_is_one_shot_and_per_operation() {
    let fake = fake();
    let id = fake.create(&spec("web")).await.unwrap();
    let refusal = EngineError::Rejected {
        status: 500,
        message: "could not select device driver \"nvidia\" with capabilities: [[gpu]]".into(),
    };
    fake.fail_next(Op::Start, refusal.clone());
    assert_eq!(fake.start(&id).await.unwrap_err(), refusal);
    assert!(!fake.inspect(&id).await.unwrap().running);
    fake.start(&id).await.expect("only the next call fails");
    assert!(fake.inspect(&id).await.unwrap().running);

    fake.fail_next(Op::Create, EngineError::Other("boom".into()));
    assert_eq!(
        fake.create(&spec("x")).await.unwrap_err(),
        EngineError::Other("boom".into())
    );
    fake.create(&spec("x")).await.unwrap();
    assert_eq!(
        fake.calls_of(Op::Create).len(),
        3,
        "failed calls are recorded too"
    );
}

#[tokio::test]
async fn unavailable_engine_fails_every_call() {
    let fake = fake();
    let id = fake.create(&spec("web")).await.unwrap();
    fake.set_unavailable(true);
    assert!(fake.start(&id).await.unwrap_err().is_unavailable());
    assert!(
        fake.list_by_label("odac.app")
            .await
            .unwrap_err()
            .is_unavailable()
    );
    assert!(
        fake.image_exists("odac/busybox:test")
            .await
            .unwrap_err()
            .is_unavailable()
    );
    let caps = fake.capabilities().await;
    assert!(!caps.reachable);
    assert!(caps.error.is_some());
    fake.set_unavailable(false);
    fake.start(&id).await.unwrap();
    assert!(fake.capabilities().await.reachable);
}

#[tokio::test]
async fn devices_are_refused_at_start_like_a_real_engine() {
    let fake = fake();
    // A device node the host lost between pre-flight and start.
    fake.mark_device_missing("/dev/dri/renderD128");
    let mut s = spec("render");
    s.devices
        .push(DeviceMapping::same_path("/dev/dri/renderD128"));
    s.group_add.push("105".into());
    let (id, words) = refused_at_start(&fake, &s).await;
    assert_eq!(
        words,
        "error gathering device information while adding custom device \"/dev/dri/renderD128\": no such file or directory"
    );
    let after = fake.inspect(&id).await.unwrap();
    assert!(!after.running);
    assert_eq!(after.devices, s.devices);
    assert_eq!(after.group_add, vec!["105".to_owned()]);

    // An NVIDIA request on an engine without the driver.
    let mut s = spec("nvidia");
    s.device_requests.push(DeviceRequest {
        driver: "nvidia".into(),
        device_ids: vec!["GPU-1".into()],
        capabilities: vec![vec!["gpu".into()]],
        ..DeviceRequest::default()
    });
    let (id, words) = refused_at_start(&fake, &s).await;
    assert_eq!(
        words,
        "could not select device driver \"nvidia\" with capabilities: [[gpu]]"
    );
    fake.add_device_driver("nvidia");
    fake.start(&id)
        .await
        .expect("starts once the driver is registered");
    assert_eq!(
        fake.inspect(&id).await.unwrap().device_requests,
        s.device_requests
    );
}

#[tokio::test]
async fn cdi_requests_follow_the_engine_capabilities() {
    let fake = fake();
    let mut s = spec("cdi");
    s.device_requests.push(DeviceRequest {
        driver: "cdi".into(),
        device_ids: vec!["odac.test/gpu=gpu0".into()],
        ..DeviceRequest::default()
    });
    // Engine 20.10: no CDI.
    let (id, words) = refused_at_start(&fake, &s).await;
    assert_eq!(
        words,
        "could not select device driver \"cdi\" with capabilities: []"
    );
    fake.remove(&id, true).await.unwrap();

    // A CDI-capable engine that does not know the device.
    let info = serde_json::json!({
        "ServerVersion": "28.2.2",
        "CDISpecDirs": ["/etc/cdi"],
        "DiscoveredDevices": [{"Source": "cdi", "ID": "odac.test/gpu=gpu1"}],
    });
    fake.set_capabilities(EngineCapabilities::from_info_json(
        &info,
        Some("1.50".into()),
    ));
    let (id, words) = refused_at_start(&fake, &s).await;
    assert_eq!(
        words,
        "CDI device injection failed: unresolvable CDI devices odac.test/gpu=gpu0"
    );
    fake.remove(&id, true).await.unwrap();

    // ... and one that does.
    s.device_requests[0].device_ids = vec!["odac.test/gpu=gpu1".into()];
    let id = fake.create(&s).await.unwrap();
    fake.start(&id).await.unwrap();
}

#[tokio::test]
async fn volumes_exits_logs_and_trait_objects() {
    let fake = Arc::new(fake());
    let engine: Arc<dyn ContainerEngine> = fake.clone();
    let labels = BTreeMap::from([("odac.app".to_owned(), "web".to_owned())]);
    engine.ensure_volume("models", &labels).await.unwrap();
    engine
        .ensure_volume("models", &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(
        fake.volumes().get("models"),
        Some(&labels),
        "an existing volume is kept"
    );
    engine.remove_volume("models").await.unwrap();
    assert!(
        engine
            .remove_volume("models")
            .await
            .unwrap_err()
            .is_not_found()
    );

    let id = engine.create(&spec("crash")).await.unwrap();
    engine.start(&id).await.unwrap();
    fake.push_log(&id, "a\nb\nc\n");
    fake.exit_container(&id, 3);
    let done = engine.inspect(&id).await.unwrap();
    assert_eq!((done.running, done.exit_code), (false, Some(3)));
    assert_eq!(done.status, ContainerState::Exited);
    assert!(done.finished_at.is_some());
    assert_eq!(engine.logs_tail(&id, 2).await.unwrap(), "b\nc\n");
}

#[tokio::test]
async fn busybox_image_helper_imports_once() {
    let fake = FakeEngine::new();
    if odac_host::engine::test_image::busybox_path().is_none() {
        assert!(
            ensure_busybox_image(&fake, BUSYBOX_TEST_IMAGE)
                .await
                .is_err()
        );
        assert!(
            std::env::var("ODAC_ALLOW_SKIP").as_deref() == Ok("1")
                && std::env::var("ODAC_REQUIRE_DOCKER").as_deref() != Ok("1"),
            "no static busybox on this host: apt-get install busybox-static, or set \
             ODAC_ALLOW_SKIP=1 to skip the rest of this test"
        );
        println!("skip rest: no static busybox on this host (ODAC_ALLOW_SKIP=1)");
        return;
    }
    assert!(
        ensure_busybox_image(&fake, BUSYBOX_TEST_IMAGE)
            .await
            .unwrap()
    );
    assert!(
        !ensure_busybox_image(&fake, BUSYBOX_TEST_IMAGE)
            .await
            .unwrap()
    );
    let imports = fake.calls_of(Op::ImportImage);
    assert_eq!(imports.len(), 1);
    let EngineCall::ImportImage {
        tag,
        bytes,
        changes,
    } = &imports[0]
    else {
        panic!("import not recorded");
    };
    assert_eq!(tag, BUSYBOX_TEST_IMAGE);
    assert!(*bytes > 500_000, "the tarball holds busybox: {bytes} bytes");
    assert!(changes.iter().any(|c| c.starts_with("CMD")));
}
