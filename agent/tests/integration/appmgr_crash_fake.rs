//! Why an app is down, against the fake engine: the crash part of the status (exit code, OOM
//! kill, next retry, output tail) apart from the GPU part, the restart policies, health read
//! back (also on quiet passes), the run options given at create (health check, log rotation
//! capped by the agent), and the crash counters and backoff surviving an agent restart, over
//! paused time.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use odac_agent::appmgr::AppManager;
use odac_host::engine::{
    ContainerEngine, ContainerHealth, EngineCall, FakeEngine, LogRotation, Op,
};
use odac_protocol::{
    AppSpec, AppState, AppStatus, CrashReason, DesiredState, HealthCheck, HealthState, LogLimits,
    RestartPolicy,
};

const IMAGE: &str = "odac/busybox:test";

fn fake() -> Arc<FakeEngine> {
    crate::appmgr_support::fake_with(IMAGE)
}

use crate::appmgr_support::open_fake as open;

fn app(name: &str, restart: Option<RestartPolicy>) -> AppSpec {
    let mut spec = AppSpec::new(name, IMAGE);
    spec.command = vec!["sh".into(), "-c".into(), "echo boom; exit 3".into()];
    spec.restart = restart;
    spec
}

async fn set(m: &AppManager, apps: Vec<AppSpec>) {
    m.set_desired(DesiredState {
        generation: 1,
        apps,
    })
    .await
    .unwrap();
}

async fn once(m: &AppManager) -> AppStatus {
    m.reconcile_once().await.remove(0)
}

/// A manager in a fresh state directory on a fake engine, running the one app `name` after
/// a pass: the directory, the engine, the manager and the app's container id.
async fn one_running(name: &str) -> (tempfile::TempDir, Arc<FakeEngine>, AppManager, String) {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    let m = open(&fake, dir.path());
    set(&m, vec![app(name, None)]).await;
    let id = once(&m).await.container_id.unwrap();
    (dir, fake, m, id)
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_crash_explains_itself_apart_from_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    let m = open(&fake, dir.path());
    set(&m, vec![app("boom", None)]).await;
    let s = once(&m).await;
    assert_eq!((s.state, &s.crash), (AppState::Running, &None));
    let id = s.container_id.unwrap();
    let long: String = (0..200).map(|i| format!("line {i}\n")).collect();
    fake.push_log(&id, &long);
    fake.push_log(&id, "boom\n");
    fake.exit_container(&id, 3);
    let s = once(&m).await;
    assert_eq!(s.state, AppState::Restarting);
    let crash = s.crash.clone().expect("a crash part");
    assert_eq!(
        crash.reason,
        CrashReason::Crashed,
        "exit 3 under `always` is a crash"
    );
    assert_eq!((crash.exit_code, crash.oom_killed), (Some(3), false));
    let tail = crash.output_tail.unwrap();
    assert!(tail.ends_with("line 199\nboom\n"), "{tail}");
    assert_eq!(tail.lines().count(), 50);
    let retry = crash.next_retry_at_ms.unwrap();
    let ahead = retry.saturating_sub(now_ms());
    assert!((500..=1_000).contains(&ahead), "next retry in {ahead} ms");
    assert_eq!(s.gpu.fallback, None, "no gpu reason for a crash");
    assert_eq!(
        fake.calls_of(Op::LogsTail).len(),
        1,
        "the tail is read once per exit"
    );
    assert_eq!(once(&m).await.crash, s.crash, "stable between passes");
    assert_eq!(fake.calls_of(Op::LogsTail).len(), 1);

    // restarted after 1 s, exits again: a crash loop
    tokio::time::advance(Duration::from_secs(1)).await;
    let restarted = once(&m).await;
    assert_eq!(
        (restarted.state, &restarted.crash, restarted.restart_count),
        (AppState::Running, &None, 1),
        "the pass that restarts it reports it running, without the crash of its previous run"
    );
    assert_eq!(restarted.last_exit_code, Some(3));
    fake.push_log(&id, "boom again\n");
    fake.exit_container(&id, 3);
    let s = once(&m).await;
    assert_eq!(s.state, AppState::CrashLoop);
    let crash = s.crash.unwrap();
    assert_eq!(crash.reason, CrashReason::CrashLoop);
    assert!(crash.output_tail.unwrap().ends_with("boom again\n"));
    assert_eq!(s.restart_count, 1);
}

#[tokio::test(start_paused = true)]
async fn clean_exits_under_always_are_restarted_without_a_crash() {
    let (_dir, fake, m, id) = one_running("tick").await;
    for round in 0..3 {
        fake.exit_container(&id, 0);
        let s = once(&m).await;
        assert_eq!(s.state, AppState::Restarting, "round {round}: {s:?}");
        let crash = s.crash.clone().unwrap();
        assert_eq!(crash.reason, CrashReason::Exited, "round {round}: {s:?}");
        assert!(crash.next_retry_at_ms.is_some(), "restarted under `always`");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(once(&m).await.state, AppState::Running, "round {round}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_oom_kill_is_its_own_reason() {
    let (_dir, fake, m, id) = one_running("hungry").await;
    let mut events = m.subscribe_events();
    fake.oom_kill(&id);
    let s = once(&m).await;
    let crash = s.crash.unwrap();
    assert_eq!(
        (crash.reason, crash.oom_killed, crash.exit_code),
        (CrashReason::OomKilled, true, Some(137))
    );
    assert_eq!(crash.output_tail, None, "no output, no tail");
    let event = events.try_recv().unwrap();
    assert_eq!(event.app.as_deref(), Some("hungry"));
    assert!(event.message.contains("oom killer"), "{event:?}");
}

#[tokio::test(start_paused = true)]
async fn restart_policies_decide_what_an_exit_means() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    let m = open(&fake, dir.path());
    set(
        &m,
        vec![
            app("always", None),
            app("done", Some(RestartPolicy::Never)),
            app("failing", Some(RestartPolicy::Never)),
            app("retried", Some(RestartPolicy::OnFailure)),
            app("tidy", Some(RestartPolicy::OnFailure)),
        ],
    )
    .await;
    let first = m.reconcile_once().await;
    let id = |name: &str| {
        first
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.container_id.clone())
            .unwrap()
    };
    for (name, code) in [
        ("always", 0),
        ("done", 0),
        ("failing", 3),
        ("retried", 3),
        ("tidy", 0),
    ] {
        fake.exit_container(&id(name), code);
    }
    let starts = fake.calls_of(Op::Start).len();
    for _ in 0..3 {
        m.reconcile_once().await;
        tokio::time::advance(Duration::from_millis(600)).await;
    }
    let statuses = m.reconcile_once().await;
    let state = |name: &str| {
        let s = statuses.iter().find(|s| s.name == name).unwrap();
        (s.state, s.restart_count)
    };
    assert_eq!(state("always"), (AppState::Running, 1));
    assert_eq!(state("retried"), (AppState::Running, 1));
    assert_eq!(state("done"), (AppState::Exited, 0));
    assert_eq!(state("tidy"), (AppState::Exited, 0));
    assert_eq!(state("failing"), (AppState::Failed, 0));
    assert_eq!(fake.calls_of(Op::Start).len(), starts + 2);
    let failing = statuses.iter().find(|s| s.name == "failing").unwrap();
    let crash = failing.crash.as_ref().unwrap();
    assert_eq!(
        (crash.reason, crash.exit_code, crash.next_retry_at_ms),
        (CrashReason::Crashed, Some(3), None)
    );
    // PROTOCOL.md 3.1: a final exit 0 (here under on_failure) carries crash reason `exited`
    let tidy = statuses.iter().find(|s| s.name == "tidy").unwrap();
    let crash = tidy.crash.as_ref().unwrap();
    assert_eq!(
        (crash.reason, crash.exit_code, crash.next_retry_at_ms),
        (CrashReason::Exited, Some(0), None)
    );
}

#[tokio::test(start_paused = true)]
async fn health_is_reported_and_run_options_are_given_at_create() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake();
    let m = open(&fake, dir.path());
    let mut spec = app("web", None);
    spec.healthcheck = Some(HealthCheck {
        command: vec!["sh".into(), "-c".into(), "test -f /ready".into()],
        interval_secs: Some(2),
        retries: Some(1),
        ..HealthCheck::default()
    });
    spec.logs = Some(LogLimits {
        max_size_bytes: Some(1 << 20),
        max_files: Some(50),
    });
    set(&m, vec![spec]).await;
    let s = once(&m).await;
    assert_eq!(s.health, None, "no health check state yet");
    let id = s.container_id.unwrap();
    let created = match &fake.calls_of(Op::Create)[0] {
        EngineCall::Create(spec) => spec.clone(),
        other => panic!("{other:?}"),
    };
    let probe = created.healthcheck.unwrap();
    assert_eq!(probe.command[2], "test -f /ready");
    assert_eq!(probe.interval, Some(Duration::from_secs(2)));
    assert_eq!(
        created.log_rotation,
        Some(LogRotation {
            max_size_bytes: 1 << 20,
            max_files: 3
        }),
        "the spec lowers the size; the file count stays at the agent's cap"
    );
    fake.set_health(
        &id,
        Some(ContainerHealth {
            status: "starting".into(),
            last_failure: None,
        }),
    );
    assert_eq!(once(&m).await.health.unwrap().state, HealthState::Starting);
    fake.set_health(
        &id,
        Some(ContainerHealth {
            status: "unhealthy".into(),
            last_failure: Some("test: /ready: not found\n".into()),
        }),
    );
    // a plain poll tick (quiet pass) sees it too
    tokio::time::sleep(Duration::from_secs(3)).await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    shutdown.cancel();
    task.await.unwrap();
    let health = m.statuses()[0].health.clone().unwrap();
    assert_eq!(health.state, HealthState::Unhealthy);
    assert_eq!(
        health.last_output.as_deref(),
        Some("test: /ready: not found")
    );
}

#[tokio::test(start_paused = true)]
async fn restart_counts_and_backoff_survive_an_agent_restart() {
    let (dir, fake, m, id) = one_running("boom").await;
    // three exits, two restarts: the next restart waits 4 s
    for wait in [1, 2] {
        fake.exit_container(&id, 3);
        once(&m).await;
        tokio::time::advance(Duration::from_secs(wait)).await;
        assert_eq!(once(&m).await.state, AppState::Running);
    }
    fake.push_log(&id, "boom\n");
    fake.exit_container(&id, 3);
    let before = once(&m).await;
    assert_eq!(
        (before.state, before.restart_count),
        (AppState::CrashLoop, 2)
    );
    drop(m);
    assert!(dir.path().join("crashes.json").exists());

    // the agent restarts; the container stays exited
    let m = open(&fake, dir.path());
    let starts = fake.calls_of(Op::Start).len();
    let after = once(&m).await;
    assert_eq!(after.state, AppState::CrashLoop);
    assert_eq!(after.restart_count, 2, "counted across the restart");
    assert_eq!(
        after.crash, before.crash,
        "the same diagnosis, tail included"
    );
    tokio::time::advance(Duration::from_millis(3_800)).await;
    once(&m).await;
    assert_eq!(
        fake.calls_of(Op::Start).len(),
        starts,
        "the 4 s backoff is kept"
    );
    tokio::time::advance(Duration::from_millis(300)).await;
    let s = once(&m).await;
    assert_eq!((s.state, s.restart_count), (AppState::Running, 3));
    assert!(fake.inspect(&id).await.unwrap().running);
}
