//! PCI enumeration: every display (class 0x03) and processing-accelerator (class 0x12) device,
//! found through `/sys/bus/pci/devices` and `/sys/class/drm/*/device`, with its ids, bound
//! driver, PCI address and the DRM nodes that sysfs ties to it. Attribute files are preferred;
//! the device's `uevent` fills in what they lack (some trees only have the uevent).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::fsread::{Reader, is_pci_address, parse_hex, uevent_value};
use super::model::PciIds;

/// PCI base classes the scan looks at.
const CLASS_DISPLAY: u32 = 0x03;
const CLASS_ACCELERATOR: u32 = 0x12;

/// Vendors whose display devices are BMC or virtual VGA, never GPUs for passthrough.
const NOT_PASSABLE_VENDORS: &[(u32, &str)] = &[
    (0x1a03, "ASPEED"),
    (0x1af4, "virtio"),
    (0x102b, "Matrox"),
    (0x1013, "Cirrus Logic"),
    (0x1234, "QEMU/Bochs"),
    (0x1b36, "Red Hat QXL"),
    (0x15ad, "VMware"),
    (0x1414, "Microsoft Hyper-V"),
    (0x80ee, "VirtualBox"),
    (0x19a2, "Emulex BMC"),
    (0x1912, "Renesas BMC"),
];

/// Walking `/sys/devices` (only done when `/sys/bus/pci/devices` is missing) stops this deep.
const MAX_WALK_DEPTH: usize = 8;

/// A display or accelerator device as read from sysfs.
#[derive(Debug, Clone)]
pub(crate) struct PciDevice {
    /// The device directory with symlinks resolved.
    pub dir: PathBuf,
    pub pci_address: Option<String>,
    pub ids: PciIds,
    pub driver: Option<String>,
    /// DRM minor names (`card1`, `renderD129`) tied to this device.
    pub drm: BTreeSet<String>,
}

/// Name of the BMC/virtual vendor, when this vendor id is one.
pub(crate) fn not_passable_vendor(vendor_id: u32) -> Option<&'static str> {
    NOT_PASSABLE_VENDORS
        .iter()
        .find(|(id, _)| *id == vendor_id)
        .map(|(_, name)| *name)
}

/// Whether a DRM class entry name is a card or render minor (`card0`, `renderD128`).
pub(crate) fn is_drm_minor(name: &str) -> bool {
    let digits = name
        .strip_prefix("renderD")
        .or_else(|| name.strip_prefix("card"));
    digits.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Every display/accelerator device under the root.
pub(crate) fn display_devices(r: &mut Reader) -> Vec<PciDevice> {
    // canonical device dir -> DRM minors seen for it through /sys/class/drm
    let mut candidates: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut from_drm: BTreeSet<PathBuf> = BTreeSet::new();

    let bus = r.host("sys/bus/pci/devices");
    if r.exists(&bus) {
        for (_, path) in r.entries(&bus) {
            if let Some(dir) = r.canonical(&path) {
                candidates.entry(dir).or_default();
            }
        }
    } else {
        let devices = r.host("sys/devices");
        for (name, path) in r.entries(&devices) {
            if name.starts_with("pci") {
                walk_pci(r, &path, 0, &mut candidates);
            }
        }
    }

    let class_drm = r.host("sys/class/drm");
    for (name, path) in r.entries(&class_drm) {
        if !is_drm_minor(&name) {
            continue;
        }
        let link = path.join("device");
        if !r.exists(&link) {
            if std::fs::metadata(&path).is_err() {
                // a dangling or looping card entry: record why it cannot be followed
                let _ = r.canonical(&path);
            }
            continue;
        }
        if let Some(dir) = r.canonical(&link) {
            from_drm.insert(dir.clone());
            candidates.entry(dir).or_default().insert(name);
        }
    }

    let mut out = Vec::new();
    for (dir, drm) in candidates {
        let assume_display = from_drm.contains(&dir);
        if let Some(dev) = read_device(r, &dir, drm, assume_display) {
            out.push(dev);
        }
    }
    out
}

fn walk_pci(
    r: &mut Reader,
    dir: &Path,
    depth: usize,
    out: &mut BTreeMap<PathBuf, BTreeSet<String>>,
) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    for (name, path) in r.entries(dir) {
        if is_pci_address(&name) && path.is_dir() && !path.is_symlink() {
            out.entry(path.clone()).or_default();
            walk_pci(r, &path, depth + 1, out);
        }
    }
}

/// Read one device; `None` when it is not a display/accelerator device or has no vendor id.
fn read_device(
    r: &mut Reader,
    dir: &Path,
    drm: BTreeSet<String>,
    assume_display: bool,
) -> Option<PciDevice> {
    let mut uevent: Option<Option<String>> = None;
    let mut uevent_of = |r: &mut Reader| -> Option<String> {
        uevent
            .get_or_insert_with(|| r.text(&dir.join("uevent")))
            .clone()
    };

    let class_path = dir.join("class");
    let class = match r.text(&class_path) {
        Some(text) => {
            let parsed = parse_hex(&text);
            if parsed.is_none() {
                r.problem(&class_path, format!("not a pci class code: {text:?}"));
            }
            parsed
        }
        None => uevent_of(r)
            .as_deref()
            .and_then(|u| uevent_value(u, "PCI_CLASS"))
            .and_then(parse_hex),
    };
    match class {
        Some(class) => {
            let base = class >> 16;
            if base != CLASS_DISPLAY && base != CLASS_ACCELERATOR {
                return None;
            }
        }
        None if assume_display => {}
        None => return None,
    }

    let uevent_text = uevent_of(r);
    let uevent_ids = uevent_text
        .as_deref()
        .and_then(|u| uevent_value(u, "PCI_ID"))
        .and_then(split_id_pair);
    let uevent_subsys = uevent_text
        .as_deref()
        .and_then(|u| uevent_value(u, "PCI_SUBSYS_ID"))
        .and_then(split_id_pair);

    let vendor_id = hex_attr(r, dir, "vendor").or(uevent_ids.map(|p| p.0));
    let Some(vendor_id) = vendor_id else {
        r.problem(dir, "display device without a vendor id");
        return None;
    };
    let ids = PciIds {
        vendor_id,
        device_id: hex_attr(r, dir, "device").or(uevent_ids.map(|p| p.1)),
        subsystem_vendor_id: hex_attr(r, dir, "subsystem_vendor").or(uevent_subsys.map(|p| p.0)),
        subsystem_device_id: hex_attr(r, dir, "subsystem_device").or(uevent_subsys.map(|p| p.1)),
        class,
    };

    let driver = r.link_name(&dir.join("driver")).or_else(|| {
        uevent_text
            .as_deref()
            .and_then(|u| uevent_value(u, "DRIVER"))
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
    });

    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let pci_address = if is_pci_address(name) {
        Some(name.to_ascii_lowercase())
    } else {
        uevent_text
            .as_deref()
            .and_then(|u| uevent_value(u, "PCI_SLOT_NAME"))
            .filter(|a| is_pci_address(a))
            .map(str::to_ascii_lowercase)
    };

    let mut drm = drm;
    for (name, _) in r.entries(&dir.join("drm")) {
        if is_drm_minor(&name) {
            drm.insert(name);
        }
    }

    Some(PciDevice {
        dir: dir.to_path_buf(),
        pci_address,
        ids,
        driver,
        drm,
    })
}

/// A hex attribute file; garbage is recorded as a problem and read as absent.
fn hex_attr(r: &mut Reader, dir: &Path, name: &str) -> Option<u32> {
    let path = dir.join(name);
    let text = r.text(&path)?;
    let value = parse_hex(&text);
    if value.is_none() {
        r.problem(&path, format!("not a hex id: {text:?}"));
    }
    value
}

/// `10DE:1C8D` → (0x10de, 0x1c8d).
fn split_id_pair(text: &str) -> Option<(u32, u32)> {
    let (a, b) = text.split_once(':')?;
    Some((parse_hex(a)?, parse_hex(b)?))
}

/// The lowest-numbered DRM minor with this prefix (`card`, `renderD`).
pub(crate) fn first_minor(drm: &BTreeSet<String>, prefix: &str) -> Option<String> {
    drm.iter()
        .filter_map(|n| {
            let digits = n.strip_prefix(prefix)?;
            if prefix == "card" && digits.starts_with('D') {
                return None;
            }
            digits.parse::<u32>().ok().map(|num| (num, n))
        })
        .min()
        .map(|(_, n)| n.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drm_minor_names() {
        assert!(is_drm_minor("card1"));
        assert!(is_drm_minor("renderD129"));
        assert!(!is_drm_minor("card1-DP-1"));
        assert!(!is_drm_minor("controlD64"));
        assert!(!is_drm_minor("card"));
    }

    #[test]
    fn lowest_minor_wins() {
        let drm: BTreeSet<String> = ["card10", "card2", "renderD129"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(first_minor(&drm, "card").as_deref(), Some("card2"));
        assert_eq!(first_minor(&drm, "renderD").as_deref(), Some("renderD129"));
    }

    #[test]
    fn bmc_vendors() {
        assert_eq!(not_passable_vendor(0x1a03), Some("ASPEED"));
        assert_eq!(not_passable_vendor(0x10de), None);
    }
}
