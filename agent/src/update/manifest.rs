//! A signed release, checked: the signature against the trusted keys first (over the exact
//! manifest bytes, before they are parsed), then the manifest's shape, its target, and its
//! version against the running one (a downgrade only when both the manifest and the
//! configuration allow it). Nothing is downloaded for a release refused here.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
pub use odac_protocol::{ReleaseManifest as Manifest, SignedRelease as SignedManifest};

use super::keys::TrustedKeys;
use super::version::Version;

/// Why a release was refused. Every message is lowercase and names what failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ManifestError {
    #[error("no release key is trusted: update.public_keys is empty")]
    NoKeys,
    #[error("release signature is not base64 of 64 bytes")]
    BadSignatureEncoding,
    #[error("release signature does not verify with any key of update.public_keys")]
    BadSignature,
    #[error("release manifest: {0}")]
    Malformed(String),
    #[error("release {version} is built for {target}, this host runs {host}")]
    WrongTarget {
        version: String,
        target: String,
        host: String,
    },
    #[error(
        "release {offered} is older than the running {running} and a downgrade is not allowed by {by}"
    )]
    Downgrade {
        offered: String,
        running: String,
        by: &'static str,
    },
    #[error("release {0} is the version already running")]
    SameVersion(String),
}

/// What a release is checked against.
#[derive(Debug, Clone)]
pub struct Policy<'a> {
    pub keys: &'a TrustedKeys,
    /// The version this agent runs.
    pub running: &'a str,
    /// This host's target triple.
    pub target: &'a str,
    /// `[update] allow_downgrade`.
    pub allow_downgrade: bool,
}

/// Verifies `signed` and returns its manifest.
pub fn verify(signed: &SignedManifest, policy: &Policy<'_>) -> Result<Manifest, ManifestError> {
    if policy.keys.is_empty() {
        return Err(ManifestError::NoKeys);
    }
    let signature = STANDARD
        .decode(signed.signature.trim())
        .ok()
        .filter(|s| s.len() == 64)
        .ok_or(ManifestError::BadSignatureEncoding)?;
    if policy
        .keys
        .signer(signed.manifest.as_bytes(), &signature)
        .is_none()
    {
        return Err(ManifestError::BadSignature);
    }
    let manifest: Manifest = serde_json::from_str(&signed.manifest)
        .map_err(|e| ManifestError::Malformed(e.to_string()))?;
    manifest
        .validate()
        .map_err(|e| ManifestError::Malformed(e.to_string()))?;
    if manifest.target != policy.target {
        return Err(ManifestError::WrongTarget {
            version: manifest.version,
            target: manifest.target,
            host: policy.target.to_owned(),
        });
    }
    let offered = Version::parse(&manifest.version)
        .ok_or_else(|| ManifestError::Malformed(format!("version {:?}", manifest.version)))?;
    // a running version that is not MAJOR.MINOR.PATCH (a development build) orders first
    let running = Version::parse(policy.running).unwrap_or_default();
    if offered == running {
        return Err(ManifestError::SameVersion(manifest.version));
    }
    if offered < running {
        let by = match (manifest.allow_downgrade, policy.allow_downgrade) {
            (true, true) => None,
            (false, true) => Some("the manifest"),
            (true, false) => Some("update.allow_downgrade"),
            (false, false) => Some("the manifest nor update.allow_downgrade"),
        };
        if let Some(by) = by {
            return Err(ManifestError::Downgrade {
                offered: manifest.version,
                running: policy.running.to_owned(),
                by,
            });
        }
    }
    Ok(manifest)
}
