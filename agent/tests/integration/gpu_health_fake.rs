//! What an unhealthy GPU changes for apps, against the fake engine on fixture hosts: no new
//! container gets it (`gpu_unhealthy` naming the GPU and the Xid when nothing healthy is
//! left), an app already on it keeps running with `restart_required` and a warning, and at its
//! restart an optional app moves to the CPU while a required one says why it cannot start;
//! once the GPU is healthy again it is given out as before.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use odac_agent::appmgr::{AppManager, labels};
use odac_host::engine::{ContainerSpec, EngineCall, FakeEngine, Op};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, FallbackTier, Reason};

const IMAGE: &str = "odac/busybox:test";

use crate::fixture_hosts::host as fixture;

fn open(host: &str, dir: &Path) -> (Arc<FakeEngine>, AppManager) {
    let fake = crate::appmgr_support::engine_like(host);
    fake.add_image(IMAGE);
    let fake = Arc::new(fake);
    let config = crate::appmgr_support::fake_config(dir);
    let m = AppManager::open(config, fake.clone(), fixture(host)).unwrap();
    (fake, m)
}

fn app(name: &str, gpu: &str) -> AppSpec {
    let mut spec = AppSpec::new(name, IMAGE);
    spec.command = vec!["sleep".into(), "3600".into()];
    spec.gpu = Some(serde_json::from_str(gpu).unwrap());
    spec
}

fn status<'a>(statuses: &'a [AppStatus], name: &str) -> &'a AppStatus {
    statuses.iter().find(|s| s.name == name).unwrap()
}

fn unhealthy(gpu: &str, error: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(gpu.to_owned(), error.to_owned())])
}

/// Desires `apps` as `generation` and runs one pass; the statuses it reports.
async fn apply(m: &AppManager, generation: u64, apps: Vec<AppSpec>) -> Vec<AppStatus> {
    m.set_desired(DesiredState { generation, apps })
        .await
        .unwrap();
    m.reconcile_once().await
}

fn last_created(fake: &FakeEngine) -> ContainerSpec {
    match fake.calls_of(Op::Create).pop().unwrap() {
        EngineCall::Create(spec) => *spec,
        other => panic!("{other:?}"),
    }
}

const XID79: &str = "xid 79: GPU has fallen off the bus";

#[tokio::test]
async fn new_apps_avoid_an_unhealthy_gpu_and_name_it_when_nothing_else_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, m) = open("nvidia-dgx-8gpu", dir.path());
    m.offer_unhealthy_gpus(unhealthy(
        "0000:4e:00.0",
        "xid 48: double bit ECC error (DBE)",
    ));
    let apps = vec![
        app("seven", r#"{"runtime":"nvidia","count":7}"#),
        app("eight", r#"{"runtime":"nvidia","count":8}"#),
    ];
    let statuses = apply(&m, 1, apps).await;

    // seven healthy GPUs are left: every one of them, never GPU 3
    let seven = status(&statuses, "seven");
    assert_eq!(seven.state, AppState::Running, "{seven:?}");
    let gpus = labels::gpus(&last_created(&fake).labels);
    assert_eq!(gpus.len(), 7);
    assert!(!gpus.contains(&"0000:4e:00.0".to_owned()), "{gpus:?}");

    // eight cannot be served: refused, the GPU and its Xid named, nothing created
    let eight = status(&statuses, "eight");
    assert_eq!(eight.state, AppState::Failed);
    let fb = eight.gpu.fallback.as_ref().unwrap();
    assert_eq!(
        (fb.tier, fb.reason),
        (FallbackTier::Preflight, Reason::GpuUnhealthy)
    );
    let detail = fb.detail.as_deref().unwrap();
    assert!(detail.contains("gpu 3 0000:4e:00.0 (xid 48"), "{detail}");
    assert!(detail.contains("7 healthy gpu(s) left"), "{detail}");
    assert!(
        eight
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("gpu_unhealthy: ")
    );
    assert_eq!(fake.calls_of(Op::Create).len(), 1);
}

#[tokio::test]
async fn apps_on_an_unhealthy_gpu_are_warned_and_move_at_their_restart_until_it_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, m) = open("nvidia-toolkit-runtime", dir.path());
    let mut a = app("a", r#"{"runtime":"nvidia","count":1,"optional":true}"#);
    let mut r = app("r", r#"{"runtime":"nvidia","count":1}"#);
    let before = apply(&m, 1, vec![a.clone(), r.clone()]).await;
    assert!(
        before.iter().all(|s| s.state == AppState::Running),
        "{before:?}"
    );
    let held = labels::gpus(&last_created(&fake).labels);
    assert_eq!(held.len(), 1);
    let gpu = held[0].clone();

    // the only GPU falls off the bus: both keep running, both are told
    m.offer_unhealthy_gpus(unhealthy(&gpu, XID79));
    let warned = m.reconcile_once().await;
    for s in &warned {
        assert_eq!(s.state, AppState::Running, "{s:?}");
        assert!(s.restart_required, "{s:?}");
        let warning = s.last_error.as_deref().unwrap();
        assert!(
            warning.contains(&gpu) && warning.contains("xid 79"),
            "{warning}"
        );
    }
    assert_eq!(
        fake.calls_of(Op::Remove).len(),
        0,
        "nothing stopped on its own"
    );

    // restarted: the optional app moves to the CPU, the required one says why it cannot start
    a.restart_token = Some("1".into());
    r.restart_token = Some("1".into());
    let restarted = apply(&m, 2, vec![a.clone(), r.clone()]).await;
    let sa = status(&restarted, "a");
    assert_eq!(sa.state, AppState::Running, "{sa:?}");
    assert_eq!(sa.gpu.attached, None);
    let fb = sa.gpu.fallback.as_ref().unwrap();
    assert_eq!(fb.reason, Reason::GpuUnhealthy);
    assert!(fb.detail.as_deref().unwrap().contains(XID79));
    let sr = status(&restarted, "r");
    assert_eq!(sr.state, AppState::Failed, "{sr:?}");
    let fb = sr.gpu.fallback.as_ref().unwrap();
    assert_eq!(fb.reason, Reason::GpuUnhealthy);
    assert!(fb.detail.as_deref().unwrap().contains(&gpu));

    // recovered: the required app starts on its GPU without being asked again
    m.offer_unhealthy_gpus(BTreeMap::new());
    let recovered = m.reconcile_once().await;
    let sr = status(&recovered, "r");
    assert_eq!(sr.state, AppState::Running, "{sr:?}");
    assert_eq!(labels::gpus(&last_created(&fake).labels), vec![gpu.clone()]);
    // the optional one on the CPU is told the GPU is back
    assert!(status(&recovered, "a").restart_required);
}
