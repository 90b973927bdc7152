//! The README's GPU lab walk-through as typed (issue 31 finding 8): `odac-sim gpu-lab` writes
//! `DIR/agent.toml` (host root, engine, state dir) and prints it as `agent_config`; `odac host
//! enroll-code --config-dir DIR` against a control plane prints the `odac-agent enroll` and
//! `odac-agent run` lines, which are run exactly as printed; the agent connects and reports
//! the lab's GPUs, and the lab still leaves nothing behind once the agent stopped.

use std::process::Command;
use std::time::Duration;

use odac_e2e::agent::SESSION_UP;
use odac_e2e::bins::{AGENT, bin};
use odac_e2e::gpu_lab::Lab;
use odac_e2e::poll::poll;
use odac_e2e::process::Process;
use odac_e2e::require_docker;
use odac_e2e::sim::Sim;

use crate::enroll_code::printed;

#[test]
fn the_lab_agent_enrolls_from_the_printed_lines_and_reports_the_lab_gpus() {
    require_docker!("gpu lab enroll");
    let dir = tempfile::tempdir().unwrap();
    let lab = Lab::start(dir.path(), "nvidia:2", &[]).unwrap();
    let config = std::fs::read_to_string(lab.dir.join("agent.toml")).unwrap();
    assert!(
        config.contains(&format!("host = {:?}", lab.docker_host)),
        "{config}"
    );
    let mut sim = Sim::start(dir.path(), "lab-enroll-unused").unwrap();

    let out = sim
        .odac_line(
            &format!("odac host enroll-code --config-dir {}", lab.dir.display()),
            None,
        )
        .unwrap()
        .stdout;
    println!("{out}");
    let enroll = printed(&out, "odac-agent enroll ");
    let enrolled = Command::new(bin(AGENT).unwrap())
        .args(&enroll[1..])
        .output()
        .unwrap();
    assert!(enrolled.status.success(), "{enrolled:?}");
    let run = printed(&out, "odac-agent run ");
    let mut cmd = Command::new(bin(AGENT).unwrap());
    cmd.args(&run[1..]);
    let mut agent = Process::spawn("lab-agent", &mut cmd, &dir.path().join("logs")).unwrap();
    agent
        .wait_for_line(SESSION_UP, Duration::from_secs(60))
        .unwrap();
    let gpus = poll(
        "the lab's two NVIDIA GPUs in the inventory",
        Duration::from_secs(60),
        || {
            let hosts = sim.hosts().map_err(|e| e.to_string())?;
            let n = hosts
                .first()
                .and_then(|h| h.inventory.as_ref())
                .map_or(0, |i| i.gpus.len());
            if n == 2 {
                Ok(n)
            } else {
                Err(format!("{n} GPUs"))
            }
        },
    )
    .unwrap();
    assert_eq!(gpus, 2);

    agent.sigterm().unwrap();
    agent.wait_exit(Duration::from_secs(15)).unwrap();
    lab.stop().unwrap();
    sim.kill().unwrap();
}
