//! The app manager keeps PROTOCOL.md's generation and removal rules (section 4.2 and 4.4),
//! against the fake engine: a stale upsert or delete (generation not above the applied one)
//! changes nothing, a snapshot is authoritative whatever its generation (a control plane that
//! lost its counter, a host back under a new id), and an app that leaves the desired state
//! gets one last `removed` status once its container is gone, and no status after it.

use std::path::Path;
use std::sync::Arc;

use odac_agent::appmgr::{AppManager, AppManagerConfig, Applied, HostSource, state::store};
use odac_host::engine::{EngineError, FakeEngine, Op};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState};
use tokio::sync::broadcast;

const IMAGE: &str = "odac/busybox:test";

fn open(dir: &Path) -> (Arc<FakeEngine>, AppManager) {
    let fake = crate::appmgr_support::fake_with_images(&[IMAGE]);
    let config = AppManagerConfig {
        state_dir: dir.to_path_buf(),
        stop_timeout_secs: 0,
        instance: format!("gen-{}", std::process::id()),
        ..AppManagerConfig::default()
    };
    let host = HostSource::Root(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/no-gpu"),
    );
    let m = AppManager::open_with_host(config, fake.clone(), host).unwrap();
    (fake, m)
}

fn app(name: &str) -> AppSpec {
    crate::appmgr_support::sleeper(name, IMAGE)
}

fn desired(generation: u64, names: &[&str]) -> DesiredState {
    DesiredState {
        generation,
        apps: names.iter().map(|n| app(n)).collect(),
    }
}

/// The names of the apps in `m`'s desired state, sorted.
pub(crate) fn names(m: &AppManager) -> Vec<String> {
    let mut v: Vec<String> = m
        .desired()
        .unwrap()
        .apps
        .into_iter()
        .map(|a| a.name)
        .collect();
    v.sort();
    v
}

fn on_disk(dir: &Path) -> DesiredState {
    serde_json::from_slice(&std::fs::read(dir.join(store::DESIRED_FILE)).unwrap()).unwrap()
}

fn drain(rx: &mut broadcast::Receiver<std::sync::Arc<AppStatus>>) -> Vec<AppStatus> {
    let mut out = Vec::new();
    while let Ok(s) = rx.try_recv() {
        out.push(std::sync::Arc::unwrap_or_clone(s));
    }
    out
}

#[tokio::test]
async fn stale_changes_are_no_ops_and_snapshots_are_authoritative() {
    let dir = tempfile::tempdir().unwrap();
    let (_fake, m) = open(dir.path());
    assert_eq!(
        m.set_desired(desired(3, &["web"])).await.unwrap(),
        Applied::Changed
    );
    // equal and lower generations are stale: nothing changes, in memory or on disk
    for (generation, what) in [(3, "equal"), (2, "lower")] {
        let up = m.upsert(generation, app("db")).await.unwrap();
        assert_eq!(up, Applied::Stale { current: 3 }, "{what} upsert");
        let del = m.delete(generation, "web").await.unwrap();
        assert_eq!(del, Applied::Stale { current: 3 }, "{what} delete");
    }
    assert_eq!(names(&m), ["web"]);
    assert_eq!(m.generation(), Some(3));
    assert_eq!(on_disk(dir.path()).generation, 3);
    // a stale change of an invalid app is still refused as invalid
    assert!(m.upsert(3, AppSpec::new("Bad Name", IMAGE)).await.is_err());

    // a lower snapshot (the control plane lost its counter) replaces the state
    assert_eq!(
        m.set_desired(desired(1, &["api"])).await.unwrap(),
        Applied::Changed
    );
    assert_eq!(names(&m), ["api"]);
    assert_eq!(m.generation(), Some(1));
    assert_eq!(on_disk(dir.path()), desired(1, &["api"]));
    // and incremental changes continue from it
    assert_eq!(m.upsert(2, app("db")).await.unwrap(), Applied::Changed);
    assert_eq!(names(&m), ["api", "db"]);
    // an equal snapshot is applied as well (it is the control plane's whole view)
    m.set_desired(desired(2, &["db"])).await.unwrap();
    assert_eq!(names(&m), ["db"]);
}

#[tokio::test]
async fn a_removed_app_reports_removed_once_its_container_is_gone_and_nothing_after() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, m) = open(dir.path());
    let mut rx = m.subscribe();
    m.set_desired(desired(1, &["web", "db"])).await.unwrap();
    let statuses = m.reconcile_once().await;
    assert!(
        statuses.iter().all(|s| s.state == AppState::Running),
        "{statuses:?}"
    );
    assert_eq!(fake.container_ids().len(), 2);
    drain(&mut rx);

    // the first removal attempt fails: no `removed` while the container exists
    fake.fail_next(Op::Remove, EngineError::Other("device busy".into()));
    m.delete(2, "web").await.unwrap();
    m.reconcile_once().await;
    let seen = drain(&mut rx);
    assert!(
        seen.iter().all(|s| s.name != "web"),
        "no status of web while its container is still there: {seen:?}"
    );
    assert_eq!(fake.container_ids().len(), 2, "removal failed once");

    let statuses = m.reconcile_once().await;
    assert_eq!(fake.container_ids().len(), 1);
    assert!(statuses.iter().all(|s| s.name != "web"), "{statuses:?}");
    let seen = drain(&mut rx);
    let web: Vec<&AppStatus> = seen.iter().filter(|s| s.name == "web").collect();
    assert_eq!(web.len(), 1, "{seen:?}");
    assert_eq!(
        (web[0].state, web[0].generation),
        (AppState::Removed, 2),
        "the generation that removed it"
    );

    // later passes and changes say nothing more about web
    m.upsert(3, app("api")).await.unwrap();
    m.reconcile_once().await;
    m.reconcile_once().await;
    let seen = drain(&mut rx);
    assert!(seen.iter().all(|s| s.name != "web"), "{seen:?}");

    // a snapshot that drops an app without a container reports it removed at once
    fake.fail_next(Op::Create, EngineError::Other("no space left".into()));
    m.set_desired(desired(4, &["db", "api", "job"]))
        .await
        .unwrap();
    m.reconcile_once().await;
    drain(&mut rx);
    m.set_desired(desired(5, &["db"])).await.unwrap();
    m.reconcile_once().await;
    let seen = drain(&mut rx);
    let mut removed: Vec<(String, u64)> = seen
        .iter()
        .filter(|s| s.state == AppState::Removed)
        .map(|s| (s.name.clone(), s.generation))
        .collect();
    removed.sort();
    assert_eq!(removed, [("api".to_owned(), 5), ("job".to_owned(), 5)]);
    assert_eq!(m.statuses().len(), 1);

    // an app added back reports again, at its new generation
    m.upsert(6, app("web")).await.unwrap();
    let statuses = m.reconcile_once().await;
    let web = statuses.iter().find(|s| s.name == "web").unwrap();
    assert_eq!((web.state, web.generation), (AppState::Running, 6));
}
