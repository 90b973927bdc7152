//! The app manager: durable desired state, reconcile against the container engine with GPU
//! pre-flight and engine fallback, crash-loop guard, local policy, statuses.
//!
//! [`AppManager`] is the handle; [`AppManagerConfig`] its configuration (embedded in the
//! agent's). One folder per role: [`manager`] (the handle, its loop, engine outages and the
//! engine's event stream), `reconcile` (one pass and its parts), `rollout` (updates that
//! cannot take an app down), [`images`] (builds, pulls, credentials, the agent's image book),
//! `gc` (image clean-up), [`crash`] (the crash-loop guard, why an app is down), [`gpu`] (GPU
//! fallback, learned device refusals, host facts), [`policy`] (local policy, host binds,
//! ownership), [`state`] (state files, diagnostic events, clipped texts) and [`local`] (the
//! app manager as the local commands see it). At the root, what every role shares: `pass`
//! (what a pass and its parts share, and what is kept per app between passes), [`labels`]
//! (how containers are recognised and what they remember), [`container`] (spec → container
//! spec), `settings` (the `[apps]` table) and `error`.

pub mod container;
pub mod crash;
mod error;
mod gc;
pub mod gpu;
pub mod images;
pub mod labels;
pub mod local;
pub mod manager;
mod pass;
pub mod policy;
mod reconcile;
mod rollout;
mod settings;
pub mod state;

pub use error::{AppMgrError, StoreError};
pub use gpu::fallback::{StartOutcome, is_device_refusal, start_with_gpu_fallback};
pub use gpu::host::HostSource;
pub use images::registry_auth::Credentials;
pub use manager::{AppManager, Applied};
pub use settings::{
    AppManagerConfig, BuildConfig, CrashLoopConfig, DEFAULT_STATE_DIR, PolicyConfig,
};
pub use state::events::{AppEvent, ImageRemoved, RemovalReason};
