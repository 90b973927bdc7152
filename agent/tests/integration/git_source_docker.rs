//! Apps from git sources against the real Docker engine: a local bare
//! repository (`file://`) whose Dockerfile starts `FROM odac/busybox:test` is built with the
//! classic builder and runs with the right commit; a second commit plus a new restart token
//! runs the new commit; a third prunes the oldest image; a bad URL, a missing branch and a
//! failing Dockerfile end `failed` / `build_failed` with a clear message and are retried on
//! the backoff only (attempts counted over a window). Each test has its own instance and
//! labels every container and image `odac.test=1` plus a run label, removed at the end even
//! when an assertion fails. Without an engine the tests fail under `ODAC_REQUIRE_DOCKER=1`
//! and are skipped otherwise.

use crate::docker_support;
use crate::git_source_support;

use docker_support::{
    engine_with_test_image, logs_with, remove_run_objects, run_labels, then_clean_up, unique_suffix,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use git_source_support::{Repo, count, desired, drain, git_app, until};
use odac_agent::appmgr::{AppManager, AppManagerConfig, CrashLoopConfig};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{ContainerEngine, DockerEngine};
use odac_protocol::{AppSpec, AppState, AppStatus, Reason};

struct Run {
    id: String,
    short: String,
    real: Arc<DockerEngine>,
    tmp: tempfile::TempDir,
}

impl Run {
    fn config(&self) -> AppManagerConfig {
        AppManagerConfig {
            state_dir: self.tmp.path().join("state"),
            instance: format!("odac-gs{}", self.short),
            stop_timeout_secs: 0,
            poll_interval_ms: 100,
            crash_loop: CrashLoopConfig {
                initial_backoff_ms: 250,
                max_backoff_secs: 1,
                healthy_reset_secs: 600,
            },
            extra_labels: run_labels(&self.id),
            ..AppManagerConfig::default()
        }
    }

    fn open(&self) -> AppManager {
        let host =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/no-gpu");
        AppManager::open(self.config(), self.real.clone(), host).unwrap()
    }

    fn app(&self, name: &str) -> String {
        format!("{name}-{}", self.short)
    }

    async fn cleanup(&self) {
        remove_run_objects(self.real.as_ref(), &self.id, true).await;
    }

    async fn logs_with(&self, id: &str, needle: &str) -> String {
        logs_with(self.real.as_ref(), id, needle, 20).await
    }
}

/// Run a test body against the real engine; clean up afterwards, then re-raise any failure.
async fn with_engine<F, Fut>(test: &str, body: F)
where
    F: FnOnce(&'static Run) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(real) = engine_with_test_image(test).await else {
        return;
    };
    let real = Arc::new(real);
    let short = unique_suffix();
    let run: &'static Run = Box::leak(Box::new(Run {
        id: format!("gs-{short}-{test}").replace('_', "-"),
        short,
        real,
        tmp: tempfile::tempdir().unwrap(),
    }));
    then_clean_up(body(run), run.cleanup()).await;
}

const BUILD_WAIT: Duration = Duration::from_secs(120);

fn dockerfile() -> String {
    format!(
        "FROM {BUSYBOX_TEST_IMAGE}\nCOPY version /version\nCMD [\"sh\", \"-c\", \"cat /version; exec sleep 3600\"]\n"
    )
}

fn running_at(commit: &str) -> impl Fn(&AppStatus) -> bool + '_ {
    move |s| s.state == AppState::Running && s.commit.as_deref() == Some(commit)
}

#[tokio::test]
async fn a_git_app_runs_its_commit_and_a_restart_runs_the_next() {
    with_engine("runs_commits", |run| async move {
        let repo = Repo::new(&run.tmp.path().join("repo"));
        let c1 = repo.commit(
            "main",
            &[("Dockerfile", &dockerfile()), ("version", "version one\n")],
            "one",
        );
        let app = run.app("web");
        let manager = run.open();
        let mut rx = manager.subscribe_events();
        let mut events = Vec::new();
        manager
            .set_desired(desired(1, vec![git_app(&app, &repo.url(), Some("main"))]))
            .await
            .unwrap();
        let s = until(&manager, &app, BUILD_WAIT, running_at(&c1)).await;
        let tag1 = format!("odac/{app}:{}", &c1[..12]);
        assert_eq!(s.image.as_deref(), Some(tag1.as_str()));
        let id = s.container_id.clone().unwrap();
        let details = run.real.inspect(&id).await.unwrap();
        assert_eq!(details.image, tag1);
        assert_eq!(details.labels[odac_host::names::GIT_COMMIT], c1);
        let logs = run.logs_with(&id, "version one").await;
        assert!(logs.contains("version one"), "{logs}");
        drain(&mut rx, &mut events);
        assert_eq!(count(&events, &app, "built image"), 1, "{events:#?}");

        // A second commit and a restart run the new commit.
        let c2 = repo.commit("main", &[("version", "version two\n")], "two");
        let mut spec: AppSpec = git_app(&app, &repo.url(), Some("main"));
        spec.restart_token = Some("restart-1".into());
        manager.upsert(2, spec.clone()).await.unwrap();
        let s = until(&manager, &app, BUILD_WAIT, running_at(&c2)).await;
        let id2 = s.container_id.clone().unwrap();
        assert_ne!(id2, id);
        let logs = run.logs_with(&id2, "version two").await;
        assert!(logs.contains("version two"), "{logs}");
        let containers = run
            .real
            .list_by_label(&format!("odac.test.run={}", run.id))
            .await
            .unwrap();
        assert_eq!(containers.len(), 1, "{containers:?}");

        // A third commit: the newest two images stay, the first is pruned.
        let c3 = repo.commit("main", &[("version", "version three\n")], "three");
        spec.restart_token = Some("restart-2".into());
        manager.upsert(3, spec).await.unwrap();
        until(&manager, &app, BUILD_WAIT, running_at(&c3)).await;
        let images = run
            .real
            .list_images_by_label(&format!("{}={app}", odac_host::names::APP))
            .await
            .unwrap();
        let mut commits: Vec<String> = images
            .iter()
            .map(|i| i.labels[odac_host::names::GIT_COMMIT].clone())
            .collect();
        commits.sort();
        let mut expected = vec![c2.clone(), c3.clone()];
        expected.sort();
        assert_eq!(commits, expected, "{images:#?}");
        assert!(
            images
                .iter()
                .all(|i| i.labels.get("odac.test.run") == Some(&run.id))
        );
        assert!(
            !run.real.image_exists(&tag1).await.unwrap(),
            "{tag1} pruned"
        );
    })
    .await;
}

fn build_failed(s: &AppStatus) -> bool {
    s.state == AppState::Failed
        && s.image_failure.as_ref().map(|f| f.reason) == Some(Reason::BuildFailed)
        && s.gpu.fallback.is_none()
}

#[tokio::test]
async fn bad_url_missing_branch_and_failing_dockerfile_end_build_failed_without_a_storm() {
    with_engine("failures", |run| async move {
        let repo = Repo::new(&run.tmp.path().join("repo"));
        let failing = format!(
            "FROM {BUSYBOX_TEST_IMAGE}\nRUN echo compiling the service && exit 3\nCMD [\"sleep\", \"3600\"]\n"
        );
        repo.commit("main", &[("Dockerfile", &failing)], "broken");
        let (bad_url, no_branch, bad_build) =
            (run.app("badurl"), run.app("nobranch"), run.app("badbuild"));
        let manager = run.open();
        let mut rx = manager.subscribe_events();
        manager
            .set_desired(desired(
                1,
                vec![
                    git_app(&bad_url, "file:///nonexistent/odac/repo.git", None),
                    git_app(&no_branch, &repo.url(), Some("release")),
                    git_app(&bad_build, &repo.url(), Some("main")),
                ],
            ))
            .await
            .unwrap();
        // The first failure of each, then a bounded window of the loop running on its own.
        until(&manager, &bad_build, BUILD_WAIT, build_failed).await;
        crate::appmgr_support::run_for(&manager, Duration::from_secs(6)).await;

        let statuses = manager.statuses();
        let mut events = Vec::new();
        drain(&mut rx, &mut events);
        for (app, needle) in [
            (&bad_url, "does not appear to be a git repository"),
            (&no_branch, "branch \"release\" not found in file://"),
            (&bad_build, "returned a non-zero code: 3"),
        ] {
            let s = statuses.iter().find(|s| &s.name == app).unwrap();
            assert!(build_failed(s), "{app}: {s:#?}");
            let error = s.last_error.as_deref().unwrap_or_default();
            assert!(error.starts_with("build_failed: "), "{app}: {error}");
            assert!(error.contains(needle), "{app}: {error}");
            let attempts = count(&events, app, "fetching ");
            println!("{app}: {attempts} attempts; last_error: {error}");
            // ~6 s at 250 ms doubling to 1 s: about 8 tries; a storm would be dozens.
            assert!(
                (2..=12).contains(&attempts),
                "{app}: {attempts} attempts: {events:#?}"
            );
        }
        let s = statuses.iter().find(|s| s.name == bad_build).unwrap();
        let error = s.last_error.as_deref().unwrap();
        assert!(error.contains("compiling the service"), "log tail: {error}");
        assert!(error.contains("RUN echo compiling"), "log tail: {error}");
        let containers = run
            .real
            .list_by_label(&format!("odac.test.run={}", run.id))
            .await
            .unwrap();
        assert!(containers.is_empty(), "{containers:?}");
    })
    .await;
}
