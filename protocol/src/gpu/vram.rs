//! `gpu.min_vram_mib`: the least video memory, in MiB, a GPU must have to be chosen for the
//! app (an LLM's weights, a transcoder's frames). Kept as sent, like the other fields, and
//! checked by [`GpuVramValue::parse`] with the field named.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validation::ValidationError;

/// The largest `min_vram_mib` accepted: 1 TiB.
pub const MAX_MIN_VRAM_MIB: u32 = 1024 * 1024;

/// `gpu.min_vram_mib` exactly as sent: a whole number 1..=1048576 or a numeric string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuVramValue(pub Box<Value>);

impl JsonSchema for GpuVramValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GpuMinVramMib".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Least VRAM in MiB a GPU must have to be chosen (free, where the agent has a telemetry reading younger than 30 s, else total): a whole number 1..=1048576 (or the same digits in a string). Absent: any GPU.",
            "oneOf": [
                {"type": "integer", "minimum": 1, "maximum": 1048576},
                {"type": "string", "pattern": "^\\s*[0-9]+\\s*$"}
            ]
        })
    }
}

impl GpuVramValue {
    /// The value for `mib`.
    pub fn new(mib: u32) -> GpuVramValue {
        GpuVramValue(Box::new(Value::from(mib)))
    }

    /// Parses the value; the error names `gpu.min_vram_mib`.
    pub fn parse(&self) -> Result<u32, ValidationError> {
        let err = |m: String| ValidationError::new("gpu.min_vram_mib", m);
        let n = match self.0.as_ref() {
            Value::Number(n) => n.as_u64().ok_or_else(|| {
                err(format!(
                    "{n} is not a whole number of MiB in 1..={MAX_MIN_VRAM_MIB}"
                ))
            })?,
            Value::String(s) => s.trim().parse::<u64>().map_err(|_| {
                err(format!(
                    "{s:?} is not a whole number of MiB in 1..={MAX_MIN_VRAM_MIB}"
                ))
            })?,
            other => {
                return Err(err(format!(
                    "{other} is not a whole number of MiB in 1..={MAX_MIN_VRAM_MIB}"
                )));
            }
        };
        u32::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_MIN_VRAM_MIB).contains(n))
            .ok_or_else(|| err(format!("{n} is out of range 1..={MAX_MIN_VRAM_MIB}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_with_the_field_named() {
        let p = |v: Value| GpuVramValue(Box::new(v)).parse().map_err(|e| e.to_string());
        assert_eq!(p(serde_json::json!(20000)), Ok(20000));
        assert_eq!(p(serde_json::json!("8000")), Ok(8000));
        assert_eq!(
            p(serde_json::json!(0)),
            Err("gpu.min_vram_mib: 0 is out of range 1..=1048576".to_owned())
        );
        assert_eq!(
            p(serde_json::json!(1.5)),
            Err("gpu.min_vram_mib: 1.5 is not a whole number of MiB in 1..=1048576".to_owned())
        );
        assert!(p(serde_json::json!("16g")).is_err());
        assert!(p(serde_json::json!(-1)).is_err());
    }
}
