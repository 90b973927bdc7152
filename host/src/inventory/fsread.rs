//! Fault-tolerant reads under the scan root. Every host path the scan touches goes through a
//! [`Reader`]: a missing file is simply absent, while anything stranger (a broken symlink, a
//! directory where a file was expected, a permission error, bytes that are not UTF-8) is
//! recorded as a [`ScanProblem`] and the scan carries on. Nothing here panics or aborts.

use std::fs;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::model::{DeviceNode, ScanProblem};

/// Sysfs and procfs attributes are small; anything larger is read only this far.
const MAX_READ_BYTES: u64 = 256 * 1024;

/// Reads host paths under a root and collects what went wrong along the way.
#[derive(Debug)]
pub struct Reader {
    root: PathBuf,
    problems: Vec<ScanProblem>,
}

impl Reader {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            problems: Vec::new(),
        }
    }

    /// The problems recorded so far, handed over at the end of the scan.
    pub fn into_problems(self) -> Vec<ScanProblem> {
        self.problems
    }

    /// A host path (`/sys/...` or `sys/...`) joined under the root.
    pub fn host(&self, host_path: &str) -> PathBuf {
        self.root.join(host_path.trim_start_matches('/'))
    }

    /// The host path of a path under the root, for messages (`/sys/...`).
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) => format!("/{}", rel.display()),
            Err(_) => path.display().to_string(),
        }
    }

    pub fn problem(&mut self, path: &Path, problem: impl Into<String>) {
        let path = self.display(path);
        self.problems.push(ScanProblem {
            path,
            problem: problem.into(),
        });
    }

    fn io_problem(&mut self, path: &Path, what: &str, err: &std::io::Error) {
        let detail = match err.kind() {
            ErrorKind::IsADirectory => "is a directory, expected a file".to_owned(),
            ErrorKind::PermissionDenied => "permission denied".to_owned(),
            ErrorKind::NotFound => "broken symlink".to_owned(),
            _ => err.to_string(),
        };
        self.problem(path, format!("cannot {what}: {detail}"));
    }

    /// Whether anything (file, dir, symlink, even a dangling one) sits at this path.
    pub fn exists(&self, path: &Path) -> bool {
        fs::symlink_metadata(path).is_ok()
    }

    /// File contents as text, trimmed. Missing → `None` silently; a broken symlink, a
    /// directory, an unreadable file → `None` plus a problem. Bytes that are not UTF-8 are
    /// replaced and recorded as a problem.
    pub fn text(&mut self, path: &Path) -> Option<String> {
        let bytes = self.bytes(path)?;
        match String::from_utf8(bytes) {
            Ok(text) => Some(text.trim().to_owned()),
            Err(err) => {
                self.problem(path, "contents are not valid utf-8");
                Some(String::from_utf8_lossy(err.as_bytes()).trim().to_owned())
            }
        }
    }

    fn bytes(&mut self, path: &Path) -> Option<Vec<u8>> {
        // O_NONBLOCK: a FIFO in a garbage tree must not hang the scan.
        let file = match fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(file) => file,
            Err(err) if err.kind() == ErrorKind::NotFound && !self.exists(path) => return None,
            Err(err) => {
                self.io_problem(path, "read", &err);
                return None;
            }
        };
        let mut bytes = Vec::new();
        match file.take(MAX_READ_BYTES).read_to_end(&mut bytes) {
            Ok(_) => Some(bytes),
            Err(err) => {
                self.io_problem(path, "read", &err);
                None
            }
        }
    }

    /// The last component of a symlink's target (`driver` → `nvidia`), even when the target
    /// does not exist. Missing → `None`; not a symlink → `None` plus a problem.
    pub fn link_name(&mut self, path: &Path) -> Option<String> {
        match fs::read_link(path) {
            Ok(target) => {
                let name = target.file_name()?.to_str();
                if name.is_none() {
                    self.problem(path, "symlink target is not valid utf-8");
                }
                name.map(str::to_owned)
            }
            Err(err) if err.kind() == ErrorKind::NotFound => None,
            Err(err) => {
                self.io_problem(path, "read symlink", &err);
                None
            }
        }
    }

    /// The path with every symlink resolved. Missing → `None`; a dangling symlink → `None`
    /// plus a problem.
    pub fn canonical(&mut self, path: &Path) -> Option<PathBuf> {
        match fs::canonicalize(path) {
            Ok(path) => Some(path),
            Err(err) if err.kind() == ErrorKind::NotFound && !self.exists(path) => None,
            Err(err) => {
                self.io_problem(path, "resolve", &err);
                None
            }
        }
    }

    /// Directory entries as `(name, path)`, sorted by name. Missing → empty; not a directory
    /// or unreadable → empty plus a problem; names that are not UTF-8 are skipped and recorded.
    pub fn entries(&mut self, dir: &Path) -> Vec<(String, PathBuf)> {
        let iter = match fs::read_dir(dir) {
            Ok(iter) => iter,
            Err(err) if err.kind() == ErrorKind::NotFound && !self.exists(dir) => {
                return Vec::new();
            }
            Err(err) => {
                self.io_problem(dir, "list", &err);
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for entry in iter {
            match entry {
                Ok(entry) => match entry.file_name().into_string() {
                    Ok(name) => out.push((name, entry.path())),
                    Err(_) => self.problem(&entry.path(), "file name is not valid utf-8"),
                },
                Err(err) => self.io_problem(dir, "list", &err),
            }
        }
        out.sort();
        out
    }

    /// Stat a device node by its host path (`/dev/dri/renderD128`). The returned node keeps
    /// the host path; `present` says whether anything is there, and owner GID and mode come
    /// from the file itself (a dangling symlink counts as absent, with a problem).
    pub fn node(&mut self, host_path: &str) -> DeviceNode {
        let path = self.host(host_path);
        let mut node = DeviceNode {
            path: host_path.to_owned(),
            present: false,
            char_device: false,
            gid: None,
            mode: None,
        };
        match fs::metadata(&path) {
            Ok(meta) => {
                node.present = true;
                node.char_device = meta.file_type().is_char_device();
                node.gid = Some(meta.gid());
                node.mode = Some(meta.mode() & 0o7777);
            }
            Err(err) if err.kind() == ErrorKind::NotFound && !self.exists(&path) => {}
            Err(err) => self.io_problem(&path, "stat", &err),
        }
        node
    }
}

/// Parse `0x10de`, `10de` or `0x30200` as hexadecimal.
pub fn parse_hex(text: &str) -> Option<u32> {
    let text = text.trim();
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// `KEY=value` lines (uevent files) → the value of one key.
pub fn uevent_value<'a>(uevent: &'a str, key: &str) -> Option<&'a str> {
    uevent.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// `Key: value` lines (procfs `information`) → the value of one key, split on the first `:`
/// and trimmed, so tab- and space-aligned variants read the same.
pub fn colon_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// `key value` lines (kfd `properties`) → the value of one key.
pub fn space_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        (parts.next()? == key).then(|| parts.next()).flatten()
    })
}

/// Whether a name is a PCI address `dddd:bb:dd.f`.
pub fn is_pci_address(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_forms() {
        assert_eq!(parse_hex("0x30200"), Some(0x30200));
        assert_eq!(parse_hex("0x030000\n"), Some(0x030000));
        assert_eq!(parse_hex("10DE"), Some(0x10de));
        assert_eq!(parse_hex("garbage"), None);
        assert_eq!(parse_hex(""), None);
    }

    #[test]
    fn key_value_forms() {
        assert_eq!(
            uevent_value("DRIVER=i915\nPCI_ID=8086:5917", "PCI_ID"),
            Some("8086:5917")
        );
        assert_eq!(
            colon_value("Model: \t\t NVIDIA A10G\nIRQ: 1", "Model"),
            Some("NVIDIA A10G")
        );
        assert_eq!(colon_value("Device Minor:    0", "Device Minor"), Some("0"));
        assert_eq!(
            space_value("vendor_id 4098\nlocation_id 6400", "location_id"),
            Some("6400")
        );
    }

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:80:05.1"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("0000:80:05"));
    }
}
