//! Bounded, non-blocking reads of the files the agent reads but does not control the shape of
//! (the host's docker `config.json`, state files a person may have replaced): opened with
//! `O_NONBLOCK`, so a FIFO or a device never blocks the opening thread; anything but a
//! regular file is refused by its kind ("is a fifo", "is a directory") before a byte is read;
//! at most a given number of bytes is read, and a longer file is refused, so a huge file never
//! fills memory. The agent's other inputs outside its state dir (the token file, the TLS
//! files) go through it too. A regular file on a stuck file system can still block a read: callers on the
//! async runtime also move the read off its workers (`spawn_blocking`, `block_in_place`).

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a bounded read failed. Messages name the file's kind or size, never its content.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    /// Nothing at the path (the OS error, for callers that pass it on).
    #[error("not found")]
    NotFound(std::io::Error),
    /// Something other than a regular file at the path.
    #[error("is {kind}, not a regular file")]
    NotRegular {
        /// `a directory`, `a fifo`, `a socket`, `a device`.
        kind: &'static str,
    },
    /// Larger than the limit.
    #[error("is larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// Opening or reading failed.
    #[error("{0}")]
    Io(std::io::Error),
}

/// The kind of a file that is not a regular one, for messages.
fn kind(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a fifo"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// The whole content of the regular file at `path` (symlinks followed), at most `limit`
/// bytes; see the module documentation.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, BoundedReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BoundedReadError::NotFound(e),
            _ => BoundedReadError::Io(e),
        })?;
    let meta = file.metadata().map_err(BoundedReadError::Io)?;
    if !meta.file_type().is_file() {
        return Err(BoundedReadError::NotRegular {
            kind: kind(meta.file_type()),
        });
    }
    if meta.len() > limit {
        return Err(BoundedReadError::TooLarge { limit });
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(BoundedReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(BoundedReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// [`read_regular`] with its refusals as [`std::io::Error`]s (`NotFound` kept as such; a file
/// of another kind or over the limit `InvalidInput` with the reason), for callers whose errors
/// carry an `io::Error`: the token file, the TLS files.
pub fn read_regular_io(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_regular(path, limit).map_err(|e| match e {
        BoundedReadError::Io(e) | BoundedReadError::NotFound(e) => e,
        other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fifos_directories_and_big_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let e = read_regular(&fifo, 1024).unwrap_err();
        assert_eq!(e.to_string(), "is a fifo, not a regular file");
        let e = read_regular(dir.path(), 1024).unwrap_err();
        assert_eq!(e.to_string(), "is a directory, not a regular file");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).unwrap();
        let e = read_regular(&big, 1024).unwrap_err();
        assert_eq!(e.to_string(), "is larger than 1024 bytes");
        assert_eq!(read_regular(&big, 2048).unwrap().len(), 2048);
        assert!(matches!(
            read_regular(&dir.path().join("none"), 1),
            Err(BoundedReadError::NotFound(_))
        ));
        let e = read_regular_io(&fifo, 1024).unwrap_err();
        assert_eq!(e.to_string(), "is a fifo, not a regular file");
        let e = read_regular_io(&dir.path().join("none"), 1).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
