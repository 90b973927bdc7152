//! Finding the binaries under test: `odac-agent`, `odac-sim` and `odac`. They live in the
//! same target profile directory as the running test executable (`target/debug/deps/…` →
//! `target/debug/`). The first call in a test process runs `cargo build -p odac-agent
//! -p odac-simulator --bins` (outside the dev profile the agent alone first) when a binary is missing or older than the sources, so the
//! binaries match the sources (set `ODAC_E2E_NO_BUILD=1` to skip it); `ODAC_E2E_BIN_DIR`
//! points at another directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::error::{Error, Result};

/// The agent binary.
pub const AGENT: &str = "odac-agent";
/// The simulator binary.
pub const SIM: &str = "odac-sim";
/// The CLI binary.
pub const CLI: &str = "odac";

/// The workspace root (the parent of this crate's manifest dir).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .map_or_else(|| here.to_owned(), Path::to_owned)
}

/// The profile directory of the running test executable, e.g. `target/debug`.
pub fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Other(format!("cannot find the test executable: {e}")))?;
    let mut dir = exe
        .parent()
        .ok_or_else(|| Error::Other(format!("{} has no parent", exe.display())))?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir
            .parent()
            .ok_or_else(|| Error::Other(format!("{} has no parent", dir.display())))?;
    }
    Ok(dir.to_owned())
}

/// The cargo profile whose output lands in `dir` (`debug` is the `dev` profile).
fn profile_of(dir: &Path) -> String {
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    }
}

/// The package sets to build, one `cargo build` each. Outside the dev profile the agent is built
/// alone, as shipped: built with the simulator, cargo would unify features and the agent binary
/// would carry the simulator's (`odac-host`'s `test-support`, wider tokio and hyper features),
/// which would skew the benchmarks' footprint. Dev builds keep one invocation (faster, and the same
/// binary `cargo build --workspace` makes).
fn package_sets(profile: &str) -> Vec<Vec<&'static str>> {
    if profile == "dev" {
        vec![vec!["odac-agent", "odac-simulator"]]
    } else {
        vec![vec!["odac-agent"], vec!["odac-simulator"]]
    }
}

fn build(dir: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let profile = profile_of(dir);
    let target_dir = dir
        .parent()
        .ok_or_else(|| Error::Other(format!("{} has no parent", dir.display())))?;
    let started = std::time::Instant::now();
    for packages in package_sets(&profile) {
        let what = format!("{cargo} build -p {}", packages.join(" -p "));
        let out = Command::new(&cargo)
            .current_dir(workspace_root())
            .args(["build", "--quiet", "--bins"])
            .args(packages.iter().flat_map(|p| ["-p", p]))
            .args(["--profile", &profile])
            .arg("--target-dir")
            .arg(target_dir)
            .output()
            .map_err(|e| Error::command(what.clone(), e.to_string()))?;
        if !out.status.success() {
            return Err(Error::command(
                what,
                format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr)),
            ));
        }
    }
    println!(
        "odac-e2e: cargo build of the binaries took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn bin_dir_once() -> std::result::Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("ODAC_E2E_BIN_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let dir = profile_dir().map_err(|e| e.to_string())?;
    if std::env::var("ODAC_E2E_NO_BUILD").as_deref() != Ok("1") && stale(&dir) {
        build(&dir).map_err(|e| e.to_string())?;
    }
    Ok(dir)
}

/// The newest modification time of the files under `path` (recursively).
fn newest_mtime(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    let own = meta.modified().ok();
    if !meta.is_dir() {
        return own;
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| newest_mtime(&e.path()))
        .chain(own)
        .max()
}

/// Whether a binary is missing or older than a source it is built from (the sources and
/// manifests of the protocol, host, agent and simulator crates, and the lock file). Each test
/// process (nextest runs one per test) then skips cargo when the binaries are current.
fn stale(dir: &Path) -> bool {
    let oldest_bin = [AGENT, SIM, CLI]
        .iter()
        .map(|b| {
            std::fs::metadata(dir.join(b))
                .and_then(|m| m.modified())
                .ok()
        })
        .collect::<Option<Vec<_>>>()
        .and_then(|v| v.into_iter().min());
    let Some(oldest_bin) = oldest_bin else {
        return true;
    };
    let root = workspace_root();
    let sources = ["protocol", "host", "agent", "simulator"]
        .iter()
        .flat_map(|c| [root.join(c).join("src"), root.join(c).join("Cargo.toml")])
        .chain([root.join("Cargo.toml"), root.join("Cargo.lock")]);
    sources
        .filter_map(|p| newest_mtime(&p))
        .any(|t| t > oldest_bin)
}

/// The directory holding the binaries, built on first use.
pub fn bin_dir() -> Result<PathBuf> {
    static DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(bin_dir_once).clone().map_err(Error::Other)
}

/// The path of binary `name`, which must exist.
pub fn bin(name: &str) -> Result<PathBuf> {
    let path = bin_dir()?.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::Other(format!(
            "binary {} is missing (build it with cargo build -p odac-agent -p odac-simulator)",
            path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn profile_names() {
        assert_eq!(profile_of(Path::new("/t/target/debug")), "dev");
        assert_eq!(profile_of(Path::new("/t/target/release")), "release");
    }

    #[test]
    fn staleness_follows_mtimes() {
        let dir = tempfile::tempdir().unwrap();
        assert!(stale(dir.path()), "missing binaries are stale");
        assert!(newest_mtime(&workspace_root().join("agent/src")).is_some());
        for b in [AGENT, SIM, CLI] {
            std::fs::write(dir.path().join(b), b"").unwrap();
        }
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        for b in [AGENT, SIM, CLI] {
            let f = std::fs::File::options()
                .write(true)
                .open(dir.path().join(b))
                .unwrap();
            f.set_modified(old).unwrap();
        }
        assert!(
            stale(dir.path()),
            "binaries older than the sources are stale"
        );
        let future = SystemTime::now() + std::time::Duration::from_secs(3600);
        for b in [AGENT, SIM, CLI] {
            let f = std::fs::File::options()
                .write(true)
                .open(dir.path().join(b))
                .unwrap();
            f.set_modified(future).unwrap();
        }
        assert!(
            !stale(dir.path()),
            "binaries newer than every source are current"
        );
    }

    #[test]
    fn workspace_root_holds_the_workspace_manifest() {
        let text = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
        assert!(text.contains("[workspace]"));
    }
}
