//! CDI spec directories (`/etc/cdi`, `/var/run/cdi`): every `.json`, `.yaml` and `.yml` spec
//! is parsed (JSON with serde_json, YAML with serde_yaml_ng), checked for the fields a
//! container engine insists on, and turned into fully-qualified device ids
//! `vendor.com/class=name`. A spec that does not parse or validate is a scan problem, not an
//! error.

use std::path::Path;

use serde::Deserialize;

use super::fsread::Reader;
use super::model::{CdiDevice, CdiScan, CdiSpec};

/// The standard spec directories, in increasing priority.
pub const SPEC_DIRS: &[&str] = &["/etc/cdi", "/var/run/cdi"];

#[derive(Debug, Deserialize)]
struct RawSpec {
    #[serde(rename = "cdiVersion")]
    cdi_version: String,
    kind: String,
    #[serde(default)]
    devices: Vec<RawDevice>,
}

#[derive(Debug, Deserialize)]
struct RawDevice {
    name: String,
    #[serde(default, rename = "containerEdits")]
    container_edits: Option<RawEdits>,
}

#[derive(Debug, Default, Deserialize)]
struct RawEdits {
    #[serde(default, rename = "deviceNodes")]
    device_nodes: Vec<RawNode>,
}

#[derive(Debug, Deserialize)]
struct RawNode {
    path: String,
    #[serde(default, rename = "hostPath")]
    host_path: Option<String>,
}

/// Read every spec in the standard directories under the root.
pub(crate) fn scan(r: &mut Reader) -> CdiScan {
    let mut out = CdiScan {
        spec_dirs: SPEC_DIRS.iter().map(|d| (*d).to_owned()).collect(),
        specs: Vec::new(),
    };
    for dir in SPEC_DIRS {
        let path = r.host(dir);
        for (name, file) in r.entries(&path) {
            let is_json = name.ends_with(".json");
            let is_yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            if !is_json && !is_yaml {
                continue;
            }
            let Some(text) = r.text(&file) else {
                continue;
            };
            match parse_spec(&text, is_json) {
                Ok(raw) => out.specs.push(to_spec(raw, &r.display(&file), dir)),
                Err(why) => r.problem(&file, format!("invalid cdi spec: {why}")),
            }
        }
    }
    out
}

fn parse_spec(text: &str, json: bool) -> Result<RawSpec, String> {
    let raw: RawSpec = if json {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
    };
    if raw.cdi_version.trim().is_empty() {
        return Err("empty cdiVersion".to_owned());
    }
    if !valid_kind(&raw.kind) {
        return Err(format!("kind {:?} is not vendor.com/class", raw.kind));
    }
    if raw.devices.is_empty() {
        return Err("no devices".to_owned());
    }
    if let Some(bad) = raw.devices.iter().find(|d| !valid_name(&d.name)) {
        return Err(format!("invalid device name {:?}", bad.name));
    }
    Ok(raw)
}

fn to_spec(raw: RawSpec, path: &str, dir: &str) -> CdiSpec {
    let devices = raw
        .devices
        .into_iter()
        .map(|d| {
            let nodes = d
                .container_edits
                .unwrap_or_default()
                .device_nodes
                .into_iter()
                .map(|n| n.host_path.unwrap_or(n.path))
                .collect();
            CdiDevice {
                id: format!("{}={}", raw.kind, d.name),
                name: d.name,
                nodes,
            }
        })
        .collect();
    CdiSpec {
        path: path.to_owned(),
        dir: dir.to_owned(),
        cdi_version: raw.cdi_version,
        kind: raw.kind,
        devices,
    }
}

/// `vendor.com/class`: vendor is a domain-like name, class alphanumeric with `-_.`.
fn valid_kind(kind: &str) -> bool {
    let Some((vendor, class)) = kind.split_once('/') else {
        return false;
    };
    let ok = |s: &str, extra: &[u8]| {
        !s.is_empty()
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
    };
    ok(vendor, b"-_.") && ok(class, b"-_.")
}

/// Device names: alphanumeric plus `-_.:`, starting with an alphanumeric.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

/// The `vendor.com/class` part of a fully-qualified id.
pub fn kind_of(id: &str) -> &str {
    id.split_once('=').map_or(id, |(kind, _)| kind)
}

/// Whether a spec file at this host path lives in one of these directories.
pub(crate) fn in_dirs(spec_dir: &str, dirs: &[String]) -> bool {
    fn norm(d: &str) -> String {
        let alias = d.replacen("/var/run/", "/run/", 1);
        let alias = if alias == "/var/run" {
            "/run".to_owned()
        } else {
            alias
        };
        Path::new(&alias)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/")
    }
    let want = norm(spec_dir);
    dirs.iter().any(|d| norm(d) == want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_names() {
        assert!(valid_kind("nvidia.com/gpu"));
        assert!(!valid_kind("nvidia.com"));
        assert!(!valid_kind("/gpu"));
        assert!(valid_name("0"));
        assert!(valid_name("GPU-edfee158-11c1"));
        assert!(!valid_name(""));
        assert_eq!(kind_of("nvidia.com/gpu=0"), "nvidia.com/gpu");
    }

    #[test]
    fn yaml_and_json_specs() {
        let yaml = "---\ncdiVersion: 0.5.0\nkind: intel.com/gpu\ndevices:\n  - name: gpu0\n    containerEdits:\n      deviceNodes:\n        - path: /dev/dri/card0\n          hostPath: /dev/dri/card0\n";
        let raw = parse_spec(yaml, false).unwrap();
        let spec = to_spec(raw, "/etc/cdi/intel.yaml", "/etc/cdi");
        assert_eq!(spec.devices[0].id, "intel.com/gpu=gpu0");
        assert_eq!(spec.devices[0].nodes, vec!["/dev/dri/card0"]);
        let json = "{\"cdiVersion\":\"0.6.0\",\"kind\":\"amd.com/gpu\",\"devices\":[]}";
        assert!(parse_spec(json, true).is_err());
        assert!(parse_spec("{garbage", true).is_err());
    }

    #[test]
    fn var_run_is_run() {
        assert!(in_dirs("/var/run/cdi", &["/run/cdi".to_owned()]));
        assert!(in_dirs("/etc/cdi", &["/etc/cdi/".to_owned()]));
        assert!(!in_dirs("/etc/cdi", &["/opt/cdi".to_owned()]));
    }
}
