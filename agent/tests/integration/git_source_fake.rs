//! Apps from git sources against the fake engine and the real git CLI (local `file://`
//! repositories): the build context is the tree at the commit (no `.git`), the image is
//! tagged `odac/<app>:<short-commit>` and labelled, the status carries the commit; a new
//! commit is picked up on a new restart token, an unchanged one reuses its image; old images
//! are pruned to the newest two; a bad URL, a missing branch, a missing Dockerfile and a
//! failing build end `failed` / `build_failed` and are retried on the backoff only (attempts
//! counted over a window of real time); a secret never reaches a status, an event or a log
//! line; GPU fallbacks are events.

use crate::git_source_support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use git_source_support::{Repo, count, desired, drain, git_app, until};
use odac_agent::appmgr::{AppManager, AppManagerConfig, CrashLoopConfig, labels};
use odac_host::engine::{EngineCall, EngineError, FakeEngine, Op};
use odac_protocol::{AppSpec, AppState, EventLevel, GitSecret, GpuRequest, Reason};

const IMAGE: &str = "odac/busybox:test";
const DOCKERFILE: &str =
    "FROM odac/busybox:test\nCOPY version /version\nCMD [\"sleep\", \"3600\"]\n";

use crate::fixture_hosts::host as fixture;

fn config(dir: &Path) -> AppManagerConfig {
    AppManagerConfig {
        state_dir: dir.to_path_buf(),
        stop_timeout_secs: 0,
        poll_interval_ms: 50,
        crash_loop: CrashLoopConfig {
            initial_backoff_ms: 200,
            max_backoff_secs: 1,
            healthy_reset_secs: 600,
        },
        ..AppManagerConfig::default()
    }
}

fn fake() -> Arc<FakeEngine> {
    crate::appmgr_support::fake_with(IMAGE)
}

fn open(fake: &Arc<FakeEngine>, dir: &Path) -> AppManager {
    AppManager::open(config(dir), fake.clone(), fixture("no-gpu")).unwrap()
}

fn s_container(manager: &AppManager, name: &str) -> String {
    manager
        .statuses()
        .into_iter()
        .find(|s| s.name == name)
        .and_then(|s| s.container_id)
        .unwrap()
}

/// A repository in a fresh directory whose `main` has one commit, "v1", of a Dockerfile at
/// `dockerfile` and a version file: the directory, the repository and the commit.
fn repo_at_v1(dockerfile: &str) -> (tempfile::TempDir, Repo, String) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repo::new(tmp.path());
    let c1 = repo.commit(
        "main",
        &[(dockerfile, DOCKERFILE), ("version", "v1\n")],
        "v1",
    );
    (tmp, repo, c1)
}

fn builds(fake: &FakeEngine) -> Vec<EngineCall> {
    fake.calls_of(Op::BuildImage)
}

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn builds_runs_and_follows_the_branch_on_restart() {
    let (tmp, repo, c1) = repo_at_v1("Dockerfile");
    let fake = fake();
    let manager = open(&fake, &tmp.path().join("state"));
    let mut rx = manager.subscribe_events();
    let mut events = Vec::new();

    manager
        .set_desired(desired(1, vec![git_app("web", &repo.url(), Some("main"))]))
        .await
        .unwrap();
    let s = until(&manager, "web", WAIT, |s| s.state == AppState::Running).await;
    assert_eq!(s.commit.as_deref(), Some(c1.as_str()));
    let tag1 = format!("odac/web:{}", &c1[..12]);
    assert_eq!(s.image.as_deref(), Some(tag1.as_str()));

    let calls = builds(&fake);
    assert_eq!(calls.len(), 1, "{calls:?}");
    let EngineCall::BuildImage {
        tag,
        files,
        dockerfile,
        labels: image_labels,
    } = &calls[0]
    else {
        unreachable!()
    };
    assert_eq!(tag, &tag1);
    assert_eq!(dockerfile, "Dockerfile");
    assert!(files.iter().any(|f| f == "Dockerfile"), "{files:?}");
    assert!(files.iter().any(|f| f == "version"), "{files:?}");
    assert!(!files.iter().any(|f| f.contains(".git")), "{files:?}");
    assert_eq!(image_labels[odac_host::names::GIT_COMMIT], c1);
    assert_eq!(image_labels[odac_host::names::APP], "web");
    assert_eq!(image_labels[odac_host::names::INSTANCE], "odac");
    let created = fake.calls_of(Op::Create);
    let EngineCall::Create(spec) = created.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(spec.image, tag1);
    assert_eq!(spec.labels[odac_host::names::GIT_COMMIT], c1);

    drain(&mut rx, &mut events);
    assert_eq!(count(&events, "web", "fetching file://"), 1, "{events:#?}");
    assert_eq!(count(&events, "web", "building image odac/web:"), 1);
    assert_eq!(count(&events, "web", "built image odac/web:"), 1);

    // A new commit alone changes nothing; with a new restart token it runs.
    let c2 = repo.commit("main", &[("version", "v2\n")], "v2");
    for _ in 0..3 {
        manager.reconcile_once().await;
    }
    assert_eq!(builds(&fake).len(), 1, "no fetch without a restart");
    let mut spec = git_app("web", &repo.url(), Some("main"));
    spec.restart_token = Some("r1".into());
    let old_id = s_container(&manager, "web");
    manager.upsert(2, spec.clone()).await.unwrap();
    // While the new commit builds, the previous version keeps running.
    let building = manager.reconcile_once().await;
    let b = building.iter().find(|s| s.name == "web").unwrap();
    assert_eq!(
        (b.state, b.container_id.as_deref(), b.commit.as_deref()),
        (AppState::Creating, Some(old_id.as_str()), Some(c1.as_str())),
        "{b:#?}"
    );
    assert_eq!(fake.container_ids(), vec![old_id.clone()]);
    let s = until(&manager, "web", WAIT, |s| {
        s.state == AppState::Running && s.commit.as_deref() == Some(c2.as_str())
    })
    .await;
    assert_eq!(s.image, Some(format!("odac/web:{}", &c2[..12])));
    assert_eq!(builds(&fake).len(), 2);
    assert_eq!(fake.container_ids().len(), 1, "the old container is gone");

    // A restart without a new commit reuses the image.
    spec.restart_token = Some("r2".into());
    manager.upsert(3, spec.clone()).await.unwrap();
    let before = fake.container_ids();
    until(&manager, "web", WAIT, |s| {
        s.state == AppState::Running && fake.container_ids() != before
    })
    .await;
    assert_eq!(builds(&fake).len(), 2, "unchanged commit: no build");
    drain(&mut rx, &mut events);
    assert_eq!(count(&events, "web", "unchanged: reusing image"), 1);

    // A third commit: the oldest image is pruned, the newest two stay.
    let c3 = repo.commit("main", &[("version", "v3\n")], "v3");
    spec.restart_token = Some("r3".into());
    manager.upsert(4, spec).await.unwrap();
    until(&manager, "web", WAIT, |s| {
        s.state == AppState::Running && s.commit.as_deref() == Some(c3.as_str())
    })
    .await;
    let mut kept: Vec<String> = fake
        .built_images()
        .into_iter()
        .map(|i| i.labels[odac_host::names::GIT_COMMIT].clone())
        .collect();
    kept.sort();
    let mut expected = vec![c2.clone(), c3.clone()];
    expected.sort();
    assert_eq!(kept, expected, "c1's image pruned");
    drain(&mut rx, &mut events);
    assert_eq!(count(&events, "web", "pruned old image"), 1, "{events:#?}");

    // Removing the app removes its images.
    manager.set_desired(desired(5, vec![])).await.unwrap();
    manager.reconcile_once().await;
    assert!(fake.container_ids().is_empty());
    assert!(fake.built_images().is_empty(), "{:?}", fake.built_images());
}

#[tokio::test]
async fn dockerfile_path_and_rev_are_honoured() {
    let (tmp, repo, c1) = repo_at_v1("docker/Dockerfile.cpu");
    repo.commit("main", &[("version", "v2\n")], "v2");
    git_source_support::git(&repo.work, &["tag", "v1", &c1]);
    let origin = repo.origin.to_string_lossy().into_owned();
    git_source_support::git(&repo.work, &["push", "-q", &origin, "v1"]);

    let fake = fake();
    let manager = open(&fake, &tmp.path().join("state"));
    let mut spec = git_app("tagged", &repo.url(), Some("main"));
    if let Some(src) = spec.source.as_mut() {
        src.rev = Some("v1".into());
        src.dockerfile = Some("docker/Dockerfile.cpu".into());
    }
    manager.set_desired(desired(1, vec![spec])).await.unwrap();
    let s = until(&manager, "tagged", WAIT, |s| s.state == AppState::Running).await;
    assert_eq!(
        s.commit.as_deref(),
        Some(c1.as_str()),
        "rev wins over branch"
    );
    let calls = builds(&fake);
    let EngineCall::BuildImage { dockerfile, .. } = &calls[0] else {
        unreachable!()
    };
    assert_eq!(dockerfile, "docker/Dockerfile.cpu");
}

fn is_build_failed(s: &odac_protocol::AppStatus) -> bool {
    s.state == AppState::Failed
        && s.image_failure.as_ref().map(|f| f.reason) == Some(Reason::BuildFailed)
        && s.gpu.fallback.is_none()
        && s.next_retry_at_ms.is_some()
}

#[tokio::test]
async fn failures_are_build_failed_and_retried_on_the_backoff_only() {
    let (tmp, repo, _) = repo_at_v1("Dockerfile");
    let fake = fake();
    for _ in 0..50 {
        fake.fail_next(
            Op::BuildImage,
            EngineError::BuildFailed {
                message: "The command '/bin/sh -c make' returned a non-zero code: 2".into(),
                log_tail: "Step 2/3 : RUN make\nmake: *** [all] Error 2".into(),
            },
        );
    }
    let manager = open(&fake, &tmp.path().join("state"));
    let mut rx = manager.subscribe_events();
    let mut no_dockerfile = git_app("nodockerfile", &repo.url(), None);
    if let Some(src) = no_dockerfile.source.as_mut() {
        src.dockerfile = Some("missing/Dockerfile".into());
    }
    let apps: Vec<AppSpec> = vec![
        git_app("badurl", "file:///nonexistent/odac/repo.git", None),
        git_app("nobranch", &repo.url(), Some("nope")),
        no_dockerfile,
        git_app("badbuild", &repo.url(), Some("main")),
    ];
    manager.set_desired(desired(1, apps)).await.unwrap();

    // Let the loop run on its own for a bounded window: 50 ms polls, 200 ms..1 s backoff.
    crate::appmgr_support::run_for(&manager, Duration::from_secs(5)).await;

    let statuses = manager.statuses();
    let mut events = Vec::new();
    drain(&mut rx, &mut events);
    for (app, needle) in [
        (
            "badurl",
            "git fetch of file:///nonexistent/odac/repo.git failed",
        ),
        ("nobranch", "branch \"nope\" not found in file://"),
        (
            "nodockerfile",
            "dockerfile \"missing/Dockerfile\" not found",
        ),
        ("badbuild", "returned a non-zero code: 2"),
    ] {
        let s = statuses.iter().find(|s| s.name == app).unwrap();
        assert!(is_build_failed(s), "{app}: {s:#?}");
        let error = s.last_error.as_deref().unwrap_or_default();
        assert!(error.starts_with("build_failed: "), "{app}: {error}");
        assert!(error.contains(needle), "{app}: {error}");
        let attempts = count(&events, app, "fetching ");
        println!("{app}: {attempts} attempts in 5 s; last_error: {error}");
        // 5 s at 200 ms doubling to 1 s: about 7 tries; a storm would be ~100.
        assert!(
            (2..=9).contains(&attempts),
            "{app}: {attempts} attempts in 5 s: {events:#?}"
        );
        // one error event per finished attempt (the last one may still run at the end)
        let errors = count(&events, app, "build failed: ");
        assert!(
            errors == attempts || errors + 1 == attempts,
            "{app}: {errors} error events for {attempts} attempts"
        );
        assert!(
            events
                .iter()
                .filter(|e| e.app.as_deref() == Some(app) && e.message.starts_with("build failed"))
                .all(|e| e.level == EventLevel::Error)
        );
    }
    let s = statuses.iter().find(|s| s.name == "badbuild").unwrap();
    assert!(
        s.last_error
            .as_deref()
            .unwrap()
            .contains("make: *** [all] Error 2"),
        "the log tail is in last_error: {s:#?}"
    );
    assert!(fake.container_ids().is_empty(), "nothing was created");
    assert!(fake.calls_of(Op::Create).is_empty());
}

#[tokio::test]
async fn a_secret_never_reaches_statuses_events_or_files_other_than_the_desired_state() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = fake();
    let state = tmp.path().join("state");
    let manager = open(&fake, &state);
    let mut rx = manager.subscribe_events();
    let secret = "s3cr3t-t0ken-odac";
    let mut spec = git_app("private", "https://127.0.0.1:9/o/r.git", None);
    if let Some(src) = spec.source.as_mut() {
        src.secret = Some(GitSecret::new(secret));
    }
    assert!(!format!("{spec:?}").contains(secret));
    manager.set_desired(desired(1, vec![spec])).await.unwrap();
    let s = until(&manager, "private", WAIT, is_build_failed).await;
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains(secret), "{json}");
    assert!(json.contains("https://127.0.0.1:9/o/r.git"), "{json}");
    let mut events = Vec::new();
    drain(&mut rx, &mut events);
    assert!(!events.is_empty());
    assert!(
        events.iter().all(|e| !e.message.contains(secret)),
        "{events:#?}"
    );
    let statuses = std::fs::read_to_string(state.join("statuses.json")).unwrap();
    assert!(!statuses.contains(secret));
    let spec_hash = labels::spec_hash(&manager.desired().unwrap().apps[0]);
    let mut rotated = manager.desired().unwrap().apps[0].clone();
    if let Some(src) = rotated.source.as_mut() {
        src.secret = Some(GitSecret::new("another-token"));
    }
    assert_eq!(
        labels::spec_hash(&rotated),
        spec_hash,
        "rotating the token is not a new spec"
    );
}

#[tokio::test]
async fn gpu_fallbacks_are_events() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = fake();
    let manager = open(&fake, &tmp.path().join("state"));
    let mut rx = manager.subscribe_events();
    let mut optional = AppSpec::new("opt", IMAGE);
    optional.gpu = Some(
        serde_json::from_str::<GpuRequest>(r#"{"runtime":"nvidia","count":1,"optional":true}"#)
            .unwrap(),
    );
    let mut required = AppSpec::new("req", IMAGE);
    required.gpu =
        Some(serde_json::from_str::<GpuRequest>(r#"{"runtime":"nvidia","count":1}"#).unwrap());
    manager
        .set_desired(desired(1, vec![optional, required]))
        .await
        .unwrap();
    for _ in 0..5 {
        manager.reconcile_once().await;
    }
    let mut events = Vec::new();
    drain(&mut rx, &mut events);
    assert_eq!(
        count(&events, "opt", "running on the cpu"),
        1,
        "{events:#?}"
    );
    assert_eq!(
        count(&events, "req", "required gpu refused at pre-flight"),
        1,
        "{events:#?}"
    );
    let levels: Vec<EventLevel> = events.iter().map(|e| e.level).collect();
    assert!(levels.contains(&EventLevel::Warn) && levels.contains(&EventLevel::Error));
}
