//! The image the scenarios run: `odac/e2e-sleeper:test`, the busybox root filesystem of the
//! agent's test image (built from the host's static busybox, no registry) whose default
//! command idles until SIGTERM and then exits at once. The walk-through creates apps through
//! the `odac` CLI, which has no command flag, so the idling has to be the image's `CMD`; and
//! exiting on SIGTERM keeps stops (and so the tests) fast. Imported once, labelled
//! `odac.test=1`, kept between runs like `odac/busybox:test`.

use std::process::{Command, Stdio};
use std::sync::Mutex;

use odac_host::engine::test_image::{busybox_path, busybox_rootfs_tar};

use crate::command::output_with_stdin;
use crate::error::{Error, Result};

/// The sleeper image's tag.
pub const SLEEPER_IMAGE: &str = "odac/e2e-sleeper:test";

/// Its default command: idle, exit 0 on SIGTERM/SIGINT.
pub const SLEEPER_CMD: &str =
    r#"CMD ["sh", "-c", "trap 'exit 0' TERM INT; sleep 999999999 & wait"]"#;

fn exists(tag: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", tag])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A lock across test processes so the image is imported once.
struct FileLock(std::path::PathBuf);

impl FileLock {
    fn acquire() -> Option<FileLock> {
        let path = std::env::temp_dir().join("odac-e2e-sleeper-import.lock");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Some(FileLock(path)),
                Err(_) if std::time::Instant::now() < deadline => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age.as_secs() > 120);
                    if stale {
                        let _ = std::fs::remove_file(&path);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(_) => return None,
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Makes sure [`SLEEPER_IMAGE`] exists, importing it when missing; returns its tag.
pub fn ensure_sleeper_image() -> Result<&'static str> {
    static ONCE: Mutex<()> = Mutex::new(());
    let _g = ONCE.lock();
    if exists(SLEEPER_IMAGE) {
        return Ok(SLEEPER_IMAGE);
    }
    let _lock = FileLock::acquire();
    if exists(SLEEPER_IMAGE) {
        return Ok(SLEEPER_IMAGE);
    }
    let path = busybox_path().ok_or_else(|| {
        Error::Other("no static busybox on this host (install busybox-static)".to_owned())
    })?;
    let bytes = std::fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
    let tar = busybox_rootfs_tar(&bytes).map_err(|e| Error::Other(e.to_string()))?;
    let mut import = Command::new("docker");
    import
        .args([
            "import",
            "--change",
            "ENV PATH=/bin",
            "--change",
            SLEEPER_CMD,
        ])
        .args(["--change", "LABEL odac.test=1", "-", SLEEPER_IMAGE]);
    let out = output_with_stdin(&mut import, "docker import", Some(&tar))?;
    if !out.status.success() {
        return Err(Error::command(
            "docker import",
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(SLEEPER_IMAGE)
}

/// Makes sure the agent's test image `odac/busybox:test` (`BUSYBOX_TEST_IMAGE`) exists on the
/// machine's engine, importing it when missing: the base image of the scenarios' builds.
pub fn ensure_busybox_test_image() -> Result<&'static str> {
    use odac_host::engine::DockerEngine;
    use odac_host::engine::test_image::{BUSYBOX_TEST_IMAGE, ensure_busybox_image};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Other(format!("cannot build a runtime: {e}")))?;
    rt.block_on(async {
        let engine = DockerEngine::connect(None)
            .await
            .map_err(|e| Error::Other(format!("connect to docker: {e}")))?;
        ensure_busybox_image(&engine, BUSYBOX_TEST_IMAGE)
            .await
            .map_err(|e| Error::Other(format!("import the busybox test image: {e}")))
    })?;
    Ok(BUSYBOX_TEST_IMAGE)
}
