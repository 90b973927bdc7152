//! `update.order = start_first` against the fake engine (time paused, no Docker): the new
//! version starts beside the previous one under the temporary name `<instance>_<app>_next`;
//! the previous one is never stopped while the new one proves itself, and once it has, the
//! previous one is stopped and removed and the new one renamed to the app's own name. A new
//! version that fails goes alone (the previous one was never stopped and runs on as it is), and
//! so does one the engine will not start (no temporary container is left behind). A
//! restarted agent finds a hand-over under way and carries it on; a temporary container left
//! alone is adopted (renamed), one of an older version removed. An app that binds a host port
//! or asks for GPUs the host cannot give twice is refused with the reason.

use crate::appmgr_support::set_one;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::AppManager;
use odac_host::engine::{ContainerEngine, EngineCall, FakeEngine, Op};
use odac_protocol::{
    AppSpec, AppState, AppStatus, GpuRequest, GpuRuntime, HealthCheck, PortMapping, RolloutState,
    UpdateOrder, UpdatePolicy,
};

use crate::appmgr_support::pass_until;

const OLD: &str = "example.test/web:1";
const NEW: &str = "example.test/web:2";
const OWN: &str = "odac_web";
const NEXT: &str = "odac_web_next";

use crate::appmgr_support::open_fake as open;

fn app(image: &str) -> AppSpec {
    let mut spec = AppSpec::new("web", image);
    spec.env = [("VERSION".to_owned(), image.to_owned())].into();
    spec.update = Some(UpdatePolicy {
        order: Some(UpdateOrder::StartFirst),
        ..UpdatePolicy::default()
    });
    spec
}

/// The name and running state of a container, `None` when it is gone.
async fn seen(fake: &FakeEngine, id: &str) -> Option<(String, bool)> {
    let d = fake.inspect(id).await.ok()?;
    Some((d.name, d.running))
}

/// Version 1 running and proven (12 s of passes); its container id.
async fn proven_v1(fake: &Arc<FakeEngine>, m: &AppManager) -> String {
    set_one(m, 1, app(OLD)).await;
    let s = pass_until(m, 100, |s| s.state == AppState::Running).await;
    for _ in 0..12 {
        m.reconcile_once().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let id = s.container_id.unwrap();
    assert_eq!(seen(fake, &id).await, Some((OWN.into(), true)));
    id
}

/// A manager in a fresh state directory on a fake engine with both images, with version 1
/// running and proven: the directory, the engine, the manager and version 1's container id.
async fn v1_proven() -> (tempfile::TempDir, Arc<FakeEngine>, AppManager, String) {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&[OLD, NEW]);
    let m = open(&fake, dir.path());
    let old = proven_v1(&fake, &m).await;
    (dir, fake, m, old)
}

/// Sets version 2 to `spec` and runs one pass; the app's status after it.
async fn roll_to(m: &AppManager, spec: AppSpec) -> AppStatus {
    set_one(m, 2, spec).await;
    m.reconcile_once().await.remove(0)
}

fn stops_of(fake: &FakeEngine, id: &str) -> usize {
    fake.calls_of(Op::Stop)
        .iter()
        .filter(|c| matches!(c, EngineCall::Stop(i, _) if i == id))
        .count()
}

fn rollout_state(s: &AppStatus) -> Option<RolloutState> {
    s.rollout.as_ref().map(|r| r.state)
}

/// `app(image)` with a health check and no `min_healthy_secs`: it has proven itself once
/// healthy (the rollout's clock is the wall clock, which paused time does not move).
fn checked(image: &str) -> AppSpec {
    let mut spec = app(image);
    spec.healthcheck = Some(HealthCheck {
        command: vec!["true".into()],
        ..HealthCheck::default()
    });
    spec.update = Some(UpdatePolicy {
        min_healthy_secs: Some(0),
        ..spec.update.unwrap_or_default()
    });
    spec
}

use crate::appmgr_support::health;

#[tokio::test(start_paused = true)]
async fn the_previous_version_serves_until_the_new_one_is_healthy() {
    let (_dir, fake, m, old) = v1_proven().await;
    fake.clear_calls();

    let s = roll_to(&m, checked(NEW)).await;
    assert_eq!(rollout_state(&s), Some(RolloutState::RollingOut), "{s:#?}");
    let new = s.container_id.clone().unwrap();
    assert_ne!(new, old);
    assert_eq!(seen(&fake, &new).await, Some((NEXT.into(), true)));
    fake.set_health(&new, health("starting"));
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(rollout_state(&s), Some(RolloutState::RollingOut), "{s:#?}");
        assert_eq!(s.container_id.as_deref(), Some(new.as_str()));
        assert_eq!(
            seen(&fake, &old).await,
            Some((OWN.into(), true)),
            "the previous version runs on, untouched, while the new one is not healthy"
        );
        assert_eq!(stops_of(&fake, &old), 0);
    }
    fake.set_health(&new, health("healthy"));
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(rollout_state(&s), None, "proven: {s:#?}");
    assert_eq!(s.container_id.as_deref(), Some(new.as_str()));
    assert_eq!(seen(&fake, &old).await, None, "the previous one is removed");
    assert_eq!(stops_of(&fake, &old), 1, "and was stopped first");
    assert_eq!(seen(&fake, &new).await, Some((OWN.into(), true)));
    assert_eq!(fake.container_ids(), vec![new.clone()]);
    assert_eq!(fake.calls_of(Op::Create).len(), 1);
    // later passes leave it alone
    fake.clear_calls();
    m.reconcile_once().await;
    assert!(fake.calls_of(Op::Rename).is_empty() && fake.calls_of(Op::Create).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_new_version_that_fails_goes_alone_and_the_previous_never_stopped() {
    let (_dir, fake, m, old) = v1_proven().await;
    fake.clear_calls();

    let s = roll_to(&m, app(NEW)).await;
    let new = s.container_id.clone().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    fake.exit_container(&new, 3);
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(rollout_state(&s), Some(RolloutState::RolledBack), "{s:#?}");
    assert_eq!(
        (s.state, s.container_id.as_deref(), s.running_generation),
        (AppState::Running, Some(old.as_str()), Some(1))
    );
    assert_eq!(seen(&fake, &new).await, None, "the failed one is gone");
    for _ in 0..20 {
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(s.container_id.as_deref(), Some(old.as_str()));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(seen(&fake, &old).await, Some((OWN.into(), true)));
    assert_eq!(stops_of(&fake, &old), 0, "never stopped");
    assert_eq!(
        fake.calls_of(Op::Create).len(),
        1,
        "nothing made to go back"
    );
}

#[tokio::test(start_paused = true)]
async fn a_restarted_agent_carries_a_hand_over_on_and_never_leaks_a_temporary_container() {
    let (dir, fake, m, old) = v1_proven().await;
    let new = roll_to(&m, app(NEW)).await.container_id.unwrap();
    drop(m);

    // the agent comes back mid-hand-over: it watches the same new container beside the old
    let m = open(&fake, dir.path());
    fake.clear_calls();
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(rollout_state(&s), Some(RolloutState::RollingOut), "{s:#?}");
    assert_eq!(s.container_id.as_deref(), Some(new.as_str()));
    assert_eq!(seen(&fake, &old).await, Some((OWN.into(), true)));
    assert!(fake.calls_of(Op::Create).is_empty());

    // cut short after the previous one went, before the rename: the new one is adopted
    drop(m);
    fake.remove(&old, true).await.unwrap();
    let m = open(&fake, dir.path());
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.container_id.as_deref(), Some(new.as_str()));
    assert_eq!(seen(&fake, &new).await, Some((OWN.into(), true)));

    // a temporary container of an older version beside a newer hand-over is removed
    set_one(&m, 3, app("example.test/web:3")).await;
    fake.add_image("example.test/web:3");
    let v3 = m.reconcile_once().await.remove(0).container_id.unwrap();
    assert_eq!(seen(&fake, &v3).await, Some((NEXT.into(), true)));
    drop(m);
    fake.remove(&v3, true).await.unwrap();
    let leftover = start_beside(&fake, &new, NEXT).await;
    let m = open(&fake, dir.path());
    let s = m.reconcile_once().await.remove(0);
    let v3 = s.container_id.clone().unwrap();
    assert_eq!(
        seen(&fake, &leftover).await,
        None,
        "the leftover is removed"
    );
    assert_eq!(seen(&fake, &v3).await, Some((NEXT.into(), true)));
    assert_eq!(seen(&fake, &new).await, Some((OWN.into(), true)));
    assert_eq!(fake.container_ids().len(), 2);
}

/// A copy of container `like` (same labels: an older version) started as `name`.
async fn start_beside(fake: &FakeEngine, like: &str, name: &str) -> String {
    let mut spec = fake.spec_of(like).unwrap();
    spec.name = name.into();
    let id = fake.create(&spec).await.unwrap();
    fake.start(&id).await.unwrap();
    id
}

#[tokio::test(start_paused = true)]
async fn start_first_is_refused_with_a_host_port_or_gpus_the_host_cannot_give_twice() {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&[OLD]);
    let m = open(&fake, dir.path());
    let mut ported = app(OLD);
    ported.ports = vec![PortMapping {
        container: 80,
        host: Some(8080),
        ..PortMapping::default()
    }];
    set_one(&m, 1, ported).await;
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.state, AppState::Failed);
    let error = s.last_error.unwrap_or_default();
    assert!(
        error.contains("update.order") && error.contains("host port 8080"),
        "{error}"
    );
    let mut gpu = app(OLD);
    gpu.gpu = Some(GpuRequest::new(GpuRuntime::Nvidia).with_count(1));
    let s = roll_to(&m, gpu).await;
    let error = s.last_error.unwrap_or_default();
    assert!(
        error.contains("update.order") && error.contains("gpu.count 1: the host has 0 gpus"),
        "{error}"
    );
    assert!(fake.container_ids().is_empty(), "nothing was created");
}

#[tokio::test(start_paused = true)]
async fn a_new_version_the_engine_will_not_start_leaves_the_previous_running_and_no_leftover() {
    let (_dir, fake, m, old) = v1_proven().await;
    fake.clear_calls();
    crate::appmgr_support::next_start_lacks_its_command(&fake);
    let s = roll_to(&m, app(NEW)).await;
    assert_eq!(rollout_state(&s), Some(RolloutState::RolledBack), "{s:#?}");
    assert_eq!(s.container_id.as_deref(), Some(old.as_str()));
    let s = m.reconcile_once().await.remove(0);
    assert_eq!(s.container_id.as_deref(), Some(old.as_str()));
    assert_eq!(
        fake.container_ids(),
        vec![old.clone()],
        "the container that did not start is gone"
    );
    assert_eq!(seen(&fake, &old).await, Some((OWN.into(), true)));
    assert_eq!(stops_of(&fake, &old), 0, "never stopped");
}
