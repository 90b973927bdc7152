//! Shared by the app-manager tests: a fake engine holding the test image, the manager settings
//! of a fake-engine test, a desired state of one generation, one app's status picked out of a
//! pass, one app set as the desired state, and passes run until a status holds (paused time, or
//! real time against a real engine).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_host::engine::FakeEngine;
use odac_protocol::{AppSpec, AppStatus, DesiredState};

/// A fake engine that already holds `image`.
pub fn fake_with(image: &str) -> Arc<FakeEngine> {
    let fake = FakeEngine::new();
    fake.add_image(image);
    Arc::new(fake)
}

/// Generation `generation` of the desired state, holding `apps`.
pub fn desired(generation: u64, apps: Vec<AppSpec>) -> DesiredState {
    DesiredState { generation, apps }
}

/// `name`'s status among `statuses`; a test fails naming what it got when there is none.
pub fn status<'a>(statuses: &'a [AppStatus], name: &str) -> &'a AppStatus {
    statuses
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no status for {name}: {statuses:?}"))
}

/// The manager settings of a fake-engine test: its state in `dir`, containers stopped at once;
/// a test changes what it needs with `..`.
pub fn fake_config(dir: &Path) -> AppManagerConfig {
    AppManagerConfig {
        state_dir: dir.to_path_buf(),
        stop_timeout_secs: 0,
        ..AppManagerConfig::default()
    }
}

/// An app manager with `config` on `fake` and the GPU-less fixture host.
pub fn open_on(fake: &Arc<FakeEngine>, config: AppManagerConfig) -> AppManager {
    AppManager::open(config, fake.clone(), crate::fixture_hosts::no_gpu())
        .expect("open the app manager")
}

/// Passes a second apart (paused time in the callers) until the first app's status satisfies
/// `pred`, at most `passes` of them.
pub async fn pass_until(
    m: &AppManager,
    passes: usize,
    pred: impl Fn(&AppStatus) -> bool,
) -> AppStatus {
    for _ in 0..passes {
        let s = m.reconcile_once().await.remove(0);
        if pred(&s) {
            return s;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("never reached: {:#?}", m.statuses());
}

/// Sets generation `generation` of the desired state to the one app `spec`.
pub async fn set_one(m: &AppManager, generation: u64, spec: AppSpec) {
    m.set_desired(desired(generation, vec![spec]))
        .await
        .expect("set the desired state");
}

/// Passes 200 ms apart in real time (a real engine) until the first app's status satisfies
/// `done`, failing with `what` and the last status after `within`.
pub async fn until_real(
    m: &AppManager,
    what: &str,
    within: Duration,
    done: impl Fn(&AppStatus) -> bool,
) -> AppStatus {
    let deadline = std::time::Instant::now() + within;
    loop {
        let s = m.reconcile_once().await.remove(0);
        if done(&s) {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: last status {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
