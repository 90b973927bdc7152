//! Tests of the hub's persistence: a restart keeps everything the hub was told, a report
//! rewrites only its host's file, and the background writer saves reports on its own.

#![allow(clippy::unwrap_used)]
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use odac_protocol::{AppSpec, AppState, AppStatus, EventLevel};

use super::*;
use crate::fake_agent::agent_conn::AgentConn;
use crate::state::model::hash_secret;

const TOKEN: &str = "static-token";

fn hub_in(dir: &Path) -> Arc<Hub> {
    let store = Store::open(dir).unwrap();
    let data = store.load().unwrap();
    Hub::new(
        store,
        data,
        Credentials::new(&[TOKEN.to_owned()], 4),
        None,
        20,
    )
}

/// The inode of `path`: a save replaces a file, so a new inode means it was rewritten.
fn inode(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

fn status(name: &str, state: AppState) -> AppStatus {
    AppStatus {
        name: name.into(),
        state,
        ..AppStatus::default()
    }
}

#[tokio::test]
async fn a_restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(dir.path());
    for id in ["h1", "h2"] {
        hub.authorize(&hash_secret(TOKEN), id).await.unwrap();
        hub.hello(&AgentConn::hello(id, &format!("{id}.lan")));
    }
    hub.create_app(Some("h1"), AppSpec::new("web", "busybox"))
        .await
        .unwrap();
    hub.restart("web", Some("r1")).await.unwrap();
    hub.record_status("h1", status("web", AppState::Running));
    hub.record_ack("h1", 2);
    hub.record_event(
        "h2",
        &odac_protocol::Event {
            seq: 1,
            level: EventLevel::Warn,
            app: None,
            message: "disk almost full".into(),
            dropped: None,
            image_removed: None,
        },
    );
    hub.add_enroll_code("code-1").await;
    let token = hub.redeem("code-1", Some("h3")).await.unwrap().unwrap();
    hub.create_app(Some("h2"), AppSpec::new("gone", "busybox"))
        .await
        .unwrap();
    hub.delete_app("gone").await.unwrap();
    hub.flush().await;
    let before = hub.read(Clone::clone);
    assert!(before.hosts["h1"].statuses.contains_key("web"));

    let again = hub_in(dir.path());
    assert_eq!(again.read(Clone::clone), before);
    assert!(again.agent_token_ok(&token), "the enrolled token was lost");
    assert!(!Store::open(dir.path()).unwrap().app_path("gone").exists());
}

#[tokio::test]
async fn a_report_rewrites_only_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(dir.path());
    for id in ["h1", "h2"] {
        hub.hello(&AgentConn::hello(id, id));
    }
    hub.create_app(Some("h1"), AppSpec::new("web", "busybox"))
        .await
        .unwrap();
    hub.flush().await;
    let store = Store::open(dir.path()).unwrap();
    let files = [
        store.host_path("h1"),
        store.host_path("h2"),
        store.app_path("web"),
        store.path().to_owned(),
    ];
    let before: Vec<u64> = files.iter().map(|f| inode(f)).collect();

    hub.record_ack("h2", 7);
    hub.flush().await;
    let after: Vec<u64> = files.iter().map(|f| inode(f)).collect();
    assert_ne!(after[1], before[1], "h2 was not saved");
    assert_eq!(
        (after[0], after[2], after[3]),
        (before[0], before[2], before[3]),
        "a report of h2 rewrote another file"
    );
    assert_eq!(store.load().unwrap().hosts["h2"].acked_generation, Some(7));
}

#[tokio::test]
async fn the_background_writer_saves_reports() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(dir.path());
    hub.hello(&AgentConn::hello("h1", "h1"));
    hub.flush().await;
    let writer = tokio::spawn(Arc::clone(&hub).run_writer());
    hub.record_ack("h1", 5);
    let store = Store::open(dir.path()).unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while store.load().unwrap().hosts["h1"].acked_generation != Some(5) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not saved within 5 s"
        );
        tokio::time::sleep(persist::WRITE_DELAY).await;
    }
    writer.abort();
}

#[tokio::test]
async fn an_older_single_file_fleet_is_written_in_the_new_layout() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = FleetData {
        version: 1,
        ..FleetData::default()
    };
    data.hosts.insert(
        "h1".into(),
        crate::state::model::HostRecord {
            id: "h1".into(),
            ..Default::default()
        },
    );
    std::fs::write(
        dir.path().join(crate::state::store::FLEET_FILE),
        serde_json::to_vec(&data).unwrap(),
    )
    .unwrap();
    let hub = hub_in(dir.path());
    hub.flush().await;
    let store = Store::open(dir.path()).unwrap();
    assert!(store.host_path("h1").exists());
    let loaded = store.load().unwrap();
    assert_eq!(loaded.version, crate::state::store::FORMAT_VERSION);
    assert_eq!(loaded.hosts, data.hosts);
}
