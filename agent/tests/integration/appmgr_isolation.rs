//! One app's bad request never blocks its host: an engine answer about one app (a 4xx such as
//! "invalid reference format", or a 5xx of an engine that still answers its ping) fails that
//! app alone, with its own message and its own retry, while the other apps start in the same
//! pass and no status says the engine is unavailable. Against the fake engine and against the
//! real one (an image whose digest algorithm the engine does not support: a 400 the reference
//! grammar lets through).

use crate::docker_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use docker_support::{engine_with_test_image, then_clean_up, unique_suffix};
use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{ContainerEngine, EngineError, FakeEngine, Op};
use odac_protocol::{AppState, AppStatus, DesiredState, Reason};

const IMAGE: &str = "odac/busybox:test";

use crate::fixture_hosts::no_gpu as fixture;

use crate::appmgr_support::{open_fake, sleeper};

use crate::appmgr_support::status;

/// The bad app failed with its own words; the good ones run; nobody is `engine_unavailable`.
fn assert_isolated(manager: &AppManager, statuses: &[AppStatus], bad: &str, words: &str) {
    let b = status(statuses, bad);
    assert_eq!(b.state, AppState::Failed, "{b:?}");
    let error = b.last_error.as_deref().unwrap_or_default();
    assert!(error.contains(words), "{error}");
    assert!(error.contains("this app's request"), "{error}");
    for good in statuses.iter().filter(|s| s.name != bad) {
        assert_eq!(good.state, AppState::Running, "{good:?}");
        assert_eq!(good.last_error, None, "{good:?}");
    }
    for s in statuses {
        let error = s.last_error.as_deref().unwrap_or_default();
        assert!(
            !error.starts_with(Reason::EngineUnavailable.as_str()),
            "{s:?}"
        );
    }
    assert_eq!(manager.engine_problem(), None);
}

/// A manager on a fake engine with the test image, its state in `dir`, and the desired state
/// (generation 1) of one sleeper app per name.
async fn sleepers(names: &[&str], dir: &Path) -> (Arc<FakeEngine>, AppManager) {
    let fake = crate::appmgr_support::fake_with_images(&[IMAGE]);
    let manager = open_fake(&fake, dir);
    let apps = names.iter().map(|n| sleeper(n, IMAGE)).collect();
    manager
        .set_desired(crate::appmgr_support::desired(1, apps))
        .await
        .unwrap();
    (fake, manager)
}

#[tokio::test]
async fn a_4xx_about_one_app_fails_that_app_alone_and_the_others_start_in_the_same_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, manager) = sleepers(&["a-bad", "b-web", "c-web"], dir.path()).await;
    // the first image check is the first app's (apps go by name)
    fake.fail_next(
        Op::ImageExists,
        EngineError::Rejected {
            status: 400,
            message: "invalid reference format: repository name must be lowercase".into(),
        },
    );
    let statuses = manager.reconcile_once().await;
    assert_isolated(
        &manager,
        &statuses,
        "a-bad",
        "(http 400): invalid reference format",
    );
    assert_eq!(fake.container_ids().len(), 2);
    // its own retry: after the backoff the engine is asked again, and it starts
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let statuses = manager.reconcile_once().await;
    assert_eq!(
        status(&statuses, "a-bad").state,
        AppState::Running,
        "{statuses:?}"
    );
}

#[tokio::test]
async fn a_malformed_image_reference_from_any_control_plane_fails_that_app_alone() {
    // a control plane that does not check the grammar sends it: the frame is taken, the app is
    // refused by the agent's own check before the engine is asked, the others start
    let frame = format!(
        r#"{{"type":"desired_state","seq":1,"generation":1,"apps":[{{"name":"a-bad","image":"BusyBox:1.36"}},{{"name":"b-web","image":"{IMAGE}","command":["sleep","3600"]}}]}}"#
    );
    let desired = match odac_protocol::decode_control(frame.as_bytes()).unwrap() {
        odac_protocol::ControlMessage::DesiredState(m) => m,
        other => panic!("{other:?}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&[IMAGE]);
    let manager = open_fake(&fake, dir.path());
    manager
        .set_desired(DesiredState {
            generation: desired.generation,
            apps: desired.apps,
        })
        .await
        .unwrap();
    let statuses = manager.reconcile_once().await;
    let bad = status(&statuses, "a-bad");
    assert_eq!(bad.state, AppState::Failed, "{bad:?}");
    let error = bad.last_error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with(Reason::PolicyDenied.as_str()) && error.contains("image"),
        "{error}"
    );
    assert!(error.contains("BusyBox:1.36"), "{error}");
    assert_eq!(status(&statuses, "b-web").state, AppState::Running);
    assert_eq!(fake.container_ids().len(), 1);
    assert_eq!(manager.engine_problem(), None);
}

#[tokio::test]
async fn a_5xx_of_an_engine_that_still_answers_is_the_app_s_failure_not_an_outage() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, manager) = sleepers(&["a-bad", "b-web"], dir.path()).await;
    fake.fail_next(
        Op::ImageExists,
        EngineError::Rejected {
            status: 500,
            message: "layer does not exist".into(),
        },
    );
    let statuses = manager.reconcile_once().await;
    assert_isolated(
        &manager,
        &statuses,
        "a-bad",
        "(http 500): layer does not exist",
    );
    // an unreachable engine is still an outage for every app
    fake.set_unavailable(true);
    let statuses = manager.reconcile_once().await;
    assert!(manager.engine_problem().is_some());
    for s in &statuses {
        let error = s.last_error.as_deref().unwrap_or_default();
        assert!(error.starts_with("engine_unavailable: "), "{s:?}");
    }
}

#[tokio::test]
async fn on_the_real_engine_an_image_the_engine_refuses_blocks_no_other_app() {
    let test = "isolation-real";
    let Some(real) = engine_with_test_image(test).await else {
        return;
    };
    let real = Arc::new(real);
    let run = format!("{}-{test}", unique_suffix());
    let tmp = tempfile::tempdir().unwrap();
    let config = AppManagerConfig {
        state_dir: tmp.path().to_path_buf(),
        instance: format!("odac-t{run}"),
        stop_timeout_secs: 0,
        extra_labels: BTreeMap::from([
            ("odac.test".to_owned(), "1".to_owned()),
            ("odac.test.run".to_owned(), run.clone()),
        ]),
        ..AppManagerConfig::default()
    };
    let engine: Arc<dyn ContainerEngine> = real.clone();
    let manager = AppManager::open(config, engine, fixture()).unwrap();
    // the reference grammar allows any digest algorithm; this engine knows sha256/384/512
    let bad_image = format!("{BUSYBOX_TEST_IMAGE}@md5:{}", "0".repeat(32));
    let apps = vec![
        sleeper("a-bad", &bad_image),
        sleeper("b-web", BUSYBOX_TEST_IMAGE),
        sleeper("c-web", BUSYBOX_TEST_IMAGE),
    ];
    let body = async {
        manager
            .set_desired(crate::appmgr_support::desired(1, apps))
            .await
            .unwrap();
        let statuses = manager.reconcile_once().await;
        assert_isolated(&manager, &statuses, "a-bad", "(http 400)");
    };
    let cleanup = async {
        let label = format!("odac.test.run={run}");
        for c in real.list_by_label(&label).await.unwrap_or_default() {
            let _ = real.remove(&c.id, true).await;
        }
    };
    then_clean_up(body, cleanup).await;
}
