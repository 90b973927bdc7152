//! NVIDIA driver capabilities: which driver libraries the container toolkit mounts into a
//! container (`compute` → `libcuda`, `video` → `libnvidia-encode`/`libnvcuvid`, `utility` →
//! `libnvidia-ml` and `nvidia-smi`, …). [`GpuCapabilitiesValue`] is the intent's
//! `gpu.capabilities` as sent (a list or a comma-separated string); [`DriverCapabilities`]
//! is a parsed set, and [`DriverCapabilities::effective`] is the toolkit's own rule for the
//! set a container gets: the intent's, else the image's `NVIDIA_DRIVER_CAPABILITIES`, else
//! `compute,utility`.

use std::collections::BTreeSet;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validation::ValidationError;

/// The environment variable the toolkit reads the capabilities from.
pub const DRIVER_CAPABILITIES_ENV: &str = "NVIDIA_DRIVER_CAPABILITIES";

/// One NVIDIA driver capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriverCapability {
    /// CUDA and OpenCL (`libcuda.so.1`).
    Compute,
    /// `nvidia-smi` and NVML (`libnvidia-ml.so.1`).
    Utility,
    /// NVENC/NVDEC video encode and decode (`libnvidia-encode.so.1`, `libnvcuvid.so.1`).
    Video,
    /// OpenGL and Vulkan.
    Graphics,
    /// X11 display.
    Display,
    /// 32-bit libraries.
    Compat32,
}

/// Every capability, in the order they are shown.
pub const ALL_CAPABILITIES: [DriverCapability; 6] = [
    DriverCapability::Compute,
    DriverCapability::Utility,
    DriverCapability::Video,
    DriverCapability::Graphics,
    DriverCapability::Display,
    DriverCapability::Compat32,
];

const EXPECTED: &str = "compute, utility, video, graphics, display, compat32 or all";

impl DriverCapability {
    /// The toolkit's name.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverCapability::Compute => "compute",
            DriverCapability::Utility => "utility",
            DriverCapability::Video => "video",
            DriverCapability::Graphics => "graphics",
            DriverCapability::Display => "display",
            DriverCapability::Compat32 => "compat32",
        }
    }

    /// Parses one name (case ignored, blanks trimmed).
    pub fn from_name(name: &str) -> Option<DriverCapability> {
        let name = name.trim();
        ALL_CAPABILITIES
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(name))
    }
}

/// A set of driver capabilities, shown in [`ALL_CAPABILITIES`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DriverCapabilities(BTreeSet<DriverCapability>);

impl DriverCapabilities {
    /// `compute,utility`: what the toolkit mounts when nothing says otherwise.
    pub fn toolkit_default() -> DriverCapabilities {
        [DriverCapability::Compute, DriverCapability::Utility]
            .into_iter()
            .collect()
    }

    /// Every capability (`all`).
    pub fn all() -> DriverCapabilities {
        ALL_CAPABILITIES.into_iter().collect()
    }

    /// The set with `c` added.
    #[must_use]
    pub fn with(mut self, c: DriverCapability) -> DriverCapabilities {
        self.0.insert(c);
        self
    }

    /// Whether `c` is in the set.
    pub fn contains(&self, c: DriverCapability) -> bool {
        self.0.contains(&c)
    }

    /// True when the set has every capability.
    pub fn is_all(&self) -> bool {
        self.0.len() == ALL_CAPABILITIES.len()
    }

    /// The names, in [`ALL_CAPABILITIES`] order.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|c| c.as_str().to_owned()).collect()
    }

    /// Parses names (`all` means every one); the first unknown name is the error.
    pub fn parse<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<DriverCapabilities, String> {
        let mut set = BTreeSet::new();
        for name in names {
            if name.trim().eq_ignore_ascii_case("all") {
                set.extend(ALL_CAPABILITIES);
            } else if let Some(c) = DriverCapability::from_name(name) {
                set.insert(c);
            } else {
                return Err(name.trim().to_owned());
            }
        }
        Ok(DriverCapabilities(set))
    }

    /// A comma-separated list (`video,compute`); empty names are skipped.
    pub fn parse_list(list: &str) -> Result<DriverCapabilities, String> {
        Self::parse(list.split(',').filter(|n| !n.trim().is_empty()))
    }

    /// The set the toolkit gives a container: `requested` when the intent names one; else
    /// the image's `NVIDIA_DRIVER_CAPABILITIES` (`all`, or the known names in it); else every
    /// capability for a legacy CUDA image (`CUDA_VERSION` without `NVIDIA_REQUIRE_CUDA`);
    /// else `compute,utility`. `image_env` is the image's `KEY=VALUE` list.
    pub fn effective(
        requested: Option<&DriverCapabilities>,
        image_env: &[String],
    ) -> DriverCapabilities {
        if let Some(r) = requested.filter(|r| !r.0.is_empty()) {
            return r.clone();
        }
        let env = |key: &str| {
            image_env
                .iter()
                .rev()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        };
        match env(DRIVER_CAPABILITIES_ENV) {
            Some(list) if !list.trim().is_empty() => {
                let known = list.split(',').filter(|n| {
                    n.trim().eq_ignore_ascii_case("all") || DriverCapability::from_name(n).is_some()
                });
                let set = Self::parse(known).unwrap_or_default();
                if set.0.is_empty() {
                    Self::toolkit_default()
                } else {
                    set
                }
            }
            Some(_) => Self::toolkit_default(),
            None if env("CUDA_VERSION").is_some() && env("NVIDIA_REQUIRE_CUDA").is_none() => {
                Self::all()
            }
            None => Self::toolkit_default(),
        }
    }

    /// The short form for tables: `all`, or the names joined with `,`.
    pub fn short(&self) -> String {
        if self.is_all() {
            "all".to_owned()
        } else {
            self.names().join(",")
        }
    }
}

impl FromIterator<DriverCapability> for DriverCapabilities {
    fn from_iter<I: IntoIterator<Item = DriverCapability>>(iter: I) -> Self {
        DriverCapabilities(iter.into_iter().collect())
    }
}

impl fmt::Display for DriverCapabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

/// `gpu.capabilities` exactly as sent: a list of names (`["video", "compute"]`) or one
/// comma-separated string (`"video,compute"`, the toolkit's spelling). Any JSON value is
/// accepted here and checked by [`GpuCapabilitiesValue::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuCapabilitiesValue(pub Box<Value>);

impl JsonSchema for GpuCapabilitiesValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GpuCapabilities".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "NVIDIA driver capabilities: a list of compute, utility, video, graphics, display, compat32 or all (case ignored), or the same names in one comma-separated string. Absent: the image's NVIDIA_DRIVER_CAPABILITIES, else compute,utility.",
            "oneOf": [
                {"type": "array", "items": {"type": "string"}},
                {"type": "string"}
            ]
        })
    }
}

impl GpuCapabilitiesValue {
    /// The value for a set (a list of names).
    pub fn from_set(set: &DriverCapabilities) -> GpuCapabilitiesValue {
        GpuCapabilitiesValue::new(Value::from(set.names()))
    }

    /// The value as sent (boxed: a status carries the request and must stay small).
    pub fn new(value: Value) -> GpuCapabilitiesValue {
        GpuCapabilitiesValue(Box::new(value))
    }

    /// Parses the value; the error names `gpu.capabilities`.
    pub fn parse(&self) -> Result<DriverCapabilities, ValidationError> {
        let err = |m: String| ValidationError::new("gpu.capabilities", m);
        let unknown = |n: String| err(format!("unknown capability {n:?} (expected {EXPECTED})"));
        let set = match self.0.as_ref() {
            Value::String(s) => DriverCapabilities::parse_list(s).map_err(unknown)?,
            Value::Array(items) => {
                let mut names = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(s) => names.push(s.as_str()),
                        other => return Err(err(format!("{other} is not a capability name"))),
                    }
                }
                DriverCapabilities::parse(names).map_err(unknown)?
            }
            other => {
                return Err(err(format!(
                    "{other} is not a list of capabilities (expected {EXPECTED})"
                )));
            }
        };
        if set.0.is_empty() {
            return Err(err(format!("names no capability (expected {EXPECTED})")));
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn env(kv: &[&str]) -> Vec<String> {
        kv.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn effective_follows_the_toolkit() {
        let video: DriverCapabilities = DriverCapabilities::parse(["video"]).unwrap();
        let eff = |req: Option<&DriverCapabilities>, e: &[&str]| {
            DriverCapabilities::effective(req, &env(e)).to_string()
        };
        assert_eq!(eff(None, &[]), "compute,utility");
        assert_eq!(
            eff(Some(&video), &["NVIDIA_DRIVER_CAPABILITIES=all"]),
            "video"
        );
        assert_eq!(
            eff(None, &["NVIDIA_DRIVER_CAPABILITIES=all"]),
            "compute,utility,video,graphics,display,compat32"
        );
        assert_eq!(
            eff(None, &["NVIDIA_DRIVER_CAPABILITIES=video,bogus,compute"]),
            "compute,video"
        );
        assert_eq!(
            eff(None, &["NVIDIA_DRIVER_CAPABILITIES="]),
            "compute,utility"
        );
        assert_eq!(
            eff(None, &["CUDA_VERSION=10.0"]),
            "compute,utility,video,graphics,display,compat32"
        );
        assert_eq!(
            eff(
                None,
                &["CUDA_VERSION=12.4", "NVIDIA_REQUIRE_CUDA=cuda>=12.4"]
            ),
            "compute,utility"
        );
    }

    #[test]
    fn values_parse_with_the_field_named() {
        let p = |v: Value| GpuCapabilitiesValue::new(v).parse().map(|s| s.to_string());
        assert_eq!(
            p(serde_json::json!(["Video", "compute"])).unwrap(),
            "compute,video"
        );
        assert_eq!(
            p(serde_json::json!("video, utility")).unwrap(),
            "utility,video"
        );
        assert_eq!(
            p(serde_json::json!(["all"])).unwrap(),
            DriverCapabilities::all().to_string()
        );
        assert_eq!(
            p(serde_json::json!(["vidoe"])).unwrap_err().to_string(),
            "gpu.capabilities: unknown capability \"vidoe\" (expected compute, utility, video, graphics, display, compat32 or all)"
        );
        assert!(
            p(serde_json::json!([]))
                .unwrap_err()
                .to_string()
                .starts_with("gpu.capabilities: names no capability")
        );
        assert!(
            p(serde_json::json!(5))
                .unwrap_err()
                .to_string()
                .starts_with("gpu.capabilities: 5 is not a list")
        );
        assert!(
            p(serde_json::json!([1]))
                .unwrap_err()
                .to_string()
                .starts_with("gpu.capabilities: 1 is not a capability name")
        );
        assert_eq!(DriverCapabilities::all().short(), "all");
        assert_eq!(
            DriverCapabilities::toolkit_default().short(),
            "compute,utility"
        );
    }
}
