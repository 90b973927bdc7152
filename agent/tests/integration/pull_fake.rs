//! Pull on demand against the fake engine (time paused): a missing image is pulled in the
//! background (`pulling`, then `running` with its image id and repo digest); a pull the
//! registry refuses ends `failed` / `image_pull_failed` with the registry's words and is
//! retried on the crash-loop backoff only (attempts counted over 60 s); credentials sent
//! through the manager are used and never reach a status or an event; `always` pulls again
//! for a new restart token and picks up a new digest; `never` does not pull; one app's slow
//! pull does not hold up another app.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::{AppEvent, AppManager, AppManagerConfig};
use odac_host::engine::{EngineCall, FakeEngine, Op, RegistryAuth};
use odac_protocol::{AppState, AppStatus, PullPolicy, Reason};
use tokio::sync::broadcast;

const IMAGE: &str = "127.0.0.1:5999/odac/app:1";
const DIGEST_1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const DIGEST_2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

use crate::fixture_hosts::no_gpu as fixture;

fn open(fake: &Arc<FakeEngine>, dir: &Path) -> AppManager {
    let config = AppManagerConfig {
        state_dir: dir.to_path_buf(),
        stop_timeout_secs: 0,
        docker_config: dir.join("no-docker-config.json"),
        ..AppManagerConfig::default()
    };
    AppManager::open(config, fake.clone(), fixture()).unwrap()
}

use crate::appmgr_support::sleeper as app;

use crate::appmgr_support::desired;

/// Reconcile (letting background pulls finish) until `pred` holds for `name`.
async fn until(manager: &AppManager, name: &str, pred: impl Fn(&AppStatus) -> bool) -> AppStatus {
    for _ in 0..200 {
        let statuses = manager.reconcile_once().await;
        if let Some(s) = statuses.iter().find(|s| s.name == name)
            && pred(s)
        {
            return s.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{name} never reached the expected status: {:#?}",
        manager.statuses()
    );
}

fn drain(rx: &mut broadcast::Receiver<AppEvent>) -> Vec<AppEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// A manager in a fresh state directory on a fake engine whose registry has IMAGE at
/// DIGEST_1, behind `credentials` if given: the directory, the engine and the manager.
fn published(
    credentials: Option<(&str, &str)>,
) -> (tempfile::TempDir, Arc<FakeEngine>, AppManager) {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    fake.publish(IMAGE, DIGEST_1, credentials);
    let manager = open(&fake, dir.path());
    (dir, fake, manager)
}

fn pulls(fake: &FakeEngine) -> Vec<EngineCall> {
    fake.calls_of(Op::PullImage)
}

#[tokio::test(start_paused = true)]
async fn a_missing_image_is_pulled_then_runs_with_its_digest() {
    let (_dir, fake, manager) = published(None);
    let mut rx = manager.subscribe_events();
    manager
        .set_desired(desired(1, vec![app("web", IMAGE)]))
        .await
        .unwrap();
    let first = manager.reconcile_once().await.remove(0);
    assert_eq!(first.state, AppState::Pulling, "{first:#?}");
    let s = until(&manager, "web", |s| s.state == AppState::Running).await;
    assert_eq!(
        s.repo_digest.as_deref(),
        Some(format!("127.0.0.1:5999/odac/app@{DIGEST_1}").as_str())
    );
    assert!(s.image_id.as_deref().unwrap().starts_with("sha256:"));
    assert_eq!(pulls(&fake).len(), 1);
    // Present now: no second pull on later passes or on a recreation.
    manager.reconcile_once().await;
    assert_eq!(pulls(&fake).len(), 1);
    let events = drain(&mut rx);
    assert!(
        events
            .iter()
            .any(|e| e.message == format!("pulled {IMAGE}")),
        "{events:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn refused_pulls_fail_with_the_registry_words_and_back_off() {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&["odac/busybox:test"]);
    let manager = open(&fake, dir.path());
    let other = app("other", "odac/busybox:test");
    manager
        .set_desired(desired(1, vec![app("ghost", IMAGE), other]))
        .await
        .unwrap();
    crate::appmgr_support::run_for(&manager, Duration::from_secs(60)).await;
    let statuses = manager.statuses();
    let ghost = statuses.iter().find(|s| s.name == "ghost").unwrap();
    assert_eq!(ghost.state, AppState::Failed, "{ghost:#?}");
    let error = ghost.last_error.as_deref().unwrap();
    assert!(error.starts_with("image_pull_failed: "), "{error}");
    assert!(error.contains("manifest unknown"), "{error}");
    assert_eq!(
        ghost.image_failure.as_ref().map(|f| f.reason),
        Some(Reason::ImagePullFailed)
    );
    assert!(
        ghost
            .image_failure
            .as_ref()
            .and_then(|f| f.detail.as_deref())
            .is_some_and(|d| d.contains("manifest unknown")),
        "the registry's words: {ghost:#?}"
    );
    assert_eq!(ghost.gpu.fallback, None, "a pull is no GPU decision");
    // not final: the status says when the agent pulls again
    let retry = ghost
        .next_retry_at_ms
        .expect("a failed pull has its next retry");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert!(u128::from(retry) + 1_000 >= now_ms, "{retry} vs {now_ms}");
    // 1 s doubling: attempts at 0, 1, 3, 7, 15, 31 s (+ pass slack); a storm would be hundreds.
    let attempts = pulls(&fake).len();
    println!("pull attempts in 60 s: {attempts}");
    assert!(
        (4..=8).contains(&attempts),
        "{attempts} pull attempts in 60 s"
    );
    let other = statuses.iter().find(|s| s.name == "other").unwrap();
    assert_eq!(other.state, AppState::Running, "not held up: {other:#?}");
}

#[tokio::test(start_paused = true)]
async fn credentials_sent_to_the_manager_are_used_and_never_shown() {
    let password = "s3cret-registry-pw";
    let (_dir, fake, manager) = published(Some(("alice", password)));
    let mut rx = manager.subscribe_events();
    manager
        .set_desired(desired(1, vec![app("private", IMAGE)]))
        .await
        .unwrap();
    let s = until(&manager, "private", |s| s.state == AppState::Failed).await;
    assert!(
        s.last_error.as_deref().unwrap().contains("unauthorized"),
        "{s:#?}"
    );
    manager.registry_credentials().set_sent(vec![RegistryAuth {
        server: "127.0.0.1:5999".into(),
        username: "alice".into(),
        password: password.into(),
    }]);
    // The retry waits for its backoff step, then pulls with the credentials.
    let s = until(&manager, "private", |s| s.state == AppState::Running).await;
    assert!(pulls(&fake).iter().any(|c| matches!(
        c,
        EngineCall::PullImage { username: Some(u), .. } if u == "alice"
    )));
    let shown = format!("{s:?}{:?}{:?}", manager.statuses(), drain(&mut rx));
    assert!(!shown.contains(password));
    assert!(!format!("{:?}", fake.calls()).contains(password));
}

#[tokio::test(start_paused = true)]
async fn always_pulls_per_restart_token_and_never_does_not_pull() {
    let (_dir, fake, manager) = published(None);
    let mut spec = app("fresh", IMAGE);
    spec.pull = PullPolicy::Always;
    manager
        .set_desired(desired(1, vec![spec.clone()]))
        .await
        .unwrap();
    let s = until(&manager, "fresh", |s| s.state == AppState::Running).await;
    assert!(s.repo_digest.as_deref().unwrap().ends_with(DIGEST_1));
    manager.reconcile_once().await;
    assert_eq!(pulls(&fake).len(), 1, "running: no pull per pass");

    fake.publish(IMAGE, DIGEST_2, None);
    spec.restart_token = Some("t2".into());
    manager.set_desired(desired(2, vec![spec])).await.unwrap();
    let s = until(&manager, "fresh", |s| {
        s.state == AppState::Running
            && s.repo_digest
                .as_deref()
                .is_some_and(|d| d.ends_with(DIGEST_2))
    })
    .await;
    assert_eq!(pulls(&fake).len(), 2, "{s:#?}");

    let mut never = app("offline", "odac/not-here:1");
    never.pull = PullPolicy::Never;
    manager.set_desired(desired(3, vec![never])).await.unwrap();
    let s = until(&manager, "offline", |s| s.state == AppState::Failed).await;
    assert!(
        s.last_error
            .as_deref()
            .unwrap()
            .contains("pull policy is never"),
        "{s:#?}"
    );
    assert_eq!(pulls(&fake).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn credentials_sent_with_the_app_are_used_for_its_registry() {
    let password = "app-level-pw";
    let (_dir, fake, manager) = published(Some(("bob", password)));
    let mut spec = app("private", IMAGE);
    spec.registry_auth = Some(odac_protocol::RegistryAuth {
        server: "127.0.0.1:5999".into(),
        username: "bob".into(),
        password: password.into(),
    });
    manager.set_desired(desired(1, vec![spec])).await.unwrap();
    let s = until(&manager, "private", |s| s.state == AppState::Running).await;
    assert!(!format!("{s:?}").contains(password));
    assert!(pulls(&fake).iter().any(|c| matches!(
        c,
        EngineCall::PullImage { username: Some(u), .. } if u == "bob"
    )));
}
