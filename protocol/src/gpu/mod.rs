//! GPU intent in an app spec, wire-compatible with ODAC: the request type with its validation
//! (`request`) and the lenient, spelling-preserving field values (`fields`).

mod fields;
mod request;

pub use fields::{GpuCountValue, GpuOptionalValue, GpuRuntime, GpuVendor};
pub(crate) use request::deserialize_opt_gpu;
pub use request::{GpuCount, GpuRequest};
