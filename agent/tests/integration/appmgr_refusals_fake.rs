//! Learned refusals against the fake engine, on paused time: once the engine refused a
//! device set, later creates asking for the same set on the same inventory make no GPU
//! create or start (optional: straight to the CPU; required: failed), still report
//! `engine_rejected` with the engine's words and when they were learned, and ask the engine
//! again after `apps.refusal_memory_secs` or when the inventory changes; 0 turns it off.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use odac_agent::appmgr::{AppManager, AppManagerConfig, HostSource};
use odac_agent::cli::inventory::engine_from_info_file;
use odac_host::engine::{FakeEngine, Op};
use odac_host::inventory::{HostScan, scan};
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, FallbackTier, Reason};

const IMAGE: &str = "odac/busybox:test";
const HOST: &str = "intel-i915-igpu";
const WORDS: &str =
    "error gathering device information while adding custom device \"/dev/dri/card1\"";

fn fixture() -> PathBuf {
    crate::fixture_hosts::host(HOST)
}

/// The Intel fixture host whose card node the fake engine cannot open, with a host scan the
/// test can change (the inventory).
struct Setup {
    fake: Arc<FakeEngine>,
    host: Arc<Mutex<HostScan>>,
    manager: AppManager,
    _dir: tempfile::TempDir,
}

fn setup(memory_secs: u64) -> Setup {
    let fake = FakeEngine::new();
    fake.set_capabilities(engine_from_info_file(&fixture().join("docker-info.json")).unwrap());
    fake.add_image(IMAGE);
    fake.mark_device_missing("/dev/dri/card1");
    let fake = Arc::new(fake);
    let host = Arc::new(Mutex::new(scan(&fixture())));
    let seen = host.clone();
    let source = HostSource::Fixed(Arc::new(move || seen.lock().unwrap().clone()));
    let dir = tempfile::tempdir().unwrap();
    let config = AppManagerConfig {
        state_dir: dir.path().to_path_buf(),
        stop_timeout_secs: 0,
        refusal_memory_secs: memory_secs,
        ..AppManagerConfig::default()
    };
    let manager = AppManager::open_with_host(config, fake.clone(), source).unwrap();
    Setup {
        fake,
        host,
        manager,
        _dir: dir,
    }
}

fn app(name: &str, optional: bool) -> AppSpec {
    let mut spec = AppSpec::new(name, IMAGE);
    spec.command = vec!["sleep".into(), "3600".into()];
    let gpu = format!(r#"{{"runtime":"intel","optional":{optional}}}"#);
    spec.gpu = Some(serde_json::from_str(&gpu).unwrap());
    spec
}

impl Setup {
    /// Desire `apps` (a new generation), reconcile once; the status of `name` and the creates
    /// and starts that pass made.
    async fn apply(
        &self,
        generation: u64,
        apps: Vec<AppSpec>,
        name: &str,
    ) -> (AppStatus, usize, usize) {
        self.fake.clear_calls();
        self.manager
            .set_desired(DesiredState { generation, apps })
            .await
            .unwrap();
        let statuses = self.manager.reconcile_once().await;
        let status = statuses.into_iter().find(|s| s.name == name).unwrap();
        (
            status,
            self.fake.calls_of(Op::Create).len(),
            self.fake.calls_of(Op::Start).len(),
        )
    }
}

/// A setup (see `setup`) where app "a" was refused its GPUs and then created without: two
/// creates in the first pass.
async fn refused_once(memory_secs: u64) -> Setup {
    let s = setup(memory_secs);
    let (_, creates, _) = s.apply(1, vec![app("a", true)], "a").await;
    assert_eq!(creates, 2);
    s
}

/// The pass asked the engine again (not refused from memory): the GPU try and the CPU one.
fn asked_again(status: &AppStatus, creates: usize, starts: usize) {
    assert!(!engine_rejected(status).contains("learned"));
    assert_eq!((creates, starts), (2, 2));
}

fn engine_rejected(status: &AppStatus) -> String {
    let fb = status
        .gpu
        .fallback
        .clone()
        .unwrap_or_else(|| panic!("{status:?}"));
    assert_eq!(
        (fb.tier, fb.reason),
        (FallbackTier::Engine, Reason::EngineRejected),
        "{status:?}"
    );
    let detail = fb.detail.unwrap();
    assert!(detail.starts_with(WORDS), "the engine's words: {detail}");
    detail
}

#[tokio::test(start_paused = true)]
async fn a_refused_device_set_is_not_asked_for_again_until_the_memory_passes() {
    let s = setup(600);
    let (first, creates, starts) = s.apply(1, vec![app("a", true)], "a").await;
    assert_eq!(first.state, AppState::Running);
    assert!(!engine_rejected(&first).contains("learned"));
    assert_eq!((creates, starts), (2, 2), "the gpu try, then the cpu");

    // Same device set, same inventory: straight to the CPU, one create, one start.
    let (second, creates, starts) = s.apply(2, vec![app("a", true), app("b", true)], "b").await;
    assert_eq!(second.state, AppState::Running);
    let detail = engine_rejected(&second);
    assert!(
        detail.contains("(learned 20"),
        "when it was learned: {detail}"
    );
    assert_eq!((creates, starts), (1, 1));
    assert!(
        s.fake
            .spec_of(second.container_id.as_deref().unwrap())
            .unwrap()
            .devices
            .is_empty()
    );

    // Required: failed with the engine's words, and no create at all.
    let (req, creates, starts) = s
        .apply(
            3,
            vec![app("a", true), app("b", true), app("r", false)],
            "r",
        )
        .await;
    assert_eq!(req.state, AppState::Failed);
    engine_rejected(&req);
    assert!(
        req.last_error.as_deref().unwrap().starts_with(WORDS),
        "{req:?}"
    );
    assert_eq!((creates, starts), (0, 0));

    // Ten minutes later the engine is asked again.
    tokio::time::advance(Duration::from_secs(601)).await;
    let apps = vec![
        app("a", true),
        app("b", true),
        app("r", false),
        app("c", true),
    ];
    let (third, creates, starts) = s.apply(4, apps, "c").await;
    assert_eq!(third.state, AppState::Running);
    asked_again(&third, creates, starts);
}

#[tokio::test(start_paused = true)]
async fn an_inventory_change_forgets_the_refusal() {
    let s = refused_once(600).await;
    let (_, creates, _) = s.apply(2, vec![app("a", true), app("b", true)], "b").await;
    assert_eq!(creates, 1, "learned");
    // The inventory changes (same devices asked for): the engine is asked again.
    s.host.lock().unwrap().gpus[0].model = Some("Intel UHD Graphics 770 (renamed)".into());
    let apps = vec![app("a", true), app("b", true), app("c", true)];
    let (c, creates, starts) = s.apply(3, apps, "c").await;
    asked_again(&c, creates, starts);
}

#[tokio::test(start_paused = true)]
async fn zero_memory_asks_the_engine_every_time() {
    let s = refused_once(0).await;
    let (b, creates, starts) = s.apply(2, vec![app("a", true), app("b", true)], "b").await;
    asked_again(&b, creates, starts);
}

#[tokio::test(start_paused = true)]
async fn an_explicit_restart_asks_the_engine_again_once_the_cause_is_gone() {
    let s = setup(600);
    let (first, _, _) = s.apply(1, vec![app("r", false), app("o", true)], "r").await;
    assert_eq!(first.state, AppState::Failed, "{first:?}");
    engine_rejected(&first);

    // the operator removes the cause; without a restart the refusal is remembered
    s.fake.mark_device_present("/dev/dri/card1");
    let apps = vec![app("r", false), app("o", true), app("b", true)];
    let (b, creates, _) = s.apply(2, apps, "b").await;
    assert!(engine_rejected(&b).contains("learned"), "{b:?}");
    assert_eq!(creates, 1, "b went to the cpu from memory");

    // `odac app restart r` and `odac app restart o`: a new restart token each
    let mut r = app("r", false);
    r.restart_token = Some("t1".into());
    let mut o = app("o", true);
    o.restart_token = Some("t1".into());
    let (restarted, creates, starts) = s.apply(3, vec![r, o, app("b", true)], "r").await;
    assert_eq!(restarted.state, AppState::Running, "{restarted:?}");
    assert_eq!(restarted.gpu.fallback, None, "{restarted:?}");
    assert!(restarted.gpu.attached.is_some(), "{restarted:?}");
    assert_eq!(
        (creates, starts),
        (2, 2),
        "r and o asked the engine with their devices"
    );
    for st in s.manager.statuses().iter().filter(|st| st.name != "b") {
        assert_eq!(st.gpu.fallback, None, "{st:?}");
        let id = st.container_id.as_deref().unwrap();
        assert!(!s.fake.spec_of(id).unwrap().devices.is_empty(), "{st:?}");
    }
}
