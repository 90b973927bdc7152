//! Inventory: the agent library's scan of the 8-GPU fixture (`nvidia-dgx-8gpu`), called in
//! process, alone and with what each periodic rescan adds (verdict, wire inventory, change
//! hash), beside a plain walk that reads every file of the same tree (the I/O floor); and
//! the time from a change of a copied fixture tree under the agent's `host_root` (GPU 7's PCI
//! device unplugged or plugged back) until the control plane's host view shows the new
//! inventory. Targets: ≤ 1 ms per scan, ≤ 10 s from change to control plane.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use odac_e2e::poll::poll_every;
use odac_e2e::stack::{Stack, fixture_host};
use odac_e2e::{Error, Result};
use odac_host::engine::EngineCapabilities;
use odac_host::inventory::{Assessment, inventory_hash, scan};

use super::{Opts, Row, Table, Target, Unit, docker_or_skip, production};

/// The fixture.
const FIXTURE: &str = "nvidia-dgx-8gpu";
/// The PCI device unplugged and plugged back to change the inventory (GPU 7).
const TOGGLED: &str = "sys/bus/pci/devices/0000:bd:00.0";
/// Where it is kept while unplugged (outside the scanned tree).
const PARKED: &str = "unplugged-gpu7";

/// Mean time of `f` over `n` calls after `n / 10` warm-up calls, in µs.
fn mean_us(n: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// Reads every file (and link) under `dir`: what any scan must at least do.
fn read_tree(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut bytes = 0;
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_symlink() => {
                bytes += std::fs::read_link(&p).map_or(0, |l| l.as_os_str().len())
            }
            Ok(t) if t.is_dir() => bytes += read_tree(&p),
            Ok(_) => bytes += std::fs::read(&p).map_or(0, |b| b.len()),
            Err(_) => {}
        }
    }
    bytes
}

fn engine() -> EngineCapabilities {
    EngineCapabilities::from_info_json(
        &serde_json::json!({"ServerVersion": "28.2.2", "Runtimes": {"nvidia": {}, "runc": {}}}),
        Some("1.50".to_owned()),
    )
}

/// The in-process rows.
fn scan_rows(opts: Opts, t: &mut Table) -> Result<()> {
    let root = fixture_host(FIXTURE);
    let gpus = scan(&root).gpus.len();
    if gpus != 8 {
        return Err(Error::Other(format!(
            "fixture {} has {gpus} gpus, expected 8",
            root.display()
        )));
    }
    let runs = opts.pick(5, 2);
    let n = opts.pick(1000, 100);
    let engine = engine();
    let (mut s, mut full, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        floor.push(mean_us(n, || {
            black_box(read_tree(black_box(&root)));
        }));
        s.push(mean_us(n, || {
            black_box(scan(black_box(&root)));
        }));
        full.push(mean_us(n, || {
            let a = Assessment::new(scan(&root), engine.clone());
            black_box(inventory_hash(&a.inventory()));
        }));
    }
    t.push(
        Row::new(format!("scan, 8-GPU fixture (mean of {n})"), Unit::Us, s)
            .baseline(floor.clone())
            .target(Target::AtMost(1000.0)),
    );
    t.push(
        Row::new("scan + verdict + inventory + hash", Unit::Us, full)
            .baseline(floor)
            .target(Target::AtMost(1000.0)),
    );
    Ok(())
}

/// Moves GPU 7's PCI device out of the tree or back; returns whether it is now present.
fn toggle(root: &Path) -> Result<bool> {
    let on = root.join(TOGGLED);
    let off = root.join(PARKED);
    if on.exists() {
        std::fs::rename(&on, &off).map_err(|e| Error::io("rename", &on, e))?;
        Ok(false)
    } else {
        std::fs::rename(&off, &on).map_err(|e| Error::io("rename", &off, e))?;
        Ok(true)
    }
}

/// A copy of the fixture in a temp dir (`cp -a`, links kept).
fn copy_fixture() -> Result<(tempfile::TempDir, PathBuf)> {
    let tmp = tempfile::Builder::new()
        .prefix("odac-bench-host-")
        .tempdir()
        .map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
    let dst = tmp.path().join("host");
    let st = Command::new("cp")
        .arg("-a")
        .arg(fixture_host(FIXTURE))
        .arg(&dst)
        .status()
        .map_err(|e| Error::command("cp -a", e.to_string()))?;
    if !st.success() {
        return Err(Error::command("cp -a", st.to_string()));
    }
    Ok((tmp, dst))
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Option<Table>> {
    let mut t = Table::new(
        "Inventory — 8-GPU fixture scan in process; fixture change → control plane",
        "read every file / rescan interval",
    );
    scan_rows(opts, &mut t)?;
    if !docker_or_skip("inventory")? {
        return Ok(Some(t));
    }
    let (_tmp, root) = copy_fixture()?;
    // the change must change the inventory the agent sends
    let before = inventory_hash(&Assessment::new(scan(&root), engine()).inventory());
    toggle(&root)?;
    let after = inventory_hash(&Assessment::new(scan(&root), engine()).inventory());
    toggle(&root)?;
    if before == after {
        return Err(Error::Other(format!(
            "unplugging {TOGGLED} does not change the inventory"
        )));
    }
    let stack = Stack::builder("bench-inventory")
        .host_root(root.clone())
        .agent_options(production)
        .start()?;
    let host = stack.wait_connected(Duration::from_secs(60))?;
    let inventory_of = |host: &str| -> std::result::Result<serde_json::Value, String> {
        let hosts = stack.sim.hosts().map_err(|e| e.to_string())?;
        let h = hosts.iter().find(|h| h.id == host).ok_or("no host")?;
        match &h.inventory {
            Some(inv) => serde_json::to_value(inv).map_err(|e| e.to_string()),
            None => Err("no inventory yet".to_owned()),
        }
    };
    let mut prev = poll_every(
        "the first inventory",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || inventory_of(&host),
    )?;
    let runs = opts.pick(5, 1);
    let mut took = Vec::new();
    let interval = stack.options.inventory_secs as f64;
    for i in 0..runs {
        // right after a push the agent has just rescanned: a change now waits a whole
        // interval; spread the changes over the rescan phase instead (stratified, not random)
        let phase = interval * (i as f64 + 0.5) / runs as f64;
        std::thread::sleep(Duration::from_secs_f64(phase));
        let present = toggle(&root)?;
        let t0 = Instant::now();
        prev = poll_every(
            "the changed inventory on the control plane",
            Duration::from_secs(30),
            Duration::from_millis(50),
            || {
                let inv = inventory_of(&host)?;
                if inv != prev {
                    Ok(inv)
                } else {
                    Err("unchanged".to_owned())
                }
            },
        )?;
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "inventory run {}/{runs}: GPU 7 {} {phase:.1} s after the last push → control plane in {secs:.2} s",
            i + 1,
            if present { "plugged back" } else { "unplugged" }
        );
        took.push(secs);
    }
    t.push(
        Row::new(
            "fixture change → inventory on the control plane",
            Unit::Secs,
            took,
        )
        .baseline(vec![interval])
        .target(Target::AtMost(10.0)),
    );
    t.note("scan baseline: a walk reading every file and link of the same fixture tree");
    t.note(format!(
        "change baseline: the agent's rescan interval ({interval:.0} s, shipped default); each \
         change is made at a different phase of the rescan cycle ((i + ½)/runs of the interval \
         after the previous push); the agent pushes an inventory only when its hash changed; the \
         control plane polled every 50 ms"
    ));
    Ok(Some(t))
}
