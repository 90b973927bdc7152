//! TLS client configuration for the uplink: rustls with the `ring` provider only, the webpki
//! root certificates by default, or only the CA(s) in `control_plane.ca_file` for a control
//! plane behind a private CA, and an optional client certificate and key for mutual TLS.
//! There is deliberately no way to switch certificate verification off.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WantsClientCert;
use rustls::{ClientConfig, ConfigBuilder, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Where the trust anchors and the optional client identity come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM file of CA certificates to trust instead of the webpki roots.
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain presented to the control plane (mTLS).
    pub client_cert: Option<PathBuf>,
    /// PEM private key of `client_cert`.
    pub client_key: Option<PathBuf>,
}

/// Why the TLS configuration could not be built. `key` is the configuration key at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("{key}: cannot read {path}: {source}", path = path.display())]
    Read {
        key: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{key}: {path} is not valid pem: {detail}", path = path.display())]
    Pem {
        key: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("{key}: {path} holds no {what}", path = path.display())]
    Empty {
        key: &'static str,
        path: PathBuf,
        what: &'static str,
    },
    #[error("control_plane.ca_file: {path}: certificate rejected as a trust anchor: {detail}", path = path.display())]
    BadAnchor { path: PathBuf, detail: String },
    #[error("control_plane.client_cert and control_plane.client_key must be set together")]
    HalfIdentity,
    #[error(
        "control_plane.client_key: key does not fit control_plane.client_cert or is unsupported: {0}"
    )]
    Identity(String),
    #[error("tls: no usable protocol versions: {0}")]
    Protocol(String),
}

impl TlsConfigError {
    /// The configuration key this error is about.
    pub fn key(&self) -> &'static str {
        match self {
            TlsConfigError::Read { key, .. }
            | TlsConfigError::Pem { key, .. }
            | TlsConfigError::Empty { key, .. } => key,
            TlsConfigError::BadAnchor { .. } => "control_plane.ca_file",
            TlsConfigError::HalfIdentity => "control_plane.client_cert",
            TlsConfigError::Identity(_) => "control_plane.client_key",
            TlsConfigError::Protocol(_) => "control_plane",
        }
    }
}

/// The crypto provider every TLS object of the agent uses (defined beside the agent's HTTP
/// client, which needs it too).
pub use odac_host::http_client::crypto_provider;

/// Builds the client configuration (ALPN `http/1.1`, for the WebSocket upgrade).
pub fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let roots = match &settings.ca_file {
        Some(path) => private_roots(path)?,
        None => RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
    };
    let builder: ConfigBuilder<ClientConfig, WantsClientCert> =
        ClientConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsConfigError::Protocol(e.to_string()))?
            .with_root_certificates(roots);
    let mut config = match (&settings.client_cert, &settings.client_key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let chain = read_certs("control_plane.client_cert", cert)?;
            let key = read_key(key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsConfigError::Identity(e.to_string()))?
        }
        _ => return Err(TlsConfigError::HalfIdentity),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn private_roots(path: &Path) -> Result<RootCertStore, TlsConfigError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs("control_plane.ca_file", path)? {
        roots.add(cert).map_err(|e| TlsConfigError::BadAnchor {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    }
    Ok(roots)
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    crate::bounded_read::read_regular_io(path, 1024 * 1024).map_err(|source| TlsConfigError::Read {
        key,
        path: path.to_owned(),
        source,
    })
}

fn read_certs(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let bytes = read(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::Pem {
            key,
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsConfigError::Empty {
            key,
            path: path.to_owned(),
            what: "certificate",
        });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    const KEY: &str = "control_plane.client_key";
    let bytes = read(KEY, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsConfigError::Empty {
            key: KEY,
            path: path.to_owned(),
            what: "private key",
        },
        // never echo key material: the pem error only names the section or position
        other => TlsConfigError::Pem {
            key: KEY,
            path: path.to_owned(),
            detail: other.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn default_trusts_webpki_roots() {
        let cfg = client_config(&TlsSettings::default()).unwrap();
        assert_eq!(cfg.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let err = client_config(&TlsSettings {
            ca_file: Some(missing.clone()),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(err.key(), "control_plane.ca_file");
        assert!(
            err.to_string()
                .starts_with("control_plane.ca_file: cannot read")
        );

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "hello\n").unwrap();
        let err = client_config(&TlsSettings {
            ca_file: Some(empty),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("holds no certificate"), "{err}");

        let err = client_config(&TlsSettings {
            client_cert: Some(missing),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(err.key(), "control_plane.client_cert");
    }

    #[test]
    fn private_ca_and_client_identity_load() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".into()]).unwrap();
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, ca.cert.pem()).unwrap();
        let key_path = dir.path().join("client.key");
        std::fs::write(&key_path, ca.signing_key.serialize_pem()).unwrap();
        client_config(&TlsSettings {
            ca_file: Some(ca_path.clone()),
            client_cert: Some(ca_path),
            client_key: Some(key_path),
        })
        .unwrap();
    }
}
