//! The reconcile loop's schedule in paused time: a retry that starts a long build or pull
//! leaves no deadline in the past, so the loop does not run passes back to back while the
//! job runs (counted with the fake engine, which records every call).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use odac_protocol::{AppState, GitSource, PullPolicy};

use super::*;
use crate::appmgr::images::build::{BuildFailure, BuildKey};
use crate::appmgr::images::pull::PullKey;
use crate::appmgr::labels::Identity;
use crate::appmgr::settings::CrashLoopConfig;
use odac_host::engine::{FakeEngine, Op};

fn open(fake: &Arc<FakeEngine>, dir: &Path) -> AppManager {
    let config = AppManagerConfig {
        state_dir: dir.to_path_buf(),
        poll_interval_ms: 1000,
        crash_loop: CrashLoopConfig {
            initial_backoff_ms: 200,
            max_backoff_secs: 1,
            healthy_reset_secs: 600,
        },
        ..AppManagerConfig::default()
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/no-gpu");
    AppManager::open(config, fake.clone(), fixture).unwrap()
}

/// Run the manager as its loop does (a pass, then the loop's own delay) for `span` of paused
/// time, at most `cap` passes; the number of passes and the paused time they took.
async fn passes_during(manager: &AppManager, span: Duration, cap: usize) -> (usize, Duration) {
    let start = Instant::now();
    let end = Instant::now() + span;
    let mut passes = 0;
    while passes < cap {
        let (delay, quiet) = manager.next_delay().await;
        if Instant::now() + delay >= end {
            break;
        }
        tokio::time::sleep(delay).await;
        manager.reconcile(quiet).await;
        passes += 1;
    }
    (passes, start.elapsed())
}

const SPAN: Duration = Duration::from_secs(60);
/// One pass a second (the poll interval) and the retry, with some slack.
const BOUND: usize = 65;

#[tokio::test(start_paused = true)]
async fn a_retried_build_that_runs_long_does_not_run_passes_back_to_back() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    let manager = open(&fake, tmp.path());
    let spec = AppSpec {
        name: "web".into(),
        source: Some(GitSource {
            url: "https://git.example.invalid/web.git".into(),
            ..GitSource::default()
        }),
        ..AppSpec::default()
    };
    let identity = Identity::of(&spec);
    let key = BuildKey {
        spec_hash: identity.spec_hash.clone(),
        restart_token: identity.restart_token.clone(),
    };
    let desired = DesiredState {
        generation: 1,
        apps: vec![spec],
    };
    manager.set_desired(desired).await.unwrap();
    let failure = BuildFailure {
        message: "git fetch failed".into(),
        log_tail: None,
    };
    let builds = &manager.inner.builds;
    builds.stage("web", &key, Some(Err(failure)));
    let first = manager.reconcile_once().await;
    assert_eq!(first[0].state, AppState::Failed, "{first:?}");
    // the retry, 200 ms from now, starts a build that runs for the whole span
    builds.stage("web", &key, None);
    fake.clear_calls();
    let (passes, took) = passes_during(&manager, SPAN, 10 * BOUND).await;
    let listings = fake.calls_of(Op::ListByLabel).len();
    eprintln!("build: {passes} passes, {listings} listings in {took:?}");
    assert!(
        passes <= BOUND,
        "{passes} passes ({listings} listings, {} engine calls) in {took:?} of a retried build",
        fake.calls().len()
    );
    let now = manager.statuses();
    assert_eq!(
        now[0].state,
        AppState::Failed,
        "the failure stays reported: {now:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retried_pull_that_runs_long_does_not_run_passes_back_to_back() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    let manager = open(&fake, tmp.path());
    let image = "registry.example.invalid/web:1";
    let spec = AppSpec {
        name: "web".into(),
        image: Some(image.into()),
        pull: PullPolicy::IfNotPresent,
        ..AppSpec::default()
    };
    let identity = Identity::of(&spec);
    let key = PullKey {
        image: image.into(),
        spec_hash: identity.spec_hash.clone(),
        restart_token: identity.restart_token.clone(),
    };
    let desired = DesiredState {
        generation: 1,
        apps: vec![spec],
    };
    manager.set_desired(desired).await.unwrap();
    let pulls = &manager.inner.pulls;
    pulls.stage("web", key.clone(), Some(Err("toomanyrequests".into())));
    let first = manager.reconcile_once().await;
    assert_eq!(first[0].state, AppState::Failed, "{first:?}");
    pulls.stage("web", key, None);
    fake.clear_calls();
    let (passes, took) = passes_during(&manager, SPAN, 10 * BOUND).await;
    eprintln!(
        "pull: {passes} passes, {} engine calls in {took:?}",
        fake.calls().len()
    );
    assert!(
        passes <= BOUND,
        "{passes} passes ({} engine calls) in {took:?} of a retried pull",
        fake.calls().len()
    );
    let now = manager.statuses();
    assert_eq!(now[0].state, AppState::Pulling, "{now:?}");
}
