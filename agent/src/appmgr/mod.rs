//! The app manager: durable desired state, reconcile against the container engine with GPU
//! pre-flight and engine fallback, crash-loop guard, local policy, statuses.
//!
//! [`AppManager`] is the handle; [`AppManagerConfig`] its configuration (embedded in the
//! agent's). The pieces: [`store`] (atomic state files), [`labels`] (how containers are
//! recognised and what they remember), [`ownership`] (which of them are this agent's),
//! [`policy`] and [`binds`] (which host paths may be mounted), [`container`] (spec →
//! container spec),
//! [`fallback`] (`start_with_gpu_fallback` and the engine-refusal classifier),
//! [`crashloop`], `crashbook` (crash counters kept across agent restarts), `diagnosis` (why
//! an app is down: exit, OOM kill, output tail; health; restart policy; log rotation),
//! `pass` (what a pass and its parts share, and what is kept per app between passes),
//! `reconcile` (one pass) with `admit`, `existing`, `create`, `image` and `source` (its
//! parts), `rollout` with `hand_over` (`update.order = start_first`), `image_gc` with `image_book` (removing the images the agent pulled or built once unused), `facts`, `refusals` (device sets the engine refused), `jobs` (the background-job
//! table of [`build`] and `pull`), [`build`] (apps built from git sources), [`clip`], [`events`] (diagnostic events), [`local`] (which agent set `apply` and `status` work on), [`watch`] (the engine's event stream driving the loop), and [`doctor`] (`doctor` with the ownership checks).

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
pub use state::events::{AppEvent, ImageRemoved, RemovalReason};
pub use gpu::fallback::{StartOutcome, is_device_refusal, start_with_gpu_fallback};
pub use gpu::host::HostSource;
pub use manager::{AppManager, Applied};
pub use images::registry_auth::Credentials;
pub use settings::{
    AppManagerConfig, BuildConfig, CrashLoopConfig, DEFAULT_STATE_DIR, PolicyConfig,
};
