//! The bare baseline client (`odac-bench-client`, see its source) as a [`Process`]: built next
//! to the running `odac-bench` when missing or older than its source (a `cargo run --bin
//! odac-bench` does not build it), started against a simulator with a token file, and waited
//! for until its session is up.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use odac_e2e::bins::{profile_dir, workspace_root};
use odac_e2e::process::Process;
use odac_e2e::sim::Sim;
use odac_e2e::{Error, Result};

/// The binary's name.
const CLIENT: &str = "odac-bench-client";

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The client binary, built first when it is missing or older than its source.
pub fn client_bin() -> Result<PathBuf> {
    let dir = profile_dir()?;
    let bin = dir.join(CLIENT);
    let src = workspace_root().join("tests/src/bin/odac-bench-client.rs");
    let stale = match (mtime(&bin), mtime(&src)) {
        (Some(b), Some(s)) => s > b,
        (None, _) => true,
        (Some(_), None) => false,
    };
    if stale {
        let profile = match dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev".to_owned(),
            Some(p) => p.to_owned(),
        };
        let target = dir
            .parent()
            .ok_or_else(|| Error::Other(format!("{} has no parent", dir.display())))?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let out = Command::new(&cargo)
            .current_dir(workspace_root())
            .args(["build", "--quiet", "-p", "odac-e2e", "--bin", CLIENT])
            .args(["--profile", &profile])
            .arg("--target-dir")
            .arg(target)
            .output()
            .map_err(|e| Error::command(format!("{cargo} build --bin {CLIENT}"), e.to_string()))?;
        if !out.status.success() {
            return Err(Error::command(
                format!("{cargo} build --bin {CLIENT}"),
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ));
        }
    }
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(Error::Other(format!("{} is missing", bin.display())))
    }
}

/// Starts the bare client against `sim` (directly, or through a proxy on `via_port`) as host
/// `id`, logging under `dir`; returns once it printed `welcome`.
pub fn start_client(sim: &Sim, via_port: Option<u16>, id: &str, dir: &Path) -> Result<Process> {
    let token_file = dir.join(format!("{id}.token"));
    std::fs::write(&token_file, sim.token()).map_err(|e| Error::io("write", &token_file, e))?;
    let url = match via_port {
        Some(p) => sim.agents_url_via(p),
        None => sim.agents_url(),
    };
    let mut cmd = Command::new(client_bin()?);
    cmd.arg("--url")
        .arg(url)
        .arg("--ca-file")
        .arg(sim.ca_path())
        .arg("--token-file")
        .arg(&token_file)
        .arg("--id")
        .arg(id);
    let p = Process::spawn(id, &mut cmd, &dir.join("logs"))?;
    p.wait_for_line("welcome", Duration::from_secs(30))?;
    Ok(p)
}
