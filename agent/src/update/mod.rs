//! Self-update: signed releases staged beside the packaged binary, started by the packaged
//! binary's launcher, committed once they proved themselves and rolled back on their own.
//!
//! Pieces: [`keys`] (the trusted ed25519 keys of `[update] public_keys`), [`manifest`] (the
//! signed release manifest and every refusal), [`version`] (release version order), [`fetch`]
//! (the download, in resumed ranges), [`stage`] (disk check, size/hash check and the
//! versioned directory under the state dir), [`state`]
//! (`update/current.json`, the boot-counting record), [`launch`] (what `odac-agent run`
//! executes before anything else) and [`commit`] (the running version's commit deadline).

pub mod commit;
pub mod fetch;
pub mod keys;
pub mod launch;
pub mod manifest;
pub mod stage;
pub mod state;
pub mod task;
pub mod version;
pub mod wire;

use serde::Deserialize;

pub use keys::{KeyError, PublicKey, TrustedKeys};
pub use manifest::{Manifest, ManifestError, SignedManifest};
pub use state::{CurrentUpdate, UpdateState};

/// Default commit window of a new version, seconds.
pub const DEFAULT_COMMIT_WITHIN_SECS: u64 = 120;
/// Allowed commit windows, seconds.
pub const COMMIT_WITHIN_RANGE: (u64, u64) = (10, 3600);

/// The target triple this build runs on, e.g. `x86_64-unknown-linux-gnu` (a manifest for
/// another one is refused).
pub fn target() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// `[update]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateConfig {
    /// Keys a release manifest may be signed with, `ed25519:<base64 of 32 bytes>`. Empty: no
    /// update is ever accepted.
    #[serde(default)]
    pub public_keys: Vec<String>,
    /// A new version that has not connected and completed a reconcile pass this long after
    /// it started is rolled back, seconds.
    #[serde(default = "default_commit_within_secs")]
    pub commit_within_secs: u64,
    /// Whether an older version may be installed (the manifest must say so too).
    #[serde(default)]
    pub allow_downgrade: bool,
}

impl Default for UpdateConfig {
    fn default() -> Self {
        Self {
            public_keys: Vec::new(),
            commit_within_secs: DEFAULT_COMMIT_WITHIN_SECS,
            allow_downgrade: false,
        }
    }
}

fn default_commit_within_secs() -> u64 {
    DEFAULT_COMMIT_WITHIN_SECS
}

impl UpdateConfig {
    /// The trusted keys; an unparsable one names its index.
    pub fn trusted_keys(&self) -> Result<TrustedKeys, KeyError> {
        TrustedKeys::parse(&self.public_keys)
    }

    /// The commit window.
    pub fn commit_within(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.commit_within_secs)
    }
}
