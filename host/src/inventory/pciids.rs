//! Human model names from the PCI ID database the OS ships (`/usr/share/misc/pci.ids` or
//! `/usr/share/hwdata/pci.ids`, under the scan root), read at run time: the device names of
//! the three GPU vendors, prefixed with the vendor (`AMD Aldebaran/MI200 [Instinct MI210]`).
//! Only the names of the GPUs a scan asks for are kept (the database's GPU section is about
//! 7 000 names, half a MiB in memory, for the few GPUs of a host): the file is read once per
//! change (path, size, modification time) and per device id not asked for before, so rescans
//! every few seconds cost a `stat`; a host without the file keeps the numeric ids.

use crate::lock::lock;
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use super::fsread::Reader;
use super::model::Vendor;

/// Where distributions put the database, in order of preference.
pub(crate) const PATHS: [&str; 2] = ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];

/// A device: (vendor id, device id).
pub(crate) type Id = (u32, u32);
/// Device names by id.
pub(crate) type Names = HashMap<Id, String>;

struct Cached {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    /// Every id asked for so far, with its name (`None`: not in the database).
    names: HashMap<Id, Option<String>>,
}

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// The database's names of the devices `ids` (those it knows; empty when the host has no
/// database).
pub(crate) fn names(r: &mut Reader, ids: &[Id]) -> Names {
    if ids.is_empty() {
        return Names::new();
    }
    let Some((path, meta)) = PATHS.iter().find_map(|p| {
        let path = r.host(p);
        std::fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (path, m))
    }) else {
        return Names::new();
    };
    let mut cache = lock(&CACHE);
    let (len, modified) = (meta.len(), meta.modified().ok());
    let cached = match cache.take() {
        Some(c) if c.path == path && c.len == len && c.modified == modified => c,
        _ => Cached {
            path: path.clone(),
            len,
            modified,
            names: HashMap::new(),
        },
    };
    let cached = cache.insert(cached);
    let missing: BTreeSet<Id> = ids
        .iter()
        .filter(|id| !cached.names.contains_key(id))
        .copied()
        .collect();
    if !missing.is_empty() {
        match std::fs::File::open(&path) {
            Ok(file) => {
                let mut found = parse(BufReader::new(file), &missing);
                for id in missing {
                    cached.names.insert(id, found.remove(&id));
                }
            }
            Err(e) => r.problem(&path, format!("cannot read: {e}")),
        }
    }
    ids.iter()
        .filter_map(|id| Some((*id, cached.names.get(id)?.clone()?)))
        .collect()
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
/// subsystem lines and the `C` class section are skipped); only the devices `wanted` are
/// kept, and the read stops once all are found.
fn parse(input: impl BufRead, wanted: &BTreeSet<Id>) -> Names {
    let mut names = Names::new();
    let mut vendor: Option<u32> = None;
    for line in input.split(b'\n').map_while(Result::ok) {
        if names.len() == wanted.len() {
            break;
        }
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
            if let Ok(id) = u32::from_str_radix(id.trim(), 16)
                && wanted.contains(&(v, id))
            {
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
        let wanted: BTreeSet<Id> = [
            (0x1002, 0x740f),
            (0x8086, 0x5912),
            (0x8086, 0x1),
            (0x1234, 0x740f),
        ]
        .into_iter()
        .collect();
        let names = parse(SAMPLE.as_bytes(), &wanted);
        assert_eq!(
            names.len(),
            2,
            "only GPU vendors' devices, only the wanted ones"
        );
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
        let mi210 = (0x1002, 0x740f);
        assert!(names(&mut r, &[mi210]).is_empty());
        let path = dir.path().join("usr/share/hwdata/pci.ids");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, SAMPLE).unwrap();
        let found = names(&mut r, &[mi210, (0x8086, 0x1)]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[&mi210], "Aldebaran/MI200 [Instinct MI210]");
        // asked again: the cache answers, the known miss included
        assert_eq!(names(&mut r, &[mi210, (0x8086, 0x1)]), found);
        // another id: read again, and only what was asked is kept
        let hd630 = (0x8086, 0x5912);
        assert_eq!(names(&mut r, &[hd630]).len(), 1);
        let kept = lock(&CACHE).as_ref().map(|c| c.names.len());
        assert_eq!(kept, Some(3), "two names and one miss");
        assert!(names(&mut r, &[]).is_empty());
    }
}
