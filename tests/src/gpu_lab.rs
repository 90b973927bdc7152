//! The GPU lab of the end-to-end tests: `odac-sim gpu-lab` started in a temp dir, its printed
//! paths, the test's own view of the lab's engine (`docker -H`), the stand-ins' hook log, and
//! [`Lab::stop`], which checks that the lab left no process, mount, container, network
//! namespace or file behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::bins::{SIM, bin};
use crate::error::{Error, Result};
use crate::process::Process;

/// How long the lab may take to come up (engine start and image load).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long it may take to take everything down.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running lab.
#[derive(Debug)]
pub struct Lab {
    process: Process,
    /// The lab dir.
    pub dir: PathBuf,
    /// `unix://…` of the lab's engine.
    pub docker_host: String,
    /// The host root describing the lab's GPUs.
    pub host_root: PathBuf,
    /// The stand-ins' log.
    pub hook_log: PathBuf,
    /// While this file exists the hook fails.
    pub hook_fail: PathBuf,
    /// The image loaded into the lab's engine.
    pub image: String,
    /// The engine's network namespace (`net:[inode]`).
    net_ns: String,
    stopped: bool,
}

/// One line of the hook log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookLine {
    /// `hook`, `runtime` or `hook-failed`.
    pub kind: String,
    /// The container id (full).
    pub container: String,
    /// `NVIDIA_VISIBLE_DEVICES`, split on commas.
    pub visible: Vec<String>,
    /// The driver capabilities the hook honoured (its `capabilities=` field), split on commas;
    /// empty for lines without one.
    pub capabilities: Vec<String>,
}

fn value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// A comma-separated field, split.
fn list(field: Option<&str>) -> Vec<String> {
    field
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Lab {
    /// [`start`](Self::start) in `stack`'s directory, and points the stack's agent (started
    /// later) at the lab's engine and host root.
    pub fn start_for(stack: &mut crate::stack::Stack, gpus: &str, extra: &[&str]) -> Result<Lab> {
        let lab = Lab::start(stack.dir(), gpus, extra)?;
        stack.options.docker_host = Some(lab.docker_host.clone());
        stack.options.host_root = lab.host_root.clone();
        Ok(lab)
    }

    /// Starts a lab under `parent/lab` with `--gpus gpus` and the `extra` arguments.
    pub fn start(parent: &Path, gpus: &str, extra: &[&str]) -> Result<Lab> {
        let dir = parent.join("lab");
        let mut cmd = Command::new(bin(SIM)?);
        cmd.args(["gpu-lab", "--stop-with-parent", "--dir"])
            .arg(&dir)
            .args(["--gpus", gpus])
            .args(extra);
        let process = Process::spawn("gpu-lab", &mut cmd, parent)?;
        process.wait_for_line("ready", START_TIMEOUT)?;
        let lines = process.lines();
        let field = |key: &str| {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(&format!("{key}: ")))
                .map(str::to_owned)
                .ok_or_else(|| Error::Other(format!("the lab printed no {key:?} line")))
        };
        let pid = field("engine_pid")?;
        let net_ns = std::fs::read_link(format!("/proc/{pid}/ns/net"))
            .map_err(|e| Error::io("read the engine's net namespace", format!("/proc/{pid}"), e))?
            .display()
            .to_string();
        Ok(Lab {
            docker_host: field("docker_host")?,
            host_root: field("host_root")?.into(),
            hook_log: field("hook_log")?.into(),
            hook_fail: field("hook_fail")?.into(),
            image: field("image")?,
            dir: std::fs::canonicalize(&dir).map_err(|e| Error::io("resolve", &dir, e))?,
            net_ns,
            process,
            stopped: false,
        })
    }

    /// `docker -H <lab> ARGS…`; stdout.
    pub fn docker(&self, args: &[&str]) -> Result<String> {
        let what = format!("docker -H {} {}", self.docker_host, args.join(" "));
        let out = Command::new("docker")
            .args(["-H", &self.docker_host])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::command(&what, e.to_string()))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::command(
                what,
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ))
        }
    }

    /// `docker inspect` of one of the lab's containers.
    pub fn inspect(&self, id: &str) -> Result<Value> {
        let out = self.docker(&["inspect", "--type", "container", id])?;
        let v: Value = serde_json::from_str(&out)
            .map_err(|e| Error::Other(format!("lab inspect {id}: not JSON: {e}")))?;
        v.get(0)
            .cloned()
            .ok_or_else(|| Error::Other(format!("lab inspect {id}: empty answer")))
    }

    /// Full ids of the lab engine's containers (any state) labelled `label`.
    pub fn containers(&self, label: &str) -> Result<Vec<String>> {
        let filter = format!("label={label}");
        Ok(self
            .docker(&["ps", "-aq", "--no-trunc", "--filter", &filter])?
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    }

    /// The hook log's lines.
    pub fn hook_lines(&self) -> Result<Vec<HookLine>> {
        let text = std::fs::read_to_string(&self.hook_log)
            .map_err(|e| Error::io("read", &self.hook_log, e))?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let kind = if l.starts_with("hook failed ") {
                    "hook-failed"
                } else {
                    l.split_whitespace().next()?
                };
                Some(HookLine {
                    kind: kind.to_owned(),
                    container: value(l, "container")?.to_owned(),
                    visible: list(value(l, "NVIDIA_VISIBLE_DEVICES")),
                    capabilities: list(value(l, "capabilities")),
                })
            })
            .collect())
    }

    /// `odac-sim gpu-lab engine ACTION --dir DIR` (`stop` or `start` the lab's own engine,
    /// never the machine's); the line it printed.
    pub fn engine(&self, action: &str) -> Result<String> {
        let what = format!(
            "odac-sim gpu-lab engine {action} --dir {}",
            self.dir.display()
        );
        let out = Command::new(bin(SIM)?)
            .args(["gpu-lab", "engine", action, "--dir"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::command(&what, e.to_string()))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(Error::command(
                what,
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ))
        }
    }

    /// Makes the hook fail (`on`) or work again.
    pub fn fail_hook(&self, on: bool) -> Result<()> {
        if on {
            std::fs::write(&self.hook_fail, "").map_err(|e| Error::io("write", &self.hook_fail, e))
        } else {
            std::fs::remove_file(&self.hook_fail)
                .map_err(|e| Error::io("remove", &self.hook_fail, e))
        }
    }

    /// What is left of the lab: processes naming its dir or in its network namespace, mounts
    /// under its dir, the dir itself.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        let dir = self.dir.display().to_string();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for pid in entries
                .filter_map(std::result::Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            {
                let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let names_dir = raw.split(|b| *b == 0).any(|arg| {
                    let arg = String::from_utf8_lossy(arg);
                    let path = arg.rsplit_once('=').map_or(&*arg, |(_, v)| v);
                    let path = path.strip_prefix("unix://").unwrap_or(path);
                    path == dir || path.starts_with(&format!("{dir}/"))
                });
                let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
                let ns = std::fs::read_link(format!("/proc/{pid}/ns/net"))
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                if names_dir || ns == self.net_ns {
                    left.push(format!("process {pid} ({ns}): {}", cmdline.trim()));
                }
            }
        }
        for line in std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
        {
            if line
                .split_whitespace()
                .nth(4)
                .is_some_and(|m| m == dir || m.starts_with(&format!("{dir}/")))
            {
                left.push(format!("mount {line}"));
            }
        }
        if self.dir.exists() {
            left.push(format!("dir {dir}"));
        }
        left
    }

    /// SIGTERM, waits for the lab to exit 0 having printed `stopped`, and fails when anything
    /// of it is left; returns how long stopping took.
    pub fn stop(mut self) -> Result<Duration> {
        self.stopped = true;
        let (status, took) = self.process.terminate(STOP_TIMEOUT)?;
        if !status.success() {
            return Err(Error::Other(format!(
                "the lab exited with {status}: {:?}",
                self.process.tail(10)
            )));
        }
        self.process
            .wait_for_line("stopped", Duration::from_secs(5))?;
        let left = self.leftovers();
        if !left.is_empty() {
            return Err(Error::Other(format!("the lab left {left:#?}")));
        }
        Ok(took)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.stopped {
            // never SIGKILL the lab: its engine would outlive it
            let _ = self.process.terminate(STOP_TIMEOUT);
        }
    }
}
