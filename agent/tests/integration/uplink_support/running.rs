//! A real `Uplink` running against a [`TestServer`] with its link events subscribed: the
//! setup of the tests that watch how the agent connects (pacing, HTTP contract); also the app
//! manager on a fake engine that the conversation tests put behind an uplink, and a captured
//! log output.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use odac_agent::appmgr::{AppManager, AppManagerConfig, HostSource};
use odac_host::engine::FakeEngine;

use odac_agent::uplink::{AppControl, LinkEvent, Uplink};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::{Behaviour, FakeApps, Pki, TestServer, inventory, uplink_config};

/// The server, the uplink's task and what the test reads or stops it with.
pub struct Running {
    pub server: TestServer,
    pub link: broadcast::Receiver<LinkEvent>,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<()>,
    _inv: watch::Sender<Option<Arc<odac_protocol::Inventory>>>,
    _pki: Pki,
}

/// Starts a server behaving as `behaviour` and an uplink presenting `token` to it.
pub async fn run_uplink(behaviour: Behaviour, token: &str) -> Running {
    let pki = Pki::new();
    let server = TestServer::start(&pki, behaviour).await;
    let (inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(4))));
    let uplink = Uplink::new(
        uplink_config(&pki, &server.url(), token),
        FakeApps::new() as Arc<dyn AppControl>,
        inv_rx,
    );
    let link = uplink.link_events();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(uplink.run(shutdown.clone()));
    Running {
        server,
        link,
        shutdown,
        task,
        _inv: inv_tx,
        _pki: pki,
    }
}

/// An app manager on `fake` with its state in `dir`, instance `<prefix>-<pid>`, containers
/// stopped at once, on the GPU-less fixture host.
pub fn manager_on(fake: &Arc<FakeEngine>, dir: &Path, prefix: &str) -> AppManager {
    AppManager::open_with_host(
        AppManagerConfig {
            state_dir: dir.to_path_buf(),
            stop_timeout_secs: 0,
            instance: format!("{prefix}-{}", std::process::id()),
            ..AppManagerConfig::default()
        },
        fake.clone(),
        HostSource::Root(crate::fixture_hosts::no_gpu()),
    )
    .expect("open the app manager")
}

/// Log output written to memory (a `tracing` writer), for a test to read.
#[derive(Clone, Default)]
pub struct Capture(pub Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sets a `tracing` subscriber at `level` for this thread that writes to a [`Capture`]; the
/// capture and the guard that keeps the subscriber set.
pub fn capture_logs(level: tracing::Level) -> (Capture, tracing::subscriber::DefaultGuard) {
    let capture = Capture::default();
    let sink = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    (capture, tracing::subscriber::set_default(subscriber))
}

/// Runs `uplink` in a task and waits (at most `within`) until `server` welcomed it; the token
/// that stops it and its task.
pub async fn spawn_welcomed(
    uplink: Uplink,
    server: &TestServer,
    within: std::time::Duration,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(uplink.run(shutdown.clone()));
    super::wait_for(&server.log, within, "welcome", |l| !l.welcomed.is_empty()).await;
    (shutdown, task)
}

/// A [`TestServer`] that never acks a report on its own.
pub async fn unacking_server(pki: &Pki) -> TestServer {
    let behaviour = Behaviour {
        auto_ack: false,
        ..Behaviour::default()
    };
    TestServer::start(pki, behaviour).await
}
