//! `odac-sim gpu-lab inject --dir DIR …`: GPU faults in a running lab, the way a host shows
//! them to the agent. `xid N --gpu I` appends the line the NVIDIA kernel module writes for
//! Xid N on the lab's NVIDIA GPU I to the host root's kmsg stand-in (`root/dev/kmsg`, a
//! regular file the agent follows from its end), framed as a `/dev/kmsg` record.
//! `vanish --gpu I` takes that GPU's PCI device out of the host root's sysfs (kept beside it
//! in `DIR/vanished/`), as a GPU that fell off the bus without a word; `return --gpu I` puts
//! it back. `--vendor amd|intel` names another vendor's GPU I for `vanish` and `return`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use odac_host::gpu_health::xid_info;

use super::error::LabError;
use odac_protocol::{Compute, Vendor};

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The kernel reports this Xid for the GPU.
    Xid(u32),
    /// The GPU's PCI device leaves sysfs.
    Vanish,
    /// It comes back.
    Return,
}

pub use super::gpus::parse_vendor;

/// The PCI address the lab gives GPU `index` of `vendor` (as `gpus::LabGpus::devices`).
pub fn lab_address(vendor: Vendor, index: u32) -> String {
    vendor.facts().lab_pci_address(index)
}

/// The NVIDIA kernel module's text after the Xid number (as captured on real hosts for the
/// common codes, NVIDIA's name of the error otherwise).
fn driver_text(code: u32) -> String {
    match code {
        79 => "GPU has fallen off the bus.".to_owned(),
        48 => "An uncorrectable double bit error (DBE) has been detected on GPU in the \
               framebuffer at partition 0, subpartition 0."
            .to_owned(),
        13 => "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address".to_owned(),
        other => xid_info(other).meaning.to_owned(),
    }
}

/// The kmsg record the NVIDIA module writes for Xid `code` on the GPU at `pci` (`seq` is
/// the record's sequence number).
pub fn xid_record(pci: &str, code: u32, seq: u64) -> String {
    let usec = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let bus = pci.rsplit_once('.').map_or(pci, |(b, _)| b);
    format!(
        "3,{seq},{usec},-;NVRM: Xid (PCI:{bus}): {code}, pid='<unknown>', name=<unknown>, {}\n",
        driver_text(code)
    )
}

/// Applies `fault` to GPU `index` of `vendor` in the lab at `dir`; what was done, one line.
pub fn inject(dir: &Path, fault: Fault, vendor: Vendor, index: u32) -> Result<String, LabError> {
    let root = dir.join("root");
    let pci = lab_address(vendor, index);
    let device = root.join("sys/devices/pci0000:00").join(&pci);
    let stash = dir.join("vanished").join(&pci);
    let missing = |what: &str| {
        LabError::command(
            format!("gpu-lab inject --gpu {index}"),
            format!(
                "the lab at {} has no {vendor:?} gpu {index} ({pci}) {what}",
                dir.display()
            ),
        )
    };
    match fault {
        Fault::Xid(code) => {
            if vendor.facts().compute != Compute::Cuda {
                return Err(missing("to report an xid (xids are nvidia's)"));
            }
            if !device.exists() && !stash.exists() {
                return Err(missing("in its host root"));
            }
            let kmsg = root.join("dev/kmsg");
            let seq = std::fs::read_to_string(&kmsg).map_or(0, |t| t.lines().count() as u64) + 1;
            let record = xid_record(&pci, code, seq);
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&kmsg)
                .map_err(|e| LabError::io("append to", &kmsg, e))?;
            file.write_all(record.as_bytes())
                .map_err(|e| LabError::io("append to", &kmsg, e))?;
            Ok(format!(
                "xid {code} for gpu {index} ({pci}) appended to {}",
                kmsg.display()
            ))
        }
        Fault::Vanish => {
            if !device.exists() {
                return Err(missing("present to take away"));
            }
            move_dir(&device, &stash)?;
            Ok(format!(
                "gpu {index} ({pci}) vanished from {}",
                root.display()
            ))
        }
        Fault::Return => {
            if !stash.exists() {
                return Err(missing("that vanished"));
            }
            move_dir(&stash, &device)?;
            Ok(format!("gpu {index} ({pci}) is back in {}", root.display()))
        }
    }
}

fn move_dir(from: &Path, to: &PathBuf) -> Result<(), LabError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| LabError::io("create", parent, e))?;
    }
    std::fs::rename(from, to).map_err(|e| LabError::io("move", from, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_xid_line_is_the_drivers_and_the_agent_reads_it() {
        let record = xid_record(&lab_address(Vendor::Nvidia, 1), 79, 7);
        assert!(record.starts_with("3,7,"), "{record}");
        assert!(record.ends_with(
            ";NVRM: Xid (PCI:0000:11:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        ), "{record}");
        let event = odac_host::gpu_health::classify(&record).unwrap();
        assert_eq!(
            (event.xid, event.pci.as_deref()),
            (Some(79), Some("0000:11:00"))
        );
    }

    #[test]
    fn faults_on_a_lab_tree_and_clear_errors_for_a_missing_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let dev = root.join("sys/devices/pci0000:00/0000:10:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(root.join("dev")).unwrap();
        std::fs::write(root.join("dev/kmsg"), "").unwrap();

        inject(dir.path(), Fault::Xid(48), Vendor::Nvidia, 0).unwrap();
        inject(dir.path(), Fault::Xid(13), Vendor::Nvidia, 0).unwrap();
        let log = std::fs::read_to_string(root.join("dev/kmsg")).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("3,1,") && lines[0].contains("): 48, "),
            "{log}"
        );
        assert!(
            lines[1].starts_with("3,2,") && lines[1].contains("): 13, "),
            "{log}"
        );

        inject(dir.path(), Fault::Vanish, Vendor::Nvidia, 0).unwrap();
        assert!(!dev.exists());
        let err = inject(dir.path(), Fault::Vanish, Vendor::Nvidia, 0).unwrap_err();
        assert!(
            err.to_string().contains("no Nvidia gpu 0 (0000:10:00.0)"),
            "{err}"
        );
        inject(dir.path(), Fault::Return, Vendor::Nvidia, 0).unwrap();
        assert!(dev.exists());

        let err = inject(dir.path(), Fault::Xid(79), Vendor::Nvidia, 5).unwrap_err();
        assert!(
            err.to_string().contains("no Nvidia gpu 5 (0000:15:00.0)"),
            "{err}"
        );
        let err = inject(dir.path(), Fault::Xid(79), Vendor::Amd, 0).unwrap_err();
        assert!(err.to_string().contains("xids are nvidia's"), "{err}");
    }
}
