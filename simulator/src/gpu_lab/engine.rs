//! The lab's private Docker engine: the machine's own `dockerd` with its socket, data root,
//! exec root, pid file and managed containerd under the lab dir, no bridge and no iptables,
//! the `nvidia` runtime stand-in registered and the toolkit stand-ins on its PATH. It runs in
//! network and mount namespaces of its own (`unshare --net --mount`, private propagation): a
//! second dockerd in the host's network namespace would delete and recreate `docker0` under
//! the main engine, and every mount it or its containers make dies with its namespace. In
//! that mount namespace the host root's `dev/` is bind-mounted on `/dev`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use odac_host::engine::test_image::{busybox_path, busybox_rootfs_tar};
use odac_host::engine::{ContainerEngine, DockerEngine};

use super::error::LabError;
use super::standins::RUNTIME;

/// The image the lab loads: the static busybox as root filesystem, idling until SIGTERM.
pub const LAB_IMAGE: &str = "odac/gpu-lab:busybox";
/// How long the engine may take to answer after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the engine may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// How the engine knows the `nvidia` runtime stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NvidiaRuntime {
    /// Not registered: only moby's `nvidia` device driver (the hook on its PATH) is there.
    None,
    /// Registered as runtime `nvidia` (`--add-runtime`), as `nvidia-ctk runtime configure` does.
    #[default]
    Registered,
    /// Registered and the default runtime (`nvidia-ctk runtime configure --set-as-default`).
    Default,
}

/// Where the engine keeps its files.
#[derive(Debug, Clone)]
pub struct EnginePaths {
    /// The lab dir.
    pub dir: PathBuf,
    /// The host root whose `dev/` becomes the engine's `/dev`.
    pub root: PathBuf,
    /// The dir with the stand-ins (put first on the engine's PATH).
    pub bin: PathBuf,
}

impl EnginePaths {
    /// The engine's API socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("docker.sock")
    }

    /// `unix://…` of the socket.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// The engine's log.
    pub fn log(&self) -> PathBuf {
        self.dir.join("dockerd.log")
    }
}

/// A running lab engine.
#[derive(Debug)]
pub struct LabEngine {
    paths: EnginePaths,
    child: Child,
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// The script run inside the new namespaces: mounts, then `exec dockerd`.
fn start_script(paths: &EnginePaths, nvidia: NvidiaRuntime) -> String {
    let dev = paths.root.join("dev");
    let d = &paths.dir;
    let mut flags = vec![
        format!("--config-file {}", q(&d.join("daemon.json"))),
        format!("--data-root {}", q(&d.join("data"))),
        format!("--exec-root {}", q(&d.join("exec"))),
        format!("--pidfile {}", q(&d.join("docker.pid"))),
        format!("-H {}", q(Path::new(&paths.docker_host()))),
        "--bridge none --iptables=false --ip-masq=false --ip6tables=false".to_owned(),
        "--storage-driver vfs".to_owned(),
        "--containerd-namespace odac-gpu-lab --containerd-plugins-namespace odac-gpu-lab-plugins"
            .to_owned(),
    ];
    if nvidia != NvidiaRuntime::None {
        flags.push(format!(
            "--add-runtime nvidia={}",
            q(&paths.bin.join(RUNTIME))
        ));
    }
    if nvidia == NvidiaRuntime::Default {
        flags.push("--default-runtime nvidia".to_owned());
    }
    format!(
        "#!/bin/sh\n# odac gpu-lab: run in private network and mount namespaces\nset -e\n\
         mount --rbind /dev/pts {pts}\nmount --rbind {dev} /dev\n\
         ip link set lo up 2>/dev/null || true\nexport PATH={bin}:\"$PATH\"\n\
         # should the lab die without stopping the engine (SIGKILL), stop the engine\n\
         (tail --pid={lab} -f {watch} >/dev/null 2>&1; kill -TERM $$ 2>/dev/null) &\n\
         exec dockerd {flags}\n",
        lab = std::process::id(),
        watch = q(&d.join("daemon.json")),
        pts = q(&dev.join("pts")),
        dev = q(&dev),
        bin = q(&paths.bin),
        flags = flags.join(" "),
    )
}

impl LabEngine {
    /// Starts the engine and waits until it answers; loads [`LAB_IMAGE`].
    pub async fn start(paths: EnginePaths, nvidia: NvidiaRuntime) -> Result<LabEngine, LabError> {
        let daemon_json = paths.dir.join("daemon.json");
        std::fs::write(&daemon_json, "{}\n").map_err(|e| LabError::io("write", &daemon_json, e))?;
        let script = paths.dir.join("engine.sh");
        std::fs::write(&script, start_script(&paths, nvidia))
            .map_err(|e| LabError::io("write", &script, e))?;
        let child = spawn(&paths)?;
        let mut engine = LabEngine { paths, child };
        if let Err(e) = engine.wait_ready().await {
            engine.stop().await;
            return Err(e);
        }
        if let Err(e) = engine.load_image().await {
            engine.stop().await;
            return Err(e);
        }
        Ok(engine)
    }

    /// The engine's process id (dockerd, in its namespaces).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn error(&self, message: impl Into<String>) -> LabError {
        LabError::Engine {
            socket: self.paths.socket(),
            message: message.into(),
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.paths.log()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    fn client(&self) -> Result<DockerEngine, LabError> {
        DockerEngine::lazy(Some(&self.paths.docker_host())).map_err(|e| self.error(e.to_string()))
    }

    async fn wait_ready(&mut self) -> Result<(), LabError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(self.error(format!("dockerd exited ({status}): {}", self.log_tail())));
            }
            if self.paths.socket().exists() {
                let client = self.client()?;
                if client.list_all().await.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(self.error(format!(
                    "no answer within {}s: {}",
                    START_TIMEOUT.as_secs(),
                    self.log_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn load_image(&self) -> Result<(), LabError> {
        let busybox = busybox_path().ok_or_else(|| {
            LabError::command(
                "busybox",
                "no static busybox on this host (install busybox-static)",
            )
        })?;
        let bytes = std::fs::read(&busybox).map_err(|e| LabError::io("read", &busybox, e))?;
        let tar = busybox_rootfs_tar(&bytes).map_err(|e| self.error(e.to_string()))?;
        let changes = [
            "ENV PATH=/bin".to_owned(),
            r#"CMD ["sh", "-c", "trap 'exit 0' TERM INT; sleep 999999999 & wait"]"#.to_owned(),
        ];
        self.client()?
            .import_image(LAB_IMAGE, tar, &changes)
            .await
            .map_err(|e| self.error(format!("loading {LAB_IMAGE}: {e}")))
    }

    /// Removes every container of the engine, stops it (SIGTERM, then SIGKILL), and ends any
    /// process still running from the lab dir (containerd, shims). Never fails: the lab is
    /// going away either way.
    pub async fn stop(&mut self) {
        if let Ok(client) = self.client()
            && let Ok(containers) = client.list_all().await
        {
            for c in containers {
                let _ = client.remove(&c.id, true).await;
            }
        }
        self.terminate().await;
        for pid in processes_using(&self.paths.dir) {
            signal(pid, "KILL");
        }
    }

    /// SIGTERM to dockerd (SIGKILL after [`STOP_TIMEOUT`]); waits for it to exit.
    async fn terminate(&mut self) {
        signal(self.child.id(), "TERM");
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Stops the engine as a host's dockerd stops (SIGTERM: it stops its containers, which
    /// stay, exited), keeping its data; ends what it left running under the lab dir
    /// (containerd, shims, its watcher), never a process that only names the dir itself.
    pub async fn pause(&mut self) {
        self.terminate().await;
        let dir = self.paths.dir.display().to_string();
        for pid in processes_using(&self.paths.dir) {
            let under = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .any(|arg| names_under(&String::from_utf8_lossy(arg), &dir))
            });
            if under {
                signal(pid, "KILL");
            }
        }
    }

    /// Starts the paused engine again on the same data (the image is still loaded) and waits
    /// until it answers.
    pub async fn resume(&mut self) -> Result<(), LabError> {
        if let Ok(None) = self.child.try_wait() {
            return Ok(());
        }
        self.child = spawn(&self.paths)?;
        self.wait_ready().await
    }

    /// Whether dockerd runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Runs `engine.sh` in new network and mount namespaces, its output appended to the log.
fn spawn(paths: &EnginePaths) -> Result<Child, LabError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(paths.log())
        .map_err(|e| LabError::io("open", paths.log(), e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| LabError::io("open", paths.log(), e))?;
    Command::new("unshare")
        .args(["--net", "--mount", "--propagation", "private", "sh"])
        .arg(paths.dir.join("engine.sh"))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(|e| LabError::command("unshare --net --mount sh engine.sh", e.to_string()))
}

/// `kill -SIG PID` on a process this lab started (the crate forbids unsafe code).
fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Whether one argument names `dir` or a path under it (`--flag=PATH` and `unix://PATH` too).
fn names(arg: &str, dir: &str) -> bool {
    let path = arg.rsplit_once('=').map_or(arg, |(_, v)| v);
    let path = path.strip_prefix("unix://").unwrap_or(path);
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether one argument names a path strictly under `dir` (not `dir` itself, as the
/// `--dir DIR` of a lab command does).
fn names_under(arg: &str, dir: &str) -> bool {
    let path = arg.rsplit_once('=').map_or(arg, |(_, v)| v);
    let path = path.strip_prefix("unix://").unwrap_or(path);
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Processes with an argument naming `dir` or a path under it (what the lab's engine started).
pub fn processes_using(dir: &Path) -> Vec<u32> {
    let dir = dir.display().to_string();
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .any(|arg| names(&String::from_utf8_lossy(arg), &dir))
            })
        })
        .collect()
}

/// Mount points (of this process's mount namespace) at or under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|m| names(m, &needle))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_stays_in_its_namespaces_and_dir() {
        let paths = EnginePaths {
            dir: "/tmp/lab".into(),
            root: "/tmp/lab/root".into(),
            bin: "/tmp/lab/root/usr/bin".into(),
        };
        let s = start_script(&paths, NvidiaRuntime::Default);
        assert!(s.contains("mount --rbind '/tmp/lab/root/dev' /dev"));
        assert!(s.contains("--bridge none --iptables=false --ip-masq=false"));
        assert!(s.contains("--data-root '/tmp/lab/data' --exec-root '/tmp/lab/exec'"));
        assert!(s.contains("-H 'unix:///tmp/lab/docker.sock'"));
        assert!(
            s.contains("--add-runtime nvidia='/tmp/lab/root/usr/bin/nvidia-container-runtime'")
        );
        assert!(s.ends_with("--default-runtime nvidia\n"));
        let registered = start_script(&paths, NvidiaRuntime::Registered);
        assert!(registered.contains("--add-runtime") && !registered.contains("--default-runtime"));
        assert!(!start_script(&paths, NvidiaRuntime::None).contains("--add-runtime"));
        let watcher = format!(
            "tail --pid={} -f '/tmp/lab/daemon.json'",
            std::process::id()
        );
        assert!(s.contains(&watcher), "{s}");
    }

    #[test]
    fn only_paths_under_the_dir_are_its_own() {
        assert!(names("/tmp/lab", "/tmp/lab"));
        assert!(names("--data-root=/tmp/lab/data", "/tmp/lab"));
        assert!(names("unix:///tmp/lab/docker.sock", "/tmp/lab"));
        assert!(!names("/tmp/lab2/data", "/tmp/lab"));
        assert!(!names("--dir", "/tmp/lab"));
        assert!(names_under("/tmp/lab/daemon.json", "/tmp/lab"));
        assert!(names_under("--exec-root=/tmp/lab/exec", "/tmp/lab"));
        assert!(!names_under("/tmp/lab", "/tmp/lab"));
        assert!(!names_under("/tmp/lab2/x", "/tmp/lab"));
    }
}
