//! GPU health: what the kernel says about each GPU (NVIDIA Xids, AMD ring timeouts and resets,
//! Intel hangs), which GPUs are therefore `unhealthy`, and when they are trusted again. NVIDIA's
//! Xid catalog and the classification of one kernel log line into a GPU event (pure) are
//! `odac_host::gpu_health`; [`kmsg`] follows `<host_root>/dev/kmsg` from the agent's start onward
//! on its own thread, [`book`] keeps each GPU's health and decides recovery, [`task`] wires them to
//! the inventory, the app manager and the uplink's events.

pub mod book;
pub mod config;
pub mod doctor;
pub mod kmsg;
pub mod task;

pub use book::{Change, HealthBook, Recovery};
pub use config::GpuHealthConfig;
pub use task::{GpuHealthMonitor, health_loop};
