//! The GPU health watch of a running agent: kernel log lines (from [`super::kmsg`]) are
//! classified, mapped to the inventory's GPUs by PCI address and kept in the
//! [`HealthBook`]; unhealthy GPUs are probed every second until they answered for the
//! recovery period. Every change is an event (`warn` when a GPU turns unhealthy, with one
//! event on each app that holds it; `info` when it recovers), wakes [`GpuHealthMonitor::changed`]
//! (the inventory loop republishes at once) and is what the app manager's GPU decision reads
//! through [`GpuHealthMonitor::unhealthy`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use odac_protocol::{AppStatus, EventLevel, GpuHealth, GpuInfo};
use tokio::sync::{Notify, broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::book::{Change, HealthBook, Recovery};
use crate::appmgr::AppEvent;
use odac_host::app_gpus::app_gpus;
use odac_host::gpu_health::{GpuKernelEvent, Severity, classify};
use odac_host::lock::lock;

/// How often unhealthy GPUs are probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The apps' statuses, read when an event must name the apps on a GPU.
pub type Statuses = Arc<dyn Fn() -> Vec<AppStatus> + Send + Sync>;

/// The shared health of the host's GPUs; cheap to clone.
#[derive(Clone)]
pub struct GpuHealthMonitor {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    book: Mutex<HealthBook>,
    /// The latest inventory's GPUs: where a PCI address is looked up.
    gpus: Mutex<Vec<GpuInfo>>,
    /// Every GPU an inventory listed since the start, as last listed: one that vanished
    /// from the bus is unhealthy and still shown.
    known: Mutex<BTreeMap<String, GpuInfo>>,
    changed: Notify,
    events: broadcast::Sender<AppEvent>,
}

impl GpuHealthMonitor {
    /// Every GPU healthy; `recovery` is `gpu.health_recovery_secs`.
    pub fn new(root: &Path, recovery: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                root: root.to_owned(),
                book: Mutex::new(HealthBook::new(recovery)),
                gpus: Mutex::new(Vec::new()),
                known: Mutex::new(BTreeMap::new()),
                changed: Notify::new(),
                events: broadcast::channel(64).0,
            }),
        }
    }

    /// The events of health changes (for the uplink's `event` reports).
    pub fn subscribe_events(&self) -> broadcast::Receiver<AppEvent> {
        self.inner.events.subscribe()
    }

    /// Resolves at the next health change.
    pub async fn changed(&self) {
        self.inner.changed.notified().await;
    }

    /// Unhealthy GPU ids with their error, for the GPU decision.
    pub fn unhealthy(&self) -> BTreeMap<String, String> {
        lock(&self.inner.book).unhealthy()
    }

    /// The wire health of every GPU with a history.
    pub fn wire(&self) -> BTreeMap<String, GpuHealth> {
        lock(&self.inner.book).wire()
    }

    /// Keeps the GPUs of the latest inventory and gives it their health. A GPU an earlier
    /// inventory listed and this one lacks left the bus: it turns unhealthy and stays listed
    /// (not passable) while it is.
    pub fn apply(&self, inventory: &mut odac_protocol::Inventory) {
        let vanished: Vec<GpuInfo> = {
            let mut known = lock(&self.inner.known);
            let gone = known
                .values()
                .filter(|k| {
                    !inventory
                        .gpus
                        .iter()
                        .any(|g| g.pci_address == k.pci_address)
                })
                .cloned()
                .collect();
            for g in &inventory.gpus {
                known.insert(g.pci_address.clone(), g.clone());
            }
            gone
        };
        *lock(&self.inner.gpus) = inventory.gpus.clone();
        for gpu in &vanished {
            let event = GpuKernelEvent {
                vendor: gpu.vendor,
                pci: Some(gpu.pci_address.clone()),
                severity: Severity::Critical,
                xid: None,
                summary: "the gpu vanished from the pci bus".to_owned(),
                fix: Some(odac_host::gpu_health::xid_info(79).fix.unwrap_or_default()),
                message: String::new(),
            };
            let change =
                lock(&self.inner.book).critical(&gpu.pci_address, &event, Instant::now(), now_ms());
            if let Some(change) = change {
                let none: Statuses = Arc::new(Vec::new);
                self.announce(&change, &event, &none);
            }
        }
        let book = lock(&self.inner.book);
        inventory.gpus.extend(
            vanished
                .into_iter()
                .filter(|g| book.is_unhealthy(&g.pci_address)),
        );
        drop(book);
        odac_host::inventory::wire::with_health(inventory, &self.wire());
    }

    /// Handles one kernel log line; `statuses` names the apps on the GPU.
    pub fn on_line(&self, line: &str, statuses: &Statuses) {
        let Some(event) = classify(line) else {
            return;
        };
        let Some(gpu) = self.gpu_of(&event) else {
            tracing::warn!(
                message = %event.message,
                "gpu error in the kernel log for a gpu this host's inventory does not name"
            );
            return;
        };
        let now = Instant::now();
        match event.severity {
            Severity::Critical => {
                let change = lock(&self.inner.book).critical(&gpu, &event, now, now_ms());
                if let Some(change) = change {
                    self.announce(&change, &event, statuses);
                }
            }
            Severity::Reset => {
                let change = lock(&self.inner.book).reset(&gpu, now_ms());
                if let Some(change) = change {
                    self.announce(&change, &event, statuses);
                }
            }
            Severity::Application => {
                let apps = apps_on(&gpu, statuses, &lock(&self.inner.gpus));
                let text = format!("gpu {gpu}: {} (the gpu stays in use)", event.summary);
                if apps.is_empty() {
                    self.emit(EventLevel::Warn, None, text.clone());
                }
                for app in apps {
                    self.emit(EventLevel::Warn, Some(app), text.clone());
                }
            }
            Severity::Warning => {
                self.emit(
                    EventLevel::Warn,
                    None,
                    format!("gpu {gpu}: {}", event.summary),
                );
            }
        }
    }

    /// Probes the unhealthy GPUs (off the runtime's workers) and recovers those that answered
    /// long enough.
    pub async fn probe(&self) {
        let ids: Vec<String> = self.unhealthy().into_keys().collect();
        if ids.is_empty() {
            return;
        }
        let root = self.inner.root.clone();
        let listed: Vec<String> = lock(&self.inner.gpus)
            .iter()
            .map(|g| g.pci_address.clone())
            .collect();
        let answering = tokio::task::spawn_blocking(move || {
            ids.into_iter()
                .filter(|id| listed.contains(id) && answers(&root, id))
                .collect::<Vec<String>>()
        })
        .await
        .unwrap_or_default();
        let changes = lock(&self.inner.book).observe(
            |id| answering.iter().any(|a| a == id),
            Instant::now(),
            now_ms(),
        );
        for change in changes {
            self.announce_recovery(&change);
        }
    }

    /// The inventory GPU a kernel event names: by PCI address (NVIDIA's lacks the function),
    /// or the vendor's only GPU when the line names none.
    fn gpu_of(&self, event: &GpuKernelEvent) -> Option<String> {
        let gpus = lock(&self.inner.gpus);
        match &event.pci {
            Some(pci) => gpus
                .iter()
                .map(|g| g.pci_address.to_ascii_lowercase())
                .find(|id| {
                    id == pci
                        || id
                            .strip_prefix(pci.as_str())
                            .is_some_and(|f| f.starts_with('.'))
                }),
            None => {
                let mut of_vendor = gpus.iter().filter(|g| g.vendor == event.vendor);
                match (of_vendor.next(), of_vendor.next()) {
                    (Some(only), None) => Some(only.pci_address.clone()),
                    _ => None,
                }
            }
        }
    }

    fn announce(&self, change: &Change, event: &GpuKernelEvent, statuses: &Statuses) {
        match change {
            Change::Unhealthy { gpu, error } => {
                let fix = error
                    .fix
                    .as_deref()
                    .map(|f| format!("; fix: {f}"))
                    .unwrap_or_default();
                let text = format!(
                    "gpu {gpu} is unhealthy: {}{fix}; no new app gets it until it recovers",
                    error.summary
                );
                tracing::warn!(gpu = %gpu, line = %event.message, "{text}");
                self.emit(EventLevel::Error, None, text);
                for app in apps_on(gpu, statuses, &lock(&self.inner.gpus)) {
                    self.emit(
                        EventLevel::Warn,
                        Some(app),
                        format!(
                            "runs on gpu {gpu}, which is unhealthy ({}); restart it to move it \
                             to a healthy gpu (or the cpu, if its gpu is optional)",
                            error.summary
                        ),
                    );
                }
                self.inner.changed.notify_one();
            }
            Change::Recovered { .. } => self.announce_recovery(change),
        }
    }

    fn announce_recovery(&self, change: &Change) {
        let Change::Recovered { gpu, why } = change else {
            return;
        };
        let why = match why {
            Recovery::Answered(period) => {
                format!("it answered for {}s without a new error", period.as_secs())
            }
            Recovery::DriverReset => "its driver reported a successful reset".to_owned(),
        };
        let text = format!("gpu {gpu} is healthy again: {why}");
        tracing::info!(gpu = %gpu, "{text}");
        self.emit(EventLevel::Info, None, text);
        self.inner.changed.notify_one();
    }

    fn emit(&self, level: EventLevel, app: Option<String>, message: String) {
        // nobody listening (no uplink yet) is fine: the health itself is in the inventory
        let _ = self.inner.events.send(AppEvent {
            level,
            app,
            message,
            image_removed: None,
        });
    }
}

/// Follows the kernel log under the monitor's root until `shutdown`: each line handled, the
/// unhealthy GPUs probed every [`PROBE_EVERY`].
pub async fn health_loop(
    monitor: GpuHealthMonitor,
    mut lines: mpsc::Receiver<String>,
    statuses: Statuses,
    shutdown: CancellationToken,
) {
    let mut lines_open = true;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            line = lines.recv(), if lines_open => match line {
                Some(line) => monitor.on_line(&line, &statuses),
                None => lines_open = false,
            },
            () = tokio::time::sleep(PROBE_EVERY) => monitor.probe().await,
        }
    }
}

/// Whether a GPU the latest inventory lists answers: its config space does not read as all
/// ones (what a device that left the bus returns). A tree without `config` (fixtures, the
/// lab) counts on the device being listed.
pub fn answers(root: &Path, gpu: &str) -> bool {
    let config = root.join("sys/bus/pci/devices").join(gpu).join("config");
    match std::fs::read(config) {
        Ok(bytes) if bytes.len() >= 2 => bytes[..2] != [0xff, 0xff],
        _ => true,
    }
}

/// The apps holding `gpu`, by name.
fn apps_on(gpu: &str, statuses: &Statuses, gpus: &[GpuInfo]) -> Vec<String> {
    app_gpus(&statuses(), gpus)
        .into_iter()
        .filter(|a| a.gpus.iter().any(|g| g == gpu))
        .map(|a| a.app)
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
