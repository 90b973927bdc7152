//! The four fields of a GPU request as they travel on the wire. Each keeps the spelling that
//! was sent (`"amd"` stays `"amd"`, `"1"` stays `"1"`), so a request is echoed back unchanged,
//! and each accepts any JSON value: a value that is not valid is kept as `Invalid` and
//! reported by validation with the field named, instead of failing deserialisation.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::vendor::Vendor;

/// `gpu.runtime`: which vendor stack serves the request. `amd` is an alias of `rocm`;
/// `auto` (like an absent runtime) lets the host decide.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GpuRuntime {
    /// `nvidia`.
    Nvidia,
    /// `rocm` (AMD).
    Rocm,
    /// `amd`, an alias of `rocm`.
    Amd,
    /// `intel`.
    Intel,
    /// `auto`: any vendor this host can serve.
    Auto,
    /// Anything else, kept as sent; validation rejects it.
    Invalid(Value),
}

impl GpuRuntime {
    /// Parses a known runtime name (exact, lowercase).
    pub fn from_wire(s: &str) -> Option<GpuRuntime> {
        Some(match s {
            "nvidia" => GpuRuntime::Nvidia,
            "rocm" => GpuRuntime::Rocm,
            "amd" => GpuRuntime::Amd,
            "intel" => GpuRuntime::Intel,
            "auto" => GpuRuntime::Auto,
            _ => return None,
        })
    }

    /// The wire spelling of a known runtime; `None` for `Invalid`.
    pub fn as_str(&self) -> Option<&'static str> {
        Some(match self {
            GpuRuntime::Nvidia => "nvidia",
            GpuRuntime::Rocm => "rocm",
            GpuRuntime::Amd => "amd",
            GpuRuntime::Intel => "intel",
            GpuRuntime::Auto => "auto",
            GpuRuntime::Invalid(_) => return None,
        })
    }

    /// The vendor this runtime names: `rocm` and `amd` both mean AMD; `auto` and invalid
    /// values name none.
    pub fn vendor(&self) -> Option<Vendor> {
        match self {
            GpuRuntime::Nvidia => Some(Vendor::Nvidia),
            GpuRuntime::Rocm | GpuRuntime::Amd => Some(Vendor::Amd),
            GpuRuntime::Intel => Some(Vendor::Intel),
            GpuRuntime::Auto | GpuRuntime::Invalid(_) => None,
        }
    }

    /// The canonical runtime for a vendor (`rocm` for AMD).
    pub fn for_vendor(vendor: Vendor) -> GpuRuntime {
        match vendor {
            Vendor::Nvidia => GpuRuntime::Nvidia,
            Vendor::Amd => GpuRuntime::Rocm,
            Vendor::Intel => GpuRuntime::Intel,
        }
    }

    fn to_value(&self) -> Value {
        match (self, self.as_str()) {
            (GpuRuntime::Invalid(v), _) => v.clone(),
            (_, Some(s)) => Value::String(s.to_owned()),
            (_, None) => Value::Null,
        }
    }
}

impl fmt::Display for GpuRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

impl Serialize for GpuRuntime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for GpuRuntime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(v.as_str()
            .and_then(GpuRuntime::from_wire)
            .unwrap_or(GpuRuntime::Invalid(v)))
    }
}

impl JsonSchema for GpuRuntime {
    fn schema_name() -> Cow<'static, str> {
        "GpuRuntime".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Vendor stack serving the request; `amd` is an alias of `rocm`, `auto` (or absent) lets the host pick.",
            "type": "string",
            "enum": ["nvidia", "rocm", "amd", "intel", "auto"]
        })
    }
}

/// `gpu.vendor`: the vendor, which must agree with `runtime` when both are given.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GpuVendor {
    /// `nvidia`, `amd` or `intel`.
    Known(Vendor),
    /// Anything else, kept as sent; validation rejects it.
    Invalid(Value),
}

impl GpuVendor {
    /// The vendor, if the value is valid.
    pub fn vendor(&self) -> Option<Vendor> {
        match self {
            GpuVendor::Known(v) => Some(*v),
            GpuVendor::Invalid(_) => None,
        }
    }

    fn to_value(&self) -> Value {
        match self {
            GpuVendor::Known(v) => Value::String(v.as_str().to_owned()),
            GpuVendor::Invalid(v) => v.clone(),
        }
    }
}

impl From<Vendor> for GpuVendor {
    fn from(v: Vendor) -> Self {
        GpuVendor::Known(v)
    }
}

impl fmt::Display for GpuVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

impl Serialize for GpuVendor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for GpuVendor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(match v.as_str().and_then(Vendor::from_wire) {
            Some(known) => GpuVendor::Known(known),
            None => GpuVendor::Invalid(v),
        })
    }
}

impl JsonSchema for GpuVendor {
    fn schema_name() -> Cow<'static, str> {
        "GpuVendor".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "GPU vendor; must agree with `runtime` when both are given.",
            "type": "string",
            "enum": ["nvidia", "amd", "intel"]
        })
    }
}

/// `gpu.count` as sent: a number 1..=64, a numeric string, or `"all"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GpuCountValue {
    /// A JSON number (validation wants a whole number in 1..=64).
    Number(serde_json::Number),
    /// A JSON string: `"all"` or a number such as `"2"`.
    Text(String),
    /// Anything else, kept as sent; validation rejects it.
    Invalid(Value),
}

impl GpuCountValue {
    fn to_value(&self) -> Value {
        match self {
            GpuCountValue::Number(n) => Value::Number(n.clone()),
            GpuCountValue::Text(s) => Value::String(s.clone()),
            GpuCountValue::Invalid(v) => v.clone(),
        }
    }
}

impl From<u32> for GpuCountValue {
    fn from(n: u32) -> Self {
        GpuCountValue::Number(n.into())
    }
}

impl fmt::Display for GpuCountValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

impl Serialize for GpuCountValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for GpuCountValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Number(n) => GpuCountValue::Number(n),
            Value::String(s) => GpuCountValue::Text(s),
            other => GpuCountValue::Invalid(other),
        })
    }
}

impl JsonSchema for GpuCountValue {
    fn schema_name() -> Cow<'static, str> {
        "GpuCountValue".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Number of GPUs, 1..=64, as a number or a numeric string, or \"all\"; absent means all.",
            "anyOf": [
                { "type": "integer", "minimum": 1, "maximum": 64 },
                { "type": "string", "pattern": "^\\s*([Aa][Ll][Ll]|[0-9]+)\\s*$" }
            ]
        })
    }
}

/// `gpu.optional` as sent: a bool, or one of the strings `true`/`1`/`yes`/`on` (and their
/// negations `false`/`0`/`no`/`off`), case-insensitive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GpuOptionalValue {
    /// A JSON boolean.
    Bool(bool),
    /// A JSON string.
    Text(String),
    /// Anything else, kept as sent; validation rejects it.
    Invalid(Value),
}

impl GpuOptionalValue {
    /// The string spellings read as `true`.
    pub const TRUE_WORDS: [&'static str; 4] = ["true", "1", "yes", "on"];
    /// The string spellings read as `false`.
    pub const FALSE_WORDS: [&'static str; 4] = ["false", "0", "no", "off"];

    /// The boolean this value means, or `None` when it means neither.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            GpuOptionalValue::Bool(b) => Some(*b),
            GpuOptionalValue::Text(s) => {
                let s = s.trim().to_ascii_lowercase();
                if Self::TRUE_WORDS.contains(&s.as_str()) {
                    Some(true)
                } else if Self::FALSE_WORDS.contains(&s.as_str()) {
                    Some(false)
                } else {
                    None
                }
            }
            GpuOptionalValue::Invalid(_) => None,
        }
    }

    fn to_value(&self) -> Value {
        match self {
            GpuOptionalValue::Bool(b) => Value::Bool(*b),
            GpuOptionalValue::Text(s) => Value::String(s.clone()),
            GpuOptionalValue::Invalid(v) => v.clone(),
        }
    }
}

impl From<bool> for GpuOptionalValue {
    fn from(b: bool) -> Self {
        GpuOptionalValue::Bool(b)
    }
}

impl fmt::Display for GpuOptionalValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

impl Serialize for GpuOptionalValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for GpuOptionalValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Bool(b) => GpuOptionalValue::Bool(b),
            Value::String(s) => GpuOptionalValue::Text(s),
            other => GpuOptionalValue::Invalid(other),
        })
    }
}

impl JsonSchema for GpuOptionalValue {
    fn schema_name() -> Cow<'static, str> {
        "GpuOptionalValue".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Whether the app may start without a GPU: a bool, or \"true\"/\"1\"/\"yes\"/\"on\" (\"false\"/\"0\"/\"no\"/\"off\"), case-insensitive.",
            "anyOf": [
                { "type": "boolean" },
                { "type": "string" }
            ]
        })
    }
}
