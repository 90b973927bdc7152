//! Host facts: hostname, OS name, kernel release, architecture, CPU count and memory, read
//! under the scan root (`/proc`, `/sys/devices/system/cpu`, `/etc/os-release`). The names are
//! capped ([`MAX_HOST_NAME`], [`MAX_HOST_TEXT`]) with a scan problem: a 16 KiB hostname under
//! the host root once made every `hello` and inventory invalid, so the agent never connected.

use std::path::Path;

use super::fsread::{Reader, space_value};
use super::model::HostFacts;

/// Longest hostname kept, in bytes (a DNS name).
pub const MAX_HOST_NAME: usize = 253;
/// Longest OS name or kernel release kept, in bytes.
pub const MAX_HOST_TEXT: usize = 256;

/// `text` cut to `max` bytes at a character boundary, with a problem at `path` when cut.
fn capped(r: &mut Reader, path: &Path, text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    r.problem(
        path,
        format!("{} bytes long, cut to the first {end}", text.len()),
    );
    text[..end].to_owned()
}

pub(crate) fn scan(r: &mut Reader) -> HostFacts {
    let hostname_path = r.host("proc/sys/kernel/hostname");
    let hostname = r
        .text(&hostname_path)
        .or_else(|| r.text(&r.host("etc/hostname")))
        .filter(|h| !h.is_empty())
        .map(|h| capped(r, &hostname_path, h, MAX_HOST_NAME));
    let os = r
        .text(&r.host("etc/os-release"))
        .or_else(|| r.text(&r.host("usr/lib/os-release")))
        .and_then(|t| os_release_value(&t, "PRETTY_NAME"))
        .map(|o| capped(r, &r.host("etc/os-release"), o, MAX_HOST_TEXT));
    let kernel_path = r.host("proc/sys/kernel/osrelease");
    let kernel = r
        .text(&kernel_path)
        .filter(|k| !k.is_empty())
        .map(|k| capped(r, &kernel_path, k, MAX_HOST_TEXT));
    let cpus = r
        .text(&r.host("sys/devices/system/cpu/online"))
        .and_then(|t| count_cpu_list(&t))
        .or_else(|| {
            r.text(&r.host("proc/cpuinfo")).and_then(|t| {
                let n = t
                    .lines()
                    .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
                    .count();
                u32::try_from(n).ok().filter(|n| *n > 0)
            })
        });
    let meminfo_path = r.host("proc/meminfo");
    let memory_bytes = r.text(&meminfo_path).and_then(|t| {
        let kib = space_value(&t, "MemTotal:").and_then(|v| v.parse::<u64>().ok());
        if kib.is_none() {
            r.problem(&meminfo_path, "no MemTotal line");
        }
        kib.map(|k| k.saturating_mul(1024))
    });
    HostFacts {
        hostname,
        os,
        kernel,
        arch: std::env::consts::ARCH.to_owned(),
        cpus,
        memory_bytes,
    }
}

/// `KEY="value"` from os-release, unquoted.
fn os_release_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        if k.trim() != key {
            return None;
        }
        let v = v.trim().trim_matches('"').trim_matches('\'');
        (!v.is_empty()).then(|| v.to_owned())
    })
}

/// `0-3,8,10-11` → 7.
pub(crate) fn count_cpu_list(text: &str) -> Option<u32> {
    let mut total = 0u32;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?);
                total = total.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
            }
            None => {
                part.trim().parse::<u32>().ok()?;
                total = total.checked_add(1)?;
            }
        }
    }
    (total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_hostname_is_cut_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc/sys/kernel");
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(proc.join("hostname"), "h".repeat(16 * 1024 + 1)).unwrap();
        std::fs::write(proc.join("osrelease"), "6.1.0").unwrap();
        let mut r = Reader::new(dir.path());
        let facts = scan(&mut r);
        assert_eq!(facts.hostname.as_deref(), Some("h".repeat(253).as_str()));
        assert_eq!(facts.kernel.as_deref(), Some("6.1.0"));
        let problems = r.into_problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "/proc/sys/kernel/hostname");
        assert!(
            problems[0].problem.contains("16385 bytes long"),
            "{problems:?}"
        );
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-3,8,10-11\n"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("garbage"), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn os_release() {
        let t = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(
            os_release_value(t, "PRETTY_NAME").as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
    }
}
