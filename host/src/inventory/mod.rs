//! Host inventory: what GPUs, drivers, device nodes and container tooling this host has,
//! read under a configurable root so tests can point it at fixture trees.
//!
//! [`scan`] produces a [`HostScan`] (domain types in [`model`]); [`verdict`] decides per
//! vendor whether a GPU can be passed into a container and how; an [`Assessment`] bundles
//! both with the engine's capabilities and is what the app manager allocates from. The wire
//! conversion ([`wire`]), the change hash ([`change`]), the `inventory` table ([`report`])
//! and the `doctor` checks ([`doctor`]) build on it; the commands live in the agent's `cli`.

mod amd;
pub mod assess;
pub mod cdi;
pub mod change;
pub mod cuda;
pub mod details;
pub mod doctor;
pub mod fsread;
mod host;
pub mod model;
mod nvidia;
mod pci;
mod pciids;
pub mod report;
mod scan;
pub mod verdict;
pub mod wire;

pub use assess::Assessment;
pub use change::{ChangeDetector, inventory_hash};
pub use model::{
    AmdGpu, AmdHost, CdiDevice, CdiScan, CdiSpec, DeviceNode, Gpu, HostFacts, HostScan, KfdNode,
    NvidiaGpu, NvidiaHost, OtherDevice, PciIds, ScanProblem, ToolkitBinary, Vendor,
};
pub use scan::scan;
pub use verdict::{GpuProblem, VendorVerdict, gpu_problem, verdicts};
