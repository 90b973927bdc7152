//! A rollout rolled back, against the fake engine (time paused, no Docker): a version that
//! ran its `min_healthy_secs` is the way back; the next version's container exits 3 with
//! output, and the previous configuration runs again on the same image id with its env, the
//! status `rolled_back` with the cause and `running_generation`; later passes create nothing
//! (the failed generation is not retried), a restarted agent keeps it so, and a new restart
//! token tries the failed spec again. A version the engine refuses to start is rolled back in
//! the same pass, its container removed first.

use crate::appmgr_support::set_one;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::AppManager;
use odac_host::engine::{FakeEngine, Op};

use crate::appmgr_support::pass_until;
use odac_protocol::{AppSpec, AppState, AppStatus, RolloutState};

const OLD: &str = "example.test/web:1";
const NEW: &str = "example.test/web:2";

use crate::appmgr_support::open_fake as open;

fn app(image: &str) -> AppSpec {
    let mut spec = AppSpec::new("web", image);
    spec.command = vec!["serve".into()];
    spec.env = [("VERSION".to_owned(), image.to_owned())].into();
    spec
}

/// The next pass's status, rolled back with the previous version running, and its rollout.
async fn rolled_back(m: &AppManager) -> (AppStatus, odac_protocol::RolloutReport) {
    let s = m.reconcile_once().await.remove(0);
    let r = s.rollout.clone().expect("a rollout part");
    assert_eq!(
        (s.state, r.state),
        (AppState::Running, RolloutState::RolledBack),
        "{s:#?}"
    );
    (s, r)
}

async fn until(m: &AppManager, pred: impl Fn(&AppStatus) -> bool) -> AppStatus {
    pass_until(m, 100, pred).await
}

/// A manager in a fresh state directory on a fake engine with both images, with the first
/// version running and proven (12 s of passes, past its 10 s): the directory, the engine,
/// the manager and the first version's running status.
async fn old_proven() -> (tempfile::TempDir, Arc<FakeEngine>, AppManager, AppStatus) {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&[OLD, NEW]);
    let m = open(&fake, dir.path());
    set_one(&m, 1, app(OLD)).await;
    let first = until(&m, |s| s.state == AppState::Running).await;
    for _ in 0..12 {
        m.reconcile_once().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    (dir, fake, m, first)
}

#[tokio::test(start_paused = true)]
async fn a_version_that_exits_is_rolled_back_and_not_retried() {
    // 12 s of passes: the first version has run its 10 s and is the way back
    let (dir, fake, m, first) = old_proven().await;
    let old_image = first.image_id.clone().unwrap();

    set_one(&m, 2, app(NEW)).await;
    let s = m.reconcile_once().await.remove(0);
    let r = s.rollout.clone().expect("rolling out");
    assert_eq!(
        (r.state, r.generation),
        (RolloutState::RollingOut, 2),
        "{s:#?}"
    );
    let new_id = s.container_id.clone().unwrap();
    fake.push_log(&new_id, "starting v2\nbroken config\n");
    fake.exit_container(&new_id, 3);

    let (s, r) = rolled_back(&m).await;
    assert_eq!(
        (s.generation, r.generation, s.running_generation),
        (2, 2, Some(1))
    );
    assert_eq!(r.error.as_deref(), Some("exited with code 3"));
    let cause = r.cause.unwrap();
    assert_eq!(cause.exit_code, Some(3));
    assert!(
        cause
            .output_tail
            .unwrap_or_default()
            .contains("broken config")
    );
    assert_eq!(s.image_id.as_deref(), Some(old_image.as_str()));
    assert_eq!(s.image.as_deref(), Some(OLD));
    let back = s.container_id.clone().unwrap();
    assert!(
        !fake.container_ids().contains(&new_id),
        "the failed one is gone"
    );
    let spec = fake.spec_of(&back).unwrap();
    assert_eq!(spec.env.get("VERSION").map(String::as_str), Some(OLD));

    // a minute of passes: the failed generation is not created again
    fake.clear_calls();
    for _ in 0..60 {
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(s.container_id.as_deref(), Some(back.as_str()));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        fake.calls_of(Op::Create).is_empty(),
        "{:?}",
        fake.calls_of(Op::Create)
    );

    // a restarted agent keeps the way back
    drop(m);
    let m = open(&fake, dir.path());
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.container_id.as_deref(), Some(back.as_str()));
    assert_eq!(s.rollout.map(|r| r.state), Some(RolloutState::RolledBack));
    assert!(fake.calls_of(Op::Create).is_empty());

    // a restart token asks for the failed spec again
    let mut again = app(NEW);
    again.restart_token = Some("retry-1".into());
    set_one(&m, 3, again).await;
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.rollout.map(|r| r.state), Some(RolloutState::RollingOut));
    assert_eq!(s.image.as_deref(), Some(NEW));
    assert_eq!(fake.calls_of(Op::Create).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_version_the_engine_will_not_start_is_rolled_back_in_the_same_pass() {
    let (_dir, fake, m, _) = old_proven().await;
    crate::appmgr_support::next_start_lacks_its_command(&fake);
    set_one(&m, 2, app(NEW)).await;
    let (s, r) = rolled_back(&m).await;
    assert!(
        r.error
            .as_deref()
            .unwrap_or_default()
            .starts_with("could not be started: "),
        "{r:?}"
    );
    assert!(r.error.unwrap().contains("executable file not found"));
    let ids = fake.container_ids();
    assert_eq!(
        ids.len(),
        1,
        "the container that did not start is gone: {ids:?}"
    );
    assert_eq!(s.container_id.as_deref(), Some(ids[0].as_str()));
    assert_eq!(s.image.as_deref(), Some(OLD));
}
