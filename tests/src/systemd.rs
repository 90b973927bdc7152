//! Real systemd for the service test: [`SystemdBox`] boots systemd as PID 1 in a container on
//! the local engine, from the image `tests/systemd/image.sh` builds (a debootstrapped Debian,
//! cached outside the repository), and runs commands in it (`systemctl`, `journalctl`, …);
//! [`agent_deb`] packages the agent under test with cargo-deb, as `deploy/check-deb.sh` does.
//!
//! The container shares the host's network namespace (so the simulator on 127.0.0.1 is
//! reachable), mounts the host's Docker socket (the agent inside drives the host's engine) and,
//! because this engine is cgroup v1, the host's `/sys/fs/cgroup` read-write with the host's
//! cgroup namespace: systemd then manages the container's own cgroup (`/docker/<id>`) as its
//! root. It is not `--privileged`: that asks for every capability, and an engine whose own
//! bounding set lacks one (CAP_SYS_RESOURCE on the CI machine) refuses to start such a container
//! ("unable to apply caps"); instead it gets every capability the engine has, without seccomp
//! and AppArmor confinement, which is what systemd needs to mount and set up service sandboxes.
//! Booting is never optional: an image that cannot be built or a systemd that does not reach
//! `running` is an error, so the test fails instead of skipping.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::bins::workspace_root;
use crate::error::{Error, Result};
use crate::poll::poll_every;

/// How long systemd may take to reach `running` (or `degraded`).
const BOOT_TIMEOUT: Duration = Duration::from_secs(90);

fn describe(out: &Output) -> String {
    format!(
        "{}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

fn run(command: &str, cmd: &mut Command) -> Result<Output> {
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|e| Error::command(command, e.to_string()))
}

fn run_ok(command: &str, cmd: &mut Command) -> Result<String> {
    let out = run(command, cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::command(command, describe(&out)))
    }
}

/// Builds (or reuses: a warm cache is a few seconds) the systemd image; its reference.
pub fn ensure_image() -> Result<String> {
    let script = workspace_root().join("tests/systemd/image.sh");
    let out = run(
        "tests/systemd/image.sh",
        Command::new("bash").arg(&script).stderr(Stdio::inherit()),
    )?;
    let image = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || image.is_empty() {
        return Err(Error::command(
            script.display().to_string(),
            format!("{} (see its output above)", out.status),
        ));
    }
    Ok(image)
}

/// The agent's Debian package, built from the binary of this test profile with
/// `cargo deb -p odac-agent --profile <profile> --no-build` into `out_dir` (or the package
/// named by `ODAC_E2E_DEB`). `agent_bin` is that binary; cargo-deb packages the one in the
/// profile directory next to it.
pub fn agent_deb(agent_bin: &Path, out_dir: &Path) -> Result<PathBuf> {
    if let Ok(deb) = std::env::var("ODAC_E2E_DEB") {
        return Ok(PathBuf::from(deb));
    }
    let profile = match agent_bin
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
    {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    };
    let target_dir = agent_bin
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| Error::Other(format!("{} has no target dir", agent_bin.display())))?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let command = format!("cargo deb -p odac-agent --profile {profile} --no-build");
    run_ok(
        &format!("{command} (needs cargo-deb: cargo install --locked cargo-deb)"),
        Command::new(cargo)
            .current_dir(workspace_root())
            .env("CARGO_TARGET_DIR", target_dir)
            .args(["deb", "-p", "odac-agent", "--profile", &profile])
            .args(["--no-build", "--fast", "--no-strip", "--output"])
            .arg(out_dir),
    )?;
    let found = std::fs::read_dir(out_dir)
        .map_err(|e| Error::io("read", out_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("odac-agent_") && n.ends_with(".deb"))
        });
    found.ok_or_else(|| Error::Other(format!("{command} left no .deb in {}", out_dir.display())))
}

/// A container running systemd as PID 1. Removed by the caller's label cleanup.
#[derive(Debug)]
pub struct SystemdBox {
    name: String,
}

impl SystemdBox {
    /// Starts container `name` from `image` with `labels`, `share` mounted read-only at
    /// `/srv/odac-e2e`, and waits until systemd reports `running` or `degraded`.
    pub fn boot(image: &str, name: &str, labels: &[String], share: &Path) -> Result<SystemdBox> {
        let mut cmd = Command::new("docker");
        cmd.args(["run", "-d", "--name", name]);
        for l in labels {
            cmd.arg("--label").arg(l);
        }
        cmd.args(["--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE"])
            .args(["--security-opt", "seccomp=unconfined"])
            .args(["--security-opt", "apparmor=unconfined"])
            .args([
                "--cgroupns",
                "host",
                "-v",
                "/sys/fs/cgroup:/sys/fs/cgroup:rw",
            ])
            .args(["--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp"])
            .args(["--network", "host", "--stop-signal", "SIGRTMIN+3"])
            .args(["-e", "container=docker"])
            .args(["-v", "/var/run/docker.sock:/run/docker.sock"])
            .arg("-v")
            .arg(format!("{}:/srv/odac-e2e:ro", share.display()))
            .args([image, "/sbin/init"]);
        run_ok("docker run (systemd container)", &mut cmd)?;
        let b = SystemdBox {
            name: name.to_owned(),
        };
        let booted = poll_every(
            "systemd in the container to finish booting",
            BOOT_TIMEOUT,
            Duration::from_millis(500),
            || {
                let out = b
                    .exec(&["systemctl", "is-system-running"])
                    .map_err(|e| e.to_string())?;
                let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                match state.as_str() {
                    "running" | "degraded" => Ok(state),
                    _ => Err(format!("is-system-running: {state:?} {}", describe(&out))),
                }
            },
        );
        match booted {
            Ok(state) if state == "degraded" => Err(Error::Other(format!(
                "systemd booted degraded; failed units: {}",
                b.sh("systemctl --failed --no-legend; journalctl -b -p warning --no-pager | tail -n 30")
                    .unwrap_or_default()
            ))),
            Ok(_) => Ok(b),
            Err(e) => Err(Error::Other(format!(
                "systemd did not boot as PID 1: {e}; container log: {}",
                run("docker logs", Command::new("docker").args(["logs", "--tail", "40", name]))
                    .map(|o| describe(&o))
                    .unwrap_or_default()
            ))),
        }
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `args` in the container; its output whatever the exit status.
    pub fn exec(&self, args: &[&str]) -> Result<Output> {
        run(
            &format!("docker exec {} {}", self.name, args.join(" ")),
            Command::new("docker").args(["exec", &self.name]).args(args),
        )
    }

    /// Runs a shell `script` in the container; its stdout, or an error with its output.
    pub fn sh(&self, script: &str) -> Result<String> {
        let out = self.exec(&["sh", "-c", script])?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::command(
                format!("in {}: {script}", self.name),
                describe(&out),
            ))
        }
    }

    /// `systemctl show -p PROPERTY --value UNIT`.
    pub fn property(&self, unit: &str, property: &str) -> Result<String> {
        self.sh(&format!("systemctl show -p {property} --value {unit}"))
            .map(|s| s.trim().to_owned())
    }

    /// `journalctl -u UNIT` (whole boot, no pager).
    pub fn journal(&self, unit: &str) -> Result<String> {
        self.sh(&format!(
            "journalctl -u {unit} --no-pager -o short-monotonic"
        ))
    }
}
