//! Shared by the app-manager tests: a fake engine holding the test image, the manager settings
//! of a fake-engine test, a desired state of one generation, one app's status picked out of a
//! pass, one app set as the desired state, passes run until a status holds (paused time, or
//! real time against a real engine), a fake engine that answers like a fixture host's engine,
//! and the specs the manager created.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_agent::cli::inventory::engine_from_info_file;
use odac_host::engine::{ContainerSpec, EngineCall, FakeEngine, Op};
use odac_protocol::{AppSpec, AppStatus, DesiredState};

/// A fake engine that already holds `image`.
pub fn fake_with(image: &str) -> Arc<FakeEngine> {
    fake_with_images(&[image])
}

/// A fake engine that already holds `images`.
pub fn fake_with_images(images: &[&str]) -> Arc<FakeEngine> {
    let fake = FakeEngine::new();
    for image in images {
        fake.add_image(image);
    }
    Arc::new(fake)
}

/// A fake engine answering like the fixture host `host`'s own engine (its docker-info.json),
/// with the nvidia device driver registered when that engine lists the nvidia runtime.
pub fn engine_like(host: &str) -> FakeEngine {
    let fake = FakeEngine::new();
    let info = crate::fixture_hosts::host(host).join("docker-info.json");
    let caps = engine_from_info_file(&info).expect("the fixture's docker-info.json");
    if caps.has_runtime("nvidia") {
        fake.add_device_driver("nvidia");
    }
    fake.set_capabilities(caps);
    fake
}

/// The container specs `fake` was asked to create, in order.
pub fn created_specs(fake: &FakeEngine) -> Vec<ContainerSpec> {
    fake.calls_of(Op::Create)
        .into_iter()
        .map(|c| match c {
            EngineCall::Create(spec) => *spec,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// The app `name` of `image` that sleeps for an hour.
pub fn sleeper(name: &str, image: &str) -> AppSpec {
    let mut spec = AppSpec::new(name, image);
    spec.command = vec!["sleep".into(), "3600".into()];
    spec
}

/// An app manager on `fake` with [`fake_config`] in `dir` and the GPU-less fixture host.
pub fn open_fake(fake: &Arc<FakeEngine>, dir: &Path) -> AppManager {
    open_on(fake, fake_config(dir))
}

/// An app manager on `fake` ([`fake_config`] in `dir`) whose containers are owned by `owner`.
pub fn open_as(fake: &Arc<FakeEngine>, dir: &Path, owner: &str) -> AppManager {
    let config = AppManagerConfig {
        owner: owner.into(),
        ..fake_config(dir)
    };
    open_on(fake, config)
}

/// A running container of `image` named `name`, of instance `odac` and app `app`, owned by
/// `owner` (none: unowned), made on `fake` behind the manager's back; its id.
pub async fn planted(
    fake: &FakeEngine,
    image: &str,
    name: &str,
    app: &str,
    owner: Option<&str>,
) -> String {
    use odac_host::engine::ContainerEngine;
    let mut l = std::collections::BTreeMap::from([
        (odac_host::names::INSTANCE.to_owned(), "odac".to_owned()),
        (odac_host::names::APP.to_owned(), app.to_owned()),
    ]);
    if let Some(o) = owner {
        l.insert(odac_host::names::OWNER.into(), o.into());
    }
    let spec = ContainerSpec {
        name: name.into(),
        image: image.into(),
        labels: l,
        ..ContainerSpec::default()
    };
    let id = fake.create(&spec).await.expect("create on the fake");
    fake.start(&id).await.expect("start on the fake");
    id
}

/// A container health of engine status `status` (`starting`, `healthy`, `unhealthy`).
pub fn health(status: &str) -> Option<odac_host::engine::ContainerHealth> {
    Some(odac_host::engine::ContainerHealth {
        status: status.into(),
        last_failure: None,
    })
}

/// Makes `fake`'s next start fail as the engine refuses a command it cannot find (`serve`).
pub fn next_start_lacks_its_command(fake: &FakeEngine) {
    fake.fail_next(
        Op::Start,
        odac_host::engine::EngineError::Rejected {
            status: 400,
            message: "exec: \"serve\": executable file not found in $PATH".into(),
        },
    );
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

/// Runs the manager's own loop for `window` (real or paused time), then stops it.
pub async fn run_for(m: &AppManager, window: Duration) {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    tokio::time::sleep(window).await;
    shutdown.cancel();
    task.await.expect("the manager's loop ended cleanly");
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
