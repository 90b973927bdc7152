//! `GpuRequest`: the GPU intent of an app, `{"runtime", "vendor", "count", "optional",
//! "capabilities", "min_vram_mib"}`.
//! Deserialisation never fails on a bad field value; [`GpuRequest::validate`] reports it with
//! the field named (`gpu.count: 0 is out of range 1..=64`). `null` and `{}` mean "no GPU".

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::capabilities::{DriverCapabilities, GpuCapabilitiesValue};
use super::fields::{GpuCountValue, GpuOptionalValue, GpuRuntime, GpuVendor};
use super::vram::GpuVramValue;
use crate::limits::MAX_GPU_COUNT;
use crate::validation::ValidationError;
use crate::vendor::Vendor;

/// The GPU intent of an app, exactly as sent. Absent fields stay absent when serialised, so a
/// request round-trips unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct GpuRequest {
    /// `nvidia`, `rocm`, `amd` (= rocm), `intel` or `auto` (= absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<GpuRuntime>,
    /// `nvidia`, `amd` or `intel`; must agree with `runtime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<GpuVendor>,
    /// 1..=64 or `"all"`; absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<GpuCountValue>,
    /// Whether the app may run on the CPU when no GPU can be had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<GpuOptionalValue>,
    /// NVIDIA driver capabilities (`["video", "compute"]` or `"video,compute"`); absent means
    /// the image's `NVIDIA_DRIVER_CAPABILITIES`, else `compute,utility`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<GpuCapabilitiesValue>,
    /// The least VRAM in MiB a GPU must have to be chosen; absent means any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_vram_mib: Option<GpuVramValue>,
}

/// How many GPUs a request wants, once validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuCount {
    /// Exactly this many (1..=64).
    N(u32),
    /// Every GPU of the vendor.
    All,
}

impl fmt::Display for GpuCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuCount::N(n) => write!(f, "{n}"),
            GpuCount::All => f.write_str("all"),
        }
    }
}

const RUNTIMES: &str = "nvidia, rocm, amd, intel or auto";
const VENDORS: &str = "nvidia, amd or intel";

impl GpuRequest {
    /// A request for `runtime` with every other field absent.
    pub fn new(runtime: GpuRuntime) -> Self {
        Self {
            runtime: Some(runtime),
            ..Self::default()
        }
    }

    /// Sets `count` to a number.
    #[must_use]
    pub fn with_count(mut self, n: u32) -> Self {
        self.count = Some(n.into());
        self
    }

    /// Sets `optional` to a bool.
    #[must_use]
    pub fn with_optional(mut self, optional: bool) -> Self {
        self.optional = Some(optional.into());
        self
    }

    /// True when no field is present: `{}` means "no GPU".
    pub fn is_empty(&self) -> bool {
        self.runtime.is_none()
            && self.vendor.is_none()
            && self.count.is_none()
            && self.optional.is_none()
            && self.capabilities.is_none()
            && self.min_vram_mib.is_none()
    }

    /// Sets `min_vram_mib`.
    #[must_use]
    pub fn with_min_vram_mib(mut self, mib: u32) -> Self {
        self.min_vram_mib = Some(GpuVramValue::new(mib));
        self
    }

    /// The least VRAM asked for, in MiB; `None` when absent or invalid (validation rejects
    /// invalid ones).
    pub fn min_vram_mib(&self) -> Option<u32> {
        self.min_vram_mib.as_ref().and_then(|v| v.parse().ok())
    }

    /// Sets `capabilities` to a list of names.
    #[must_use]
    pub fn with_capabilities(mut self, set: &DriverCapabilities) -> Self {
        self.capabilities = Some(GpuCapabilitiesValue::from_set(set));
        self
    }

    /// The driver capabilities asked for; `None` when absent or invalid (validation rejects
    /// invalid ones).
    pub fn driver_capabilities(&self) -> Option<DriverCapabilities> {
        self.capabilities.as_ref().and_then(|c| c.parse().ok())
    }

    /// The vendor asked for, from `runtime` or else `vendor`; `None` means auto (any vendor
    /// the host can serve). Meaningful after [`GpuRequest::validate`] succeeded.
    pub fn effective_vendor(&self) -> Option<Vendor> {
        self.runtime
            .as_ref()
            .and_then(GpuRuntime::vendor)
            .or_else(|| self.vendor.as_ref().and_then(GpuVendor::vendor))
    }

    /// How many GPUs are wanted; an absent or invalid count reads as [`GpuCount::All`]
    /// (validation rejects invalid ones).
    pub fn count(&self) -> GpuCount {
        self.try_count().unwrap_or(GpuCount::All)
    }

    /// Whether the app may fall back to the CPU; an absent or invalid value reads as `false`.
    pub fn is_optional(&self) -> bool {
        self.try_optional().unwrap_or(false)
    }

    /// Parses `count`; the error names `gpu.count`.
    pub fn try_count(&self) -> Result<GpuCount, ValidationError> {
        let err = |m: String| ValidationError::new("gpu.count", m);
        let range = |n: i128, shown: String| {
            if (1..=i128::from(MAX_GPU_COUNT)).contains(&n) {
                u32::try_from(n)
                    .map(GpuCount::N)
                    .map_err(|_| err(format!("{shown} is out of range 1..={MAX_GPU_COUNT}")))
            } else {
                Err(err(format!("{shown} is out of range 1..={MAX_GPU_COUNT}")))
            }
        };
        match &self.count {
            None => Ok(GpuCount::All),
            Some(GpuCountValue::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    range(i128::from(i), n.to_string())
                } else if let Some(u) = n.as_u64() {
                    range(i128::from(u), n.to_string())
                } else {
                    Err(err(format!("{n} is not a whole number")))
                }
            }
            Some(GpuCountValue::Text(s)) => {
                let t = s.trim();
                if t.eq_ignore_ascii_case("all") {
                    Ok(GpuCount::All)
                } else if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
                    let n = t.parse::<i128>().unwrap_or(i128::MAX);
                    range(n, format!("{s:?}"))
                } else {
                    Err(err(format!("{s:?} is not a number or \"all\"")))
                }
            }
            Some(GpuCountValue::Invalid(v)) => Err(err(format!("{v} is not a number or \"all\""))),
        }
    }

    /// Parses `optional`; absent is `false`; the error names `gpu.optional`.
    pub fn try_optional(&self) -> Result<bool, ValidationError> {
        match &self.optional {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| {
                ValidationError::new(
                    "gpu.optional",
                    format!(
                        "{v} is not a boolean (expected true or false, or one of \"true\", \"1\", \"yes\", \"on\", \"false\", \"0\", \"no\", \"off\")"
                    ),
                )
            }),
        }
    }

    /// Checks every field; errors are named `gpu.runtime`, `gpu.vendor`, `gpu.count`,
    /// `gpu.optional`, `gpu.capabilities` and `gpu.min_vram_mib`. An empty request (no GPU) is valid.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(GpuRuntime::Invalid(v)) = &self.runtime {
            return Err(ValidationError::new(
                "gpu.runtime",
                match v {
                    Value::String(s) => format!("unknown runtime {s:?} (expected {RUNTIMES})"),
                    other => format!("{other} is not a runtime name (expected {RUNTIMES})"),
                },
            ));
        }
        if let Some(GpuVendor::Invalid(v)) = &self.vendor {
            return Err(ValidationError::new(
                "gpu.vendor",
                match v {
                    Value::String(s) => format!("unknown vendor {s:?} (expected {VENDORS})"),
                    other => format!("{other} is not a vendor name (expected {VENDORS})"),
                },
            ));
        }
        let from_runtime = self.runtime.as_ref().and_then(GpuRuntime::vendor);
        let from_vendor = self.vendor.as_ref().and_then(GpuVendor::vendor);
        if let (Some(r), Some(v), Some(rt)) = (from_runtime, from_vendor, &self.runtime)
            && r != v
        {
            return Err(ValidationError::new(
                "gpu.vendor",
                format!("vendor \"{v}\" does not agree with runtime {rt}"),
            ));
        }
        self.try_count()?;
        let optional = self.try_optional()?;
        if let Some(c) = &self.capabilities {
            c.parse()?;
        }
        if let Some(v) = &self.min_vram_mib {
            v.parse()?;
        }
        if !self.is_empty() && from_runtime.is_none() && from_vendor.is_none() && !optional {
            return Err(ValidationError::new(
                "gpu.runtime",
                "gpu needs a runtime or a vendor unless optional",
            ));
        }
        Ok(())
    }
}

/// Deserialises an optional GPU request where `null` and `{}` both mean "no GPU" (`None`).
pub(crate) fn deserialize_opt_gpu<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<GpuRequest>, D::Error> {
    Ok(Option::<GpuRequest>::deserialize(d)?.filter(|g| !g.is_empty()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn parse(json: &str) -> GpuRequest {
        serde_json::from_str(json).unwrap()
    }

    fn err(json: &str) -> String {
        parse(json).validate().unwrap_err().to_string()
    }

    #[test]
    fn aliases_normalise_to_vendors() {
        for (json, vendor) in [
            (r#"{"runtime":"nvidia"}"#, Some(Vendor::Nvidia)),
            (r#"{"runtime":"rocm"}"#, Some(Vendor::Amd)),
            (r#"{"runtime":"amd"}"#, Some(Vendor::Amd)),
            (r#"{"runtime":"intel"}"#, Some(Vendor::Intel)),
            (r#"{"runtime":"auto","optional":true}"#, None),
            (r#"{"optional":true}"#, None),
            (r#"{"vendor":"amd"}"#, Some(Vendor::Amd)),
            (
                r#"{"runtime":"auto","vendor":"intel"}"#,
                Some(Vendor::Intel),
            ),
            (r#"{"runtime":"amd","vendor":"amd"}"#, Some(Vendor::Amd)),
            (r#"{"runtime":"rocm","vendor":"amd"}"#, Some(Vendor::Amd)),
        ] {
            let g = parse(json);
            g.validate().unwrap();
            assert_eq!(g.effective_vendor(), vendor, "{json}");
            assert_eq!(serde_json::to_string(&g).unwrap(), json, "round trip");
        }
    }

    #[test]
    fn counts() {
        for (json, count) in [
            (r#"{"runtime":"nvidia"}"#, GpuCount::All),
            (r#"{"runtime":"nvidia","count":1}"#, GpuCount::N(1)),
            (r#"{"runtime":"nvidia","count":64}"#, GpuCount::N(64)),
            (r#"{"runtime":"nvidia","count":"2"}"#, GpuCount::N(2)),
            (r#"{"runtime":"nvidia","count":"all"}"#, GpuCount::All),
            (r#"{"runtime":"nvidia","count":"ALL"}"#, GpuCount::All),
        ] {
            let g = parse(json);
            g.validate().unwrap();
            assert_eq!(g.count(), count, "{json}");
            assert_eq!(serde_json::to_string(&g).unwrap(), json, "round trip");
        }
    }

    #[test]
    fn optional_spellings() {
        for (v, b) in [
            ("true", true),
            ("false", false),
            (r#""true""#, true),
            (r#""1""#, true),
            (r#""yes""#, true),
            (r#""on""#, true),
            (r#""On""#, true),
            (r#""0""#, false),
            (r#""no""#, false),
            (r#""off""#, false),
        ] {
            let json = format!(r#"{{"runtime":"intel","optional":{v}}}"#);
            let g = parse(&json);
            g.validate().unwrap();
            assert_eq!(g.is_optional(), b, "{json}");
            assert_eq!(serde_json::to_string(&g).unwrap(), json, "round trip");
        }
    }

    #[test]
    fn invalid_cases_name_the_field() {
        let cases = [
            (
                r#"{"runtime":"nvidia","count":0}"#,
                "gpu.count: 0 is out of range 1..=64",
            ),
            (
                r#"{"runtime":"nvidia","count":65}"#,
                "gpu.count: 65 is out of range 1..=64",
            ),
            (
                r#"{"runtime":"nvidia","count":-1}"#,
                "gpu.count: -1 is out of range 1..=64",
            ),
            (
                r#"{"runtime":"nvidia","count":"0"}"#,
                "gpu.count: \"0\" is out of range 1..=64",
            ),
            (
                r#"{"runtime":"nvidia","count":"some"}"#,
                "gpu.count: \"some\" is not a number or \"all\"",
            ),
            (
                r#"{"runtime":"nvidia","count":1.5}"#,
                "gpu.count: 1.5 is not a whole number",
            ),
            (
                r#"{"runtime":"nvidia","vendor":"amd"}"#,
                "gpu.vendor: vendor \"amd\" does not agree with runtime \"nvidia\"",
            ),
            (
                r#"{"runtime":"cuda"}"#,
                "gpu.runtime: unknown runtime \"cuda\" (expected nvidia, rocm, amd, intel or auto)",
            ),
            (
                r#"{"vendor":"matrox"}"#,
                "gpu.vendor: unknown vendor \"matrox\" (expected nvidia, amd or intel)",
            ),
            (
                r#"{"runtime":"auto"}"#,
                "gpu.runtime: gpu needs a runtime or a vendor unless optional",
            ),
            (
                r#"{"count":1}"#,
                "gpu.runtime: gpu needs a runtime or a vendor unless optional",
            ),
            (
                r#"{"runtime":"auto","optional":false}"#,
                "gpu.runtime: gpu needs a runtime or a vendor unless optional",
            ),
        ];
        for (json, want) in cases {
            assert_eq!(err(json), want, "{json}");
        }
        assert!(
            err(r#"{"runtime":"nvidia","optional":"maybe"}"#)
                .starts_with("gpu.optional: \"maybe\" is not a boolean")
        );
        assert!(err(r#"{"runtime":5}"#).starts_with("gpu.runtime: 5 is not a runtime name"));
    }

    #[test]
    fn empty_and_null_mean_no_gpu() {
        #[derive(Deserialize)]
        struct W {
            #[serde(default, deserialize_with = "deserialize_opt_gpu")]
            gpu: Option<GpuRequest>,
        }
        for json in [
            r#"{}"#,
            r#"{"gpu":null}"#,
            r#"{"gpu":{}}"#,
            r#"{"gpu":{"count":null}}"#,
        ] {
            let w: W = serde_json::from_str(json).unwrap();
            assert_eq!(w.gpu, None, "{json}");
        }
        assert!(GpuRequest::default().validate().is_ok());
    }
}
