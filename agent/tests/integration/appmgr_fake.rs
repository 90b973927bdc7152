//! The app manager against the fake engine: pre-flight fallback and refusal, the exact engine
//! requests per mechanism, engine refusals at start, errors that are not device refusals,
//! restart-required, ownership by labels, durable desired state, engine outage, policy, named
//! volumes, the crash-loop backoff counted over 30 s of paused time, and the hardening every
//! container gets (`no-new-privileges`, a pids limit).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::state::store;
use odac_agent::appmgr::{AppManager, HostSource, labels};
use odac_host::engine::{
    ContainerEngine, ContainerSpec, DeviceRequest, EngineCall, EngineError, FakeEngine, Op,
};
use odac_protocol::{
    AppSpec, AppState, DesiredState, FallbackTier, GpuRequest, Mechanism, Reason, Vendor,
    VolumeMount,
};

const IMAGE: &str = "odac/busybox:test";

use crate::fixture_hosts::host as fixture;

/// A fake engine like the fixture host's own (`engine_like`), holding the test image.
fn fake_for(host: &str) -> Arc<FakeEngine> {
    let fake = engine_like(host);
    fake.add_image(IMAGE);
    Arc::new(fake)
}

use crate::appmgr_support::fake_config as config;

fn open(fake: &Arc<FakeEngine>, host: &str, dir: &Path) -> AppManager {
    AppManager::open(config(dir), fake.clone(), fixture(host)).unwrap()
}

fn gpu(json: &str) -> Option<GpuRequest> {
    Some(serde_json::from_str(json).unwrap())
}

fn app(name: &str, gpu_json: Option<&str>) -> AppSpec {
    let mut spec = AppSpec::new(name, IMAGE);
    spec.command = vec!["sleep".into(), "3600".into()];
    spec.gpu = gpu_json.and_then(gpu);
    spec
}

use crate::appmgr_support::desired;

use crate::appmgr_support::status;

use crate::appmgr_support::{created_specs, engine_like};

#[tokio::test]
async fn optional_gpu_on_a_host_without_gpu_runs_on_the_cpu_with_a_preflight_reason() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    let intent = r#"{"runtime":"nvidia","count":1,"optional":true}"#;
    m.set_desired(desired(1, vec![app("llm", Some(intent))]))
        .await
        .unwrap();
    let statuses = m.reconcile_once().await;
    let s = status(&statuses, "llm");
    assert_eq!(s.state, AppState::Running);
    let fb = s.gpu.fallback.as_ref().unwrap();
    assert_eq!(
        (fb.tier, fb.reason),
        (FallbackTier::Preflight, Reason::NoDevice)
    );
    assert_eq!(s.gpu.attached, None);
    assert_eq!(
        s.gpu.requested,
        gpu(intent),
        "requested is the intent as sent"
    );
    let specs = created_specs(&fake);
    assert_eq!(specs.len(), 1);
    assert!(specs[0].device_requests.is_empty() && specs[0].devices.is_empty());
    assert!(specs[0].group_add.is_empty());
}

#[tokio::test]
async fn required_gpu_without_gpu_fails_without_creating_or_churning() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    m.set_desired(desired(
        1,
        vec![app("llm", Some(r#"{"runtime":"nvidia"}"#))],
    ))
    .await
    .unwrap();
    let first = m.reconcile_once().await;
    for _ in 0..5 {
        assert_eq!(m.reconcile_once().await, first, "statuses are stable");
    }
    let s = status(&first, "llm");
    assert_eq!(s.state, AppState::Failed);
    assert_eq!(s.container_id, None);
    let fb = s.gpu.fallback.as_ref().unwrap();
    assert_eq!(
        (fb.tier, fb.reason),
        (FallbackTier::Preflight, Reason::NoDevice)
    );
    assert!(s.last_error.as_deref().unwrap().starts_with("no_device: "));
    assert!(fake.calls_of(Op::Create).is_empty());
    assert!(fake.calls_of(Op::Remove).is_empty());
}

#[tokio::test]
async fn cdi_request_is_exact_and_attached_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("nvidia-cdi");
    let m = open(&fake, "nvidia-cdi", dir.path());
    m.set_desired(desired(
        1,
        vec![app("llm", Some(r#"{"runtime":"nvidia","count":1}"#))],
    ))
    .await
    .unwrap();
    let statuses = m.reconcile_once().await;
    let specs = created_specs(&fake);
    assert_eq!(specs.len(), 1);
    assert_eq!(
        specs[0].device_requests,
        vec![DeviceRequest {
            driver: "cdi".into(),
            count: None,
            device_ids: vec!["example.com/device=0".into()],
            capabilities: vec![],
            options: Default::default(),
        }]
    );
    assert!(specs[0].devices.is_empty());
    let s = status(&statuses, "llm");
    assert_eq!(s.state, AppState::Running);
    let a = s.gpu.attached.as_ref().unwrap();
    assert_eq!(a.mechanism, Mechanism::Cdi);
    assert_eq!(a.devices, vec!["example.com/device=0"]);
    assert_eq!(
        a.vendor,
        Vendor::Nvidia,
        "the vendor recorded for a non-vendor cdi kind"
    );
    assert!(
        !fake.calls_of(Op::Inspect).is_empty(),
        "attached comes from inspect"
    );
}

#[tokio::test]
async fn nvidia_runtime_request_uses_explicit_ids_and_gpu_capability() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("nvidia-dgx-8gpu");
    let m = open(&fake, "nvidia-dgx-8gpu", dir.path());
    m.set_desired(desired(
        1,
        vec![app("llm", Some(r#"{"runtime":"nvidia","count":2}"#))],
    ))
    .await
    .unwrap();
    let s = m.reconcile_once().await.remove(0);
    let spec = &created_specs(&fake)[0];
    let r = &spec.device_requests[0];
    assert_eq!(r.driver, "nvidia");
    assert_eq!(r.count, None);
    assert_eq!(r.device_ids.len(), 2);
    // the toolkit's default set, asked for explicitly
    assert_eq!(r.capabilities, vec![vec!["gpu", "compute", "utility"]]);
    assert_eq!(s.state, AppState::Running, "{s:?}");
    assert_eq!(s.gpu.attached.unwrap().devices, r.device_ids);
    assert_eq!(labels::gpus(&spec.labels).len(), 2);
}

#[tokio::test]
async fn engine_refusal_at_start_falls_back_to_one_cpu_container() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("intel-i915-igpu");
    fake.mark_device_missing("/dev/dri/card1");
    let m = open(&fake, "intel-i915-igpu", dir.path());
    m.set_desired(desired(
        1,
        vec![app("vid", Some(r#"{"runtime":"intel","optional":true}"#))],
    ))
    .await
    .unwrap();
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Running);
    let fb = s.gpu.fallback.clone().unwrap();
    assert_eq!(
        (fb.tier, fb.reason),
        (FallbackTier::Engine, Reason::EngineRejected)
    );
    assert!(
        fb.detail.as_deref().unwrap().starts_with(
            "error gathering device information while adding custom device \"/dev/dri/card1\""
        ),
        "{fb:?}"
    );
    assert_eq!(s.gpu.attached, None);
    assert_eq!(fake.container_ids().len(), 1, "exactly one container");
    let specs = created_specs(&fake);
    assert_eq!(specs.len(), 2);
    assert_eq!(
        specs[0].devices.len(),
        2,
        "first try with card1 and renderD129"
    );
    assert!(specs[1].devices.is_empty() && specs[1].group_add.is_empty());
    // The next passes keep that container and the recorded fallback.
    let again = m.reconcile_once().await.remove(0);
    assert_eq!(again.gpu.fallback, Some(fb));
    assert_eq!(again.container_id, s.container_id);
    assert_eq!(created_specs(&fake).len(), 2);
}

#[tokio::test]
async fn engine_refusal_at_create_and_required_intents() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("intel-i915-igpu");
    let words = "unknown or invalid runtime name: nvidia";
    fake.fail_next(
        Op::Create,
        EngineError::Rejected {
            status: 400,
            message: words.into(),
        },
    );
    let m = open(&fake, "intel-i915-igpu", dir.path());
    m.set_desired(desired(
        1,
        vec![app("opt", Some(r#"{"runtime":"intel","optional":true}"#))],
    ))
    .await
    .unwrap();
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Running);
    assert_eq!(s.gpu.fallback.unwrap().detail.as_deref(), Some(words));
    assert_eq!(fake.container_ids().len(), 1);

    // Required: failed with the engine's words, nothing left, no churn.
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("intel-i915-igpu");
    fake.mark_device_missing("/dev/dri/renderD129");
    let m = open(&fake, "intel-i915-igpu", dir.path());
    m.set_desired(desired(1, vec![app("req", Some(r#"{"runtime":"intel"}"#))]))
        .await
        .unwrap();
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Failed);
    let fb = s.gpu.fallback.clone().unwrap();
    assert_eq!(
        (fb.tier, fb.reason),
        (FallbackTier::Engine, Reason::EngineRejected)
    );
    assert!(s.last_error.as_deref().unwrap().contains("renderD129"));
    assert!(fake.container_ids().is_empty());
    for _ in 0..3 {
        m.reconcile_once().await;
    }
    assert_eq!(fake.calls_of(Op::Create).len(), 1, "held, not retried");
}

#[tokio::test]
async fn errors_that_are_not_device_refusals_are_never_taken_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("intel-i915-igpu");
    let busy = "driver failed programming external connectivity on endpoint odac-web: Bind for 0.0.0.0:8080 failed: port is already allocated";
    fake.fail_next(
        Op::Start,
        EngineError::Rejected {
            status: 500,
            message: busy.into(),
        },
    );
    let m = open(&fake, "intel-i915-igpu", dir.path());
    m.set_desired(desired(
        1,
        vec![app("web", Some(r#"{"runtime":"intel","optional":true}"#))],
    ))
    .await
    .unwrap();
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Failed);
    assert_eq!(s.last_error.as_deref(), Some(busy));
    assert_eq!(s.gpu.fallback, None, "not an engine refusal of the device");
    assert_eq!(fake.calls_of(Op::Create).len(), 1, "no cpu retry");
    assert!(fake.calls_of(Op::Remove).is_empty());

    // A missing image that may not be pulled is a pull failure, not a device refusal.
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    let mut spec = app("gone", Some(r#"{"runtime":"nvidia","optional":true}"#));
    spec.image = Some("odac/missing:1".into());
    spec.pull = odac_protocol::PullPolicy::Never;
    m.set_desired(desired(1, vec![spec])).await.unwrap();
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Failed);
    let error = s.last_error.as_deref().unwrap();
    assert!(error.starts_with("image_pull_failed: "), "{error}");
    assert!(error.contains("odac/missing:1"), "{error}");
    let failure = s.image_failure.unwrap();
    assert_eq!(failure.reason, odac_protocol::Reason::ImagePullFailed);
    assert_eq!(s.gpu.fallback, None, "a pull is no GPU decision");
    assert!(fake.calls_of(Op::Create).is_empty(), "nothing created");
    assert!(fake.calls_of(Op::PullImage).is_empty(), "never pulled");
}

#[tokio::test(start_paused = true)]
async fn failed_start_is_retried_after_the_backoff_and_then_runs() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    fake.fail_next(
        Op::Start,
        EngineError::Rejected {
            status: 500,
            message: "Bind for 0.0.0.0:8080 failed: port is already allocated".into(),
        },
    );
    let m = open(&fake, "no-gpu", dir.path());
    m.set_desired(desired(1, vec![app("web", None)]))
        .await
        .unwrap();
    assert_eq!(m.reconcile_once().await[0].state, AppState::Failed);
    assert_eq!(m.reconcile_once().await[0].state, AppState::Failed, "waits");
    assert_eq!(fake.calls_of(Op::Start).len(), 1);
    tokio::time::advance(Duration::from_millis(1100)).await;
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Running, "{s:?}");
    assert_eq!(fake.calls_of(Op::Start).len(), 2);
    assert_eq!(
        fake.calls_of(Op::Create).len(),
        1,
        "the same container is started"
    );
}

#[tokio::test]
async fn gpu_intent_change_waits_for_a_restart_token() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("amd-kfd-mi210-8gpu");
    let m = open(&fake, "amd-kfd-mi210-8gpu", dir.path());
    let mut spec = app("llm", Some(r#"{"runtime":"rocm","count":1}"#));
    m.set_desired(desired(1, vec![spec.clone()])).await.unwrap();
    let first = m.reconcile_once().await.remove(0);
    assert_eq!(first.gpu.attached.as_ref().unwrap().devices.len(), 2);
    spec.gpu = gpu(r#"{"runtime":"rocm","count":2}"#);
    m.set_desired(desired(2, vec![spec.clone()])).await.unwrap();
    let changed = m.reconcile_once().await.remove(0);
    assert!(changed.restart_required);
    assert_eq!(
        changed.container_id, first.container_id,
        "container untouched"
    );
    assert_eq!(changed.gpu.attached, first.gpu.attached);
    assert_eq!(changed.gpu.requested, spec.gpu);
    assert_eq!(fake.calls_of(Op::Create).len(), 1);
    assert!(fake.calls_of(Op::Remove).is_empty());

    spec.restart_token = Some("2026-01-01T00:00:00Z".into());
    m.set_desired(desired(3, vec![spec.clone()])).await.unwrap();
    let restarted = m.reconcile_once().await.remove(0);
    assert!(!restarted.restart_required);
    assert_ne!(restarted.container_id, first.container_id);
    assert_eq!(
        restarted.gpu.attached.unwrap().devices.len(),
        3,
        "kfd + two render nodes"
    );
    assert_eq!(fake.container_ids().len(), 1);
    // The same token again does nothing.
    m.set_desired(desired(4, vec![spec])).await.unwrap();
    m.reconcile_once().await;
    assert_eq!(fake.calls_of(Op::Create).len(), 2);
}

#[tokio::test]
async fn only_labelled_containers_of_this_instance_are_touched() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let stranger = fake
        .create(&ContainerSpec {
            name: "someone-else".into(),
            image: IMAGE.into(),
            ..ContainerSpec::default()
        })
        .await
        .unwrap();
    let other_agent = fake
        .create(&ContainerSpec {
            name: "other-web".into(),
            image: IMAGE.into(),
            labels: [
                (odac_host::names::INSTANCE.to_owned(), "other".to_owned()),
                (odac_host::names::APP.to_owned(), "web".to_owned()),
            ]
            .into(),
            ..ContainerSpec::default()
        })
        .await
        .unwrap();
    let m = open(&fake, "no-gpu", dir.path());
    m.set_desired(desired(1, vec![app("web", None), app("db", None)]))
        .await
        .unwrap();
    let statuses = m.reconcile_once().await;
    assert_eq!(statuses.len(), 2);
    assert_eq!(fake.container_ids().len(), 4);
    m.set_desired(desired(2, vec![app("db", None)]))
        .await
        .unwrap();
    let statuses = m.reconcile_once().await;
    assert_eq!(statuses.len(), 1);
    let ids = fake.container_ids();
    assert_eq!(ids.len(), 3, "web removed");
    assert!(ids.contains(&stranger) && ids.contains(&other_agent));
    assert_eq!(m.statuses().len(), 1);
}

#[tokio::test]
async fn agent_restart_keeps_containers_and_rebuilds_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("amd-kfd-mi210-8gpu");
    let a_gpus = {
        let m = open(&fake, "amd-kfd-mi210-8gpu", dir.path());
        m.set_desired(desired(
            5,
            vec![app("a", Some(r#"{"runtime":"rocm","count":1}"#))],
        ))
        .await
        .unwrap();
        let s = m.reconcile_once().await.remove(0);
        s.gpu.attached.unwrap().devices
    };
    let creates = fake.calls_of(Op::Create).len();
    let m = open(&fake, "amd-kfd-mi210-8gpu", dir.path());
    assert_eq!(m.generation(), Some(5), "desired state loaded from disk");
    assert_eq!(m.statuses().len(), 1, "statuses loaded from disk");
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Running);
    assert_eq!(
        fake.calls_of(Op::Create).len(),
        creates,
        "nothing recreated"
    );
    m.upsert(6, app("b", Some(r#"{"runtime":"rocm","count":1}"#)))
        .await
        .unwrap();
    let statuses = m.reconcile_once().await;
    let b = status(&statuses, "b").gpu.attached.clone().unwrap().devices;
    assert_ne!(
        a_gpus, b,
        "b gets another gpu than a, known from a's labels"
    );
    assert_eq!(
        status(&statuses, "a")
            .gpu
            .attached
            .as_ref()
            .unwrap()
            .devices,
        a_gpus
    );
}

#[tokio::test]
async fn two_count_one_apps_get_different_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("nvidia-dgx-8gpu");
    let m = open(&fake, "nvidia-dgx-8gpu", dir.path());
    let g = Some(r#"{"runtime":"nvidia","count":1}"#);
    m.set_desired(desired(1, vec![app("a", g), app("b", g)]))
        .await
        .unwrap();
    let statuses = m.reconcile_once().await;
    let a = status(&statuses, "a").gpu.attached.clone().unwrap();
    let b = status(&statuses, "b").gpu.attached.clone().unwrap();
    assert_eq!((a.devices.len(), b.devices.len()), (1, 1));
    assert_ne!(a.devices, b.devices);
}

#[tokio::test]
async fn engine_outage_keeps_statuses_and_converges() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    m.set_desired(desired(1, vec![app("web", None)]))
        .await
        .unwrap();
    let before = m.reconcile_once().await.remove(0);
    assert_eq!(before.state, AppState::Running);
    fake.set_unavailable(true);
    let mut events = m.subscribe();
    m.upsert(2, app("db", None)).await.unwrap();
    let statuses = m.reconcile_once().await;
    let web = status(&statuses, "web");
    assert_eq!(web.state, AppState::Running, "last state kept");
    assert_eq!(web.container_id, before.container_id);
    assert!(
        web.last_error
            .as_deref()
            .unwrap()
            .starts_with("engine_unavailable: ")
    );
    assert_eq!(status(&statuses, "db").state, AppState::Pending);
    assert!(m.engine_problem().is_some());
    let ev = events.try_recv().unwrap();
    assert!(
        ev.last_error
            .as_deref()
            .unwrap()
            .starts_with("engine_unavailable")
    );
    fake.set_unavailable(false);
    let statuses = m.reconcile_once().await;
    assert!(
        statuses
            .iter()
            .all(|s| s.state == AppState::Running && s.last_error.is_none())
    );
    assert_eq!(m.engine_problem(), None);
    assert_eq!(fake.container_ids().len(), 2);
}

#[tokio::test]
async fn desired_state_is_validated_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    m.set_desired(desired(3, vec![app("web", None)]))
        .await
        .unwrap();
    let on_disk: DesiredState =
        serde_json::from_slice(&std::fs::read(dir.path().join(store::DESIRED_FILE)).unwrap())
            .unwrap();
    assert_eq!(
        on_disk.generation, 3,
        "persisted before set_desired returned"
    );
    let bad = desired(4, vec![app("web", None), app("web", None)]);
    let err = m.set_desired(bad).await.unwrap_err().to_string();
    assert!(err.contains("apps[1].name: duplicate app name"), "{err}");
    assert_eq!(m.generation(), Some(3));
    assert_eq!(m.desired().unwrap().apps.len(), 1);
    m.upsert(4, app("db", None)).await.unwrap();
    m.delete(5, "web").await.unwrap();
    assert_eq!(crate::appmgr_generations::names(&m), vec!["db"]);
}

#[tokio::test]
async fn corrupt_state_file_is_moved_aside_and_the_agent_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(store::DESIRED_FILE), b"{not json").unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    assert_eq!(m.generation(), None);
    let problems = m.problems();
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].contains("desired.json is corrupt"),
        "{problems:?}"
    );
    let moved = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("desired.json.corrupt-")
        })
        .count();
    assert_eq!(moved, 1);
    m.set_desired(desired(1, vec![app("web", None)]))
        .await
        .unwrap();
    assert_eq!(m.reconcile_once().await[0].state, AppState::Running);
}

#[tokio::test]
async fn policy_denies_host_binds_and_named_volumes_survive_recreation() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    let mut bad = app("bad", None);
    bad.volumes.push(VolumeMount {
        source: "/etc".into(),
        target: "/host-etc".into(),
        read_only: true,
    });
    let mut good = app("good", None);
    good.volumes.push(VolumeMount {
        source: "models".into(),
        target: "/models".into(),
        read_only: false,
    });
    m.set_desired(desired(1, vec![bad, good.clone()]))
        .await
        .unwrap();
    let statuses = m.reconcile_once().await;
    let s = status(&statuses, "bad");
    assert_eq!(s.state, AppState::Failed);
    assert_eq!(
        s.gpu.fallback.as_ref().unwrap().reason,
        Reason::PolicyDenied
    );
    assert!(
        s.last_error
            .as_deref()
            .unwrap()
            .starts_with("policy_denied: volumes[0].source: host bind mount of \"/etc\""),
        "{s:?}"
    );
    let specs = created_specs(&fake);
    assert_eq!(specs.len(), 1, "nothing created for the denied app");
    assert_eq!(specs[0].binds[0].source, "odac_good_models");
    assert!(fake.volumes().contains_key("odac_good_models"));
    good.restart_token = Some("1".into());
    m.set_desired(desired(2, vec![good])).await.unwrap();
    m.reconcile_once().await;
    assert_eq!(created_specs(&fake).len(), 2);
    assert!(fake.calls_of(Op::RemoveVolume).is_empty());
    assert!(fake.volumes().contains_key("odac_good_models"));
}

/// Count the restarts of an app that exits at once, over 30 s of (paused) time.
#[tokio::test(start_paused = true)]
async fn crash_loop_backoff_counted_over_thirty_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    m.set_desired(desired(1, vec![app("crash", None)]))
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    let mut starts: Vec<Duration> = Vec::new();
    let mut last = None;
    let step = Duration::from_millis(100);
    while start.elapsed() < Duration::from_secs(30) {
        // The process dies as soon as it runs.
        for id in fake.container_ids() {
            if fake.inspect(&id).await.unwrap().running {
                fake.exit_container(&id, 3);
            }
        }
        let n = fake.calls_of(Op::Start).len();
        let s = m.reconcile_once().await.remove(0);
        if fake.calls_of(Op::Start).len() > n {
            starts.push(start.elapsed());
        }
        last = Some(s);
        tokio::time::advance(step).await;
    }
    let s = last.unwrap();
    // Created at t=0, then restarts after 1, 2, 4, 8 s of backoff (the next, 16 s, is
    // past the 30 s window).
    assert_eq!(starts.len(), 5, "{starts:?}");
    let gaps: Vec<f64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    for (gap, want) in gaps.iter().zip([1.0, 2.0, 4.0, 8.0]) {
        assert!(
            (gap - want).abs() <= 0.25,
            "gap {gap} s, expected about {want} s: {starts:?}"
        );
    }
    assert_eq!(s.state, AppState::CrashLoop);
    assert_eq!(s.restart_count, 4);
    assert_eq!(s.last_exit_code, Some(3));
    assert_eq!(
        fake.calls_of(Op::Create).len(),
        1,
        "restarted, not recreated"
    );
}

#[tokio::test(start_paused = true)]
async fn run_loop_restarts_on_schedule_and_stops_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    let m = open(&fake, "no-gpu", dir.path());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    m.set_desired(desired(1, vec![app("web", None)]))
        .await
        .unwrap();
    let mut events = m.subscribe();
    let running = loop {
        let s = events.recv().await.unwrap();
        if s.state == AppState::Running {
            break s;
        }
    };
    let id = running.container_id.clone().unwrap();
    fake.exit_container(&id, 1);
    // Seen at the next poll, restarted one second later.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(fake.inspect(&id).await.unwrap().running);
    assert_eq!(m.statuses()[0].restart_count, 1);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_gpu_that_appears_later_sets_restart_required() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("intel-i915-igpu");
    let with_gpu = odac_host::inventory::scan(&fixture("intel-i915-igpu"));
    let mut without_gpu = with_gpu.clone();
    without_gpu.gpus.clear();
    let current = Arc::new(std::sync::Mutex::new(without_gpu));
    let seen = current.clone();
    let host = HostSource::Fixed(Arc::new(move || seen.lock().unwrap().clone()));
    let m = AppManager::open_with_host(config(dir.path()), fake.clone(), host).unwrap();
    let mut spec = app("vid", Some(r#"{"runtime":"intel","optional":true}"#));
    m.set_desired(desired(1, vec![spec.clone()])).await.unwrap();
    let cpu = m.reconcile_once().await.remove(0);
    assert_eq!(cpu.gpu.fallback.as_ref().unwrap().reason, Reason::NoDevice);
    assert!(!cpu.restart_required);
    *current.lock().unwrap() = with_gpu;
    let later = m.reconcile_once().await.remove(0);
    assert!(later.restart_required, "the gpu is there now: {later:?}");
    assert_eq!(later.container_id, cpu.container_id, "container untouched");
    spec.restart_token = Some("1".into());
    m.set_desired(desired(2, vec![spec])).await.unwrap();
    let gpu_now = m.reconcile_once().await.remove(0);
    assert!(!gpu_now.restart_required);
    assert_eq!(gpu_now.gpu.fallback, None);
    assert_eq!(
        gpu_now.gpu.attached.unwrap().devices,
        vec!["/dev/dri/card1", "/dev/dri/renderD129"]
    );
}

#[tokio::test]
async fn without_a_desired_state_running_containers_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    {
        let m = open(&fake, "no-gpu", dir.path());
        m.set_desired(desired(1, vec![app("web", None)]))
            .await
            .unwrap();
        m.reconcile_once().await;
    }
    std::fs::write(dir.path().join(store::DESIRED_FILE), b"garbage").unwrap();
    let m = open(&fake, "no-gpu", dir.path());
    assert_eq!(m.generation(), None);
    assert!(m.reconcile_once().await.is_empty());
    assert_eq!(fake.container_ids().len(), 1, "not removed");
    assert!(fake.calls_of(Op::Remove).is_empty());
    m.set_desired(desired(2, vec![])).await.unwrap();
    m.reconcile_once().await;
    assert!(
        fake.container_ids().is_empty(),
        "an explicit empty state removes it"
    );
}

/// A plain poll tick costs one engine call, the listing: the engine's capabilities and the
/// host scan are read again only every 15 s, a container only when the listing shows it
/// changed, and a new desired state reads everything afresh. (The poll runs while the
/// engine's event stream is down, as here: `engine_events_fake.rs` covers the stream.)
#[tokio::test(start_paused = true)]
async fn quiet_poll_ticks_list_once_and_inspect_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("no-gpu");
    fake.refuse_events(u32::MAX);
    let m = open(&fake, "no-gpu", dir.path());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    let apps = vec![app("api", None), app("web", None)];
    m.set_desired(desired(1, apps.clone())).await.unwrap();
    let mut events = m.subscribe();
    while m
        .statuses()
        .iter()
        .filter(|s| s.state == AppState::Running)
        .count()
        < 2
    {
        events.recv().await.unwrap();
    }
    let ids: Vec<String> = m
        .statuses()
        .iter()
        .map(|s| s.container_id.clone().unwrap())
        .collect();
    let count = |op: Op| fake.calls_of(op).len();

    // ticks at 2, 4, … 14 s after the pass that started both apps: listings only
    fake.clear_calls();
    tokio::time::sleep(Duration::from_secs(15)).await;
    let ops: Vec<Op> = fake.calls().iter().map(EngineCall::op).collect();
    assert_eq!(ops, vec![Op::ListByLabel; 7], "{:?}", fake.calls());

    // the tick at 16 s reads the engine's capabilities again, still without inspecting
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(count(Op::Capabilities), 1, "{:?}", fake.calls());
    assert_eq!(count(Op::Inspect), 0, "{:?}", fake.calls());

    // facts offered by the agent's inventory loop (at 25 s) keep the tick at 32 s from
    // reading them again
    let offered = odac_host::inventory::Assessment::new(
        odac_host::inventory::scan(&fixture("no-gpu")),
        fake.capabilities().await,
    );
    fake.clear_calls();
    tokio::time::sleep(Duration::from_secs(8)).await;
    m.offer_facts(offered);
    tokio::time::sleep(Duration::from_secs(8)).await;
    let ops: Vec<Op> = fake.calls().iter().map(EngineCall::op).collect();
    assert_eq!(ops, vec![Op::ListByLabel; 8], "{:?}", fake.calls());

    // a container that exited is inspected (exit code) and restarted; the other is not
    fake.clear_calls();
    fake.exit_container(&ids[1], 3);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let inspected: Vec<EngineCall> = fake.calls_of(Op::Inspect);
    assert!(
        !inspected.is_empty()
            && inspected
                .iter()
                .all(|c| *c == EngineCall::Inspect(ids[1].clone())),
        "{inspected:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let web = status(&m.statuses(), "web").clone();
    assert_eq!(
        (web.state, web.restart_count, web.last_exit_code),
        (AppState::Running, 1, Some(3)),
        "{web:?}"
    );

    // a new desired state (between two ticks) is not quiet: capabilities and every
    // container are read again
    tokio::time::sleep(Duration::from_millis(500)).await;
    fake.clear_calls();
    m.set_desired(desired(2, apps)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(count(Op::Capabilities), 1, "{:?}", fake.calls());
    let mut inspected: Vec<EngineCall> = fake.calls_of(Op::Inspect);
    inspected.sort_by_key(|c| format!("{c:?}"));
    let mut want: Vec<EngineCall> = ids.iter().cloned().map(EngineCall::Inspect).collect();
    want.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(inspected, want);
    shutdown.cancel();
    task.await.unwrap();
}

/// Every container, with or without a GPU, is created with `no-new-privileges` and the
/// configured pids limit (4096 by default).
#[tokio::test]
async fn every_container_gets_no_new_privileges_and_a_pids_limit() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_for("nvidia-cdi");
    let m = open(&fake, "nvidia-cdi", dir.path());
    m.set_desired(desired(
        1,
        vec![
            app("cpu", None),
            app("llm", Some(r#"{"runtime":"nvidia","count":1}"#)),
        ],
    ))
    .await
    .unwrap();
    let statuses = m.reconcile_once().await;
    assert_eq!(status(&statuses, "cpu").state, AppState::Running);
    assert_eq!(status(&statuses, "llm").state, AppState::Running);
    let specs = created_specs(&fake);
    assert_eq!(specs.len(), 2, "{specs:?}");
    for spec in &specs {
        assert_eq!(
            spec.security_opt,
            vec!["no-new-privileges".to_owned()],
            "{spec:?}"
        );
        assert_eq!(spec.pids_limit, Some(4096), "{spec:?}");
    }
}
