//! Self-update: a launched version is pending until it has connected and completed a
//! reconcile pass within `update.commit_within_secs`; then it commits and says so. When the
//! window passes first it notes how far it got and stops the agent, and the next start (the
//! launcher) rolls it back; the previous version then reports `update_failed` with that cause.
//! Virtual time: the window is the configured one, not waited for.

use std::sync::Arc;
use std::time::Duration;

use odac_agent::update::UpdateConfig;
use odac_agent::update::launch::{Decision, decide};
use odac_agent::update::state::{self, CurrentUpdate, Slot, UpdateState};
use odac_agent::update::task::UpdateTask;
use odac_agent::uplink::LinkEvent;
use odac_protocol::UpdatePhase;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::self_update_support::{Disk, FixedFetch, Reports};

struct Probe {
    dir: tempfile::TempDir,
    reports: Arc<Reports>,
    link: broadcast::Sender<LinkEvent>,
    reconciled: watch::Sender<bool>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _offers: mpsc::Sender<odac_protocol::UpdateOffer>,
}

/// An update task over `dir` running `running` (started by the launcher when `launched`),
/// whose fetches fail, on a disk with room, reporting into `reports`.
fn update_task(
    dir: &std::path::Path,
    config: UpdateConfig,
    running: &str,
    launched: bool,
    reports: Arc<Reports>,
) -> UpdateTask {
    UpdateTask {
        state_dir: dir.to_owned(),
        config,
        running: running.to_owned(),
        launched,
        fetch: FixedFetch::failing("unused"),
        disk: Arc::new(Disk(u64::MAX)),
        reports,
    }
}

/// A v2 started by the launcher (attempt counted) and its update task, running "0.2.0".
fn launched_v2(commit_within_secs: u64) -> Probe {
    let dir = tempfile::tempdir().unwrap();
    let slot = Slot {
        version: "0.2.0".to_owned(),
        path: dir.path().join("update/versions/0.2.0/odac-agent"),
    };
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(slot.path.parent().unwrap()).unwrap();
        std::fs::write(&slot.path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&slot.path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut record = CurrentUpdate::staged(slot, None, Vec::new());
    record.attempts = 1;
    state::save(dir.path(), &record).unwrap();
    let reports = Arc::new(Reports::default());
    let config = UpdateConfig {
        commit_within_secs,
        ..UpdateConfig::default()
    };
    let task = update_task(dir.path(), config, "0.2.0", true, reports.clone());
    let (link, link_rx) = broadcast::channel(16);
    let (reconciled, reconciled_rx) = watch::channel(false);
    let (offers, offers_rx) = mpsc::channel(1);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(task.run(offers_rx, link_rx, reconciled_rx, shutdown.clone()));
    Probe {
        dir,
        reports,
        link,
        reconciled,
        shutdown,
        task,
        _offers: offers,
    }
}

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn connected_and_reconciled_in_time_commits() {
    let p = launched_v2(120);
    settle().await;
    assert_eq!(p.reports.phases(), [UpdatePhase::Pending]);
    tokio::time::sleep(Duration::from_secs(30)).await;
    p.link.send(LinkEvent::Connected).unwrap();
    settle().await;
    let r = state::load(p.dir.path()).unwrap().unwrap();
    assert_eq!(
        r.state,
        UpdateState::Pending,
        "connected alone does not commit"
    );
    assert_eq!(r.progress.as_deref(), Some("connected"));
    p.reconciled.send_replace(true);
    settle().await;
    let r = state::load(p.dir.path()).unwrap().unwrap();
    assert_eq!(r.state, UpdateState::Committed);
    assert_eq!(
        p.reports.phases(),
        [UpdatePhase::Pending, UpdatePhase::Committed]
    );
    // the window passing later changes nothing, and the next start runs v2 again
    assert!(r.slot.path.exists(), "the committed binary is kept");
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert!(!p.shutdown.is_cancelled());
    assert_eq!(
        decide(&mut Some(r.clone()), "0.1.0"),
        Decision::Exec(r.slot.clone())
    );
    p.shutdown.cancel();
    p.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_missed_window_stops_the_agent_and_the_next_start_rolls_back() {
    let p = launched_v2(120);
    settle().await;
    // reconciled locally, but the control plane is never reached
    p.reconciled.send_replace(true);
    tokio::time::sleep(Duration::from_secs(119)).await;
    assert!(!p.shutdown.is_cancelled());
    tokio::time::sleep(Duration::from_secs(2)).await;
    settle().await;
    assert!(p.shutdown.is_cancelled(), "the version stops itself");
    p.task.await.unwrap();
    let mut record = state::load(p.dir.path()).unwrap();
    let progress = record.as_ref().unwrap().progress.clone().unwrap();
    assert!(
        progress.contains("missed the commit window of 120 s"),
        "{progress}"
    );
    assert!(progress.contains("connected: false"), "{progress}");
    // systemd restarts the service: the launcher runs the packaged v1
    assert_eq!(decide(&mut record, "0.1.0"), Decision::RunSelf);
    state::save(p.dir.path(), record.as_ref().unwrap()).unwrap();
    // v1's update task reports the failure with its cause
    let v1 = launched_v1_reports(p.dir.path()).await;
    let last = v1.last();
    assert_eq!(last.phase, UpdatePhase::UpdateFailed);
    assert_eq!(last.version, "0.2.0");
    assert!(
        last.message
            .clone()
            .unwrap()
            .contains("missed the commit window"),
        "{last:?}"
    );
}

/// What the packaged v1's update task reports on start over `dir`.
async fn launched_v1_reports(dir: &std::path::Path) -> Arc<Reports> {
    let reports = Arc::new(Reports::default());
    let task = update_task(
        dir,
        UpdateConfig::default(),
        "0.1.0",
        false,
        reports.clone(),
    );
    let (_link, link_rx) = broadcast::channel(1);
    let (_rec, rec_rx) = watch::channel(false);
    let (_tx, rx) = mpsc::channel(1);
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(task.run(rx, link_rx, rec_rx, shutdown.clone()));
    settle().await;
    shutdown.cancel();
    handle.await.unwrap();
    reports
}

/// Counts how often the wrapped future is polled.
struct Polls<F> {
    inner: std::pin::Pin<Box<F>>,
    count: Arc<std::sync::atomic::AtomicUsize>,
}

impl<F: std::future::Future> std::future::Future for Polls<F> {
    type Output = F::Output;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

/// The agent drops the link's and the reconcile pass's senders when those parts stop (or
/// never start, as in `--once` runs): the update task must then sleep, not spin on inputs
/// that answer "closed" at once (an idle agent once burnt ~46 % of a core this way).
#[tokio::test(start_paused = true)]
async fn closed_inputs_leave_the_task_asleep() {
    let dir = tempfile::tempdir().unwrap();
    let reports = Arc::new(Reports::default());
    let task = update_task(dir.path(), UpdateConfig::default(), "0.1.0", false, reports);
    let (link, link_rx) = broadcast::channel::<LinkEvent>(1);
    let (reconciled, rec_rx) = watch::channel(false);
    let (offers, rx) = mpsc::channel(1);
    drop((link, reconciled, offers));
    let shutdown = CancellationToken::new();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handle = tokio::spawn(Polls {
        inner: Box::pin(task.run(rx, link_rx, rec_rx, shutdown.clone())),
        count: count.clone(),
    });
    settle().await;
    let settled = count.load(std::sync::atomic::Ordering::Relaxed);
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
    let later = count.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        later - settled <= 1,
        "the task was polled {} more times with nothing to do",
        later - settled
    );
    assert!(!handle.is_finished(), "it waits for the shutdown");
    shutdown.cancel();
    handle.await.unwrap();
}
