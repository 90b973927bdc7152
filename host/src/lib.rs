//! `odac-host`: what both the agent and the simulator need of a host, so that the simulator
//! does not depend on the agent. The container engine seam ([`engine`], the only module that
//! imports bollard), the GPU inventory ([`inventory`]) and placement ([`gpu`]), the kernel-log
//! classification of GPU faults ([`gpu_health`]), the poison-tolerant [`lock`], atomic file
//! writes ([`atomic_file`]), the small HTTP client ([`http_client`]), the log caps on noisy
//! dependencies ([`log_caps`]), the apps' GPUs ([`app_gpus`]) and the label and container names
//! ([`names`]). It depends on `odac-protocol` and external crates only.

pub mod app_gpus;
pub mod atomic_file;
pub mod engine;
pub mod gpu;
pub mod gpu_health;
pub mod http_client;
pub mod inventory;
pub mod lock;
pub mod log_caps;
pub mod names;
