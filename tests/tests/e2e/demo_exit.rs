//! What `odac-sim demo`'s Ctrl-C leaves (issue 31 finding 9), with the real binaries and
//! engine: an app added during the walk-through survives Ctrl-C, and the demo says so by name
//! with how to remove it (`--clean`); the next demo on the same state dir manages it again,
//! and Ctrl-C of `odac-sim demo --clean` removes every app of the demo, leaving no container
//! of the demo's instance. Uses the demo's fixed instance `odac-demo`, so it runs one at a
//! time with the other demo test (`one_engine.rs`).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use odac_e2e::bins::{AGENT, CLI, SIM, bin};
use odac_e2e::ports::free_port;
use odac_e2e::process::Process;
use odac_e2e::require_docker;
use odac_simulator::demo::DEMO_APP;

use crate::readme_demo::{Leftovers, demo_apps, interrupt};

const EXTRA: &str = "walkthrough-extra";

fn start_demo(state: &Path, port: u16, extra: &[&str], logs: &Path) -> Process {
    let mut cmd = Command::new(bin(SIM).unwrap());
    cmd.args(["demo", "--listen", &format!("127.0.0.1:{port}"), "--state"])
        .arg(state)
        .args(extra)
        .env("ODAC_AGENT_BIN", bin(AGENT).unwrap())
        .process_group(0);
    let demo = Process::spawn("demo", &mut cmd, logs).unwrap();
    demo.wait_for_line("Ctrl-C stops the demo", Duration::from_secs(120))
        .unwrap();
    demo
}

/// Ctrl-C, then the demo's whole output once it exited.
fn ctrl_c(mut demo: Process) -> String {
    interrupt(&demo);
    demo.wait_exit(Duration::from_secs(90)).unwrap();
    demo.lines().join("\n")
}

fn wait_running(app: &str) {
    let start = Instant::now();
    while !demo_apps().iter().any(|a| a == app) {
        assert!(start.elapsed() < Duration::from_secs(90), "{app} never ran");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn ctrl_c_names_what_the_demo_leaves_and_clean_removes_it() {
    require_docker!("demo exit");
    assert!(
        demo_apps().is_empty(),
        "another odac-sim demo runs on this engine"
    );
    let _left = Leftovers(EXTRA);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let port = free_port().unwrap();
    let demo = start_demo(&state, port, &[], &dir.path().join("logs"));
    let spec = serde_json::json!({
        "name": EXTRA,
        "image": odac_simulator::catalog::DEMO_IMAGE,
        "command": ["sleep", "2147483647"],
    });
    let created = odac_e2e::command::output_with_stdin(
        Command::new(bin(CLI).unwrap())
            .args(["--api", &format!("https://127.0.0.1:{port}"), "--ca-file"])
            .arg(state.join("sim/ca.pem"))
            .args(["app", "create", "-f", "-"]),
        "odac app create -f -",
        Some(spec.to_string().as_bytes()),
    )
    .unwrap();
    assert!(created.status.success(), "{created:?}");
    wait_running(EXTRA);

    let said = ctrl_c(demo);
    println!("{said}");
    assert!(said.contains(&format!("removed {DEMO_APP}")), "{said}");
    assert!(
        said.contains(&format!(
            "left in place: 1 app(s) made during the demo ({EXTRA})"
        )),
        "{said}"
    );
    assert!(said.contains("--clean"), "{said}");
    assert_eq!(demo_apps(), vec![EXTRA.to_owned()], "{said}");

    let demo = start_demo(&state, port, &["--clean"], &dir.path().join("logs2"));
    wait_running(DEMO_APP);
    let said = ctrl_c(demo);
    println!("{said}");
    assert!(said.contains("the demo's host has no app left"), "{said}");
    assert!(demo_apps().is_empty(), "{said}");
}
