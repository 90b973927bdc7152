//! `odac-sim gpu-lab`: GPU flows on a real engine without GPU hardware. The lab builds a host
//! root describing the chosen GPUs ([`host_root`]), writes stand-ins for the NVIDIA container
//! toolkit ([`standins`]), starts a private Docker engine configured like a GPU host
//! ([`engine`]), prints where everything is, and runs until SIGINT/SIGTERM; then it removes
//! the engine's containers, stops it and deletes everything it made. Point an agent at it with
//! `docker.host` and `host_root`: the lab writes them to `DIR/agent.toml` (with a state dir
//! under DIR), which `odac-agent enroll --config-dir DIR` (the line `odac host enroll-code
//! --config-dir DIR` prints) completes with a control plane and its token. While it runs,
//! `odac-sim gpu-lab engine stop|start --dir DIR` ([`control`]) stops and starts its engine.

pub mod control;
pub mod engine;
pub mod error;
pub mod gpus;
pub mod host_root;
pub mod inject;
pub mod standins;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use engine::{LAB_IMAGE, NvidiaRuntime};
pub use error::LabError;
pub use gpus::{LabGpus, nvidia_uuid};

use engine::{EnginePaths, LabEngine};

/// What to start.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// The lab dir (created; must be empty or absent).
    pub dir: PathBuf,
    /// The GPUs simulated.
    pub gpus: LabGpus,
    /// Whether the `nvidia` runtime stand-in is registered, and as the default.
    pub nvidia_runtime: NvidiaRuntime,
    /// The NVIDIA driver version the host root shows and the hook checks
    /// `NVIDIA_REQUIRE_*` against (with the CUDA version of its branch).
    pub nvidia_driver: String,
    /// The AMD GPUs' VRAM in MiB, in GPU order (the last one repeats).
    pub vram_mib: Vec<u64>,
    /// Stop as on SIGTERM when the process that started the lab goes away (tests use it so a
    /// killed test run leaves no lab behind).
    pub stop_with_parent: bool,
}

/// Returns once this process's parent has changed (it died and the lab was re-parented).
async fn parent_gone() {
    let parent = std::os::unix::process::parent_id();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        if std::os::unix::process::parent_id() != parent {
            return;
        }
    }
}

/// The lab's files.
#[derive(Debug, Clone)]
pub struct LabPaths {
    /// The lab dir.
    pub dir: PathBuf,
    /// The host root for the agent's `host_root`.
    pub host_root: PathBuf,
    /// The stand-ins' log.
    pub hook_log: PathBuf,
    /// While this file exists the hook fails.
    pub hook_fail: PathBuf,
    /// An agent configuration for the lab, without a control plane yet.
    pub agent_config: PathBuf,
}

impl LabPaths {
    fn new(dir: &Path) -> LabPaths {
        LabPaths {
            dir: dir.to_owned(),
            host_root: dir.join("root"),
            hook_log: dir.join("hook.log"),
            hook_fail: dir.join("hook-fail"),
            agent_config: dir.join("agent.toml"),
        }
    }
}

/// Makes the dir (refusing one with files: the lab deletes what is in it on exit); returns it
/// resolved, and whether the lab created it.
fn prepare_dir(dir: &Path) -> Result<(PathBuf, bool), LabError> {
    let created = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| LabError::io("create", dir, e))?;
    let dir = std::fs::canonicalize(dir).map_err(|e| LabError::io("resolve", dir, e))?;
    let mut entries = std::fs::read_dir(&dir).map_err(|e| LabError::io("list", &dir, e))?;
    if entries.next().is_some() {
        return Err(LabError::io(
            "use",
            &dir,
            std::io::Error::other(
                "the lab dir is not empty (the lab removes its contents on exit)",
            ),
        ));
    }
    Ok((dir, created))
}

/// Everything but the engine: host root, stand-ins, the hook's devices file.
fn build_files(paths: &LabPaths, config: &LabConfig) -> Result<EnginePaths, LabError> {
    let (gpus, driver) = (&config.gpus, config.nvidia_driver.as_str());
    let devices = host_root::build(&paths.host_root, gpus, driver, &config.vram_mib)?;
    let bin = host_root::bin_dir(&paths.host_root);
    std::fs::create_dir_all(&bin).map_err(|e| LabError::io("create", &bin, e))?;
    standins::write(&paths.dir, &bin)?;
    let list: String = devices
        .iter()
        .filter(|g| g.uuid.is_some())
        .map(|g| format!("{} {}\n", g.uuid.as_deref().unwrap_or_default(), g.index))
        .collect();
    let file = paths.dir.join("nvidia-devices");
    std::fs::write(&file, list).map_err(|e| LabError::io("write", &file, e))?;
    let cuda = odac_host::inventory::cuda::cuda_for_driver(driver)
        .map_or_else(|| "0.0".to_owned(), |c| c.to_string());
    let file = paths.dir.join(standins::DRIVER_FILE);
    std::fs::write(&file, format!("{driver} {cuda}\n"))
        .map_err(|e| LabError::io("write", &file, e))?;
    std::fs::write(&paths.hook_log, "").map_err(|e| LabError::io("write", &paths.hook_log, e))?;
    let engine = EnginePaths {
        dir: paths.dir.clone(),
        root: paths.host_root.clone(),
        bin,
    };
    let toml = agent_toml(paths, &engine.docker_host());
    std::fs::write(&paths.agent_config, toml)
        .map_err(|e| LabError::io("write", &paths.agent_config, e))?;
    Ok(engine)
}

/// The lab's `agent.toml`: its host root, engine and a state dir under DIR; the control plane
/// is added by `odac-agent enroll --config-dir DIR`.
fn agent_toml(paths: &LabPaths, docker_host: &str) -> String {
    let quote = |p: &Path| format!("{:?}", p.display().to_string());
    format!(
        "# the GPU lab's agent: `odac host enroll-code --config-dir {dir}` prints the\n\
         # `odac-agent enroll` line that adds [control_plane] here\n\
         host_root = {root}\nstate_dir = {state}\n\n[docker]\nhost = {docker:?}\n",
        dir = paths.dir.display(),
        root = quote(&paths.host_root),
        state = quote(&paths.dir.join("agent-state")),
        docker = docker_host,
    )
}

/// Deletes what the lab made: the dir's contents, and the dir when the lab created it.
fn remove_all(dir: &Path, created: bool) -> Result<(), LabError> {
    if created {
        return match std::fs::remove_dir_all(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LabError::io("remove", dir, e)),
        };
    }
    let entries = std::fs::read_dir(dir).map_err(|e| LabError::io("list", dir, e))?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let removed = if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| LabError::io("remove", &path, e))?;
    }
    Ok(())
}

/// The lines printed once the lab is up.
pub fn banner(paths: &LabPaths, docker_host: &str, pid: u32) -> String {
    format!(
        "docker_host: {docker_host}\nhost_root: {}\nhook_log: {}\nhook_fail: {}\nimage: {LAB_IMAGE}\n\
         agent_config: {}\nengine_pid: {pid}\nready\n",
        paths.host_root.display(),
        paths.hook_log.display(),
        paths.hook_fail.display(),
        paths.agent_config.display(),
    )
}

/// Runs the lab until SIGINT/SIGTERM, then takes it all down.
pub async fn run(config: &LabConfig) -> Result<(), LabError> {
    let (dir, created) = prepare_dir(&config.dir)?;
    let paths = LabPaths::new(&dir);
    let started = match build_files(&paths, config) {
        Ok(engine_paths) => {
            let docker_host = engine_paths.docker_host();
            LabEngine::start(engine_paths, config.nvidia_runtime)
                .await
                .map(|engine| (engine, docker_host))
        }
        Err(e) => Err(e),
    };
    let (mut engine, docker_host) = match started {
        Ok(started) => started,
        Err(e) => {
            let _ = remove_all(&dir, created);
            return Err(e);
        }
    };
    let mut out = std::io::stdout();
    let _ = out.write_all(banner(&paths, &docker_host, engine.pid()).as_bytes());
    let _ = out.flush();
    let signal = crate::server::wait_for_signal();
    let gone = parent_gone();
    tokio::pin!(signal, gone);
    loop {
        tokio::select! {
            () = &mut signal => break,
            () = &mut gone, if config.stop_with_parent => break,
            () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {
                control::serve(&dir, &mut engine).await;
            }
        }
    }
    engine.stop().await;
    for m in engine::mounts_under(&dir) {
        let _ = std::process::Command::new("umount")
            .args(["-l", &m])
            .status();
    }
    remove_all(&dir, created)?;
    println!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_with_files_is_refused_and_only_what_the_lab_made_is_removed() {
        let tmp = std::env::temp_dir().join(format!("odac-gpu-lab-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let (dir, created) = prepare_dir(&tmp).unwrap_or_else(|e| panic!("{e}"));
        assert!(created);
        std::fs::write(dir.join("x"), "").unwrap_or_else(|e| panic!("{e}"));
        let err = prepare_dir(&tmp)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("not empty") && err.contains("odac-gpu-lab-unit"),
            "{err}"
        );
        remove_all(&dir, false).unwrap_or_else(|e| panic!("{e}"));
        assert!(dir.exists() && std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(1) == 0);
        remove_all(&dir, true).unwrap_or_else(|e| panic!("{e}"));
        assert!(!dir.exists());
    }
}
