//! Image clean-up against the fake engine (time paused, no Docker): an image the agent pulled
//! goes `apps.image_gc_delay_secs` after the app moved off it and the rollout settled (never
//! while a rollout could still go back to it), with an `image_removed` event naming it, the
//! bytes that came back and why; an image a container of someone else still uses is kept
//! (the engine's conflict) and tried again; an image added by hand and another instance's
//! image are never touched. On low disk the unused images go at once, the one unused longest
//! first, and the image in use stays.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::{AppEvent, AppManager, AppManagerConfig, RemovalReason};
use odac_host::engine::{ContainerEngine, EngineCall, FakeEngine, Op};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, UpdatePolicy};
use tokio::sync::broadcast::Receiver;

use crate::appmgr_support::{fake_config, open_on, pass_until};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn app(image: &str) -> AppSpec {
    let mut spec = AppSpec::new("web", image);
    // proven on the pass after it is first seen running (the rollout's clock is the wall
    // clock, which paused time does not move)
    spec.update = Some(UpdatePolicy {
        min_healthy_secs: Some(0),
        ..UpdatePolicy::default()
    });
    spec
}

async fn set(m: &AppManager, generation: u64, image: &str) {
    m.set_desired(DesiredState {
        generation,
        apps: vec![app(image)],
    })
    .await
    .unwrap();
}

/// Move the app to `image` (pulled from the fake registry) and let the rollout settle; the
/// image id it runs.
async fn settle_on(m: &AppManager, generation: u64, image: &str) -> String {
    set(m, generation, image).await;
    let s = pass_until(m, 60, |s: &AppStatus| {
        s.state == AppState::Running
            && s.image.as_deref() == Some(image)
            && s.rollout.is_none()
            && s.running_generation.is_none()
    })
    .await;
    s.image_id
        .clone()
        .unwrap_or_else(|| panic!("no image id: {s:#?}"))
}

fn removed_ids(fake: &FakeEngine) -> Vec<String> {
    fake.calls_of(Op::RemoveImage)
        .into_iter()
        .filter_map(|c| match c {
            EngineCall::RemoveImage(id, force) => {
                assert!(!force, "never forced");
                Some(id)
            }
            _ => None,
        })
        .collect()
}

fn removal_events(rx: &mut Receiver<AppEvent>) -> Vec<AppEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if e.image_removed.is_some() {
            out.push(e);
        }
    }
    out
}

fn config(dir: &Path, delay_secs: u64, min_free_mb: u64) -> AppManagerConfig {
    AppManagerConfig {
        image_gc_delay_secs: delay_secs,
        image_gc_min_free_mb: min_free_mb,
        ..fake_config(dir)
    }
}

async fn passes(m: &AppManager, seconds: u64) {
    for _ in 0..seconds {
        m.reconcile_once().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_pulled_image_goes_after_the_delay_and_nothing_else_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    let (a, b) = ("example.test/gc/web:1", "example.test/gc/web:2");
    fake.publish(a, DIGEST, None);
    fake.publish(b, DIGEST, None);
    fake.set_image_size(a, 42_000_000);
    // pulled by hand (the user's), and another instance's pulled image
    fake.add_image("example.test/gc/mine:1");
    fake.publish("example.test/gc/other:1", DIGEST, None);
    let other = open_on(
        &fake,
        AppManagerConfig {
            instance: "other".into(),
            ..config(other_dir.path(), 86_400, 0)
        },
    );
    other
        .set_desired(DesiredState {
            generation: 1,
            apps: vec![AppSpec::new("tool", "example.test/gc/other:1")],
        })
        .await
        .unwrap();
    pass_until(&other, 30, |s| s.state == AppState::Running).await;
    other
        .set_desired(DesiredState {
            generation: 2,
            apps: vec![],
        })
        .await
        .unwrap();
    other.reconcile_once().await;
    drop(other);

    let m = open_on(&fake, config(dir.path(), 60, 0));
    let mut events = m.subscribe_events();
    let a_id = settle_on(&m, 1, a).await;
    // the way back while b rolls out: a stays however long that takes
    set(&m, 2, b).await;
    fake.clear_calls();
    let b_id = settle_on(&m, 2, b).await;
    assert_ne!(a_id, b_id);
    assert!(removed_ids(&fake).is_empty());
    // a someone else's container still uses: the engine refuses, the agent tries again later
    let mut foreign = fake.spec_of(&fake.container_ids()[0]).unwrap();
    foreign.name = "someone-else".into();
    foreign.image = a.into();
    foreign.labels.clear();
    let foreign = fake.create(&foreign).await.unwrap();
    passes(&m, 58).await;
    assert!(removed_ids(&fake).is_empty(), "not before the delay");
    passes(&m, 5).await;
    assert_eq!(removed_ids(&fake), vec![a_id.clone()], "tried once");
    assert!(fake.image_refs().contains(&a.to_owned()), "in use: kept");
    fake.remove(&foreign, true).await.unwrap();
    fake.clear_calls();
    passes(&m, 55).await;
    assert!(removed_ids(&fake).is_empty(), "another delay first");
    passes(&m, 10).await;
    assert_eq!(removed_ids(&fake), vec![a_id.clone()]);
    assert!(!fake.image_refs().contains(&a.to_owned()), "removed");
    let got = removal_events(&mut events);
    assert_eq!(got.len(), 1, "{got:?}");
    let removed = got[0].image_removed.clone().unwrap();
    assert_eq!(
        (
            removed.image.as_str(),
            removed.reference.as_str(),
            removed.bytes
        ),
        (a_id.as_str(), a, 42_000_000)
    );
    assert_eq!(removed.reason, RemovalReason::Delay);
    assert_eq!(got[0].app.as_deref(), Some("web"));
    assert!(
        got[0].message.contains("42.0 MB back"),
        "{}",
        got[0].message
    );

    // an hour on: b runs, the hand-pulled and the other instance's images are untouched
    fake.clear_calls();
    passes(&m, 3600).await;
    assert!(removed_ids(&fake).is_empty(), "{:?}", removed_ids(&fake));
    let refs = fake.image_refs();
    for kept in [b, "example.test/gc/mine:1", "example.test/gc/other:1"] {
        assert!(refs.contains(&kept.to_owned()), "{kept} kept: {refs:?}");
    }
    // the record survives a restart: a is forgotten, b is known
    let book = std::fs::read_to_string(dir.path().join("images.json")).unwrap();
    assert!(book.contains(&b_id) && !book.contains(&a_id), "{book}");
}

#[tokio::test(start_paused = true)]
async fn on_low_disk_the_oldest_unused_image_goes_first_and_the_one_in_use_stays() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    // a loopback registry: with a data root named, a pull first reads the manifest's size
    let refs = [
        "127.0.0.1:9/gc/web:1",
        "127.0.0.1:9/gc/web:2",
        "127.0.0.1:9/gc/web:3",
    ];
    for r in refs {
        fake.publish(r, DIGEST, None);
    }
    fake.add_image("127.0.0.1:9/gc/mine:1");
    // named, but not readable until the directory exists: no low-disk clean-up meanwhile
    let root = dir.path().join("data-root");
    fake.set_data_root(Some(root.to_str().unwrap()));
    // always below the threshold once readable
    let m = open_on(&fake, config(dir.path(), 86_400, 1 << 30));
    let mut events = m.subscribe_events();
    let mut ids = Vec::new();
    for (g, r) in refs.iter().enumerate() {
        ids.push(settle_on(&m, g as u64 + 1, r).await);
        passes(&m, 5).await;
    }
    assert!(removed_ids(&fake).is_empty(), "the data root is unreadable");
    std::fs::create_dir(&root).unwrap();
    // the data root is asked for again within ten minutes
    passes(&m, 660).await;
    assert_eq!(
        removed_ids(&fake),
        vec![ids[0].clone(), ids[1].clone()],
        "oldest unused first, the one in use kept"
    );
    let reasons: Vec<RemovalReason> = removal_events(&mut events)
        .into_iter()
        .filter_map(|e| e.image_removed.map(|r| r.reason))
        .collect();
    assert_eq!(reasons, vec![RemovalReason::LowDisk; 2]);
    let left = fake.image_refs();
    assert!(
        left.contains(&refs[2].to_owned()) && left.contains(&"127.0.0.1:9/gc/mine:1".to_owned())
    );
}
