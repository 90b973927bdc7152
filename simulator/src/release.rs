//! Agent releases on the simulator's side (`odac-sim release …`): an ed25519 release key
//! (`keygen`: ring's PKCS#8 document, base64 in a mode-0600 file; the public key printed as
//! the `ed25519:…` line for `[update] public_keys`), signing an agent binary into a release
//! file (`sign`: the manifest's JSON text, exactly the bytes signed, and the signature), and
//! finding the release of a version in the directory `odac-sim serve --releases` serves.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use odac_protocol::{ReleaseManifest, SignedRelease};
use ring::signature::{Ed25519KeyPair, KeyPair};
use sha2::{Digest, Sha256};

/// Suffix of a signed release file.
pub const RELEASE_SUFFIX: &str = ".release.json";

/// A release operation that failed; names the file, never the key's content.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error("release key {path}: {why}")]
    Key { path: PathBuf, why: String },
    #[error("{path}: {why}")]
    File { path: PathBuf, why: String },
    #[error("release manifest: {0}")]
    Manifest(String),
    #[error("no release of version {version} in {dir}")]
    NotFound { version: String, dir: PathBuf },
}

fn key_err(path: &Path, why: impl Into<String>) -> ReleaseError {
    ReleaseError::Key {
        path: path.to_owned(),
        why: why.into(),
    }
}

fn file_err(path: &Path, why: impl ToString) -> ReleaseError {
    ReleaseError::File {
        path: path.to_owned(),
        why: why.to_string(),
    }
}

/// Makes a key in `path` (created, mode 0600; an existing file is refused) and returns its
/// public key, `ed25519:<base64>`.
pub fn keygen(path: &Path) -> Result<String, ReleaseError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let rng = ring::rand::SystemRandom::new();
    let doc = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| key_err(path, "cannot generate"))?;
    let pair = Ed25519KeyPair::from_pkcs8(doc.as_ref()).map_err(|_| key_err(path, "cannot use"))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| key_err(path, e.to_string()))?;
    writeln!(f, "{}", STANDARD.encode(doc.as_ref())).map_err(|e| key_err(path, e.to_string()))?;
    Ok(public_text(&pair))
}

fn public_text(pair: &Ed25519KeyPair) -> String {
    format!("ed25519:{}", STANDARD.encode(pair.public_key().as_ref()))
}

/// Reads a key written by [`keygen`] (refused when others may read it).
pub fn load_key(path: &Path) -> Result<Ed25519KeyPair, ReleaseError> {
    let meta = std::fs::metadata(path).map_err(|e| key_err(path, e.to_string()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(key_err(
            path,
            format!("mode {mode:03o} lets other users read it; run chmod 600 on it"),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| key_err(path, e.to_string()))?;
    let doc = STANDARD
        .decode(text.trim())
        .map_err(|_| key_err(path, "is not a base64 PKCS#8 ed25519 key"))?;
    Ed25519KeyPair::from_pkcs8(&doc).map_err(|_| key_err(path, "is not a PKCS#8 ed25519 key"))
}

/// The public key of the key in `path`.
pub fn public_key(path: &Path) -> Result<String, ReleaseError> {
    load_key(path).map(|k| public_text(&k))
}

/// What a release says besides the artefact's size and hash.
#[derive(Debug, Clone)]
pub struct ReleaseInfo {
    pub version: String,
    pub target: String,
    pub url: String,
    pub allow_downgrade: bool,
}

/// Signs `artefact` with `key` into a release.
pub fn sign_bytes(
    key: &Ed25519KeyPair,
    artefact: &[u8],
    info: &ReleaseInfo,
) -> Result<SignedRelease, ReleaseError> {
    let manifest = ReleaseManifest {
        version: info.version.clone(),
        target: info.target.clone(),
        size: artefact.len() as u64,
        sha256: hex::encode(Sha256::digest(artefact)),
        url: info.url.clone(),
        allow_downgrade: info.allow_downgrade,
    };
    manifest
        .validate()
        .map_err(|e| ReleaseError::Manifest(e.to_string()))?;
    let text =
        serde_json::to_string(&manifest).map_err(|e| ReleaseError::Manifest(e.to_string()))?;
    let signature = STANDARD.encode(key.sign(text.as_bytes()).as_ref());
    Ok(SignedRelease {
        manifest: text,
        signature,
    })
}

/// Signs the file `artefact` with the key in `key`; writes `out` and returns the release.
pub fn sign_file(
    key: &Path,
    artefact: &Path,
    info: &ReleaseInfo,
    out: &Path,
) -> Result<SignedRelease, ReleaseError> {
    let pair = load_key(key)?;
    let bytes = std::fs::read(artefact).map_err(|e| file_err(artefact, e))?;
    let release = sign_bytes(&pair, &bytes, info)?;
    let json = serde_json::to_vec_pretty(&release).map_err(|e| file_err(out, e))?;
    std::fs::write(out, json).map_err(|e| file_err(out, e))?;
    Ok(release)
}

/// The release of `version` among the `*.release.json` files of `dir`.
pub fn find(dir: &Path, version: &str) -> Result<SignedRelease, ReleaseError> {
    let entries = std::fs::read_dir(dir).map_err(|e| file_err(dir, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.to_string_lossy().ends_with(RELEASE_SUFFIX) {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(release) = serde_json::from_slice::<SignedRelease>(&bytes) else {
            continue;
        };
        let manifest: Result<ReleaseManifest, _> = serde_json::from_str(&release.manifest);
        if manifest.is_ok_and(|m| m.version == version) {
            return Ok(release);
        }
    }
    Err(ReleaseError::NotFound {
        version: version.to_owned(),
        dir: dir.to_owned(),
    })
}
