//! Host access is bound at creation, like the GPU intent (issue 33): a change of `shm_size`,
//! `caps`, `sysctls` or `devices` alone leaves the running container alone and sets
//! `restart_required`; a new restart token recreates it with the new host access. Against
//! the fake engine, which records every create.

use std::sync::Arc;

use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_host::engine::{FakeEngine, Op};
use odac_protocol::{AppSpec, DesiredState};

const IMAGE: &str = "odac/busybox:test";

use crate::fixture_hosts::host as fixture;

use crate::appmgr_support::created_specs as created;

fn desired(generation: u64, spec: &AppSpec) -> DesiredState {
    DesiredState {
        generation,
        apps: vec![spec.clone()],
    }
}

#[tokio::test]
async fn a_host_access_change_waits_for_a_restart_token() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeEngine::new();
    fake.add_image(IMAGE);
    let fake = Arc::new(fake);
    let config = AppManagerConfig {
        state_dir: dir.path().to_path_buf(),
        stop_timeout_secs: 0,
        ..AppManagerConfig::default()
    };
    let m = AppManager::open(config, fake.clone(), fixture("no-gpu")).unwrap();
    let mut spec: AppSpec = serde_json::from_value(serde_json::json!({
        "name": "nvr",
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "shm_size": "64m",
    }))
    .unwrap();
    m.set_desired(desired(1, &spec)).await.unwrap();
    let first = m.reconcile_once().await.remove(0);
    assert!(!first.restart_required, "{first:?}");
    assert_eq!(created(&fake)[0].shm_size, Some(64 << 20));

    spec.shm_size = Some(serde_json::from_value(serde_json::json!("512m")).unwrap());
    spec.caps = vec!["net_admin".into()];
    m.set_desired(desired(2, &spec)).await.unwrap();
    let changed = m.reconcile_once().await.remove(0);
    assert!(changed.restart_required, "{changed:?}");
    assert_eq!(
        changed.container_id, first.container_id,
        "container untouched"
    );
    assert_eq!(created(&fake).len(), 1);
    assert!(fake.calls_of(Op::Remove).is_empty());

    spec.restart_token = Some("2026-01-01T00:00:00Z".into());
    m.set_desired(desired(3, &spec)).await.unwrap();
    let restarted = m.reconcile_once().await.remove(0);
    assert!(!restarted.restart_required, "{restarted:?}");
    assert_ne!(restarted.container_id, first.container_id);
    let now = created(&fake).pop().unwrap();
    assert_eq!(now.shm_size, Some(512 << 20));
    assert_eq!(now.cap_add, vec!["NET_ADMIN".to_owned()]);

    // another command still recreates at once: only host access (and the GPU) wait
    spec.command = vec!["sleep".into(), "7200".into()];
    m.set_desired(desired(4, &spec)).await.unwrap();
    let recreated = m.reconcile_once().await.remove(0);
    assert_ne!(recreated.container_id, restarted.container_id);
    assert_eq!(created(&fake).len(), 3);
}
