//! Tests of the fleet files: round trips, sealed secrets, the older single-file layout and
//! which files a save rewrites.

#![allow(clippy::unwrap_used)]
use super::*;
use odac_protocol::{AppSpec, EventLevel};

#[test]
fn round_trips_and_missing_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(store.load().unwrap().apps.is_empty());
    let mut data = FleetData {
        version: FORMAT_VERSION,
        ..FleetData::default()
    };
    data.apps.insert(
        "web".into(),
        crate::state::model::AppRecord {
            host: "h1".into(),
            spec: AppSpec::new("web", "busybox"),
            created_ms: 1,
            updated_ms: 2,
            last_restart_request: None,
            sealed_secret: None,
        },
    );
    data.push_event(
        EventLevel::Info,
        "control_plane",
        None,
        Some("web"),
        "created",
    );
    store.save_all(&data).unwrap();
    assert_eq!(store.load().unwrap(), data);
    // a git secret is sealed in the file and back in the spec after loading
    let mut spec = AppSpec::new("private", "busybox");
    spec.image = None;
    spec.source = Some(odac_protocol::GitSource {
        url: "https://git.example/o/r.git".into(),
        secret: Some(odac_protocol::GitSecret::new("ghp_in_clear_never")),
        ..odac_protocol::GitSource::default()
    });
    data.apps.insert(
        "private".into(),
        crate::state::model::AppRecord {
            host: "h1".into(),
            spec,
            ..crate::state::model::AppRecord::default()
        },
    );
    store.save_all(&data).unwrap();
    let text = std::fs::read_to_string(store.app_path("private")).unwrap();
    assert!(!text.contains("ghp_in_clear_never"), "{text}");
    assert!(text.contains("\"sealed_secret\": \"v1:"), "{text}");
    assert_eq!(store.load().unwrap(), data);
    // another key cannot open it: the secret is dropped and the app named in an event
    std::fs::remove_file(dir.path().join(crate::state::secrets::KEY_FILE)).unwrap();
    let other = Store::open(dir.path()).unwrap();
    let loaded = other.load().unwrap();
    let source = loaded.apps["private"].spec.source.clone().unwrap();
    assert_eq!(source.secret, None);
    assert!(
        loaded
            .events
            .iter()
            .any(|e| e.app.as_deref() == Some("private")
                && e.message.contains("could not be unsealed")),
        "{:?}",
        loaded.events
    );
    std::fs::write(store.path(), b"{broken").unwrap();
    let err = store.load().unwrap_err().to_string();
    assert!(err.contains("fleet.json"), "{err}");
}

fn host(id: &str, generation: u64) -> HostRecord {
    HostRecord {
        id: id.into(),
        hostname: format!("{id}.lan"),
        generation,
        ..HostRecord::default()
    }
}

#[test]
fn an_older_single_file_fleet_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = FleetData {
        version: 1,
        ..FleetData::default()
    };
    data.hosts.insert("h1".into(), host("h1", 3));
    data.apps.insert(
        "web".into(),
        AppRecord {
            host: "h1".into(),
            spec: AppSpec::new("web", "busybox"),
            ..AppRecord::default()
        },
    );
    // written as the single-file layout wrote it: hosts and apps inside fleet.json
    std::fs::write(
        dir.path().join(FLEET_FILE),
        serde_json::to_vec(&data).unwrap(),
    )
    .unwrap();
    let store = Store::open(dir.path()).unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(loaded, data);
    assert!(
        loaded.version < FORMAT_VERSION,
        "the hub must write it whole"
    );
    // written whole in the new layout, it loads the same, and fleet.json holds no host
    store.save_all(&loaded).unwrap();
    assert!(store.host_path("h1").exists() && store.app_path("web").exists());
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert!(
        !text.contains("h1.lan") && !text.contains("busybox"),
        "{text}"
    );
    let again = store.load().unwrap();
    assert_eq!(again.version, FORMAT_VERSION);
    assert_eq!(again.hosts, data.hosts);
    assert_eq!(again.apps, data.apps);
}

#[test]
fn a_save_rewrites_only_what_changed_and_removes_what_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut data = FleetData::default();
    for id in ["h1", "h2", "odd:id"] {
        data.hosts.insert(id.into(), host(id, 1));
    }
    store.save_all(&data).unwrap();
    let before = |id: &str| {
        std::fs::metadata(store.host_path(id))
            .unwrap()
            .modified()
            .unwrap()
    };
    let (h1, odd) = (before("h1"), before("odd:id"));
    let fleet = std::fs::read(store.path()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    data.hosts.insert("h2".into(), host("h2", 2));
    store
        .save(&Changes {
            hosts: vec![("h2".into(), data.hosts.get("h2").cloned())],
            ..Changes::default()
        })
        .unwrap();
    assert_eq!(before("h1"), h1, "h1 was rewritten");
    assert_eq!(before("odd:id"), odd);
    assert!(before("h2") > h1, "h2 was not rewritten");
    assert_eq!(std::fs::read(store.path()).unwrap(), fleet);
    assert_eq!(store.load().unwrap().hosts, data.hosts);
    // an id that is not a plain file name gets a hex name, never a path
    assert!(
        (store
            .host_path("odd:id")
            .file_name()
            .unwrap()
            .to_string_lossy())
        .starts_with('_')
    );
    assert!(
        !store
            .host_path("../x")
            .starts_with(dir.path().join(FLEET_FILE))
    );
    assert_eq!(
        store.host_path("../x").parent().unwrap(),
        dir.path().join(HOSTS_DIR)
    );
    // a host that is gone loses its file
    data.hosts.remove("h1");
    store
        .save(&Changes {
            hosts: vec![("h1".into(), None)],
            ..Changes::default()
        })
        .unwrap();
    assert!(!store.host_path("h1").exists());
    assert_eq!(store.load().unwrap().hosts, data.hosts);
}
