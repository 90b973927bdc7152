//! The app manager's GPU side on the engine: [`fallback`] (`start_with_gpu_fallback`: a
//! create or start the engine refuses for its devices goes to the CPU or fails, and the
//! classifier of those refusals), [`refusals`] (device sets the engine refused, remembered
//! per inventory so later creates skip the failed start), and the host facts the GPU decision
//! reads: [`host`] (where they come from: a root to scan or a function) and [`facts`] (the
//! latest ones, shared with the inventory loop and reused by quiet passes).

pub(super) mod facts;
pub mod fallback;
pub(super) mod host;
pub(super) mod refusals;
