//! `odac-sim gpu-lab`: GPU flows on a real engine without GPU hardware. The lab builds a host
//! root describing the chosen GPUs ([`host_root`]), writes stand-ins for the NVIDIA container
//! toolkit ([`standins`]), starts a private Docker engine configured like a GPU host
//! ([`engine`]), prints where everything is, and runs until SIGINT/SIGTERM; then it removes
//! the engine's containers, stops it and deletes everything it made. Point an agent at it with
//! `docker.host` and `host_root`.

pub mod engine;
pub mod error;
pub mod gpus;
pub mod host_root;
pub mod standins;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use engine::LAB_IMAGE;
pub use error::LabError;
pub use gpus::{LabGpus, nvidia_uuid};

use engine::{EnginePaths, LabEngine};
use gpus::LabVendor;

/// What to start.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// The lab dir (created; must be empty or absent).
    pub dir: PathBuf,
    /// The GPUs simulated.
    pub gpus: LabGpus,
    /// Make `nvidia` the engine's default runtime (as `nvidia-ctk runtime configure
    /// --set-as-default` does), so every container goes through the runtime stand-in.
    pub nvidia_default_runtime: bool,
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
}

impl LabPaths {
    fn new(dir: &Path) -> LabPaths {
        LabPaths {
            dir: dir.to_owned(),
            host_root: dir.join("root"),
            hook_log: dir.join("hook.log"),
            hook_fail: dir.join("hook-fail"),
        }
    }
}

/// Makes the dir (refusing one with files: the lab deletes what is in it on exit).
fn prepare_dir(dir: &Path) -> Result<PathBuf, LabError> {
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
    Ok(dir)
}

/// Everything but the engine: host root, stand-ins, the hook's devices file.
fn build_files(paths: &LabPaths, gpus: &LabGpus) -> Result<EnginePaths, LabError> {
    let devices = host_root::build(&paths.host_root, gpus)?;
    let bin = host_root::bin_dir(&paths.host_root);
    std::fs::create_dir_all(&bin).map_err(|e| LabError::io("create", &bin, e))?;
    standins::write(&paths.dir, &bin)?;
    let list: String = devices
        .iter()
        .filter(|g| g.vendor == LabVendor::Nvidia)
        .map(|g| format!("{} {}\n", g.uuid.as_deref().unwrap_or_default(), g.index))
        .collect();
    let file = paths.dir.join("nvidia-devices");
    std::fs::write(&file, list).map_err(|e| LabError::io("write", &file, e))?;
    std::fs::write(&paths.hook_log, "").map_err(|e| LabError::io("write", &paths.hook_log, e))?;
    Ok(EnginePaths {
        dir: paths.dir.clone(),
        root: paths.host_root.clone(),
        bin,
    })
}

/// Deletes the lab dir's contents and the dir itself.
fn remove_all(dir: &Path) -> Result<(), LabError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LabError::io("remove", dir, e)),
    }
}

/// The lines printed once the lab is up.
pub fn banner(paths: &LabPaths, docker_host: &str, pid: u32) -> String {
    format!(
        "docker_host: {docker_host}\nhost_root: {}\nhook_log: {}\nhook_fail: {}\nimage: {LAB_IMAGE}\n\
         engine_pid: {pid}\nready\n",
        paths.host_root.display(),
        paths.hook_log.display(),
        paths.hook_fail.display(),
    )
}

/// Runs the lab until SIGINT/SIGTERM, then takes it all down.
pub async fn run(config: &LabConfig) -> Result<(), LabError> {
    let dir = prepare_dir(&config.dir)?;
    let paths = LabPaths::new(&dir);
    let started = match build_files(&paths, &config.gpus) {
        Ok(engine_paths) => LabEngine::start(engine_paths, config.nvidia_default_runtime).await,
        Err(e) => Err(e),
    };
    let mut engine = match started {
        Ok(engine) => engine,
        Err(e) => {
            let _ = remove_all(&dir);
            return Err(e);
        }
    };
    let mut out = std::io::stdout();
    let _ = out.write_all(
        banner(
            &paths,
            &format!("unix://{}/docker.sock", dir.display()),
            engine.pid(),
        )
        .as_bytes(),
    );
    let _ = out.flush();
    crate::server::wait_for_signal().await;
    engine.stop().await;
    let left = engine::mounts_under(&dir);
    for m in &left {
        let _ = std::process::Command::new("umount")
            .args(["-l", m])
            .status();
    }
    remove_all(&dir)?;
    println!("stopped");
    Ok(())
}
