//! GPU health from the kernel log on fixture hosts: the real Xid 79, 48 and 13 lines and an
//! amdgpu ring timeout (tests/fixtures/kernel-log, provenance in its README) appended to a
//! kmsg stand-in after the watch started; recovery on a paused clock.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use odac_agent::appmgr::AppEvent;
use odac_agent::gpu_health::kmsg::{self, KmsgState};
use odac_agent::gpu_health::task::Statuses;
use odac_agent::gpu_health::{GpuHealthMonitor, health_loop};
use odac_protocol::{
    AppState, AppStatus, Attached, EventLevel, GpuHealthState, Inventory, Mechanism, Vendor,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::fixture_hosts::assess;

fn kernel_line(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/kernel-log")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn append(root: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("dev/kmsg"))
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// A host root with a kmsg stand-in that already holds a critical line (from before the
/// agent started: it must not count).
fn kmsg_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("dev")).unwrap();
    std::fs::write(
        dir.path().join("dev/kmsg"),
        kernel_line("nvidia-xid48.kmsg"),
    )
    .unwrap();
    dir
}

/// The monitor over `root`, given the fixture's inventory.
fn monitor(root: &Path, fixture: &str, recovery: Duration) -> (GpuHealthMonitor, Inventory) {
    let monitor = GpuHealthMonitor::new(root, recovery);
    let mut inventory = assess(fixture).inventory();
    monitor.apply(&mut inventory);
    (monitor, inventory)
}

/// One app whose container holds the fixture's first NVIDIA GPU (by UUID, as the engine
/// reports it).
fn app_on_gpu0(inventory: &Inventory) -> Statuses {
    let uuid = inventory.gpus[0].uuid.clone().unwrap();
    let status = AppStatus {
        name: "trainer".into(),
        state: AppState::Running,
        ..AppStatus::default()
    };
    let mut status = status;
    status.gpu.attached = Some(Attached {
        vendor: Vendor::Nvidia,
        mechanism: Mechanism::NvidiaRuntime,
        devices: vec![uuid],
        capabilities: Vec::new(),
    });
    Arc::new(move || vec![status.clone()])
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within 5 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn drain(rx: &mut broadcast::Receiver<AppEvent>) -> Vec<AppEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn critical_xids_make_their_gpu_unhealthy_and_an_application_xid_stays_with_the_app() {
    let root = kmsg_root();
    let (monitor, inventory) = monitor(root.path(), "nvidia-dgx-8gpu", Duration::from_secs(300));
    let mut events = monitor.subscribe_events();
    let stop = CancellationToken::new();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let state = kmsg::spawn(root.path(), tx, stop.clone());
    assert_eq!(state, KmsgState::File(root.path().join("dev/kmsg")));
    let watch = tokio::spawn(health_loop(
        monitor.clone(),
        rx,
        app_on_gpu0(&inventory),
        stop.clone(),
    ));

    // the Xid 48 written before the start is not read: nothing is unhealthy
    tokio::time::sleep(kmsg::POLL * 3).await;
    assert!(monitor.unhealthy().is_empty(), "{:?}", monitor.unhealthy());

    // Xid 13 on GPU 0: an event on the app that holds it, the GPU stays healthy
    append(root.path(), &kernel_line("nvidia-xid13.kmsg"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    wait_for("the xid 13 event", || {
        seen.lock().unwrap().extend(drain(&mut events));
        !seen.lock().unwrap().is_empty()
    })
    .await;
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].app.as_deref(), Some("trainer"));
    assert_eq!(got[0].level, EventLevel::Warn);
    assert!(got[0].message.contains("xid 13"), "{}", got[0].message);
    assert!(monitor.unhealthy().is_empty());

    // Xid 79 on GPU 1 and Xid 48 on GPU 0: both unhealthy, with the Xid, meaning and fix
    append(root.path(), &kernel_line("nvidia-xid79.kmsg"));
    append(root.path(), &kernel_line("nvidia-xid48.kmsg"));
    wait_for("gpus 0 and 1 unhealthy", || monitor.unhealthy().len() == 2).await;
    let unhealthy = monitor.unhealthy();
    assert_eq!(
        unhealthy.get("0000:0f:00.0").map(String::as_str),
        Some("xid 79: GPU has fallen off the bus")
    );
    assert!(unhealthy["0000:07:00.0"].starts_with("xid 48: double bit ECC"));

    // the inventory says so: unhealthy, not passable, the error with its fix
    let mut inventory = inventory.clone();
    monitor.apply(&mut inventory);
    let gpu1 = &inventory.gpus[1];
    assert_eq!(gpu1.pci_address, "0000:0f:00.0");
    let health = gpu1.health.as_ref().unwrap();
    assert_eq!(health.state, GpuHealthState::Unhealthy);
    let error = health.last_error.as_ref().unwrap();
    assert_eq!((error.xid, error.count), (Some(79), 1));
    assert!(error.fix.as_deref().unwrap().contains("reboot"));
    assert!(!gpu1.passable);
    assert!(inventory.gpus[2].health.is_none() && inventory.gpus[2].passable);

    // events: the gpu's error, and a warning on the app that runs on GPU 0
    let got = drain(&mut events);
    assert!(
        got.iter().any(
            |e| e.level == EventLevel::Error && e.message.contains("0000:0f:00.0 is unhealthy")
        ),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|e| e.app.as_deref() == Some("trainer") && e.message.contains("xid 48")),
        "{got:?}"
    );
    stop.cancel();
    watch.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_amd_ring_timeout_recovers_by_the_driver_reset_or_after_the_recovery_period() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("sys/bus/pci/devices/0000:03:00.0")).unwrap();
    let (monitor, _) = monitor(root.path(), "amd-kfd-mi210-8gpu", Duration::from_secs(60));
    let mut events = monitor.subscribe_events();
    let none: Statuses = Arc::new(Vec::new);

    monitor.on_line(&kernel_line("amd-ring-timeout.kmsg"), &none);
    assert_eq!(
        monitor.unhealthy().get("0000:03:00.0").map(String::as_str),
        Some("ring comp_1.1.0 timeout")
    );
    monitor.on_line(&kernel_line("amd-ring-reset.kmsg"), &none);
    assert!(monitor.unhealthy().is_empty());
    let got = drain(&mut events);
    assert!(
        got.iter()
            .any(|e| e.message.contains("driver reported a successful reset")),
        "{got:?}"
    );

    // again, and this time no reset: the GPU answers for the 60 s period
    monitor.on_line(&kernel_line("amd-ring-timeout.kmsg"), &none);
    monitor.probe().await;
    tokio::time::advance(Duration::from_secs(59)).await;
    monitor.probe().await;
    assert_eq!(monitor.unhealthy().len(), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    monitor.probe().await;
    assert!(monitor.unhealthy().is_empty());
    let got = drain(&mut events);
    assert!(
        got.iter()
            .any(|e| e.level == EventLevel::Info && e.message.contains("answered for 60s")),
        "{got:?}"
    );
    assert_eq!(
        monitor.wire()["0000:03:00.0"]
            .last_error
            .as_ref()
            .unwrap()
            .count,
        2
    );
}

#[tokio::test(start_paused = true)]
async fn a_gpu_that_left_the_bus_is_not_trusted_however_long() {
    let root = tempfile::tempdir().unwrap();
    let (monitor, full) = monitor(root.path(), "nvidia-dgx-8gpu", Duration::from_secs(10));
    let none: Statuses = Arc::new(Vec::new);
    monitor.on_line(&kernel_line("nvidia-xid79.kmsg"), &none);
    // the next scans no longer list it: still unhealthy however long, and still shown
    let mut without = full.clone();
    without.gpus.retain(|g| g.pci_address != "0000:0f:00.0");
    for _ in 0..5 {
        let mut inventory = without.clone();
        monitor.apply(&mut inventory);
        tokio::time::advance(Duration::from_secs(30)).await;
        monitor.probe().await;
        let shown = inventory
            .gpus
            .iter()
            .find(|g| g.pci_address == "0000:0f:00.0");
        let shown = shown.expect("a vanished unhealthy gpu stays in the inventory");
        assert!(!shown.passable && !shown.health.as_ref().unwrap().is_healthy());
    }
    assert!(monitor.unhealthy().contains_key("0000:0f:00.0"));
    // listed again, but its config space reads all ones: still gone
    let dev = root.path().join("sys/bus/pci/devices/0000:0f:00.0");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("config"), [0xff; 64]).unwrap();
    monitor.apply(&mut full.clone());
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(30)).await;
        monitor.probe().await;
    }
    assert!(monitor.unhealthy().contains_key("0000:0f:00.0"));
    // answering: trusted after the period
    std::fs::write(dev.join("config"), [0xde, 0x10, 0xbf, 0x20]).unwrap();
    monitor.probe().await;
    tokio::time::advance(Duration::from_secs(10)).await;
    monitor.probe().await;
    assert!(monitor.unhealthy().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_gpu_that_vanishes_without_a_word_is_unhealthy_until_it_is_back_long_enough() {
    let root = tempfile::tempdir().unwrap();
    let (monitor, full) = monitor(root.path(), "nvidia-dgx-8gpu", Duration::from_secs(20));
    let mut events = monitor.subscribe_events();
    let mut without = full.clone();
    without.gpus.retain(|g| g.pci_address != "0000:47:00.0");
    monitor.apply(&mut without);
    assert_eq!(
        monitor.unhealthy().get("0000:47:00.0").map(String::as_str),
        Some("the gpu vanished from the pci bus")
    );
    assert_eq!(without.gpus.len(), full.gpus.len(), "still listed");
    let got = drain(&mut events);
    assert!(
        got.iter()
            .any(|e| e.message.contains("0000:47:00.0 is unhealthy")),
        "{got:?}"
    );
    // back: trusted once it answered for the period
    monitor.apply(&mut full.clone());
    monitor.probe().await;
    tokio::time::advance(Duration::from_secs(20)).await;
    monitor.probe().await;
    assert!(monitor.unhealthy().is_empty());
}

#[test]
fn no_kernel_log_reads_nothing_and_says_why() {
    let root = tempfile::tempdir().unwrap();
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    let state = kmsg::spawn(root.path(), tx, CancellationToken::new());
    let KmsgState::Absent { path, why } = state else {
        panic!("not absent: {state:?}");
    };
    assert_eq!(path, root.path().join("dev/kmsg"));
    assert_eq!(why, "no such file");
    assert_eq!(
        kmsg::probe(root.path()),
        KmsgState::Absent {
            path: root.path().join("dev/kmsg"),
            why: "no such file".into()
        }
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_kernel_log_that_never_writes_blocks_nothing() {
    // a FIFO without a writer: a blocking open or read would hang the runtime's only thread
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("dev")).unwrap();
    let fifo = root.path().join("dev/kmsg");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    let stop = CancellationToken::new();
    let state = kmsg::spawn(root.path(), tx, stop.clone());
    // neither the device nor a file: refused without blocking, and the runtime runs on
    assert!(matches!(state, KmsgState::Absent { .. }), "{state:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    stop.cancel();
}

#[test]
fn doctor_says_whether_gpu_errors_are_watched() {
    use odac_host::inventory::doctor::CheckStatus;
    let root = tempfile::tempdir().unwrap();
    let missing = odac_agent::gpu_health::doctor::kmsg_check(root.path());
    assert_eq!(missing.status, CheckStatus::Warn);
    assert!(
        missing.message.contains("no such file"),
        "{}",
        missing.message
    );
    assert!(
        missing.message.contains("not watched"),
        "{}",
        missing.message
    );
    assert!(missing.fix.unwrap().contains("CAP_SYSLOG"));

    // the command prints it, and a warning does not change the exit code of a fine host
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/no-gpu");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_odac-agent"))
        .args(["doctor", "--no-engine", "--json", "--root"])
        .arg(&fixture)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let line = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "gpu health")
        .unwrap_or_else(|| panic!("no gpu health check: {report}"));
    assert_eq!(line["status"], "warn");
    assert_eq!(out.status.code(), Some(0), "{report}");

    std::fs::create_dir_all(root.path().join("dev")).unwrap();
    std::fs::write(root.path().join("dev/kmsg"), "").unwrap();
    let standin = odac_agent::gpu_health::doctor::kmsg_check(root.path());
    assert_eq!(standin.status, CheckStatus::Info);
    assert!(standin.message.contains("stand-in"), "{}", standin.message);
}
