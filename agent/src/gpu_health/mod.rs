//! GPU health: what the kernel says about each GPU (NVIDIA Xids, AMD ring timeouts and
//! resets, Intel hangs), which GPUs are therefore `unhealthy`, and when they are trusted
//! again. [`xid`] is NVIDIA's Xid catalog, [`classify`] turns one kernel log line into a GPU
//! event (pure), [`kmsg`] follows `<host_root>/dev/kmsg` from the agent's start onward on its
//! own thread, [`book`] keeps each GPU's health and decides recovery, [`task`] wires them to
//! the inventory, the app manager and the uplink's events.

pub mod book;
pub mod classify;
pub mod config;
pub mod doctor;
pub mod kmsg;
pub mod task;
pub mod xid;

pub use book::{Change, HealthBook, Recovery};
pub use classify::{GpuKernelEvent, Severity, classify};
pub use config::GpuHealthConfig;
pub use task::{GpuHealthMonitor, health_loop};
pub use xid::{XidClass, XidInfo, xid_info};
