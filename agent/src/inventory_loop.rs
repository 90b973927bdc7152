//! The inventory loop of `odac-agent run`: the host scan (off the runtime threads) plus the
//! engine's capabilities, read again on a timer, at once when the engine changed (a daemon
//! `reload`, a resubscribed event stream) or a GPU's health changed, completed with NVML's
//! facts and the GPU health book, offered to the app manager and published for the uplink.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use odac_protocol::Inventory;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::appmgr::AppManager;
use crate::gpu_health::GpuHealthMonitor;
use odac_host::engine::{ContainerEngine, EngineCapabilities};
use odac_host::inventory::{Assessment, scan};

/// One assessment: host scan (blocking reads, off the runtime threads) plus the engine's
/// capabilities.
pub(crate) async fn assess(root: &std::path::Path, engine: &dyn ContainerEngine) -> Assessment {
    Assessment::new(scan_host(root).await, engine.capabilities().await)
}

/// The host scan, off the runtime threads.
async fn scan_host(root: &std::path::Path) -> odac_host::inventory::HostScan {
    let root = root.to_owned();
    match tokio::task::spawn_blocking(move || scan(&root)).await {
        Ok(h) => h,
        Err(e) => {
            warn!("inventory scan failed: {e}");
            Default::default()
        }
    }
}

/// Rescans every `every` and publishes the result; the uplink sends it only when it changed.
/// The app manager's quiet passes reuse the same facts rather than reading them again. The
/// host is read every time; the engine's capabilities (`GET /info`) are read again at once
/// when the engine changed (a daemon `reload`, the event stream resubscribed after a fault:
/// a restart), and otherwise only every backstop while the event stream is up (runtimes
/// change only with a reload or a restart, which the stream reports), every time while it
/// is down. `engine` comes with its capabilities as first read.
pub(crate) async fn inventory_loop(
    root: PathBuf,
    (engine, first_caps): (Arc<dyn ContainerEngine>, EngineCapabilities),
    every: Duration,
    tx: watch::Sender<Option<Arc<Inventory>>>,
    (manager, health): (AppManager, GpuHealthMonitor),
    mut nvml_facts: crate::telemetry::NvmlFacts,
    shutdown: CancellationToken,
) {
    let mut changes = manager.engine_changes();
    let mut changes_open = true;
    let mut engine_read = Some((first_caps, tokio::time::Instant::now()));
    let reuse_for = manager.config().backstop();
    loop {
        let changed = tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => false,
            // a GPU health change is published at once, not at the next interval
            () = health.changed() => false,
            r = changes.changed(), if changes_open => {
                changes_open = r.is_ok();
                changes_open
            }
        };
        if changed {
            changes.borrow_and_update();
            info!("the engine changed: rescanning the inventory now");
        }
        let caps = match engine_read.as_ref() {
            Some((caps, at))
                if !changed
                    && caps.reachable
                    && manager.events_live()
                    && at.elapsed() < reuse_for =>
            {
                caps.clone()
            }
            _ => {
                let caps = tokio::select! {
                    () = shutdown.cancelled() => return,
                    c = engine.capabilities() => c,
                };
                engine_read = Some((caps.clone(), tokio::time::Instant::now()));
                caps
            }
        };
        let mut assessment = Assessment::new(scan_host(&root).await, caps);
        nvml_facts.fill_scan(&mut assessment.scan);
        let mut inventory = nvml_facts.fill(assessment.inventory());
        health.apply(&mut inventory);
        manager.offer_unhealthy_gpus(health.unhealthy());
        manager.offer_facts(assessment);
        tx.send_replace(Some(Arc::new(inventory)));
    }
}
