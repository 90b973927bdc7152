//! The test's own view of the Docker engine, through the `docker` command line (independent of
//! the agent's engine code): is the engine there (a missing one fails unless `ODAC_ALLOW_SKIP=1`),
//! which containers carry a label, what `inspect` says, and label-based cleanup that also runs
//! when a test fails ([`LabelCleanup`] removes on drop).

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::error::{Error, Result};

/// Label on every container, volume and image the end-to-end tests create.
pub const TEST_LABEL: &str = "odac.test";
/// Label naming the test run (one value per scenario) on the agent's containers.
pub const RUN_LABEL: &str = "odac.e2e.run";

fn docker(args: &[&str]) -> Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::command(format!("docker {}", args.join(" ")), e.to_string()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::command(
            format!("docker {}", args.join(" ")),
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ))
    }
}

/// The engine's version when it answers, else why not.
pub fn engine_version() -> Result<String> {
    docker(&["version", "--format", "{{.Server.Version}}"]).map(|s| s.trim().to_owned())
}

/// Whether the developer opted out of tests whose counterpart is missing: `ODAC_ALLOW_SKIP=1`,
/// unless `ODAC_REQUIRE_DOCKER=1` (CI) says the engine is required.
pub fn skip_allowed() -> bool {
    std::env::var("ODAC_ALLOW_SKIP").as_deref() == Ok("1")
        && std::env::var("ODAC_REQUIRE_DOCKER").as_deref() != Ok("1")
}

/// Whether the test may go on: `Ok(true)` with an engine; without one `Err`, or `Ok(false)`
/// (after printing a skip line) when the developer opted out with `ODAC_ALLOW_SKIP=1`.
pub fn docker_or_skip(test: &str) -> Result<bool> {
    match engine_version() {
        Ok(_) => Ok(true),
        Err(e) if skip_allowed() => {
            println!("SKIP {test}: no docker engine ({e}) and ODAC_ALLOW_SKIP=1");
            Ok(false)
        }
        Err(e) => Err(Error::DockerRequired(e.to_string())),
    }
}

/// Returns from the calling test when Docker is missing and the developer opted out
/// (`ODAC_ALLOW_SKIP=1`, printing a skip line); fails it otherwise.
#[macro_export]
macro_rules! require_docker {
    ($test:expr) => {
        match $crate::docker::docker_or_skip($test) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => panic!("{e}"),
        }
    };
}

/// One container as `docker ps` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Short id.
    pub id: String,
    /// Name.
    pub name: String,
    /// `running`, `exited`, `created`, `restarting`, …
    pub state: String,
    /// The `odac.app` label.
    pub app: String,
}

/// Containers (any state) carrying `label` (`KEY` or `KEY=VALUE`).
pub fn containers(label: &str) -> Result<Vec<Container>> {
    let filter = format!("label={label}");
    let out = docker(&[
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        &filter,
        "--format",
        "{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Label \"odac.app\"}}",
    ])?;
    Ok(out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split('\t').map(str::to_owned);
            Container {
                id: f.next().unwrap_or_default(),
                name: f.next().unwrap_or_default(),
                state: f.next().unwrap_or_default(),
                app: f.next().unwrap_or_default(),
            }
        })
        .collect())
}

/// `docker inspect` of one container.
pub fn inspect(id: &str) -> Result<Value> {
    let out = docker(&["inspect", "--type", "container", id])?;
    let v: Value = serde_json::from_str(&out)
        .map_err(|e| Error::Other(format!("docker inspect {id}: not JSON: {e}")))?;
    v.get(0)
        .cloned()
        .ok_or_else(|| Error::Other(format!("docker inspect {id}: empty answer")))
}

/// Removes every container (with its anonymous volumes) and named volume carrying `label`;
/// returns how many containers were removed.
pub fn remove_by_label(label: &str) -> Result<usize> {
    let filter = format!("label={label}");
    let ids: Vec<String> = docker(&["ps", "-aq", "--filter", &filter])?
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    for chunk in ids.chunks(50) {
        let mut args = vec!["rm", "-f", "-v"];
        args.extend(chunk.iter().map(String::as_str));
        docker(&args)?;
    }
    let vols: Vec<String> = docker(&["volume", "ls", "-q", "--filter", &filter])?
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    for chunk in vols.chunks(50) {
        let mut args = vec!["volume", "rm", "-f"];
        args.extend(chunk.iter().map(String::as_str));
        let _ = docker(&args);
    }
    Ok(ids.len())
}

/// Removes the containers and volumes carrying a label when dropped (so also when the test
/// panics), and once when created, in case an earlier run left some behind.
#[derive(Debug)]
pub struct LabelCleanup {
    label: String,
}

impl LabelCleanup {
    /// Cleans `label` now and on drop.
    pub fn new(label: impl Into<String>) -> LabelCleanup {
        let c = LabelCleanup {
            label: label.into(),
        };
        let _ = remove_by_label(&c.label);
        c
    }

    /// The label (`KEY=VALUE`).
    pub fn label(&self) -> &str {
        &self.label
    }
}

impl Drop for LabelCleanup {
    fn drop(&mut self) {
        if let Err(e) = remove_by_label(&self.label) {
            eprintln!("cleanup of containers labelled {}: {e}", self.label);
        }
    }
}

/// Whether the engine has a runtime named `name` (`docker info` `Runtimes`).
pub fn has_runtime(name: &str) -> Result<bool> {
    let out = docker(&["info", "--format", "{{json .Runtimes}}"])?;
    let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
    Ok(v.get(name).is_some())
}
