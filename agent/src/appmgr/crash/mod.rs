//! Crashes: the crash-loop guard of one app ([`crashloop`]: the backoff between restarts,
//! reset by a long enough run) and why an app is down ([`diagnosis`]: the exit seen once with
//! its output tail, OOM kills, health, the restart policy, log rotation). What a pass
//! remembers of them across agent restarts is `reconcile/crashbook.rs`'s.

pub mod crashloop;
pub(super) mod diagnosis;
