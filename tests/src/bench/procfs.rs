//! What the benchmarks read from `/proc`: a process's CPU time (`utime + stime` of
//! `/proc/<pid>/stat`, in clock ticks) and resident set (`VmRSS`, `VmHWM`); the loopback TCP
//! connections established to a port (`/proc/net/tcp`), which is how a reconnect storm is
//! watched without touching the simulator; and the open-file limit a large fleet needs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use odac_e2e::{Error, Result};

/// Clock ticks per second (`getconf CLK_TCK`; 100 when it cannot be asked).
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// `utime + stime` of `stat` text (the fields after the command name).
fn cpu_ticks_of(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // after ")": state is field 3 of the man page, utime 14 and stime 15
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU time used so far by `pid` (all threads), in clock ticks.
pub fn cpu_ticks(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
    cpu_ticks_of(&text).ok_or_else(|| Error::Other(format!("{path}: no utime/stime")))
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| Error::Other(format!("{path}: no {field}")))
}

/// CPU share of processes over a window: start it, then read the percent of one core.
#[derive(Debug)]
pub struct CpuWindow {
    pids: Vec<u32>,
    ticks: Vec<u64>,
    started: Instant,
}

impl CpuWindow {
    /// Starts a window over `pids`.
    pub fn start(pids: &[u32]) -> Result<CpuWindow> {
        Ok(CpuWindow {
            pids: pids.to_vec(),
            ticks: pids.iter().map(|p| cpu_ticks(*p)).collect::<Result<_>>()?,
            started: Instant::now(),
        })
    }

    /// Percent of one core each process used since the start, in the order given.
    pub fn percent(&self) -> Result<Vec<f64>> {
        let wall = self.started.elapsed().as_secs_f64().max(1e-3);
        let hz = clock_ticks();
        self.pids
            .iter()
            .zip(&self.ticks)
            .map(|(p, t0)| {
                let used = cpu_ticks(*p)?.saturating_sub(*t0) as f64 / hz;
                Ok(used / wall * 100.0)
            })
            .collect()
    }

    /// How long the window has been open.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The pid of the oldest process whose command name is `comm` (e.g. `dockerd`), if any.
pub fn pid_of(comm: &str) -> Option<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect();
    pids.sort_unstable();
    pids.first().copied()
}

/// Counts `/proc/net/tcp` lines in state ESTABLISHED whose local port is `port`.
fn established_in(text: &str, port: u16) -> usize {
    let want = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter(|l| {
            let mut f = l.split_whitespace();
            let local = f.nth(1).unwrap_or("");
            let state = f.nth(1).unwrap_or("");
            state == "01" && local.ends_with(&want)
        })
        .count()
}

/// Established IPv4 TCP connections whose local port is `port` (the server's side).
pub fn established_to(port: u16) -> Result<usize> {
    let path = Path::new("/proc/net/tcp");
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    Ok(established_in(&text, port))
}

/// The open-file limit (soft, hard) of this process.
pub fn nofile() -> Result<(u64, u64)> {
    let path = Path::new("/proc/self/limits");
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .ok_or_else(|| Error::Other("/proc/self/limits: no Max open files".to_owned()))?;
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match nums.as_slice() {
        [soft, hard, ..] => Ok((*soft, *hard)),
        _ => Ok((u64::MAX, u64::MAX)), // "unlimited"
    }
}

/// Makes sure this process (and so every child it starts later) may open `need` files:
/// raises the soft limit to the hard one with `prlimit --pid` (no unsafe code here), or
/// says what to run when even the hard limit is too low.
pub fn ensure_nofile(need: u64) -> Result<u64> {
    let (soft, hard) = nofile()?;
    if soft >= need {
        return Ok(soft);
    }
    if hard < need {
        return Err(Error::Other(format!(
            "open-file limit: {need} needed, hard limit is {hard}; run `ulimit -n {need}` as root \
             (or raise nofile in /etc/security/limits.conf) first"
        )));
    }
    let pid = std::process::id().to_string();
    let out = Command::new("prlimit")
        .args(["--pid", &pid, &format!("--nofile={hard}:{hard}")])
        .output()
        .map_err(|e| Error::command("prlimit", e.to_string()))?;
    let (now, _) = nofile()?;
    if !out.status.success() || now < need {
        return Err(Error::Other(format!(
            "open-file limit: {need} needed, soft limit {soft}, prlimit failed ({}); run `ulimit -n {need}` first",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(now)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let stat = "42 (odac agent) S 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 9 0 5 1 2";
        assert_eq!(cpu_ticks_of(stat), Some(281));
        let own = cpu_ticks(std::process::id()).unwrap();
        assert!(own < u64::MAX);
        assert!(status_kib(std::process::id(), "VmHWM").unwrap() > 0);
    }

    #[test]
    fn counts_established_connections_by_local_port() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n\
           1: 0100007F:1F90 0100007F:C350 01 00000000:00000000\n\
           2: 0100007F:C350 0100007F:1F90 01 00000000:00000000\n\
           3: 0100007F:1F90 0100007F:C351 06 00000000:00000000\n";
        assert_eq!(established_in(text, 8080), 1);
        assert_eq!(established_in(text, 50000), 1);
        assert_eq!(established_in(text, 1), 0);
    }

    #[test]
    fn a_real_connection_is_counted() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _s = l.accept().unwrap();
        assert_eq!(established_to(port).unwrap(), 1);
        assert_eq!(pid_of("no-such-command-here"), None);
        let (soft, hard) = nofile().unwrap();
        assert!(soft <= hard);
        assert_eq!(ensure_nofile(1).unwrap(), soft);
    }
}
