//! Why an app is down, against the real Docker engine: an app that prints
//! `boom` and exits 3 reports exit code 3 with `boom` in its output tail; one that allocates
//! 64 MiB under a 6 MiB limit reports `oom_killed`; a failing health check reports
//! `unhealthy` with the check's output (the spec's, and the image's own `HEALTHCHECK`); the container's `HostConfig.LogConfig` carries the
//! rotation limits; an exit 0 under `never` is `exited` and not restarted; the restart count
//! survives an agent restart. Each test has its own `apps.instance` and removes every container
//! of it at the end, even when an assertion fails.

use crate::appmgr_support::until_real;
use crate::docker_support;

use std::time::Duration;

use docker_support::{InstanceRun, then_clean_up};
use odac_agent::appmgr::AppManager;
use odac_host::engine::ContainerEngine;
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_protocol::{
    AppSpec, AppState, AppStatus, CrashReason, HealthCheck, HealthState, LogLimits, Resources,
    RestartPolicy,
};

/// One test's own instance on the real engine.
type Run = InstanceRun;

async fn new_run(test: &str) -> Option<Run> {
    InstanceRun::new(test, "odac-crash").await
}

fn app(name: &str, script: &str, restart: Option<RestartPolicy>) -> AppSpec {
    let mut spec = AppSpec::new(name, BUSYBOX_TEST_IMAGE);
    spec.command = vec!["sh".into(), "-c".into(), script.into()];
    spec.restart = restart;
    spec
}

async fn set(m: &AppManager, spec: AppSpec) {
    crate::appmgr_support::set_one(m, 1, spec).await;
}

/// `docker inspect --format <format> <id>`.
fn docker_inspect(id: &str, format: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["inspect", "--format", format, id])
        .output()
        .expect("run docker inspect");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Reconcile until the status satisfies `done` (30 s at most).
async fn until(m: &AppManager, what: &str, done: impl Fn(&AppStatus) -> bool) -> AppStatus {
    until_real(m, what, Duration::from_secs(30), done).await
}

#[tokio::test]
async fn boom_exit_3_reports_its_code_and_output_and_logs_are_rotated() {
    let Some(run) = new_run("boom_exit_3").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let mut spec = app("boom", "echo starting; echo boom >&2; exit 3", None);
            spec.logs = Some(LogLimits {
                max_size_bytes: Some(1 << 20),
                max_files: Some(2),
            });
            set(&m, spec).await;
            let s = until(&m, "a crash with its tail", |s| s.crash.is_some()).await;
            let crash = s.crash.clone().unwrap();
            assert_eq!(crash.exit_code, Some(3), "{s:?}");
            assert!(!crash.oom_killed);
            assert!(matches!(
                crash.reason,
                CrashReason::Crashed | CrashReason::CrashLoop
            ));
            let tail = crash.output_tail.unwrap_or_default();
            assert!(tail.contains("boom"), "{tail:?}");
            assert!(tail.contains("starting"), "stdout too: {tail:?}");
            assert!(crash.next_retry_at_ms.is_some(), "restarted under `always`");
            assert_eq!(s.gpu.fallback, None);
            let id = s.container_id.unwrap();
            assert_eq!(
                docker_inspect(&id, "{{json .HostConfig.LogConfig}}"),
                r#"{"Type":"json-file","Config":{"max-file":"2","max-size":"1048576"}}"#
            );
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn allocating_64_mib_under_a_6_mib_limit_is_oom_killed() {
    let Some(run) = new_run("oom_killed").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let mut spec = app(
                "hungry",
                r#"x=$(head -c 67108864 /dev/zero | tr "\0" a); echo survived; sleep 1"#,
                Some(RestartPolicy::Never),
            );
            spec.resources = Resources {
                memory_bytes: Some(6 * 1024 * 1024),
                cpus: None,
            };
            set(&m, spec).await;
            // the engine may record the kill a moment after the exit: the status follows
            let s = until(&m, "an oom kill", |s| {
                s.crash.as_ref().is_some_and(|c| c.oom_killed)
            })
            .await;
            let crash = s.crash.clone().unwrap();
            assert!(crash.oom_killed, "{s:?}");
            assert_eq!(crash.reason, CrashReason::OomKilled);
            assert_eq!(s.state, AppState::Failed, "`never` does not restart it");
            assert!(!crash.output_tail.unwrap_or_default().contains("survived"));
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn a_failing_health_check_is_unhealthy_with_its_output() {
    let Some(run) = new_run("unhealthy").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let mut spec = app("sick", "sleep 3600", None);
            spec.healthcheck = Some(HealthCheck {
                command: vec![
                    "sh".into(),
                    "-c".into(),
                    "echo model not loaded; exit 1".into(),
                ],
                interval_secs: Some(1),
                timeout_secs: Some(5),
                retries: Some(1),
                start_period_secs: None,
            });
            set(&m, spec).await;
            let s = until(&m, "unhealthy", |s| {
                s.health
                    .as_ref()
                    .is_some_and(|h| h.state == HealthState::Unhealthy)
            })
            .await;
            assert_eq!(s.state, AppState::Running);
            let output = s.health.unwrap().last_output.unwrap_or_default();
            assert!(output.contains("model not loaded"), "{output:?}");
            let id = s.container_id.unwrap();
            assert_eq!(
                docker_inspect(&id, "{{json .HostConfig.LogConfig}}"),
                r#"{"Type":"json-file","Config":{"max-file":"3","max-size":"10485760"}}"#,
                "the agent's defaults"
            );
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn exit_0_under_never_is_exited_and_not_restarted() {
    let Some(run) = new_run("exit_0_never").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            set(&m, app("job", "echo done", Some(RestartPolicy::Never))).await;
            let s = until(&m, "exited", |s| s.state == AppState::Exited).await;
            let id = s.container_id.clone().unwrap();
            let started = docker_inspect(&id, "{{.State.StartedAt}}");
            for _ in 0..10 {
                let s = m.reconcile_once().await.remove(0);
                assert_eq!((s.state, s.restart_count), (AppState::Exited, 0));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            assert_eq!(
                docker_inspect(&id, "{{.State.StartedAt}}"),
                started,
                "never started again"
            );
            let crash = m.statuses()[0].crash.clone().unwrap();
            assert_eq!((crash.exit_code, crash.next_retry_at_ms), (Some(0), None));
            assert_eq!(crash.output_tail.as_deref(), Some("done\n"));
        },
        run.clean_up(),
    )
    .await;
}

#[tokio::test]
async fn the_restart_count_survives_an_agent_restart() {
    let Some(run) = new_run("restart_count_persisted").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            set(&m, app("flaky", "echo boom; exit 3", None)).await;
            let before = until(&m, "two restarts", |s| s.restart_count >= 2).await;
            drop(m);
            let m = run.open();
            let after = m.reconcile_once().await.remove(0);
            assert_eq!(
                after.container_id, before.container_id,
                "the same container"
            );
            assert!(
                after.restart_count >= before.restart_count,
                "{} restarts before, {} after",
                before.restart_count,
                after.restart_count
            );
        },
        run.clean_up(),
    )
    .await;
}

/// A build context holding only `dockerfile`.
fn context(dockerfile: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(dockerfile.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "Dockerfile", dockerfile.as_bytes())
        .unwrap();
    b.into_inner().unwrap()
}

#[tokio::test]
async fn the_images_own_healthcheck_is_reported() {
    let Some(run) = new_run("image_healthcheck").await else {
        return;
    };
    let tag = format!("odac-test/{}:health", run.instance);
    then_clean_up(
        async {
            let dockerfile = format!(
                "FROM {BUSYBOX_TEST_IMAGE}\nHEALTHCHECK --interval=1s --timeout=5s --retries=1 \
                 CMD echo image check failed; exit 1\n"
            );
            let labels = [("odac.test".to_owned(), "1".to_owned())].into();
            run.engine
                .build_image(&tag, context(&dockerfile), "Dockerfile", &labels)
                .await
                .unwrap();
            let m = run.open();
            set(&m, {
                let mut spec = AppSpec::new("imagecheck", tag.clone());
                spec.command = vec!["sleep".into(), "3600".into()];
                spec
            })
            .await;
            let s = until(&m, "unhealthy by the image's check", |s| {
                s.health
                    .as_ref()
                    .is_some_and(|h| h.state == HealthState::Unhealthy)
            })
            .await;
            let output = s.health.unwrap().last_output.unwrap_or_default();
            assert!(output.contains("image check failed"), "{output:?}");
        },
        async {
            run.clean_up().await;
            let _ = run.engine.remove_image(&tag, true).await;
        },
    )
    .await;
}
