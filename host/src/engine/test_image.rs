//! A tiny local test image, built without a registry: a root filesystem tarball made in memory
//! from the host's static busybox (Debian's `busybox-static`, `/bin/busybox`) plus applet
//! symlinks, imported through [`ContainerEngine::import_image`]. The agent's tests, the
//! end-to-end tests and the simulator's demo run their containers from it.

use std::path::PathBuf;
use std::time::Duration;

use super::api::ContainerEngine;
use super::error::EngineError;

/// The tag tests use by default.
pub const BUSYBOX_TEST_IMAGE: &str = "odac/busybox:test";

/// Applets linked to busybox in `/bin`.
const APPLETS: &[&str] = &[
    "sh", "ash", "sleep", "ls", "cat", "echo", "env", "id", "true", "false", "test", "[", "mkdir",
    "rm", "touch", "ps", "grep", "head", "tail", "wc", "stat", "printf", "sed", "awk", "date",
    "hostname", "uname", "pwd", "cp", "mv", "ln", "chmod", "readlink", "kill", "seq", "tr", "cut",
    "sort", "du", "df", "find", "xargs", "mount", "nc", "wget", "httpd", "whoami", "groups", "dd",
    "od", "hexdump", "tee", "basename", "dirname", "nproc", "free", "top",
];

/// Where to look for a static busybox, in order (`ODAC_BUSYBOX` first when set).
fn candidates() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::env::var_os("ODAC_BUSYBOX")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    paths.extend(["/bin/busybox", "/usr/bin/busybox"].map(PathBuf::from));
    paths
}

/// Whether an ELF binary is statically linked (has no `PT_INTERP` program header). Only
/// 64-bit little-endian ELF is understood; anything else counts as not static.
fn is_static_elf(bytes: &[u8]) -> bool {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .and_then(|v| usize::try_from(v).ok())
    };
    if bytes.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    (0..phnum).all(|i| {
        let at = phoff + i * phentsize;
        bytes
            .get(at..at + 4)
            .is_some_and(|t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]) != 3)
    })
}

/// Read the host's static busybox.
fn read_busybox() -> Result<(PathBuf, Vec<u8>), EngineError> {
    let mut tried = Vec::new();
    for path in candidates() {
        match std::fs::read(&path) {
            Ok(bytes) if is_static_elf(&bytes) => return Ok((path, bytes)),
            Ok(_) => tried.push(format!(
                "{} (not a static x86-64/arm64 ELF)",
                path.display()
            )),
            Err(e) => tried.push(format!("{} ({e})", path.display())),
        }
    }
    Err(EngineError::Other(format!(
        "no static busybox found (install busybox-static or set ODAC_BUSYBOX): tried {}",
        tried.join(", ")
    )))
}

fn header(kind: tar::EntryType, path: &str, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    // Paths here are short ASCII constants; set_path cannot fail on them, but stay total.
    if header.set_path(path).is_err() {
        header.set_path("invalid").ok();
    }
    header.set_cksum();
    header
}

/// Build the root filesystem tarball around a busybox binary.
pub fn busybox_rootfs_tar(busybox: &[u8]) -> Result<Vec<u8>, EngineError> {
    let io = |e: std::io::Error| EngineError::Other(format!("cannot build test rootfs tar: {e}"));
    let mut builder = tar::Builder::new(Vec::new());
    for dir in [
        "bin", "etc", "tmp", "dev", "proc", "sys", "root", "var", "data",
    ] {
        let mode = if dir == "tmp" { 0o1777 } else { 0o755 };
        let h = header(tar::EntryType::Directory, dir, mode, 0);
        builder.append(&h, std::io::empty()).map_err(io)?;
    }
    let h = header(
        tar::EntryType::Regular,
        "bin/busybox",
        0o755,
        busybox.len() as u64,
    );
    builder.append(&h, busybox).map_err(io)?;
    for applet in APPLETS {
        let mut h = header(tar::EntryType::Symlink, &format!("bin/{applet}"), 0o777, 0);
        h.set_link_name("busybox").map_err(io)?;
        h.set_cksum();
        builder.append(&h, std::io::empty()).map_err(io)?;
    }
    let files = [
        (
            "etc/passwd",
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
        ),
        ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
    ];
    for (path, text) in files {
        let h = header(tar::EntryType::Regular, path, 0o644, text.len() as u64);
        builder.append(&h, text.as_bytes()).map_err(io)?;
    }
    builder.into_inner().map_err(io)
}

/// Dockerfile instructions applied at import: `PATH`, a default `CMD` and the test label.
pub fn busybox_changes() -> Vec<String> {
    vec![
        "ENV PATH=/bin".into(),
        r#"CMD ["sh"]"#.into(),
        "LABEL odac.test=1".into(),
    ]
}

/// A best-effort lock across processes (parallel test binaries) so one image is imported
/// once instead of several untagged copies: a file created exclusively in the temp dir,
/// removed on drop, ignored when stale.
struct ImportLock(PathBuf);

impl ImportLock {
    const WAIT: Duration = Duration::from_secs(30);
    const STALE: Duration = Duration::from_secs(60);

    async fn acquire(tag: &str) -> Option<Self> {
        let name: String = tag
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = std::env::temp_dir().join(format!("odac-image-import-{name}.lock"));
        let deadline = std::time::Instant::now() + Self::WAIT;
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Some(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > Self::STALE);
                    if stale {
                        let _ = std::fs::remove_file(&path);
                    } else if std::time::Instant::now() > deadline {
                        return None;
                    } else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                Err(_) => return None,
            }
        }
    }
}

impl Drop for ImportLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Make sure image `tag` exists, importing it from the host's static busybox when missing.
/// Returns whether an import happened (by this call).
pub async fn ensure_busybox_image(
    engine: &dyn ContainerEngine,
    tag: &str,
) -> Result<bool, EngineError> {
    if engine.image_exists(tag).await? {
        return Ok(false);
    }
    let _lock = ImportLock::acquire(tag).await;
    if engine.image_exists(tag).await? {
        return Ok(false);
    }
    let (path, busybox) = read_busybox()?;
    tracing::info!(tag, busybox = %path.display(), "importing busybox test image");
    let tar = busybox_rootfs_tar(&busybox)?;
    engine.import_image(tag, tar, &busybox_changes()).await?;
    Ok(true)
}

/// Path of the static busybox the image would be built from, if any.
pub fn busybox_path() -> Option<PathBuf> {
    read_busybox().ok().map(|(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn rootfs_has_busybox_and_applet_links() {
        let tar = busybox_rootfs_tar(b"\x7fELF fake").unwrap();
        let mut archive = tar::Archive::new(&tar[..]);
        let mut names = Vec::new();
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            if path == "bin/sh" {
                assert_eq!(entry.header().entry_type(), tar::EntryType::Symlink);
                assert_eq!(entry.link_name().unwrap().unwrap(), Path::new("busybox"));
            }
            names.push(path);
        }
        for needed in [
            "bin/busybox",
            "bin/sh",
            "bin/sleep",
            "bin/ls",
            "etc/passwd",
            "tmp",
        ] {
            assert!(
                names.iter().any(|n| n == needed),
                "{needed} missing in {names:?}"
            );
        }
    }

    #[test]
    fn static_detection() {
        assert!(!is_static_elf(b"not an elf"));
        assert!(!is_static_elf(b"\x7fELF\x02\x01"));
        if let Ok(bytes) = std::fs::read("/bin/busybox") {
            // Debian's busybox-static is static; the dynamic `busybox` package is not.
            println!("/bin/busybox static: {}", is_static_elf(&bytes));
        }
        // A dynamically linked binary every Linux test host has.
        if let Ok(bytes) = std::fs::read("/bin/ls") {
            assert!(!is_static_elf(&bytes));
        }
    }
}
