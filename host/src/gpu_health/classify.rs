//! One kernel log line → what it says about a GPU, or nothing. Pure: no IO, never panics on
//! any input. Understands a `/dev/kmsg` record (`6,1234,5678,-;message`), a `dmesg` line
//! (`[ 12.345] message`) and a bare message. Recognised messages, in the drivers' own words:
//!
//! - NVIDIA: `NVRM: Xid (PCI:0000:01:00): 79, pid=…, name=…, GPU has fallen off the bus.`
//!   (the PCI address lacks the function; older drivers omit `PCI:` and `pid=`), classified
//!   by [`super::xid`].
//! - AMD (`amdgpu`): `ring gfx_0.0.0 timeout, signaled seq=…` (with the device prefix
//!   `amdgpu 0000:08:00.0: ` on newer kernels, without one after `[drm:amdgpu_job_timedout
//!   [amdgpu]] *ERROR*` on older ones) and `GPU reset begin!` make the GPU unhealthy;
//!   `GPU reset(2) succeeded!`, `GPU reset succeeded…` and `Ring … reset succeeded` are the
//!   driver's reset; `GPU reset(N) failed` keeps it unhealthy.
//! - Intel (`i915`, `xe`): `GPU HANG: ecode …, in <process> [pid]` is a hang of one context,
//!   which the driver resets by itself: an application event, the GPU stays usable;
//!   `GPU wedged`/`Failed to reset chip` (the driver gave up) make it unhealthy.

use odac_protocol::Vendor;

use super::xid::{XidClass, xid_info};

/// What a line means for its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The GPU is not to be trusted: make it unhealthy.
    Critical,
    /// The application on the GPU caused it: an event on that app, the GPU stays healthy.
    Application,
    /// Worth a warning; nothing changes.
    Warning,
    /// The driver reset the GPU successfully: it may be trusted again.
    Reset,
}

/// A kernel message about one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuKernelEvent {
    pub vendor: Vendor,
    /// The PCI address as the driver printed it, lowercase: `0000:01:00` (NVIDIA, no
    /// function) or `0000:03:00.0`; `None` when the line names no device.
    pub pci: Option<String>,
    pub severity: Severity,
    /// The NVIDIA Xid, when there is one.
    pub xid: Option<u32>,
    /// What happened, e.g. `xid 79: GPU has fallen off the bus`.
    pub summary: String,
    /// What to do about it, where known.
    pub fix: Option<&'static str>,
    /// The message as the kernel wrote it (without the record prefix), at most 512 bytes.
    pub message: String,
}

const MAX_MESSAGE: usize = 512;

const AMD_FIX: &str = "if it recurs, check the GPU's power and temperature, update the kernel \
                       and firmware (linux-firmware), or reboot the host";
const INTEL_FIX: &str = "reboot the host; if it recurs, update the kernel and the GPU firmware";

/// Classify one line; `None` for anything that is not a GPU driver message this agent knows.
pub fn classify(line: &str) -> Option<GpuKernelEvent> {
    let message = strip_prefix(line.trim_end_matches(['\n', '\r']));
    if let Some(rest) = message.strip_prefix("NVRM: Xid (") {
        return nvidia_xid(message, rest);
    }
    if let Some((driver, pci, rest)) = device_prefixed(message) {
        return match driver {
            "amdgpu" => amd(message, Some(pci), rest),
            "i915" | "xe" => intel(message, Some(pci), rest),
            _ => None,
        };
    }
    if message.starts_with("[drm:amdgpu_") {
        return amd(message, None, message);
    }
    if message.contains("[drm] GPU HANG") {
        return intel(message, None, message);
    }
    None
}

/// The message of a kmsg record (`prio,seq,usec,flags[,…];msg`) or dmesg line (`[ t] msg`).
fn strip_prefix(line: &str) -> &str {
    if let Some((head, msg)) = line.split_once(';') {
        let mut fields = head.split(',');
        let numeric = |f: Option<&str>| {
            f.is_some_and(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
        };
        if numeric(fields.next()) && numeric(fields.next()) && numeric(fields.next()) {
            return msg;
        }
    }
    if let Some(rest) = line.strip_prefix('[')
        && let Some((stamp, msg)) = rest.split_once(']')
        && stamp
            .trim()
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.')
    {
        return msg.trim_start();
    }
    line
}

/// `driver 0000:03:00.0: rest` → (driver, lowercase address, rest).
fn device_prefixed(message: &str) -> Option<(&str, String, &str)> {
    let (driver, after) = message.split_once(' ')?;
    let (pci, rest) = after.split_once(": ")?;
    is_pci(pci, true).then(|| (driver, pci.to_ascii_lowercase(), rest))
}

/// `dddd:bb:dd.f` (with the function) or `dddd:bb:dd` (without), hex digits.
fn is_pci(s: &str, with_function: bool) -> bool {
    let (head, function) = match s.split_once('.') {
        Some((h, f)) => (h, Some(f)),
        None => (s, None),
    };
    if with_function != function.is_some() {
        return false;
    }
    let parts: Vec<&str> = head.split(':').collect();
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 3
        && hex(parts[0], 4)
        && hex(parts[1], 2)
        && hex(parts[2], 2)
        && function.is_none_or(|f| hex(f, 1))
}

fn nvidia_xid(message: &str, rest: &str) -> Option<GpuKernelEvent> {
    let (addr, after) = rest.split_once("): ")?;
    let addr = addr.strip_prefix("PCI:").unwrap_or(addr);
    let pci = (is_pci(addr, false) || is_pci(addr, true)).then(|| addr.to_ascii_lowercase());
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let code: u32 = digits.parse().ok()?;
    let info = xid_info(code);
    let severity = match info.class {
        XidClass::Application => Severity::Application,
        XidClass::Critical => Severity::Critical,
        XidClass::Warning => Severity::Warning,
    };
    Some(GpuKernelEvent {
        vendor: Vendor::Nvidia,
        pci,
        severity,
        xid: Some(code),
        summary: format!("xid {code}: {}", info.meaning),
        fix: info.fix,
        message: clip(message),
    })
}

fn amd(message: &str, pci: Option<String>, rest: &str) -> Option<GpuKernelEvent> {
    let rest = rest.strip_prefix("amdgpu: ").unwrap_or(rest);
    let (severity, summary) = if let Some(ring) = ring_timeout(rest) {
        (Severity::Critical, format!("ring {ring} timeout"))
    } else if rest.starts_with("GPU reset begin!") {
        (Severity::Critical, "gpu reset begun".to_owned())
    } else if rest.starts_with("GPU reset") && rest.contains("failed") {
        (Severity::Critical, "gpu reset failed".to_owned())
    } else if (rest.starts_with("GPU reset") && rest.contains("succeeded"))
        || (rest.starts_with("Ring ") && rest.ends_with("reset succeeded"))
    {
        (Severity::Reset, "gpu reset succeeded".to_owned())
    } else {
        return None;
    };
    Some(GpuKernelEvent {
        vendor: Vendor::Amd,
        pci,
        severity,
        xid: None,
        summary,
        fix: (severity == Severity::Critical).then_some(AMD_FIX),
        message: clip(message),
    })
}

/// `…ring gfx_0.0.0 timeout, signaled seq=…` → `gfx_0.0.0`.
fn ring_timeout(rest: &str) -> Option<&str> {
    let at = rest.find("ring ")?;
    let after = &rest[at + "ring ".len()..];
    let (ring, tail) = after.split_once(' ')?;
    tail.starts_with("timeout").then_some(ring)
}

fn intel(message: &str, pci: Option<String>, rest: &str) -> Option<GpuKernelEvent> {
    let (severity, summary) = if rest.contains("GPU HANG") {
        let process = rest
            .split_once(", in ")
            .map(|(_, p)| p.split(',').next().unwrap_or(p).trim().to_owned());
        let summary = match process {
            Some(p) => format!("gpu hang in {p} (the driver reset the context)"),
            None => "gpu hang (the driver reset the context)".to_owned(),
        };
        (Severity::Application, summary)
    } else if rest.contains("GPU wedged") || rest.contains("Failed to reset chip") {
        (
            Severity::Critical,
            "gpu wedged: the driver could not reset it".to_owned(),
        )
    } else {
        return None;
    };
    Some(GpuKernelEvent {
        vendor: Vendor::Intel,
        pci,
        severity,
        xid: None,
        summary,
        fix: (severity == Severity::Critical).then_some(INTEL_FIX),
        message: clip(message),
    })
}

fn clip(s: &str) -> String {
    if s.len() <= MAX_MESSAGE {
        return s.to_owned();
    }
    let mut end = MAX_MESSAGE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests;
