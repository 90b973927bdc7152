//! Human model names from the PCI ID database the OS ships (`/usr/share/misc/pci.ids` or
//! `/usr/share/hwdata/pci.ids`, under the scan root), read at run time: the device names of
//! the three GPU vendors, prefixed with the vendor (`AMD Aldebaran/MI200 [Instinct MI210]`).
//! The file is parsed once per change (path, size, modification time), so rescans every few
//! seconds cost a `stat`; a host without the file keeps the numeric ids.

use crate::lock::lock;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use super::fsread::Reader;
use super::model::Vendor;

/// Where distributions put the database, in order of preference.
pub(crate) const PATHS: [&str; 2] = ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];

/// Device names by (vendor id, device id), for the three GPU vendors.
type Names = HashMap<(u32, u32), String>;

struct Cached {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    names: std::sync::Arc<Names>,
}

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// The database's names (empty when the host has none).
pub(crate) fn names(r: &mut Reader) -> std::sync::Arc<Names> {
    let Some((path, meta)) = PATHS.iter().find_map(|p| {
        let path = r.host(p);
        std::fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (path, m))
    }) else {
        return std::sync::Arc::default();
    };
    let mut cache = lock(&CACHE);
    if let Some(c) = cache.as_ref()
        && c.path == path
        && c.len == meta.len()
        && c.modified == meta.modified().ok()
    {
        return std::sync::Arc::clone(&c.names);
    }
    let names = match std::fs::File::open(&path) {
        Ok(file) => std::sync::Arc::new(parse(BufReader::new(file))),
        Err(e) => {
            r.problem(&path, format!("cannot read: {e}"));
            return std::sync::Arc::default();
        }
    };
    *cache = Some(Cached {
        path,
        len: meta.len(),
        modified: meta.modified().ok(),
        names: std::sync::Arc::clone(&names),
    });
    names
}

/// The model name of a GPU, when the database knows its device id.
pub(crate) fn model(
    names: &Names,
    vendor: Vendor,
    vendor_id: u32,
    device_id: u32,
) -> Option<String> {
    let name = names.get(&(vendor_id, device_id))?;
    Some(format!("{} {name}", vendor.facts().display_name))
}

/// `vvvv  Vendor` lines open a vendor, `\tdddd  Device` lines name its devices (`\t\t`
/// subsystem lines and the `C` class section are skipped); only GPU vendors are kept.
fn parse(input: impl BufRead) -> Names {
    let mut names = Names::new();
    let mut vendor: Option<u32> = None;
    for line in input.split(b'\n').map_while(Result::ok) {
        let line = String::from_utf8_lossy(&line);
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if line.starts_with("C ") {
            break;
        }
        if let Some(rest) = line.strip_prefix('\t') {
            if rest.starts_with('\t') {
                continue;
            }
            let (Some(v), Some((id, name))) = (vendor, rest.split_once("  ")) else {
                continue;
            };
            if let Ok(id) = u32::from_str_radix(id.trim(), 16) {
                names.insert((v, id), name.trim().to_owned());
            }
        } else {
            vendor = line
                .split_once("  ")
                .and_then(|(id, _)| u32::from_str_radix(id.trim(), 16).ok())
                .filter(|id| Vendor::from_pci_id(*id).is_some());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# header\n1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\t740f  Aldebaran/MI200 [Instinct MI210]\n\t\t1002 0c34  Instinct MI210\n1234  Other\n\t740f  Not a gpu vendor\n8086  Intel Corporation\n\t5912  HD Graphics 630\nC 00  Unclassified device\n\t00  Non-VGA unclassified device\n";

    #[test]
    fn gpu_vendors_devices_are_named() {
        let names = parse(SAMPLE.as_bytes());
        assert_eq!(names.len(), 2);
        assert_eq!(
            model(&names, Vendor::Amd, 0x1002, 0x740f).as_deref(),
            Some("AMD Aldebaran/MI200 [Instinct MI210]")
        );
        assert_eq!(
            model(&names, Vendor::Intel, 0x8086, 0x5912).as_deref(),
            Some("Intel HD Graphics 630")
        );
        assert_eq!(model(&names, Vendor::Intel, 0x8086, 0x1), None);
    }

    #[test]
    fn the_database_is_read_under_the_root_and_absent_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Reader::new(dir.path());
        assert!(names(&mut r).is_empty());
        let path = dir.path().join("usr/share/hwdata/pci.ids");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, SAMPLE).unwrap();
        assert_eq!(names(&mut r).len(), 2);
    }
}
