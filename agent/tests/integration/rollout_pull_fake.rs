//! An update to an image that is not on the host yet, against the fake engine (time paused):
//! the previous version keeps running (same container, not stopped or removed) while the new
//! image is pulled (a stalled pull, 10 s of passes); once a pull goes through, the new version
//! replaces it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_host::engine::{FakeEngine, Op};

use crate::appmgr_support::{fake_config, open_on, pass_until};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState};

const OLD: &str = "127.0.0.1:5999/odac/app:1";
const NEW: &str = "127.0.0.1:5999/odac/app:2";
const DIGEST_1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const DIGEST_2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn open(fake: &Arc<FakeEngine>, dir: &Path) -> AppManager {
    let config = AppManagerConfig {
        pull_stall_secs: 30,
        docker_config: dir.join("no-docker-config.json"),
        ..fake_config(dir)
    };
    open_on(fake, config)
}

fn app(image: &str) -> AppSpec {
    crate::appmgr_support::sleeper("web", image)
}

async fn until(m: &AppManager, pred: impl Fn(&AppStatus) -> bool) -> AppStatus {
    pass_until(m, 200, pred).await
}

#[tokio::test(start_paused = true)]
async fn the_previous_version_runs_while_the_new_image_is_pulled() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    fake.publish(OLD, DIGEST_1, None);
    fake.publish(NEW, DIGEST_2, None);
    let m = open(&fake, dir.path());
    m.set_desired(DesiredState {
        generation: 1,
        apps: vec![app(OLD)],
    })
    .await
    .unwrap();
    let old = until(&m, |s| s.state == AppState::Running).await;
    let id = old.container_id.clone().unwrap();

    fake.stall_pulls(true);
    fake.clear_calls();
    m.set_desired(DesiredState {
        generation: 2,
        apps: vec![app(NEW)],
    })
    .await
    .unwrap();
    for _ in 0..10 {
        let s = m.reconcile_once().await.remove(0);
        assert_eq!(s.state, AppState::Pulling, "{s:#?}");
        assert_eq!(
            s.container_id.as_deref(),
            Some(id.as_str()),
            "the old one runs"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(fake.container_ids().contains(&id));
    assert!(fake.calls_of(Op::Stop).is_empty(), "{:?}", fake.calls());
    assert!(fake.calls_of(Op::Remove).is_empty(), "{:?}", fake.calls());

    // the stalled pull is given up after `pull_stall_secs`; the next one goes through
    fake.stall_pulls(false);
    let s = until(&m, |s| {
        s.state == AppState::Running && s.container_id.as_deref() != Some(id.as_str())
    })
    .await;
    assert_eq!(s.image.as_deref(), Some(NEW));
    assert!(!fake.container_ids().contains(&id), "replaced once pulled");
}
