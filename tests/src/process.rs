//! [`Process`]: a child process under test. Its stdout and stderr are copied line by line to
//! log files in a directory the test owns and kept in memory, so a test can wait for a log
//! line (with a deadline), count lines, send SIGTERM or SIGKILL, and read the peak resident
//! set size (`VmHWM` in `/proc/<pid>/status`). Dropping it kills the process; when the test is
//! panicking the tail of both logs is printed first, so a failure shows what the process said.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Lines printed from each log when a panicking test drops a process.
const TAIL_ON_PANIC: usize = 60;

/// The captured output of a process.
#[derive(Debug, Default)]
struct Lines {
    lines: Mutex<Vec<String>>,
    grew: Condvar,
}

impl Lines {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        odac_host::lock::lock(&self.lines)
    }

    fn push(&self, line: String) {
        self.lock().push(line);
        self.grew.notify_all();
    }
}

/// Removes ANSI escape sequences (colours) from a log line.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn copy_lines(src: impl Read, mut file: File, lines: Arc<Lines>) {
    let mut reader = BufReader::new(src);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let _ = file.write_all(&buf);
                let text = String::from_utf8_lossy(&buf);
                let line = strip_ansi(text.trim_end_matches(['\n', '\r']));
                lines.push(line);
            }
        }
    }
}

/// A running (or exited) child process with captured output.
pub struct Process {
    name: String,
    child: Child,
    lines: Arc<Lines>,
    stdout_log: PathBuf,
    stderr_log: PathBuf,
    exit: Option<ExitStatus>,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("name", &self.name)
            .field("pid", &self.child.id())
            .finish()
    }
}

impl Process {
    /// Starts `cmd` (stdin closed) with its output logged to `LOG_DIR/NAME.stdout.log` and
    /// `LOG_DIR/NAME.stderr.log`.
    pub fn spawn(name: &str, cmd: &mut Command, log_dir: &Path) -> Result<Process> {
        std::fs::create_dir_all(log_dir).map_err(|e| Error::io("create log dir", log_dir, e))?;
        let stdout_log = log_dir.join(format!("{name}.stdout.log"));
        let stderr_log = log_dir.join(format!("{name}.stderr.log"));
        let out_file =
            File::create(&stdout_log).map_err(|e| Error::io("create log", &stdout_log, e))?;
        let err_file =
            File::create(&stderr_log).map_err(|e| Error::io("create log", &stderr_log, e))?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                Error::command(format!("{name} ({:?})", cmd.get_program()), e.to_string())
            })?;
        let lines = Arc::new(Lines::default());
        if let Some(out) = child.stdout.take() {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || copy_lines(out, out_file, lines));
        }
        if let Some(err) = child.stderr.take() {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || copy_lines(err, err_file, lines));
        }
        Ok(Process {
            name: name.to_owned(),
            child,
            lines,
            stdout_log,
            stderr_log,
            exit: None,
        })
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The stdout log file.
    pub fn stdout_log(&self) -> &Path {
        &self.stdout_log
    }

    /// The stderr log file.
    pub fn stderr_log(&self) -> &Path {
        &self.stderr_log
    }

    /// Every line printed so far (stdout and stderr interleaved as read).
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// How many lines have been printed so far: a mark for [`Process::wait_for_line_after`].
    pub fn mark(&self) -> usize {
        self.lines.lock().len()
    }

    /// How many lines so far contain `needle`.
    pub fn count_lines(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Waits until some line contains `needle`; returns it.
    pub fn wait_for_line(&self, needle: &str, timeout: Duration) -> Result<String> {
        self.wait_for_line_after(0, needle, timeout)
    }

    /// Waits until a line printed after `mark` (see [`Process::mark`]) contains `needle`.
    pub fn wait_for_line_after(
        &self,
        mark: usize,
        needle: &str,
        timeout: Duration,
    ) -> Result<String> {
        self.wait_for(
            mark,
            timeout,
            &format!("a line containing {needle:?}"),
            |l| l.contains(needle),
        )
    }

    /// Waits until a line printed after `mark` satisfies `pred`; returns it.
    pub fn wait_for(
        &self,
        mark: usize,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> Result<String> {
        let deadline = Instant::now() + timeout;
        let mut seen = mark;
        let mut lines = self.lines.lock();
        loop {
            if let Some(hit) = lines.iter().skip(seen).find(|l| pred(l)) {
                return Ok(hit.clone());
            }
            seen = lines.len().max(mark);
            let now = Instant::now();
            if now >= deadline {
                let last = lines.last().cloned().unwrap_or_default();
                return Err(Error::Timeout {
                    what: format!("{what} from {}", self.name),
                    waited: timeout,
                    last,
                });
            }
            let wait = (deadline - now).min(Duration::from_millis(200));
            lines = match self.lines.grew.wait_timeout(lines, wait) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The exit status, if the process has exited (does not block).
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.try_exit().is_none()
    }

    /// Waits for the process to exit, for at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.try_exit() {
                return Ok(st);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{} to exit", self.name),
                    waited: timeout,
                    last: self.lines().last().cloned().unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: &str) -> Result<()> {
        let pid = self.pid().to_string();
        let st = Command::new("kill")
            .args([sig, &pid])
            .status()
            .map_err(|e| Error::command(format!("kill {sig} {pid}"), e.to_string()))?;
        if st.success() {
            Ok(())
        } else {
            Err(Error::command(format!("kill {sig} {pid}"), st.to_string()))
        }
    }

    /// Sends SIGTERM (does not wait).
    pub fn sigterm(&mut self) -> Result<()> {
        if self.try_exit().is_some() {
            return Ok(());
        }
        self.signal("-TERM")
    }

    /// Sends SIGTERM and waits for the exit; returns how long it took.
    pub fn terminate(&mut self, timeout: Duration) -> Result<(ExitStatus, Duration)> {
        let start = Instant::now();
        self.sigterm()?;
        let st = self.wait_exit(timeout)?;
        Ok((st, start.elapsed()))
    }

    /// Sends SIGKILL and reaps the process.
    pub fn sigkill(&mut self) -> Result<ExitStatus> {
        if let Some(st) = self.try_exit() {
            return Ok(st);
        }
        let _ = self.child.kill();
        let st = self
            .child
            .wait()
            .map_err(|e| Error::command(format!("wait for {}", self.name), e.to_string()))?;
        self.exit = Some(st);
        Ok(st)
    }

    /// Peak resident set size in KiB (`VmHWM`), while the process runs.
    pub fn peak_rss_kib(&self) -> Result<u64> {
        let path = PathBuf::from(format!("/proc/{}/status", self.pid()));
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
        vm_hwm_kib(&text).ok_or_else(|| Error::Other(format!("no VmHWM in {}", path.display())))
    }

    /// The last `n` lines of output.
    pub fn tail(&self, n: usize) -> Vec<String> {
        let lines = self.lines.lock();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }
}

/// Parses `VmHWM:   12345 kB` out of a `/proc/<pid>/status` text.
pub fn vm_hwm_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- last output of {} (pid {}; logs: {}) ----",
                self.name,
                self.pid(),
                self.stderr_log.display()
            );
            for line in self.tail(TAIL_ON_PANIC) {
                eprintln!("{}| {line}", self.name);
            }
        }
        let _ = self.sigkill();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn waits_for_lines_and_logs_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Process::spawn(
            "echoer",
            &mut sh(
                "echo one; echo two >&2; sleep 0.2; printf '\\033[32mthree\\033[0m\\n'; sleep 30",
            ),
            dir.path(),
        )
        .unwrap();
        let hit = p.wait_for_line("three", Duration::from_secs(5)).unwrap();
        assert_eq!(hit, "three", "colours are stripped");
        assert_eq!(p.count_lines("o"), 2);
        let mark = p.mark();
        assert!(
            p.wait_for_line_after(mark, "one", Duration::from_millis(200))
                .is_err()
        );
        assert!(p.is_running());
        assert!(p.peak_rss_kib().unwrap() > 0);
        let st = p.sigkill().unwrap();
        assert!(!st.success());
        let out = std::fs::read_to_string(p.stdout_log()).unwrap();
        assert!(out.starts_with("one\n"), "{out:?}");
        let err = std::fs::read_to_string(p.stderr_log()).unwrap();
        assert_eq!(err, "two\n");
    }

    #[test]
    fn sigterm_is_delivered_and_timed() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Process::spawn(
            "trapper",
            &mut sh("trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done"),
            dir.path(),
        )
        .unwrap();
        p.wait_for_line("ready", Duration::from_secs(5)).unwrap();
        let (st, took) = p.terminate(Duration::from_secs(5)).unwrap();
        assert_eq!(st.code(), Some(7));
        assert!(took < Duration::from_secs(5));
        p.wait_for_line("got-term", Duration::from_secs(2)).unwrap();
    }

    #[test]
    fn drop_kills_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let p = Process::spawn("sleeper", &mut sh("sleep 60"), dir.path()).unwrap();
        let proc_dir = PathBuf::from(format!("/proc/{}", p.pid()));
        drop(p);
        // reaped by sigkill in drop: the pid is gone (or reused by something unrelated)
        let alive =
            std::fs::read_to_string(proc_dir.join("cmdline")).is_ok_and(|c| c.contains("sleep"));
        assert!(!alive);
    }

    #[test]
    fn wait_for_line_times_out_with_the_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = Process::spawn("quiet", &mut sh("echo hello; sleep 30"), dir.path()).unwrap();
        p.wait_for_line("hello", Duration::from_secs(5)).unwrap();
        let err = p
            .wait_for_line("never", Duration::from_millis(100))
            .unwrap_err();
        assert!(err.to_string().contains("hello"), "{err}");
    }

    #[test]
    fn parses_vm_hwm() {
        let text = "Name:\tx\nVmPeak:\t  100 kB\nVmHWM:\t    4321 kB\nVmRSS:\t 12 kB\n";
        assert_eq!(vm_hwm_kib(text), Some(4321));
        assert_eq!(vm_hwm_kib("Name: x\n"), None);
    }

    #[test]
    fn strips_ansi() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2024\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m x"),
            "2024  INFO x"
        );
    }
}
