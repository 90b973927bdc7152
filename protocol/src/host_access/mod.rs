//! ODAC's app-spec fields that reach into the host kernel: the size of `/dev/shm`
//! (`shm_size`), extra capabilities from an allowlist (`caps`), namespaced sysctls
//! (`sysctls`) and extra host device nodes (`devices`). They travel as sent (`"512m"` stays
//! `"512m"`, a sysctl value may be a string, a number or a boolean) and frame decoding takes
//! any value of the right shape: [`AppSpec::host_access`](crate::AppSpec::host_access)
//! checks them, naming the field, and gives the [`HostAccess`] the agent applies. The control
//! plane refuses a bad one before accepting a spec; the agent checks every spec again, and a
//! bad one fails that app only (`policy_denied`), not the frame that carried it. Which host
//! devices may be mapped is the agent's local policy (`[apps.policy]
//! allowed_device_prefixes`); GPU device nodes never come from here, only from the GPU intent.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validation::ValidationError;

/// Smallest `/dev/shm` an app may ask for (1 MiB).
pub const MIN_SHM_BYTES: u64 = 1 << 20;
/// Largest `/dev/shm` an app may ask for (64 GiB).
pub const MAX_SHM_BYTES: u64 = 64 << 30;
/// The capabilities an app may be granted (names without `CAP_`).
pub const ALLOWED_CAPS: [&str; 5] = [
    "NET_ADMIN",
    "NET_RAW",
    "NET_BIND_SERVICE",
    "IPC_LOCK",
    "SYS_NICE",
];
/// The namespaced sysctls an app may set: a key equal to an entry, or starting with an
/// entry that ends in `.` or `*` (the `*` left out).
pub const ALLOWED_SYSCTLS: [&str; 5] = [
    "net.",
    "kernel.msg*",
    "kernel.sem",
    "kernel.shm*",
    "fs.mqueue.",
];
/// Most entries in `caps`, `sysctls` or `devices`.
pub const MAX_HOST_ACCESS_ENTRIES: usize = 64;
/// Longest sysctl value, in bytes.
pub const MAX_SYSCTL_VALUE: usize = 256;

/// `shm_size` as sent: bytes as a number, or a string with a unit (`"512m"`, `"1.5GiB"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ShmSize(pub Value);

/// One sysctl value as sent: a string, a whole number or a boolean.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SysctlValue(pub Value);

/// The regular expression a size string must match (see [`parse_size`]).
pub const SIZE_PATTERN: &str = "^\\s*[0-9]+(\\.[0-9]+)?\\s*([bB]|[kKmMgG]([iI]?[bB])?)\\s*$";

impl JsonSchema for ShmSize {
    fn schema_name() -> Cow<'static, str> {
        "ShmSize".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Size of /dev/shm: bytes, or a string with a unit (\"512m\", \"1.5GiB\"); 1 MiB to 64 GiB.",
            "anyOf": [
                {"type": "integer", "minimum": MIN_SHM_BYTES, "maximum": MAX_SHM_BYTES},
                {"type": "string", "pattern": SIZE_PATTERN}
            ]
        })
    }
}

/// A sysctl value string: no control characters, not only whitespace.
const VALUE_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$";

impl JsonSchema for SysctlValue {
    fn schema_name() -> Cow<'static, str> {
        "SysctlValue".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A sysctl value: a string, a whole number or a boolean (true means \"1\").",
            "anyOf": [
                {"type": "string", "maxLength": MAX_SYSCTL_VALUE, "pattern": VALUE_PATTERN},
                {"type": "integer"},
                {"type": "boolean"}
            ]
        })
    }
}

/// What an app may have of the host, checked and normalised: what the agent gives the
/// engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostAccess {
    /// Size of `/dev/shm` in bytes; `None`: the engine's default (64 MiB).
    pub shm_size_bytes: Option<u64>,
    /// Capabilities to add, upper case without `CAP_`, each once, in spec order.
    pub caps: Vec<String>,
    /// Sysctls with their values as the kernel takes them (`true` is `"1"`).
    pub sysctls: BTreeMap<String, String>,
    /// Host device paths, mapped to the same path in the container.
    pub devices: Vec<String>,
}

/// Bytes of a size: `"512m"`, `"1.5GiB"`, `"64k"`, `"100b"`. Units are binary (`m`, `mb`
/// and `mib` all mean 1024²), any case; a fraction is cut to whole bytes. A number without
/// a unit is refused: it is almost always a missing unit.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    if number.is_empty() {
        return Err(format!(
            "{text:?} is not a size such as \"512m\" or \"1.5GiB\""
        ));
    }
    if unit.is_empty() {
        return Err(format!(
            "{text:?} has no unit: write \"{number}m\" for {number} MiB, or give the bytes as a number"
        ));
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(format!(
                "{text:?} has an unknown unit {unit:?} (b, k, m or g, optionally with b or ib)"
            ));
        }
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let bad = || format!("{text:?} is not a size such as \"512m\" or \"1.5GiB\"");
    if whole.is_empty() || fraction.contains('.') || (number.contains('.') && fraction.is_empty()) {
        return Err(bad());
    }
    let fraction = &fraction[..fraction.len().min(9)];
    let whole: u128 = whole.parse().map_err(|_| bad())?;
    let frac: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| bad())?
    };
    let unit = 1u128 << shift;
    let bytes = whole
        .checked_mul(unit)
        .and_then(|b| b.checked_add(frac * unit / 10u128.pow(fraction.len() as u32)))
        .ok_or_else(bad)?;
    u64::try_from(bytes).map_err(|_| format!("{text:?} is too large"))
}

/// Whether `path` is a GPU device node (`/dev/nvidia*`, `/dev/dri`, `/dev/dri/*`,
/// `/dev/kfd`): those come from the GPU intent only.
pub fn is_gpu_device(path: &str) -> bool {
    let mut parts = path.split('/').filter(|p| !p.is_empty() && *p != ".");
    if parts.next() != Some("dev") {
        return false;
    }
    match parts.next() {
        Some(node) => node.starts_with("nvidia") || node == "dri" || node == "kfd",
        None => false,
    }
}

/// The size in bytes of a `shm_size` as sent, in range.
pub(crate) fn check_shm_size(shm: &ShmSize) -> Result<u64, ValidationError> {
    let field = "shm_size";
    let bytes = match &shm.0 {
        Value::Number(n) => n.as_u64().ok_or_else(|| {
            ValidationError::new(field, format!("{n} is not a whole number of bytes"))
        })?,
        Value::String(s) => parse_size(s).map_err(|m| ValidationError::new(field, m))?,
        other => {
            return Err(ValidationError::new(
                field,
                format!("expected bytes or a size such as \"512m\", got {other}"),
            ));
        }
    };
    if !(MIN_SHM_BYTES..=MAX_SHM_BYTES).contains(&bytes) {
        return Err(ValidationError::new(
            field,
            format!("{bytes} bytes is out of range 1 MiB..=64 GiB"),
        ));
    }
    Ok(bytes)
}

/// The capabilities, upper case without `CAP_`, each once; anything off the allowlist is
/// refused naming it.
pub(crate) fn check_caps(caps: &[String]) -> Result<Vec<String>, ValidationError> {
    too_many("caps", caps.len())?;
    let mut out: Vec<String> = Vec::new();
    for (i, cap) in caps.iter().enumerate() {
        let upper = cap.trim().to_ascii_uppercase();
        let name = upper.strip_prefix("CAP_").unwrap_or(&upper);
        if !ALLOWED_CAPS.contains(&name) {
            return Err(ValidationError::new(
                format!("caps[{i}]"),
                format!(
                    "{cap:?} is not allowed: caps may only be {}",
                    ALLOWED_CAPS.join(", ")
                ),
            ));
        }
        if !out.iter().any(|c| c == name) {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

/// Whether a sysctl key is namespaced (see [`ALLOWED_SYSCTLS`]).
pub fn sysctl_allowed(key: &str) -> bool {
    let well_formed = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        && !key.split(['.', '/']).any(|p| p.is_empty() || p == "..");
    well_formed
        && ALLOWED_SYSCTLS
            .iter()
            .any(|rule| match rule.strip_suffix('*') {
                Some(prefix) => key.starts_with(prefix),
                None if rule.ends_with('.') => key.starts_with(rule),
                None => key == *rule,
            })
}

/// The sysctls with their values as the kernel takes them.
pub(crate) fn check_sysctls(
    sysctls: &BTreeMap<String, SysctlValue>,
) -> Result<BTreeMap<String, String>, ValidationError> {
    too_many("sysctls", sysctls.len())?;
    let mut out = BTreeMap::new();
    for (key, value) in sysctls {
        let field = format!("sysctls.{key}");
        if !sysctl_allowed(key) {
            return Err(ValidationError::new(
                field,
                format!(
                    "{key:?} is not a namespaced sysctl: sysctls may only be net.*, kernel.msg*, kernel.sem, kernel.shm*, fs.mqueue.*"
                ),
            ));
        }
        let text = match &value.0 {
            Value::Bool(b) => if *b { "1" } else { "0" }.to_owned(),
            Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
            Value::String(s)
                if !s.trim().is_empty()
                    && s.len() <= MAX_SYSCTL_VALUE
                    && !s.chars().any(char::is_control) =>
            {
                s.clone()
            }
            other => {
                return Err(ValidationError::new(
                    field,
                    format!(
                        "{other} is not a sysctl value (a string of at most {MAX_SYSCTL_VALUE} bytes without control characters, a whole number or a boolean)"
                    ),
                ));
            }
        };
        out.insert(key.clone(), text);
    }
    Ok(out)
}

/// The device paths: absolute under `/dev/`, plain components, no GPU device, each once.
pub(crate) fn check_devices(devices: &[String]) -> Result<Vec<String>, ValidationError> {
    too_many("devices", devices.len())?;
    for (i, path) in devices.iter().enumerate() {
        let field = format!("devices[{i}]");
        let plain = path.starts_with("/dev/")
            && !path.contains([':', ','])
            && !path.chars().any(|c| c.is_control() || c.is_whitespace())
            && path[1..]
                .split('/')
                .all(|p| !p.is_empty() && p != "." && p != "..");
        if !plain {
            return Err(ValidationError::new(
                field,
                format!(
                    "{path:?} is not a host device path (absolute under /dev/, no '.', '..', empty components, ':' or ',')"
                ),
            ));
        }
        if is_gpu_device(path) {
            return Err(ValidationError::new(
                field,
                format!("{path:?} is a gpu device: ask for gpus with the gpu intent instead"),
            ));
        }
        if devices[..i].contains(path) {
            return Err(ValidationError::new(
                field,
                format!("{path:?} is listed twice"),
            ));
        }
    }
    Ok(devices.to_vec())
}

fn too_many(field: &str, n: usize) -> Result<(), ValidationError> {
    if n > MAX_HOST_ACCESS_ENTRIES {
        return Err(ValidationError::new(
            field,
            format!("has {n} entries, the limit is {MAX_HOST_ACCESS_ENTRIES}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
