//! The engine's events drive the app manager, against the fake engine over paused time: a
//! crash is seen through its event, not the poll; with the stream up only the backstop
//! passes run; a closed stream falls back to the poll and is resubscribed on a backoff (never
//! a busy loop) with a full pass after it; a hung stream (silent while the engine answers its
//! ping) is renewed and the health verdict it missed arrives; `doctor` says when the stream is
//! down; the loop's heartbeat stays
//! fresh through hours of nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use odac_agent::appmgr::local::Target;
use odac_agent::appmgr::local::doctor::events_check;
use odac_agent::appmgr::manager::watch::StreamReport;
use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_agent::liveness::Liveness;
use odac_host::engine::{EngineEvent, FakeEngine, Op};
use odac_host::inventory::doctor::CheckStatus;
use odac_protocol::{AppSpec, AppState, AppStatus, DesiredState, HealthCheck, HealthState};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const IMAGE: &str = "odac/busybox:test";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/no-gpu")
}

struct World {
    fake: Arc<FakeEngine>,
    m: AppManager,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
    dir: PathBuf,
}

/// A manager on the fake with one app `web` running, its loop started.
async fn world(poll_ms: u64, backstop_secs: u64, spec: AppSpec) -> World {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&[IMAGE]);
    let config = AppManagerConfig {
        state_dir: dir.path().to_path_buf(),
        stop_timeout_secs: 0,
        poll_interval_ms: poll_ms,
        backstop_secs,
        ..AppManagerConfig::default()
    };
    let m = AppManager::open(config, fake.clone(), fixture()).unwrap();
    crate::appmgr_support::set_one(&m, 1, spec).await;
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    let w = World {
        fake,
        m,
        shutdown,
        task,
        dir: dir.path().to_path_buf(),
        _dir: dir,
    };
    w.until("running with the stream up", |s| {
        s.state == AppState::Running
    })
    .await;
    w.until_live(true).await;
    w
}

impl World {
    fn status(&self) -> AppStatus {
        self.m.statuses().remove(0)
    }

    fn id(&self) -> String {
        self.status().container_id.unwrap()
    }

    /// Waits (in paused time, at most a virtual hour) until `web`'s status satisfies `ok`.
    async fn until(&self, what: &str, ok: impl Fn(&AppStatus) -> bool) -> Duration {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3600) {
            if self.m.statuses().first().is_some_and(&ok) {
                return start.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what}: never happened; last {:?}", self.m.statuses());
    }

    async fn until_live(&self, live: bool) -> Duration {
        let start = Instant::now();
        while self.m.events_live() != live {
            assert!(
                start.elapsed() < Duration::from_secs(3600),
                "stream never live={live}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        start.elapsed()
    }

    /// What `doctor` looks at for this manager's agent set.
    fn target(&self) -> Target {
        Target {
            apps: self.m.config().clone(),
            docker_host: None,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }
}

fn healthy_app() -> AppSpec {
    let mut spec = AppSpec::new("web", IMAGE);
    spec.healthcheck = Some(HealthCheck {
        command: vec!["true".into()],
        ..HealthCheck::default()
    });
    spec
}

use crate::appmgr_support::health;

/// Whether `s` reports the health verdict `state`.
fn health_is(s: &AppStatus, state: HealthState) -> bool {
    s.health.as_ref().is_some_and(|h| h.state == state)
}

#[tokio::test(start_paused = true)]
async fn a_crash_is_seen_through_its_event_not_the_poll() {
    // an hour's poll and backstop: only the event can explain a prompt status
    let w = world(3_600_000, 3600, AppSpec::new("web", IMAGE)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    w.fake.exit_container(&w.id(), 3);
    let took = w
        .until("the crash reported", |s| s.last_exit_code == Some(3))
        .await;
    assert!(took < Duration::from_secs(5), "seen after {took:?}");
    // the container is removed by hand: recreated, again through the event
    let before = w.id();
    w.fake.clear_calls();
    tokio::time::sleep(Duration::from_secs(30)).await;
    // the crash-loop backoff restarted it meanwhile; now it is removed
    let gone = w.id();
    odac_host::engine::ContainerEngine::remove(w.fake.as_ref(), &gone, true)
        .await
        .unwrap();
    let took = w
        .until("recreated", |s| {
            s.state == AppState::Running && s.container_id.as_deref() != Some(gone.as_str())
        })
        .await;
    assert!(took < Duration::from_secs(5), "recreated after {took:?}");
    assert_eq!(before, gone, "the same container ran until it was removed");
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn with_the_stream_up_only_the_backstop_passes_and_it_catches_what_no_event_said() {
    let w = world(2_000, 60, AppSpec::new("web", IMAGE)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    w.fake.clear_calls();
    // ten virtual minutes of nothing: ten backstop passes at most, not 300 polls
    tokio::time::sleep(Duration::from_secs(600)).await;
    let listings = w.fake.calls_of(Op::ListByLabel).len();
    assert!(
        (9..=11).contains(&listings),
        "{listings} listings in 10 minutes with the stream up"
    );
    // an exit the stream never reported (lost) is found by the next backstop pass
    w.fake.exit_silently(&w.id(), 7);
    let took = w
        .until("the silent exit found", |s| s.last_exit_code == Some(7))
        .await;
    assert!(
        took > Duration::from_secs(6) && took <= Duration::from_secs(61),
        "found after {took:?}: neither the 2 s poll nor later than the backstop"
    );
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_closed_stream_falls_back_to_the_poll_and_is_resubscribed_on_a_backoff() {
    let w = world(2_000, 3600, AppSpec::new("web", IMAGE)).await;
    assert_eq!(w.fake.event_subscriptions(), 1);
    let mut changes = w.m.engine_changes();
    // the engine closes the stream and refuses new ones for a while
    w.fake.refuse_events(1_000_000);
    w.fake.close_events();
    w.until_live(false).await;
    let report = StreamReport::load(&w.dir).expect("the stream's state for doctor");
    assert!(!report.live);
    assert_eq!(report.poll_interval_ms, 2_000);
    assert!(
        report.problem.as_deref().unwrap().contains("closed"),
        "{report:?}"
    );
    let doctor = events_check(&w.target()).expect("doctor's events check");
    assert_eq!(doctor.status, CheckStatus::Warn, "{doctor:?}");
    assert!(
        doctor.message.contains("closed the event stream")
            && doctor.message.contains("polls the engine every 2000 ms"),
        "{doctor:?}"
    );
    // meanwhile the poll sees what no event says
    w.fake.exit_silently(&w.id(), 5);
    let took = w
        .until("the exit found by the poll", |s| {
            s.last_exit_code == Some(5)
        })
        .await;
    assert!(took <= Duration::from_secs(3), "found after {took:?}");
    // ten minutes of refusals: a backoff (1 s doubling to 30 s), never a busy loop
    let before = w.fake.event_subscriptions();
    tokio::time::sleep(Duration::from_secs(600)).await;
    let tries = w.fake.event_subscriptions() - before;
    assert!(
        (10..=40).contains(&tries),
        "{tries} subscriptions in 10 minutes"
    );
    // the engine takes subscriptions again: resubscribed, a full pass, a rescan signalled
    w.fake.refuse_events(0);
    w.fake.clear_calls();
    w.until_live(true).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !w.fake.calls_of(Op::Capabilities).is_empty(),
        "a full pass (engine facts read afresh) after the resubscription"
    );
    assert!(
        changes.has_changed().unwrap(),
        "the inventory is told to rescan"
    );
    changes.borrow_and_update();
    assert!(StreamReport::load(&w.dir).unwrap().live);
    let doctor = events_check(&w.target()).unwrap();
    assert_eq!(doctor.status, CheckStatus::Ok, "{doctor:?}");
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_hung_stream_is_renewed_and_the_health_verdict_it_missed_arrives() {
    let w = world(2_000, 60, healthy_app()).await;
    let id = w.id();
    w.fake.set_health(&id, health("healthy"));
    let took = w
        .until("healthy", |s| health_is(s, HealthState::Healthy))
        .await;
    assert!(took < Duration::from_secs(2), "healthy after {took:?}");
    // the stream hangs: open, silent, while the engine answers its ping
    w.fake.hang_events(false);
    tokio::time::sleep(Duration::from_secs(1)).await;
    w.fake.clear_calls();
    w.fake.set_health(&id, health("unhealthy"));
    // backstop passes do not inspect a running container just to read its health
    tokio::time::sleep(Duration::from_secs(150)).await;
    assert!(
        w.fake.calls_of(Op::Inspect).is_empty(),
        "{:?}",
        w.fake.calls_of(Op::Inspect)
    );
    assert_eq!(w.status().health.unwrap().state, HealthState::Healthy);
    assert!(w.m.events_live());
    // after five silent backstops the stream is renewed from the last event seen: the
    // verdict it missed is replayed
    let took = w
        .until("unhealthy", |s| health_is(s, HealthState::Unhealthy))
        .await;
    assert!(took <= Duration::from_secs(300), "after {took:?} more");
    assert_eq!(w.fake.event_subscriptions(), 2, "one renewal");
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_daemon_reload_signals_a_rescan_and_hours_of_nothing_keep_the_heartbeat_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&[IMAGE]);
    let config = AppManagerConfig {
        state_dir: dir.path().to_path_buf(),
        ..AppManagerConfig::default()
    };
    let m = AppManager::open(config, fake.clone(), fixture()).unwrap();
    m.set_desired(DesiredState {
        generation: 1,
        apps: vec![AppSpec::new("web", IMAGE)],
    })
    .await
    .unwrap();
    let mut liveness = Liveness::for_watchdog(Some(Duration::from_secs(15)));
    let beat = liveness.register("app manager");
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(m.clone().run_with(shutdown.clone(), beat));
    let mut changes = m.engine_changes();
    while !m.events_live() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    changes.borrow_and_update();
    fake.emit(EngineEvent::reload(0));
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("a reload is an engine change")
        .unwrap();
    // three virtual hours with nothing happening: the heartbeat never goes stale
    for _ in 0..180 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            liveness.stale(Duration::from_secs(15)).is_empty(),
            "{:?}",
            liveness.stale(Duration::from_secs(15))
        );
    }
    assert!(m.events_live());
    let renewals = fake.event_subscriptions() - 1;
    assert!(
        (30..=37).contains(&renewals),
        "{renewals} renewals in 3 h: one per five silent backstops"
    );
    shutdown.cancel();
    task.await.unwrap();
}
