//! Agent self-update on the wire. `update_offer` (control plane → agent, acked by `seq`)
//! carries a [`SignedRelease`]: the release manifest's JSON text exactly as signed, and an
//! ed25519 signature of those bytes. `update_status` (agent → control plane, a report with a
//! `seq`) says where the update of the host stands: downloading (with progress), staged,
//! switching, committed, or failed/refused with the cause. The agent verifies the signature
//! against its own trusted keys before it parses the manifest; this crate checks shapes only.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{ValidationError, check_len, check_opt_string, check_required};

/// Longest manifest text, bytes.
pub const MAX_MANIFEST: usize = 4096;
/// Longest version string, bytes.
pub const MAX_VERSION: usize = 64;

/// `update_offer`: install this release.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct UpdateOffer {
    /// Sequence number the agent acks once it has taken the offer in hand.
    pub seq: u64,
    /// The signed release.
    pub release: SignedRelease,
}

/// A release manifest and its signature.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct SignedRelease {
    /// The [`ReleaseManifest`] as JSON text, byte for byte what was signed.
    pub manifest: String,
    /// Base64 of the 64-byte ed25519 signature of `manifest`'s UTF-8 bytes.
    pub signature: String,
}

/// What a release is: signed by the release key, checked by the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseManifest {
    /// Agent version, `MAJOR.MINOR.PATCH`.
    pub version: String,
    /// Target triple, e.g. `x86_64-unknown-linux-gnu`.
    pub target: String,
    /// Size of the artefact (the agent binary), bytes.
    pub size: u64,
    /// Lowercase hex SHA-256 of the artefact.
    pub sha256: String,
    /// `http(s)://` URL of the artefact.
    pub url: String,
    /// Whether hosts on a newer version may install this one (their config must allow it too).
    #[serde(default)]
    pub allow_downgrade: bool,
}

/// `update_status`: where this host's update stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct UpdateStatusReport {
    /// Report sequence number.
    pub seq: u64,
    /// The version being installed (or refused).
    pub version: String,
    /// The phase.
    pub phase: UpdatePhase,
    /// Bytes downloaded so far (`downloading`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The artefact's size (`downloading`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Why (`refused`, `update_failed`), or what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The phases of an update.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpdatePhase {
    /// The artefact is being fetched.
    #[default]
    Downloading,
    /// Verified and staged; the agent restarts into it.
    Staged,
    /// The new version is running and has not committed yet.
    Pending,
    /// The new version proved itself and is kept.
    Committed,
    /// The new version did not commit; the host is back on the previous one.
    UpdateFailed,
    /// The offer was refused (signature, key, target, size, hash, disk, downgrade).
    Refused,
}

impl UpdatePhase {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdatePhase::Downloading => "downloading",
            UpdatePhase::Staged => "staged",
            UpdatePhase::Pending => "pending",
            UpdatePhase::Committed => "committed",
            UpdatePhase::UpdateFailed => "update_failed",
            UpdatePhase::Refused => "refused",
        }
    }

    /// Whether the update is over (nothing more will be reported for this version).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            UpdatePhase::Committed | UpdatePhase::UpdateFailed | UpdatePhase::Refused
        )
    }
}

impl SignedRelease {
    /// Checks the shapes (the signature itself is the agent's to check).
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_required("release.manifest", &self.manifest)?;
        check_len("release.manifest", &self.manifest, MAX_MANIFEST)?;
        check_required("release.signature", &self.signature)?;
        check_len("release.signature", &self.signature, 128)
    }
}

impl ReleaseManifest {
    /// Checks every field; errors name it.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_version("version", &self.version)?;
        check_required("target", &self.target)?;
        check_len("target", &self.target, 128)?;
        if self.size == 0 {
            return Err(ValidationError::new("size", "must not be 0"));
        }
        if self.sha256.len() != 64
            || !self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(ValidationError::new(
                "sha256",
                "must be 64 lowercase hex digits",
            ));
        }
        check_required("url", &self.url)?;
        check_len("url", &self.url, 2048)?;
        if !(self.url.starts_with("https://") || self.url.starts_with("http://")) {
            return Err(ValidationError::new("url", "must be an http(s) url"));
        }
        Ok(())
    }
}

impl UpdateStatusReport {
    /// Checks every field; errors name it.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_len("version", &self.version, MAX_VERSION)?;
        check_opt_string("message", self.message.as_ref())
    }
}

/// Checks a `MAJOR.MINOR.PATCH` version (each a decimal number).
pub fn check_version(field: &str, version: &str) -> Result<(), ValidationError> {
    check_len(field, version, MAX_VERSION)?;
    if parse_version(version).is_none() {
        return Err(ValidationError::new(
            field,
            format!("{version:?} is not a MAJOR.MINOR.PATCH version"),
        ));
    }
    Ok(())
}

/// `MAJOR.MINOR.PATCH` as numbers (compare them to order versions); `None` for anything else.
pub fn parse_version(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.');
    let mut next = || -> Option<u64> {
        let p = parts.next()?;
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        p.parse().ok()
    };
    let v = (next()?, next()?, next()?);
    parts.next().is_none().then_some(v)
}
