//! Follows the kernel log, `<host_root>/dev/kmsg`, from the agent's start onward, on a thread
//! of its own so that no read ever blocks the agent's async loops. On the real `/dev/kmsg` (a
//! character device) the reader seeks to the end (`SEEK_END`: only records written from now
//! on), waits in `poll(2)` for the next record, reads one record per `read`, and on `EPIPE` (the ring buffer overwrote records before
//! they were read) logs once and goes on with the next record. A regular file stands in for it
//! in tests and the GPU lab: the reader starts at its end as well and follows appends line by
//! line. Without a kmsg there is nothing to read ([`KmsgState::Absent`], stated by `doctor`).

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long the file reader waits when there is nothing new (it checks for shutdown as often).
pub const POLL: Duration = Duration::from_millis(200);
/// Longest the device reader waits for a record before it checks for shutdown: `poll(2)` wakes
/// it for a record at once. (Reading every 200 ms was most of an idle agent's CPU samples.)
pub const DEVICE_WAIT: Duration = Duration::from_secs(5);
/// Longest kernel record kept (the kernel's own limit is about 1 KiB of text).
const RECORD_BUF: usize = 8192;

/// What the kernel log is on this host root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KmsgState {
    /// The kernel's record device: records from the agent's start onward.
    Device(PathBuf),
    /// A regular file standing in for it (tests, the GPU lab): lines appended from now on.
    File(PathBuf),
    /// Nothing to read, and why.
    Absent { path: PathBuf, why: String },
}

/// Where the kernel log lives under `root`.
pub fn kmsg_path(root: &Path) -> PathBuf {
    root.join("dev/kmsg")
}

/// Opens the kernel log under `root` without blocking (`O_NONBLOCK`).
fn open(root: &Path) -> Result<(File, KmsgState), KmsgState> {
    let path = kmsg_path(root);
    let absent = |why: String| KmsgState::Absent {
        path: path.clone(),
        why,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => absent("no such file".to_owned()),
            ErrorKind::PermissionDenied => absent(format!(
                "not readable by the agent ({e}); under systemd the unit needs \
                 DeviceAllow=/dev/kmsg r and CAP_SYSLOG"
            )),
            _ => absent(e.to_string()),
        })?;
    let kind = file
        .metadata()
        .map_err(|e| absent(e.to_string()))?
        .file_type();
    if kind.is_char_device() {
        Ok((file, KmsgState::Device(path)))
    } else if kind.is_file() {
        Ok((file, KmsgState::File(path)))
    } else {
        Err(absent(
            "neither the kernel's record device nor a regular file".to_owned(),
        ))
    }
}

/// What `doctor` says about the kernel log (opening it reads nothing).
pub fn probe(root: &Path) -> KmsgState {
    match open(root) {
        Ok((_, state)) | Err(state) => state,
    }
}

/// Starts following the kernel log under `root`: each new line (a record's message with its
/// prefix) goes to `tx` until `stop` is cancelled or `tx` is closed. Returns at once.
pub fn spawn(root: &Path, tx: mpsc::Sender<String>, stop: CancellationToken) -> KmsgState {
    let (mut file, state) = match open(root) {
        Ok(opened) => opened,
        Err(absent) => return absent,
    };
    let device = matches!(state, KmsgState::Device(_));
    // both: only what is written from now on
    let start = match file.seek(SeekFrom::End(0)) {
        Ok(at) => at,
        Err(e) => {
            return KmsgState::Absent {
                path: kmsg_path(root),
                why: format!("cannot seek to its end: {e}"),
            };
        }
    };
    let spawned = std::thread::Builder::new()
        .name("odac-kmsg".into())
        .spawn(move || {
            if device {
                match file.try_clone() {
                    Ok(readiness) => follow_records(&mut file, &tx, &stop, || {
                        await_readable(&readiness, &stop, DEVICE_WAIT)
                    }),
                    Err(_) => follow_records(&mut file, &tx, &stop, || idle(&stop)),
                }
            } else {
                follow_file(&mut file, start, &tx, &stop);
            }
        });
    match spawned {
        Ok(_) => state,
        Err(e) => KmsgState::Absent {
            path: kmsg_path(root),
            why: format!("cannot start its reader thread: {e}"),
        },
    }
}

/// Sleeps [`POLL`] unless `stop` is cancelled; false when it is.
fn idle(stop: &CancellationToken) -> bool {
    if stop.is_cancelled() {
        return false;
    }
    std::thread::sleep(POLL);
    !stop.is_cancelled()
}

/// Waits until `fd` has something to read or `timeout` passed, unless `stop` is cancelled;
/// false when it is. A failing `poll(2)` falls back to [`idle`], so it never spins.
fn await_readable(fd: impl std::os::fd::AsFd, stop: &CancellationToken, timeout: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    if stop.is_cancelled() {
        return false;
    }
    let timeout = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) => !stop.is_cancelled(),
        Err(_) => idle(stop),
    }
}

/// One record per `read` (the device's contract), its first line sent.
pub(crate) fn follow_records<R: Read>(
    source: &mut R,
    tx: &mpsc::Sender<String>,
    stop: &CancellationToken,
    mut wait: impl FnMut() -> bool,
) {
    let mut buf = vec![0u8; RECORD_BUF];
    let mut overrun_logged = false;
    let mut error_logged = false;
    while !stop.is_cancelled() {
        match source.read(&mut buf) {
            Ok(0) => {
                if !wait() {
                    return;
                }
            }
            Ok(n) => {
                let record = String::from_utf8_lossy(&buf[..n]);
                let line = record.split('\n').next().unwrap_or_default();
                if tx.blocking_send(line.to_owned()).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if !wait() {
                    return;
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {
                // the ring buffer overwrote records we had not read; the next read goes on
                if !overrun_logged {
                    tracing::warn!(
                        "kernel log: records were overwritten before they were read (EPIPE); \
                         some gpu errors may have been missed"
                    );
                    overrun_logged = true;
                }
            }
            Err(e) => {
                if !error_logged {
                    tracing::warn!(error = %e, "kernel log: read failed; retrying");
                    error_logged = true;
                }
                if !wait() {
                    return;
                }
            }
        }
    }
}

/// A regular file from `start`: complete lines as they are appended; a file cut shorter is
/// read again from its start.
fn follow_file(file: &mut File, start: u64, tx: &mpsc::Sender<String>, stop: &CancellationToken) {
    let mut at = start;
    let mut partial: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; RECORD_BUF];
    loop {
        let len = file.metadata().map(|m| m.len()).unwrap_or(at);
        if len < at {
            at = 0;
            partial.clear();
            if file.seek(SeekFrom::Start(0)).is_err() {
                return;
            }
        }
        match file.read(&mut chunk) {
            Ok(0) => {
                if !idle(stop) {
                    return;
                }
            }
            Ok(n) => {
                at += n as u64;
                partial.extend_from_slice(&chunk[..n]);
                while let Some(end) = partial.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = partial.drain(..=end).collect();
                    let text = String::from_utf8_lossy(&line[..end]).into_owned();
                    if tx.blocking_send(text).is_err() {
                        return;
                    }
                }
                if partial.len() > RECORD_BUF {
                    partial.clear();
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if !idle(stop) {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "kernel log stand-in: read failed; stopped following it");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Records, with an overrun (EPIPE) in the middle, then nothing.
    struct Script(Vec<std::io::Result<&'static str>>);

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(ErrorKind::WouldBlock.into());
            }
            match self.0.remove(0) {
                Ok(s) => {
                    buf[..s.len()].copy_from_slice(s.as_bytes());
                    Ok(s.len())
                }
                Err(e) => Err(e),
            }
        }
    }

    #[test]
    fn an_overrun_is_survived_and_the_next_records_still_arrive() {
        let (tx, mut rx) = mpsc::channel(16);
        let stop = CancellationToken::new();
        let mut script = Script(vec![
            Ok("3,1,10,-;first\n SUBSYSTEM=pci\n"),
            Err(std::io::Error::from_raw_os_error(libc::EPIPE)),
            Err(std::io::Error::from_raw_os_error(libc::EPIPE)),
            Ok("3,9,90,-;after the overrun\n"),
        ]);
        let stopper = stop.clone();
        let reader = std::thread::spawn(move || {
            follow_records(&mut script, &tx, &stopper, || idle(&stopper))
        });
        assert_eq!(rx.blocking_recv().unwrap(), "3,1,10,-;first");
        assert_eq!(rx.blocking_recv().unwrap(), "3,9,90,-;after the overrun");
        stop.cancel();
        reader.join().unwrap();
    }

    #[test]
    fn the_device_reader_wakes_for_a_record_and_stops_when_told() {
        use std::io::Write;
        let (reader, mut writer) = std::io::pipe().unwrap();
        let stop = CancellationToken::new();
        // a record is there: it returns without waiting out an hour (a reader that did not wake
        // for it would hang here until nextest ends the test after 10 minutes: no clock read)
        writer.write_all(b"6,1,1,-;x\n").unwrap();
        assert!(await_readable(&reader, &stop, Duration::from_secs(3600)));
        // nothing there: back after the timeout, to check for shutdown
        let (empty, _keep) = std::io::pipe().unwrap();
        assert!(await_readable(&empty, &stop, Duration::from_millis(50)));
        stop.cancel();
        assert!(!await_readable(&reader, &stop, Duration::from_secs(60)));
    }
}
