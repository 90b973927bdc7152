//! Pulls against misbehaving registries and host files, on the fake engine: a FIFO at
//! `apps.docker_config` does not freeze the runtime (pulls and other apps go on); a registry
//! whose manifest never ends fails the app with `image_pull_failed` before the engine is asked
//! to pull, and every retry is refused the same way; a registry that echoes the credentials it
//! was sent never gets them into a status or an event; a pull that stalls is cancelled after
//! `apps.pull_stall_secs` and fails the app.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_host::engine::{EngineError, FakeEngine, Op};
use odac_protocol::{AppState, AppStatus, DesiredState, Reason};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

use crate::fixture_hosts::no_gpu as fixture;

fn open(fake: &Arc<FakeEngine>, dir: &Path, docker_config: PathBuf) -> AppManager {
    let config = AppManagerConfig {
        state_dir: dir.join("state"),
        stop_timeout_secs: 0,
        docker_config,
        ..AppManagerConfig::default()
    };
    AppManager::open(config, fake.clone(), fixture()).unwrap()
}

use crate::appmgr_support::sleeper as app;

fn find(statuses: &[AppStatus], name: &str) -> AppStatus {
    statuses
        .iter()
        .find(|s| s.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no status for {name}: {statuses:#?}"))
}

#[test]
fn a_fifo_at_docker_config_does_not_freeze_pulls_or_other_apps() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("config.json");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let fake = Arc::new(FakeEngine::new());
    let (a, b) = ("127.0.0.1:5998/odac/a:1", "127.0.0.1:5998/odac/b:1");
    fake.publish(a, DIGEST, None);
    fake.publish(b, DIGEST, None);
    fake.add_image("odac/busybox:test");
    // two workers, two pulls: the old blocking read of the FIFO held both of them
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let manager = rt.block_on(async { open(&fake, dir.path(), fifo.clone()) });
    let shutdown = CancellationToken::new();
    rt.spawn(manager.clone().run(shutdown.clone()));
    let apps = vec![app("a", a), app("b", b), app("local", "odac/busybox:test")];
    rt.block_on(manager.set_desired(DesiredState {
        generation: 1,
        apps,
    }))
    .unwrap();
    // polled from this thread: a frozen runtime cannot fire its own timers
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let all_running = loop {
        let statuses = manager.statuses();
        let running = ["a", "b", "local"].iter().all(|n| {
            statuses
                .iter()
                .any(|s| s.name == *n && s.state == AppState::Running)
        });
        if running || std::time::Instant::now() > deadline {
            break running;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !all_running {
        let statuses = manager.statuses();
        // a frozen runtime would hang its own drop
        std::mem::forget(rt);
        panic!("apps not running 30 s after a FIFO at docker_config: {statuses:#?}");
    }
    shutdown.cancel();
    rt.shutdown_timeout(Duration::from_secs(5));
}

/// A registry on 127.0.0.1 whose every answer is an endless chunked body; counts requests.
async fn endless_registry() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.docker.distribution.manifest.v2+json\r\ntransfer-encoding: chunked\r\n\r\n";
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
                while s.write_all(chunk.as_bytes()).await.is_ok() {}
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn an_endless_manifest_fails_the_pull_before_the_engine_is_asked() {
    let (addr, requests) = endless_registry().await;
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    fake.set_data_root(Some(dir.path().to_str().unwrap()));
    let image = format!("{addr}/odac/endless:1");
    // the fake registry holds it: a pull, had it been asked for, would have succeeded
    fake.publish(&image, DIGEST, None);
    let manager = open(&fake, dir.path(), dir.path().join("none.json"));
    manager
        .set_desired(DesiredState {
            generation: 1,
            apps: vec![app("endless", &image)],
        })
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(manager.clone().run(shutdown.clone()));
    // the crash-loop backoff retries at 1 s and 3 s
    tokio::time::sleep(Duration::from_millis(4500)).await;
    shutdown.cancel();
    task.await.unwrap();
    let s = find(&manager.statuses(), "endless");
    assert_eq!(s.state, AppState::Failed, "{s:#?}");
    let error = s.last_error.as_deref().unwrap();
    assert!(error.starts_with("image_pull_failed: "), "{error}");
    assert!(
        error.contains("/v2/odac/endless/manifests/1") && error.contains("larger than 4194304"),
        "{error}"
    );
    assert_eq!(
        s.image_failure.as_ref().map(|f| f.reason),
        Some(Reason::ImagePullFailed)
    );
    assert_eq!(s.gpu.fallback, None, "a pull is no GPU decision");
    assert!(
        fake.calls_of(Op::PullImage).is_empty(),
        "the engine was asked to pull: {:?}",
        fake.calls_of(Op::PullImage)
    );
    let n = requests.load(Ordering::SeqCst);
    assert!(
        (2..=5).contains(&n),
        "{n} manifest requests: retries also refused"
    );
}

#[tokio::test(start_paused = true)]
async fn credentials_echoed_by_the_registry_never_reach_a_status_or_event() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    let image = "127.0.0.1:5997/odac/private:1";
    let b64 = base64::engine::general_purpose::STANDARD.encode("alice:s3cret-pw");
    fake.fail_next(
        Op::PullImage,
        EngineError::Rejected {
            status: 500,
            message: format!(
                "unauthorized: you sent user alice password s3cret-pw (Authorization: Basic {b64}), token Bearer eyJ.tok.en {}",
                "x".repeat(10_000)
            ),
        },
    );
    let manager = open(&fake, dir.path(), dir.path().join("none.json"));
    let mut rx = manager.subscribe_events();
    let mut spec = app("private", image);
    spec.registry_auth = Some(odac_protocol::RegistryAuth {
        server: "127.0.0.1:5997".into(),
        username: "alice".into(),
        password: "s3cret-pw".into(),
    });
    manager
        .set_desired(DesiredState {
            generation: 1,
            apps: vec![spec],
        })
        .await
        .unwrap();
    let mut failed = None;
    for _ in 0..100 {
        let s = find(&manager.reconcile_once().await, "private");
        if s.state == AppState::Failed {
            failed = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = failed.expect("the pull fails");
    let error = s.last_error.clone().unwrap();
    assert!(error.contains("unauthorized"), "{error}");
    assert!(error.len() < 5000, "capped: {} bytes", error.len());
    let mut shown = format!("{s:?}{:?}", manager.statuses());
    while let Ok(e) = rx.try_recv() {
        shown.push_str(&e.message);
    }
    for secret in ["s3cret-pw", b64.as_str(), "eyJ.tok.en"] {
        assert!(!shown.contains(secret), "{secret} shown: {error}");
    }
    // the user is named by the agent's own "pulling … as alice", never by the echo
    assert!(!error.contains("alice"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_stalled_pull_is_cancelled_after_pull_stall_secs() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeEngine::new());
    let image = "127.0.0.1:5996/odac/stalled:1";
    fake.publish(image, DIGEST, None);
    fake.stall_pulls(true);
    let config = AppManagerConfig {
        state_dir: dir.path().join("state"),
        stop_timeout_secs: 0,
        docker_config: dir.path().join("none.json"),
        pull_stall_secs: 30,
        ..AppManagerConfig::default()
    };
    let manager = AppManager::open(config, fake.clone(), fixture()).unwrap();
    manager
        .set_desired(DesiredState {
            generation: 1,
            apps: vec![app("stalled", image)],
        })
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let first = find(&manager.reconcile_once().await, "stalled");
    assert_eq!(first.state, AppState::Pulling, "{first:#?}");
    let mut failed = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = find(&manager.reconcile_once().await, "stalled");
        if s.state == AppState::Failed {
            failed = Some(s);
            break;
        }
    }
    let s = failed.expect("the stalled pull fails");
    let waited = started.elapsed();
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(33)).contains(&waited),
        "failed after {waited:?}"
    );
    let error = s.last_error.as_deref().unwrap();
    assert!(
        error.starts_with("image_pull_failed: ")
            && error.contains("no progress for 30 s (apps.pull_stall_secs)"),
        "{error}"
    );
    // the engine's pull was dropped: the next pull is a new call, after the backoff
    fake.stall_pulls(false);
    let s = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let s = find(&manager.reconcile_once().await, "stalled");
        if s.state == AppState::Running || started.elapsed() > Duration::from_secs(120) {
            break s;
        }
    };
    assert_eq!(s.state, AppState::Running, "{s:#?}");
    assert_eq!(fake.calls_of(Op::PullImage).len(), 2);
}
