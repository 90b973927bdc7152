//! The release keys the agent trusts (`[update] public_keys`): ed25519 public keys written
//! `ed25519:<base64 of the 32 key bytes>`. Verification is ring's ed25519 (the crypto crate
//! the TLS stack already uses); nothing here is home-made crypto.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::signature::{ED25519, UnparsedPublicKey};

/// The prefix of a written key.
pub const KEY_PREFIX: &str = "ed25519:";

/// An unusable key in the configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("update.public_keys[{index}]: {why}")]
pub struct KeyError {
    pub index: usize,
    pub why: String,
}

/// One ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// Parses `ed25519:<base64>`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some(b64) = text.trim().strip_prefix(KEY_PREFIX) else {
            return Err(format!("{text:?} does not start with {KEY_PREFIX:?}"));
        };
        let bytes = STANDARD
            .decode(b64)
            .map_err(|e| format!("{text:?} is not base64: {e}"))?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| format!("{text:?} has {} bytes, not 32", b.len()))?;
        Ok(Self(key))
    }

    /// The key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// `ed25519:<base64>`.
    pub fn to_text(&self) -> String {
        format!("{KEY_PREFIX}{}", STANDARD.encode(self.0))
    }

    /// Whether `signature` is this key's signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(message, signature)
            .is_ok()
    }
}

/// The keys of `[update] public_keys`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedKeys(Vec<PublicKey>);

impl TrustedKeys {
    /// Parses every key; the first bad one is the error.
    pub fn parse(texts: &[String]) -> Result<Self, KeyError> {
        texts
            .iter()
            .enumerate()
            .map(|(index, t)| PublicKey::parse(t).map_err(|why| KeyError { index, why }))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether no key is trusted (every update is refused).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The trusted key that signed `message` with `signature`, if any.
    pub fn signer(&self, message: &[u8], signature: &[u8]) -> Option<&PublicKey> {
        self.0.iter().find(|k| k.verifies(message, signature))
    }
}
