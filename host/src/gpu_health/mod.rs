//! The pure part of GPU health, shared with the simulator's GPU lab: [`xid`] is NVIDIA's Xid
//! catalog and [`classify`](mod@classify) turns one kernel log line into a GPU event.
//! Following the kernel log and keeping each GPU's health is the agent's own `gpu_health`
//! module.

pub mod classify;
pub mod xid;

pub use classify::{GpuKernelEvent, Severity, classify};
pub use xid::{XidClass, XidInfo, xid_info};
