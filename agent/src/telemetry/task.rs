//! The telemetry loop: samples every GPU of the latest inventory once per interval (the first
//! sample at start), adds the apps' GPUs and their per-app usage (NVIDIA), and hands a `gpu_stats` sample to `put` only when
//! [`Threshold`] admits it, so at most one report per interval leaves the agent. Sampling
//! reads sysfs (and NVML), off the runtime threads. A host without GPUs sends nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use odac_protocol::{AppStatus, GpuStats};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::collect::Collector;
use super::config::TelemetryConfig;
use super::threshold::Threshold;
use crate::uplink::{AppControl, GpuStatsSink, InventoryFeed};
use odac_host::app_gpus::app_gpus;

/// Who else sees every sample, with the GPUs it sampled (the metrics endpoint).
pub type SampleObserver =
    Box<dyn Fn(&[odac_protocol::GpuInfo], &GpuStats, &crate::metrics::EngineUtils) + Send + Sync>;

/// The loop as `run` starts it: the configured interval, the host root, the app manager's
/// statuses, samples into the uplink's outbox (and to `also`).
pub fn spawn_for(
    config: &TelemetryConfig,
    host_root: &std::path::Path,
    inventory: InventoryFeed,
    apps: Arc<dyn AppControl>,
    sink: GpuStatsSink,
    also: Option<SampleObserver>,
    shutdown: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    telemetry_loop(
        Collector::new(host_root),
        Duration::from_secs(config.interval_secs),
        inventory,
        {
            let apps = Arc::clone(&apps);
            move || apps.statuses()
        },
        move |stats| sink.put(stats),
        move |gpus, stats, engines| {
            apps.offer_gpu_samples(&stats.gpus);
            if let Some(also) = &also {
                also(gpus, stats, engines);
            }
        },
        shutdown,
    )
}

/// Runs until `shutdown`; every reading is also handed to `seen` with the GPUs it sampled
/// (the app manager's free VRAM, the metrics endpoint), whether or not it moved enough to be
/// sent.
pub async fn telemetry_loop(
    collector: Collector,
    every: Duration,
    inventory: InventoryFeed,
    statuses: impl Fn() -> Vec<AppStatus> + Send,
    put: impl Fn(GpuStats) + Send,
    seen: impl Fn(&[odac_protocol::GpuInfo], &GpuStats, &crate::metrics::EngineUtils) + Send,
    shutdown: CancellationToken,
) {
    let collector = Arc::new(Mutex::new(collector));
    let mut threshold = Threshold::default();
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let interval_secs = u32::try_from(every.as_secs()).unwrap_or(u32::MAX);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let gpus = match inventory.borrow().as_deref() {
            Some(inv) => inv.gpus.clone(),
            None => continue,
        };
        if gpus.is_empty() {
            continue;
        }
        let sampling = Arc::clone(&collector);
        let list = gpus.clone();
        let statuses = statuses();
        let apps = app_gpus(&statuses, &gpus);
        let held = apps.clone();
        let sampled = tokio::task::spawn_blocking(move || {
            let mut c = odac_host::lock::lock(&sampling);
            let samples = c.sample(&list, Instant::now());
            (
                samples,
                c.app_usage(&statuses, &held),
                c.engine_utils().clone(),
            )
        })
        .await;
        let (samples, usage, engines) = match sampled {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("gpu telemetry sample failed: {e}");
                continue;
            }
        };
        let stats = GpuStats {
            interval_secs,
            gpus: samples,
            apps,
            usage,
        };
        seen(&gpus, &stats, &engines);
        if threshold.admit(&stats) {
            put(stats);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use odac_protocol::{Inventory, Vendor};
    use tokio::sync::{mpsc, watch};

    use super::*;
    use crate::telemetry::nvml::NvmlError;

    #[tokio::test(start_paused = true)]
    async fn a_changed_counter_is_sent_within_one_interval_and_a_steady_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/bus/pci/devices/0000:19:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        let busy = dev.join("gpu_busy_percent");
        std::fs::write(&busy, "3\n").unwrap();
        let inventory = Inventory {
            gpus: vec![crate::telemetry::test_gpu(
                Vendor::Amd,
                "0000:19:00.0",
                "amdgpu",
            )],
            ..Inventory::default()
        };
        let (_tx, feed) = watch::channel(Some(Arc::new(inventory)));
        let collector = Collector::with_nvml(
            dir.path(),
            Box::new(|| Err(NvmlError::Query("not used".into()))),
        );
        let (sent_tx, mut sent) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let every = Duration::from_secs(60);
        let task = tokio::spawn(telemetry_loop(
            collector,
            every,
            feed,
            Vec::new,
            move |s| {
                let _ = sent_tx.send(s);
            },
            |_, _, _| {},
            shutdown.clone(),
        ));
        let first = sent.recv().await.unwrap();
        assert_eq!(first.gpus[0].util, Some(3));
        assert_eq!(first.interval_secs, 60);

        // steady: two intervals, nothing sent
        tokio::time::sleep(every * 2 + Duration::from_secs(1)).await;
        assert!(sent.try_recv().is_err());

        // the counter moves: it arrives within one interval
        std::fs::write(&busy, "80\n").unwrap();
        let start = tokio::time::Instant::now();
        let next = sent.recv().await.unwrap();
        assert!(start.elapsed() <= every);
        assert_eq!(next.gpus[0].util, Some(80));
        shutdown.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_host_without_gpus_sends_no_gpu_stats() {
        let dir = tempfile::tempdir().unwrap();
        let (_tx, feed) = watch::channel(Some(Arc::new(Inventory::default())));
        let collector = Collector::with_nvml(
            dir.path(),
            Box::new(|| Err(NvmlError::Query("not used".into()))),
        );
        let (sent_tx, mut sent) = mpsc::unbounded_channel();
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let every = Duration::from_secs(10);
        let task = tokio::spawn(telemetry_loop(
            collector,
            every,
            feed,
            Vec::new,
            move |s| {
                let _ = sent_tx.send(s);
            },
            move |gpus, _, _| {
                let _ = seen_tx.send(gpus.len());
            },
            shutdown.clone(),
        ));
        tokio::time::sleep(every * 5 + Duration::from_secs(1)).await;
        assert!(sent.try_recv().is_err(), "no gpu_stats without a GPU");
        assert!(seen.try_recv().is_err(), "nothing sampled either");
        shutdown.cancel();
        task.await.unwrap();
    }
}
