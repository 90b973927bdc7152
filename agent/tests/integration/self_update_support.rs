//! Shared by the self-update tests: a release key (ring's ed25519), signed releases of given
//! bytes, a fetch that serves fixed bytes (or fails), a disk with a given free space, and a
//! recording sink of update reports.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use odac_agent::update::fetch::{Fetch, Progress};
use odac_agent::update::stage::DiskSpace;
use odac_agent::update::task::ReportUpdate;
use odac_protocol::{ReleaseManifest, SignedRelease, UpdatePhase, UpdateStatusReport};
use ring::signature::{Ed25519KeyPair, KeyPair};
use sha2::{Digest, Sha256};

/// A release key.
pub struct Key(Ed25519KeyPair);

impl Key {
    pub fn new() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        Self(Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap())
    }

    /// `ed25519:<base64>`, as `[update] public_keys` holds it.
    pub fn public(&self) -> String {
        format!("ed25519:{}", STANDARD.encode(self.0.public_key().as_ref()))
    }

    /// Signs `manifest`'s JSON text.
    pub fn sign(&self, manifest: &ReleaseManifest) -> SignedRelease {
        let text = serde_json::to_string(manifest).unwrap();
        self.sign_text(&text)
    }

    pub fn sign_text(&self, text: &str) -> SignedRelease {
        SignedRelease {
            manifest: text.to_owned(),
            signature: STANDARD.encode(self.0.sign(text.as_bytes()).as_ref()),
        }
    }
}

/// The manifest of `bytes` as version `version` for this host.
pub fn manifest(version: &str, bytes: &[u8]) -> ReleaseManifest {
    ReleaseManifest {
        version: version.to_owned(),
        target: odac_agent::update::target(),
        size: bytes.len() as u64,
        sha256: hex::encode(Sha256::digest(bytes)),
        url: "https://127.0.0.1:9/releases/odac-agent".to_owned(),
        allow_downgrade: false,
    }
}

/// Serves `body` (or fails with `error`), recording the URLs asked for.
pub struct FixedFetch {
    pub body: Result<Vec<u8>, String>,
    pub asked: Mutex<Vec<String>>,
}

impl FixedFetch {
    pub fn serving(body: &[u8]) -> Arc<Self> {
        Arc::new(Self {
            body: Ok(body.to_vec()),
            asked: Mutex::new(Vec::new()),
        })
    }

    pub fn failing(error: &str) -> Arc<Self> {
        Arc::new(Self {
            body: Err(error.to_owned()),
            asked: Mutex::new(Vec::new()),
        })
    }

    pub fn asked(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

#[async_trait]
impl Fetch for FixedFetch {
    async fn fetch(
        &self,
        url: &str,
        _size: u64,
        progress: Progress<'_>,
    ) -> Result<Vec<u8>, String> {
        self.asked.lock().unwrap().push(url.to_owned());
        let body = self.body.clone()?;
        progress(body.len() as u64);
        Ok(body)
    }
}

/// A disk with `0` bytes free.
pub struct Disk(pub u64);

impl DiskSpace for Disk {
    fn free_bytes(&self, _dir: &Path) -> std::io::Result<u64> {
        Ok(self.0)
    }
}

/// Records every report.
#[derive(Default)]
pub struct Reports(pub Mutex<Vec<UpdateStatusReport>>);

impl ReportUpdate for Reports {
    fn report(&self, status: UpdateStatusReport) {
        self.0.lock().unwrap().push(status);
    }
}

impl Reports {
    pub fn phases(&self) -> Vec<UpdatePhase> {
        self.0.lock().unwrap().iter().map(|r| r.phase).collect()
    }

    pub fn last(&self) -> UpdateStatusReport {
        self.0.lock().unwrap().last().cloned().unwrap()
    }
}

/// Every executable file under `dir` (recursively).
pub fn executables(dir: &Path) -> Vec<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            out.extend(executables(&p));
        } else if meta.permissions().mode() & 0o111 != 0 {
            out.push(p);
        }
    }
    out
}
