//! Ownership against the fake engine: containers and volumes carry the owner's agent id;
//! another owner's container of the same instance is left alone and reported once as a
//! conflict (event); an unowned container (made before owner labels) is adopted only when the
//! desired state names its app; volumes of the earlier naming scheme keep their data, and the
//! pair that collided under it (`fa`/`b-data`, `fa-b`/`data`) gets two volumes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use odac_agent::appmgr::{AppManager, container};
use odac_host::engine::{ContainerEngine, EngineCall, FakeEngine, Op};
use odac_protocol::{AppSpec, AppState, EventLevel, VolumeMount};

const IMAGE: &str = "odac/busybox:test";
const ME: &str = "agent-me";

fn fake() -> Arc<FakeEngine> {
    crate::appmgr_support::fake_with(IMAGE)
}

fn open(fake: &Arc<FakeEngine>, dir: &Path) -> AppManager {
    crate::appmgr_support::open_as(fake, dir, ME)
}

fn app(name: &str) -> AppSpec {
    crate::appmgr_support::sleeper(name, IMAGE)
}

fn with_volume(mut spec: AppSpec, source: &str) -> AppSpec {
    spec.volumes.push(VolumeMount {
        source: source.into(),
        target: "/data".into(),
        read_only: false,
    });
    spec
}

use crate::appmgr_support::desired;

/// A running container of instance `odac` and app `app`, owned by `owner` (none: unowned).
async fn existing(fake: &FakeEngine, app: &str, owner: Option<&str>) -> String {
    let name = format!("old-{app}-{}", owner.unwrap_or("none"));
    crate::appmgr_support::planted(fake, IMAGE, &name, app, owner).await
}

#[tokio::test]
async fn another_owners_containers_are_left_alone_and_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    let theirs_web = existing(&fake, "web", Some("agent-them")).await;
    let theirs_db = existing(&fake, "db", Some("agent-them")).await;
    let m = open(&fake, dir.path());
    let mut events = m.subscribe_events();
    m.set_desired(desired(1, vec![app("web")])).await.unwrap();
    let s = m.reconcile_once().await;
    assert_eq!(s[0].state, AppState::Running, "{s:?}");
    let mine = s[0].container_id.clone().unwrap();
    let spec = fake.inspect(&mine).await.unwrap();
    assert_eq!(spec.labels[odac_host::names::OWNER], ME);
    assert_eq!(spec.labels[odac_host::names::INSTANCE], "odac");
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    let conflicts: Vec<_> = seen
        .iter()
        .filter(|e| e.message.starts_with("conflict: "))
        .collect();
    assert_eq!(conflicts.len(), 2, "{seen:?}");
    assert!(conflicts.iter().all(|e| e.level == EventLevel::Warn));
    assert!(
        conflicts[0].message.contains("belongs to agent agent-them"),
        "{conflicts:?}"
    );

    // passes go on: nothing of theirs stopped or removed, conflicts not repeated
    for generation in 2..4 {
        m.set_desired(desired(generation, vec![])).await.unwrap();
        m.reconcile_once().await;
    }
    let ids = fake.container_ids();
    assert!(
        ids.contains(&theirs_web) && ids.contains(&theirs_db),
        "{ids:?}"
    );
    assert!(
        !ids.contains(&mine),
        "my web was removed when no longer desired"
    );
    for id in [&theirs_web, &theirs_db] {
        assert!(fake.inspect(id).await.unwrap().running);
    }
    let stops: Vec<_> = fake
        .calls()
        .into_iter()
        .filter(|c| matches!(c, EngineCall::Stop(..) | EngineCall::Remove(..)))
        .collect();
    assert!(
        stops
            .iter()
            .all(|c| matches!(c, EngineCall::Stop(x, _) | EngineCall::Remove(x, _) if *x == mine)),
        "{stops:?}"
    );
    while let Ok(e) = events.try_recv() {
        assert!(
            !e.message.starts_with("conflict: "),
            "reported again: {e:?}"
        );
    }
}

#[tokio::test]
async fn unowned_containers_are_adopted_only_when_the_desired_state_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    let web = existing(&fake, "web", None).await;
    let stranger = existing(&fake, "cache", None).await;
    let m = open(&fake, dir.path());
    m.set_desired(desired(1, vec![app("web")])).await.unwrap();
    let s = m.reconcile_once().await;
    // the old container carries no spec hash, so it is recreated — by its new owner
    assert_eq!(s[0].state, AppState::Running);
    let ids = fake.container_ids();
    assert!(
        !ids.contains(&web),
        "adopted, then recreated with the owner label"
    );
    assert!(ids.contains(&stranger), "not named: left alone");
    let new_web = s[0].container_id.clone().unwrap();
    assert_eq!(
        fake.inspect(&new_web).await.unwrap().labels[odac_host::names::OWNER],
        ME
    );
    m.set_desired(desired(2, vec![])).await.unwrap();
    m.reconcile_once().await;
    assert_eq!(fake.container_ids(), vec![stranger]);
}

#[tokio::test]
async fn an_adopted_up_to_date_container_keeps_running_and_goes_with_its_app() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    // what the version before owner labels made for this spec: same labels, no owner
    let spec = app("web");
    let mut old = container::container_spec("odac", "", &spec, IMAGE, &BTreeMap::new());
    old.name = "odac-web".into();
    assert!(!old.labels.contains_key(odac_host::names::OWNER));
    let id = fake.create(&old).await.unwrap();
    fake.start(&id).await.unwrap();
    let m = open(&fake, dir.path());
    m.set_desired(desired(1, vec![spec])).await.unwrap();
    let s = m.reconcile_once().await;
    assert_eq!(
        s[0].container_id.as_deref(),
        Some(id.as_str()),
        "kept as is"
    );
    assert!(fake.calls_of(Op::Create).len() == 1, "nothing new created");
    m.set_desired(desired(2, vec![])).await.unwrap();
    m.reconcile_once().await;
    assert!(fake.container_ids().is_empty(), "removed with its app");
}

#[tokio::test]
async fn old_scheme_volumes_keep_their_data_and_the_colliding_pair_is_split() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    // made by the earlier version for app fa, volume b-data
    let old = container::legacy_volume_name("odac", "fa", "b-data");
    let old_labels = BTreeMap::from([
        (odac_host::names::INSTANCE.to_owned(), "odac".to_owned()),
        (odac_host::names::APP.to_owned(), "fa".to_owned()),
    ]);
    fake.ensure_volume(&old, &old_labels).await.unwrap();
    let m = open(&fake, dir.path());
    let fa = with_volume(app("fa"), "b-data");
    let fa_b = with_volume(app("fa-b"), "data");
    m.set_desired(desired(1, vec![fa, fa_b])).await.unwrap();
    let s = m.reconcile_once().await;
    assert!(s.iter().all(|s| s.state == AppState::Running), "{s:?}");
    let binds: BTreeMap<String, String> = fake
        .calls_of(Op::Create)
        .into_iter()
        .map(|c| match c {
            EngineCall::Create(spec) => (
                spec.labels[odac_host::names::APP].clone(),
                spec.binds[0].source.clone(),
            ),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(binds["fa"], old, "fa keeps its old volume and its data");
    assert_eq!(
        binds["fa-b"],
        odac_host::names::volume_name("odac", "fa-b", "data")
    );
    assert_ne!(binds["fa"], binds["fa-b"]);
    let volumes = fake.volumes();
    assert_eq!(volumes.len(), 2, "{volumes:?}");
    assert_eq!(volumes[&binds["fa-b"]][odac_host::names::OWNER], ME);
    assert!(fake.calls_of(Op::RemoveVolume).is_empty());
}
