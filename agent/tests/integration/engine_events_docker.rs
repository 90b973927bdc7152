//! The engine's events drive the app manager, against the real Docker engine. The loop runs
//! with a 10-minute poll and a 1-hour backstop, so a status that arrives within the tests'
//! generous 30 s bound can only come from an event: `docker kill` reports the crash, an OOM
//! kill reports `oom_killed`, `docker rm -f` by hand gets the app recreated, and a health
//! check turning unhealthy is reported from its `health_status` event. The seam itself: the
//! stream carries `start`, `kill` and `die` (with the exit code) of the instance's containers
//! and nothing of a container without its label. Each test has its own `apps.instance` and
//! removes every container of it at the end, even when an assertion fails.

use crate::docker_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use docker_support::{InstanceRun, engine_with_test_image, then_clean_up, unique_suffix};
use futures_util::StreamExt;
use odac_agent::appmgr::{AppManager, AppManagerConfig, CrashLoopConfig};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{ContainerEngine, ContainerSpec, EngineEvent, EventFilter, EventKind};
use odac_protocol::{
    AppSpec, AppState, AppStatus, HealthCheck, HealthState, Resources, RestartPolicy,
};
use tokio_util::sync::CancellationToken;

/// The generous bound on anything the tests wait for.
const BOUND: Duration = Duration::from_secs(30);

/// One test's own instance on the real engine, its manager's loop running.
struct Run {
    base: InstanceRun,
    m: AppManager,
    shutdown: CancellationToken,
}

impl Run {
    async fn new(test: &str, spec: AppSpec) -> Option<Run> {
        let base = InstanceRun::new(test, "odac-ev").await?;
        let config = AppManagerConfig {
            // nothing but an event can explain a prompt status
            poll_interval_ms: 600_000,
            backstop_secs: 3600,
            crash_loop: CrashLoopConfig {
                initial_backoff_ms: 600_000,
                ..CrashLoopConfig::default()
            },
            ..base.config()
        };
        let m =
            AppManager::open(config, base.engine.clone(), crate::fixture_hosts::no_gpu()).unwrap();
        crate::appmgr_support::set_one(&m, 1, spec).await;
        let shutdown = CancellationToken::new();
        tokio::spawn(m.clone().run(shutdown.clone()));
        Some(Run { base, m, shutdown })
    }

    /// Waits until the status satisfies `done` (the loop alone acts; [`BOUND`] at most).
    async fn until(&self, what: &str, done: impl Fn(&AppStatus) -> bool) -> AppStatus {
        let deadline = Instant::now() + BOUND;
        loop {
            if let Some(s) = self.m.statuses().into_iter().next().filter(&done) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: last status {:?}",
                self.m.statuses()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Running, with the event stream up.
    async fn running(&self) -> AppStatus {
        let s = self
            .until("running", |s| s.state == AppState::Running)
            .await;
        let deadline = Instant::now() + BOUND;
        while !self.m.events_live() {
            assert!(Instant::now() < deadline, "the event stream never came up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        s
    }

    async fn clean_up(&self) {
        self.shutdown.cancel();
        self.base.clean_up().await;
    }
}

fn sleeper(name: &str) -> AppSpec {
    let mut spec = AppSpec::new(name, BUSYBOX_TEST_IMAGE);
    spec.command = vec!["sleep".into(), "3600".into()];
    spec
}

fn docker(args: &[&str]) {
    let out = std::process::Command::new("docker")
        .args(args)
        .output()
        .expect("run docker");
    assert!(out.status.success(), "docker {args:?}: {out:?}");
}

#[tokio::test]
async fn docker_kill_reports_the_crash_through_the_die_event() {
    let Some(run) = Run::new("events_kill", sleeper("victim")).await else {
        return;
    };
    then_clean_up(
        async {
            let id = run.running().await.container_id.unwrap();
            docker(&["kill", &id]);
            let s = run
                .until("the crash reported", |s| s.last_exit_code == Some(137))
                .await;
            assert_ne!(s.state, AppState::Running, "{s:?}");
            assert_eq!(s.crash.unwrap().exit_code, Some(137));
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn an_oom_kill_is_reported_through_its_events() {
    let mut spec = AppSpec::new("hungry", BUSYBOX_TEST_IMAGE);
    spec.command = vec![
        "sh".into(),
        "-c".into(),
        r#"sleep 2; x=$(head -c 67108864 /dev/zero | tr "\0" a); echo survived; sleep 1"#.into(),
    ];
    spec.restart = Some(RestartPolicy::Never);
    spec.resources = Resources {
        memory_bytes: Some(6 * 1024 * 1024),
        cpus: None,
    };
    let Some(run) = Run::new("events_oom", spec).await else {
        return;
    };
    then_clean_up(
        async {
            run.running().await;
            let s = run
                .until("an oom kill", |s| {
                    s.crash.as_ref().is_some_and(|c| c.oom_killed)
                })
                .await;
            assert_eq!(s.state, AppState::Failed, "`never` does not restart it");
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn a_container_removed_by_hand_is_recreated_through_the_destroy_event() {
    let Some(run) = Run::new("events_rm", sleeper("removed")).await else {
        return;
    };
    then_clean_up(
        async {
            let id = run.running().await.container_id.unwrap();
            docker(&["rm", "-f", &id]);
            let s = run
                .until("recreated", |s| {
                    s.state == AppState::Running
                        && s.container_id.as_deref().is_some_and(|c| c != id)
                })
                .await;
            assert!(s.crash.is_none(), "{s:?}");
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn a_health_check_turning_unhealthy_is_reported_from_its_event() {
    let mut spec = AppSpec::new("sick", BUSYBOX_TEST_IMAGE);
    spec.command = vec!["sh".into(), "-c".into(), "touch /tmp/ok; sleep 3600".into()];
    spec.healthcheck = Some(HealthCheck {
        command: vec![
            "sh".into(),
            "-c".into(),
            "test -f /tmp/ok || { echo not ready; exit 1; }".into(),
        ],
        interval_secs: Some(1),
        timeout_secs: Some(5),
        retries: Some(1),
        start_period_secs: None,
    });
    let Some(run) = Run::new("events_health", spec).await else {
        return;
    };
    then_clean_up(
        async {
            let id = run.running().await.container_id.unwrap();
            run.until("healthy", |s| {
                s.health
                    .as_ref()
                    .is_some_and(|h| h.state == HealthState::Healthy)
            })
            .await;
            docker(&["exec", &id, "rm", "/tmp/ok"]);
            let s = run
                .until("unhealthy", |s| {
                    s.health
                        .as_ref()
                        .is_some_and(|h| h.state == HealthState::Unhealthy)
                })
                .await;
            assert_eq!(s.state, AppState::Running);
            let output = s.health.unwrap().last_output.unwrap_or_default();
            assert!(output.contains("not ready"), "{output:?}");
        },
        run.clean_up(),
    )
    .await;
}

/// The seam: the stream of the instance's containers carries start, kill and die (with the
/// exit code), and nothing of a container without the instance's label.
#[tokio::test]
async fn the_stream_carries_the_instances_container_events_only() {
    let Some(engine) = engine_with_test_image("events_seam").await else {
        return;
    };
    let instance = format!("odac-evs{}", unique_suffix());
    let label = format!("{}={instance}", odac_host::names::INSTANCE);
    let ours = ContainerSpec {
        name: format!("{instance}_ours"),
        image: BUSYBOX_TEST_IMAGE.to_owned(),
        command: Some(vec!["sleep".into(), "3600".into()]),
        labels: BTreeMap::from([
            (odac_host::names::INSTANCE.to_owned(), instance.clone()),
            ("odac.test".to_owned(), "1".to_owned()),
        ]),
        ..ContainerSpec::default()
    };
    let mut other = ours.clone();
    other.name = format!("{instance}_other");
    other.labels.remove(odac_host::names::INSTANCE);
    // the request goes out when the stream is first polled: `since` covers what comes before
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let filter = EventFilter {
        labels: vec![label],
        since_nanos: Some(i64::try_from(now.as_nanos()).unwrap()),
    };
    let mut stream = engine.events(&filter).await.unwrap();
    let names = [ours.name.clone(), other.name.clone()];
    let engine = &engine;
    then_clean_up(
        async {
            let other_id = engine.create(&other).await.unwrap();
            engine.start(&other_id).await.unwrap();
            let id = engine.create(&ours).await.unwrap();
            engine.start(&id).await.unwrap();
            docker(&["kill", &id]);
            let mut seen: Vec<EngineEvent> = Vec::new();
            while !seen.iter().any(|e| e.kind == EventKind::Die) {
                let next = tokio::time::timeout(BOUND, stream.next())
                    .await
                    .expect("events within the bound")
                    .expect("the stream stays open")
                    .unwrap();
                seen.push(next);
            }
            let kinds: Vec<&EventKind> = seen.iter().map(|e| &e.kind).collect();
            assert_eq!(
                kinds,
                [&EventKind::Start, &EventKind::Kill, &EventKind::Die],
                "{seen:?}"
            );
            assert!(
                seen.iter()
                    .all(|e| e.container.as_deref() == Some(id.as_str()))
            );
            assert_eq!(
                seen[2].attributes.get("exitCode").map(String::as_str),
                Some("137")
            );
            assert!(seen.iter().all(|e| e.time_nanos > 0));
            engine.ping().await.unwrap();
        },
        async {
            for name in &names {
                let _ = engine.remove(name, true).await;
            }
        },
    )
    .await;
}
