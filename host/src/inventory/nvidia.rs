//! NVIDIA driver and toolkit evidence: the kernel module, `/proc/driver/nvidia/version`, the
//! per-GPU `information` files (model, minor number, UUID), `/dev/nvidiactl` and the container
//! toolkit binaries on the host's PATH.

use std::collections::BTreeMap;
use std::fs;

use super::fsread::{Reader, colon_value, is_pci_address};
use super::model::{NvidiaHost, ToolkitBinary};

/// Directories searched for toolkit binaries (the usual PATH of dockerd).
const PATH_DIRS: &[&str] = &[
    "usr/local/sbin",
    "usr/local/bin",
    "usr/sbin",
    "usr/bin",
    "sbin",
    "bin",
];

/// Toolkit binaries worth knowing about.
const TOOLKIT_BINARIES: &[&str] = &[
    "nvidia-container-runtime-hook",
    "nvidia-container-runtime",
    "nvidia-ctk",
    "nvidia-cdi-hook",
];

/// One GPU as the NVIDIA driver describes it in procfs.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcGpu {
    pub model: Option<String>,
    pub uuid: Option<String>,
    pub minor: Option<u32>,
}

/// Host-wide NVIDIA state.
pub(crate) fn scan_host(r: &mut Reader) -> NvidiaHost {
    let module_loaded = r.exists(&r.host("sys/module/nvidia"));
    let driver_version = r
        .text(&r.host("proc/driver/nvidia/version"))
        .and_then(|t| parse_nvrm_version(&t))
        .or_else(|| {
            r.text(&r.host("sys/module/nvidia/version"))
                .filter(|v| !v.is_empty())
        });
    let control_node = r.node("/dev/nvidiactl");
    let uvm_node = r.node("/dev/nvidia-uvm");
    let mut toolkit = Vec::new();
    for name in TOOLKIT_BINARIES {
        for dir in PATH_DIRS {
            let path = r.host(&format!("{dir}/{name}"));
            if fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                toolkit.push(ToolkitBinary {
                    name: (*name).to_owned(),
                    path: format!("/{dir}/{name}"),
                });
                break;
            }
        }
    }
    NvidiaHost {
        module_loaded,
        driver_version,
        control_node,
        uvm_node,
        toolkit,
    }
}

/// `/proc/driver/nvidia/gpus/<bdf>/information`, keyed by lowercase PCI address.
pub(crate) fn proc_gpus(r: &mut Reader) -> BTreeMap<String, ProcGpu> {
    let mut out = BTreeMap::new();
    let dir = r.host("proc/driver/nvidia/gpus");
    for (name, path) in r.entries(&dir) {
        let addr = name.to_ascii_lowercase();
        if !is_pci_address(&addr) {
            continue;
        }
        let info_path = path.join("information");
        let gpu = match r.text(&info_path) {
            Some(text) => parse_information(r, &info_path, &text),
            None => ProcGpu::default(),
        };
        out.insert(addr, gpu);
    }
    out
}

fn parse_information(r: &mut Reader, path: &std::path::Path, text: &str) -> ProcGpu {
    let minor = colon_value(text, "Device Minor").and_then(|m| {
        let parsed = m.parse::<u32>().ok();
        if parsed.is_none() {
            r.problem(path, format!("device minor is not a number: {m:?}"));
        }
        parsed
    });
    ProcGpu {
        model: colon_value(text, "Model")
            .filter(|m| !m.is_empty())
            .map(str::to_owned),
        uuid: colon_value(text, "GPU UUID")
            .filter(|u| u.starts_with("GPU-"))
            .map(str::to_owned),
        minor,
    }
}

/// The version in `NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug ...`.
pub(crate) fn parse_nvrm_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|tok| {
            tok.contains('.')
                && tok.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                && tok.bytes().next().is_some_and(|b| b.is_ascii_digit())
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvrm_versions() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc version 12.3.0\n";
        assert_eq!(
            parse_nvrm_version(proprietary).as_deref(),
            Some("535.104.05")
        );
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (dvs-builder@U16-I3-B03-4-3)  Wed May 21 2025\n";
        assert_eq!(parse_nvrm_version(open).as_deref(), Some("575.57.08"));
        assert_eq!(parse_nvrm_version("garbage"), None);
    }
}
