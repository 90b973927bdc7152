//! Updates that cannot take an app down, against the real Docker engine. Two images are
//! imported locally from the host's static busybox (no registry): one that keeps running, one
//! that prints a line, exits 3 after 2 s. An app bumped from the first to the second is rolled
//! back: the previous container configuration runs again on the same image id, the status says
//! `rolled_back` with exit 3, the output tail and the failing generation, and the failed
//! generation is not created again (engine `create` events counted over a 15 s window: short
//! for a test, the rule has no time limit); an agent restarted afterwards keeps it so. A health
//! check that never passes is rolled back after its (shortened) deadline with the check's
//! output. An update waits while the app keeps `/run/odac/update.lock` (created and removed
//! from inside the container) and overrides a lock older than `update.max_lock_secs`. Without
//! `update.auto_revert` a failed version is left as it is, its status saying so. Each test has its own `apps.instance` and removes every container of it at the end.

use crate::appmgr_support::{set_one, until_real};
use crate::docker_support;

use std::time::{Duration, Instant};

use docker_support::{InstanceRun, then_clean_up};
use odac_agent::appmgr::AppManager;
use odac_host::engine::test_image::{busybox_path, busybox_rootfs_tar};
use odac_host::engine::{ContainerEngine, DockerEngine};
use odac_protocol::{AppSpec, AppState, AppStatus, HealthCheck, RolloutState, UpdatePolicy};

/// Keeps running.
const STEADY: &str = "odac/busybox:rollout-steady";
/// Prints, then exits 3 after 2 s.
const EXITS_3: &str = "odac/busybox:rollout-exit3";

/// Import `tag` from the host's busybox with `cmd` as its command, unless it exists.
async fn ensure_image(engine: &DockerEngine, tag: &str, cmd: &str) {
    if engine.image_exists(tag).await.unwrap() {
        return;
    }
    let busybox = std::fs::read(busybox_path().expect("a static busybox")).unwrap();
    let changes = vec![
        "ENV PATH=/bin".to_owned(),
        format!("CMD {cmd}"),
        "LABEL odac.test=1".to_owned(),
        format!("LABEL odac.test.rollout={tag}"),
    ];
    engine
        .import_image(tag, busybox_rootfs_tar(&busybox).unwrap(), &changes)
        .await
        .unwrap();
}

/// One test's own instance on the real engine, with the two rollout images.
struct Run(InstanceRun);

impl std::ops::Deref for Run {
    type Target = InstanceRun;
    fn deref(&self) -> &InstanceRun {
        &self.0
    }
}

impl Run {
    async fn new(test: &str) -> Option<Run> {
        let run = InstanceRun::new(test, "odac-rollout").await?;
        ensure_image(
            &run.engine,
            STEADY,
            r#"["sh", "-c", "echo steady; exec sleep 3600"]"#,
        )
        .await;
        ensure_image(
            &run.engine,
            EXITS_3,
            r#"["sh", "-c", "echo starting v2; sleep 2; echo broken config >&2; exit 3"]"#,
        )
        .await;
        Some(Run(run))
    }

    /// Containers the engine created for this instance between `since` and `until` (Unix
    /// seconds), from its event log.
    fn creates(&self, since: u64, until: u64) -> Vec<String> {
        let out = std::process::Command::new("docker")
            .args([
                "events",
                "--since",
                &since.to_string(),
                "--until",
                &until.to_string(),
                "--filter",
                "event=create",
                "--filter",
                &format!("label={}={}", odac_host::names::INSTANCE, self.instance),
                "--format",
                "{{.ID}}",
            ])
            .output()
            .expect("run docker events");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn spec(image: &str) -> AppSpec {
    let mut spec = AppSpec::new("web", image);
    spec.env = [("VERSION".to_owned(), image.to_owned())].into();
    spec.update = Some(UpdatePolicy {
        // longer than the 2 s the broken version runs
        min_healthy_secs: Some(4),
        healthy_deadline_secs: Some(4),
        auto_revert: None,
        max_lock_secs: None,
        order: None,
    });
    spec
}

/// The first version runs and proves itself (its way back is written to the state dir).
async fn first_version(run: &Run, m: &AppManager) -> AppStatus {
    set_one(m, 1, spec(STEADY)).await;
    let s = until(m, "the first version runs", |s| {
        s.state == AppState::Running
    })
    .await;
    let book = run.tmp.path().join("state/rollouts.json");
    until(m, "the first version proves itself", |_| {
        std::fs::read_to_string(&book).is_ok_and(|t| t.contains("\"good\""))
    })
    .await;
    s
}

/// Reconcile until the status satisfies `done` (60 s at most).
async fn until(m: &AppManager, what: &str, done: impl Fn(&AppStatus) -> bool) -> AppStatus {
    until_real(m, what, Duration::from_secs(60), done).await
}

#[tokio::test]
async fn a_version_that_exits_3_is_rolled_back_to_the_same_image_and_not_retried() {
    let Some(run) = Run::new("rollout_exit_3").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let before = first_version(&run, &m).await;
            let image_before = before.image_id.clone().expect("image id read back");

            set_one(&m, 2, spec(EXITS_3)).await;
            let s = until(&m, "the new version rolls out", |s| {
                s.rollout
                    .as_ref()
                    .is_some_and(|r| r.state == RolloutState::RollingOut)
            })
            .await;
            assert_eq!(s.rollout.as_ref().unwrap().generation, 2);
            assert!(
                s.rollout.as_ref().unwrap().deadline_at_ms.is_some(),
                "{s:?}"
            );

            let s = until(&m, "rolled back and running", |s| {
                s.state == AppState::Running
                    && s.rollout
                        .as_ref()
                        .is_some_and(|r| r.state == RolloutState::RolledBack)
            })
            .await;
            let r = s.rollout.clone().unwrap();
            assert_eq!((s.generation, r.generation), (2, 2), "{s:?}");
            assert_eq!(s.running_generation, Some(1));
            assert_eq!(s.image_id.as_deref(), Some(image_before.as_str()));
            assert_eq!(s.image.as_deref(), Some(STEADY));
            let cause = r.cause.clone().expect("the crash part of the failed run");
            assert_eq!(cause.exit_code, Some(3), "{r:?}");
            let tail = cause.output_tail.unwrap_or_default();
            assert!(
                tail.contains("broken config") && tail.contains("starting v2"),
                "{tail:?}"
            );
            assert_eq!(r.error.as_deref(), Some("exited with code 3"));
            assert!(r.at_ms.is_some());
            let id = s.container_id.clone().unwrap();
            let inspected = run.engine.inspect(&id).await.unwrap();
            assert_eq!(inspected.image_id, image_before);
            assert!(
                inspected.env.contains(&format!("VERSION={STEADY}")),
                "{:?}",
                inspected.env
            );

            // the failed generation is not created again: 15 s of passes, no engine create
            // the event log counts whole seconds: start after the second the revert was made in
            tokio::time::sleep(Duration::from_millis(1100)).await;
            let since = unix_secs();
            let window = Instant::now() + Duration::from_secs(15);
            while Instant::now() < window {
                let s = m.reconcile_once().await.remove(0);
                assert_eq!(
                    (
                        s.state,
                        s.container_id.as_deref(),
                        s.rollout.map(|r| r.state)
                    ),
                    (
                        AppState::Running,
                        Some(id.as_str()),
                        Some(RolloutState::RolledBack)
                    )
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let created = run.creates(since, unix_secs() + 1);
            assert!(created.is_empty(), "created again: {created:?}");

            // an agent restarted now keeps the previous version and the story
            drop(m);
            let m = run.open();
            let s = m.reconcile_once().await.remove(0);
            assert_eq!(s.container_id.as_deref(), Some(id.as_str()));
            assert_eq!(s.running_generation, Some(1));
            assert_eq!(s.rollout.map(|r| r.state), Some(RolloutState::RolledBack));

            // a newer generation is rolled out again
            let mut newer = spec(STEADY);
            newer.env.insert("FIXED".into(), "1".into());
            set_one(&m, 3, newer).await;
            let s = until(&m, "the fixed version runs", |s| {
                s.state == AppState::Running
                    && s.rollout.is_some()
                    && s.container_id.as_deref() != Some(id.as_str())
            })
            .await;
            assert_eq!(s.running_generation, None);
            assert_eq!(s.rollout.unwrap().state, RolloutState::RollingOut);
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn a_health_check_that_never_passes_is_rolled_back_after_the_deadline() {
    let Some(run) = Run::new("rollout_unhealthy").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let before = first_version(&run, &m).await;
            let mut sick = spec(STEADY);
            sick.healthcheck = Some(HealthCheck {
                command: vec![
                    "sh".into(),
                    "-c".into(),
                    "echo not ready yet >&2; exit 1".into(),
                ],
                interval_secs: Some(1),
                timeout_secs: Some(1),
                retries: Some(1),
                start_period_secs: None,
            });
            set_one(&m, 2, sick).await;
            let s = until(&m, "rolled back after the health deadline", |s| {
                s.rollout
                    .as_ref()
                    .is_some_and(|r| r.state == RolloutState::RolledBack)
                    && s.state == AppState::Running
            })
            .await;
            let r = s.rollout.clone().unwrap();
            assert_eq!(
                r.error.as_deref(),
                Some("was not healthy 4 s after it started (health unhealthy)"),
                "{r:?}"
            );
            let health = r.health.expect("the failed version's health");
            assert!(
                health
                    .last_output
                    .as_deref()
                    .unwrap_or_default()
                    .contains("not ready yet"),
                "{health:?}"
            );
            assert_eq!(s.running_generation, Some(1));
            assert_eq!(s.image_id, before.image_id);
            assert_eq!(s.health, None, "the previous version has no health check");
        },
        run.clean_up(),
    )
    .await;
}

/// `docker exec ID sh -c SCRIPT`: the app itself acting on its `/run/odac`.
fn in_app(id: &str, script: &str) {
    let out = std::process::Command::new("docker")
        .args(["exec", id, "sh", "-c", script])
        .output()
        .expect("run docker exec");
    assert!(out.status.success(), "{script}: {out:?}");
}

#[tokio::test]
async fn an_update_waits_while_the_app_holds_its_lock_and_not_longer_than_max_lock_secs() {
    let Some(run) = Run::new("rollout_update_lock").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let mut events = m.subscribe_events();
            let first = first_version(&run, &m).await;
            let id1 = first.container_id.clone().unwrap();
            in_app(&id1, "touch /run/odac/update.lock");

            let mut second = spec(STEADY);
            second.env.insert("SECOND".into(), "1".into());
            set_one(&m, 2, second.clone()).await;
            for _ in 0..5 {
                let s = m.reconcile_once().await.remove(0);
                let r = s.rollout.clone().expect("a rollout part");
                assert_eq!(r.state, RolloutState::UpdateWaitingLock, "{s:?}");
                assert_eq!(r.generation, 2);
                assert!(r.deadline_at_ms.is_some());
                assert_eq!(
                    s.container_id.as_deref(),
                    Some(id1.as_str()),
                    "not replaced"
                );
                assert_eq!(
                    (s.state, s.running_generation),
                    (AppState::Running, Some(1))
                );
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
            in_app(&id1, "rm /run/odac/update.lock");
            let s = m.reconcile_once().await.remove(0);
            assert_ne!(
                s.container_id.as_deref(),
                Some(id1.as_str()),
                "updated in one pass"
            );
            assert_eq!(s.rollout.map(|r| r.state), Some(RolloutState::RollingOut));
            let s = until(&m, "the second version proves itself", |s| {
                s.rollout.is_none() && s.state == AppState::Running
            })
            .await;
            let id2 = s.container_id.unwrap();

            // a lock older than update.max_lock_secs is overridden, with a warning
            in_app(&id2, "touch /run/odac/update.lock");
            let mut third = second;
            third.env.insert("THIRD".into(), "1".into());
            third.update.as_mut().unwrap().max_lock_secs = Some(2);
            set_one(&m, 3, third).await;
            let s = m.reconcile_once().await.remove(0);
            assert_eq!(
                s.rollout.map(|r| r.state),
                Some(RolloutState::UpdateWaitingLock)
            );
            let s = until(&m, "the third version despite the old lock", |s| {
                s.container_id.as_deref() != Some(id2.as_str())
            })
            .await;
            assert_eq!(s.rollout.map(|r| r.state), Some(RolloutState::RollingOut));
            let mut messages = Vec::new();
            while let Ok(e) = events.try_recv() {
                messages.push(e.message);
            }
            assert!(
                messages
                    .iter()
                    .any(|m| m.contains("more than update.max_lock_secs (2 s): updating anyway")),
                "{messages:#?}"
            );
            assert!(
                messages
                    .iter()
                    .any(|m| m.contains("generation 2 waits: the app holds /run/odac/update.lock")),
                "{messages:#?}"
            );
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn without_auto_revert_the_failed_version_is_left_and_says_so() {
    let Some(run) = Run::new("rollout_no_revert").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            first_version(&run, &m).await;
            let mut broken = spec(EXITS_3);
            broken.update.as_mut().unwrap().auto_revert = Some(false);
            set_one(&m, 2, broken).await;
            let s = until(&m, "the rollout failed", |s| {
                s.rollout
                    .as_ref()
                    .is_some_and(|r| r.state == RolloutState::Failed)
            })
            .await;
            let r = s.rollout.clone().unwrap();
            assert_eq!(r.generation, 2);
            assert_eq!(r.error.as_deref(), Some("exited with code 3"));
            assert_eq!(r.cause.and_then(|c| c.exit_code), Some(3));
            assert_eq!(
                s.running_generation, None,
                "the failed version is what runs"
            );
            assert_eq!(s.image.as_deref(), Some(EXITS_3));
            // it is left to its restart policy, the failure still told
            let s = until(&m, "restarted as before", |s| s.restart_count >= 1).await;
            assert_eq!(s.image.as_deref(), Some(EXITS_3));
            assert_eq!(s.rollout.map(|r| r.state), Some(RolloutState::Failed));
        },
        run.clean_up(),
    )
    .await;
}
