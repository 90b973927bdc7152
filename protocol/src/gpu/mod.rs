//! GPU intent in an app spec, wire-compatible with ODAC: the request type with its validation
//! (`request`), the lenient, spelling-preserving field values (`fields`) and the NVIDIA driver
//! capabilities with the toolkit's rule for the effective set (`capabilities`), and the
//! least VRAM a GPU must have (`vram`).

mod capabilities;
mod fields;
mod request;
mod vram;

pub use capabilities::{
    ALL_CAPABILITIES, DRIVER_CAPABILITIES_ENV, DriverCapabilities, DriverCapability,
    GpuCapabilitiesValue,
};
pub use fields::{GpuCountValue, GpuOptionalValue, GpuRuntime, GpuVendor};
pub(crate) use request::deserialize_opt_gpu;
pub use request::{GpuCount, GpuRequest};
pub use vram::{GpuVramValue, MAX_MIN_VRAM_MIB};
