//! TLS material. On first start the simulator generates a CA (rcgen, ECDSA P-256) and keeps
//! it in the state dir (`ca.pem`, `ca-key.pem` mode 0600); every start issues a fresh server
//! certificate signed by it for `localhost`, the loopback addresses and the listen address.
//! Clients (agents, the CLI, tests) trust `DIR/ca.pem`. rustls always uses the ring provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::SimError;

/// File name of the CA certificate in the state dir.
pub const CA_FILE: &str = "ca.pem";
const CA_KEY_FILE: &str = "ca-key.pem";
const CA_NAME: &str = "odac-sim local CA";

/// The server side of TLS, ready to serve.
pub struct TlsMaterial {
    /// Path of the CA certificate clients must trust.
    pub ca_path: PathBuf,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// rustls server configuration (HTTP/1.1 ALPN, for WebSocket upgrades).
    pub server_config: Arc<ServerConfig>,
}

/// The ring crypto provider, the only one this workspace uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(what: &str, e: impl std::fmt::Display) -> SimError {
    SimError::Tls(format!("{what}: {e}"))
}

fn ca_params() -> Result<CertificateParams, SimError> {
    let mut p = CertificateParams::new(Vec::<String>::new()).map_err(|e| tls_err("ca", e))?;
    p.distinguished_name.push(DnType::CommonName, CA_NAME);
    p.distinguished_name
        .push(DnType::OrganizationName, "odac-sim");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(p)
}

/// Loads the CA from `dir` (creating it on first start) and issues a server certificate for
/// `localhost`, `127.0.0.1`, `::1` and `extra_names` (e.g. the listen IP).
pub fn load_or_create(dir: &Path, extra_names: &[String]) -> Result<TlsMaterial, SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::io("create", dir, e))?;
    let ca_path = dir.join(CA_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    let (ca_pem, ca_key) = if ca_path.exists() && key_path.exists() {
        let key_pem =
            std::fs::read_to_string(&key_path).map_err(|e| SimError::io("read", &key_path, e))?;
        let key = KeyPair::from_pem(&key_pem).map_err(|e| tls_err("ca key", e))?;
        let pem =
            std::fs::read_to_string(&ca_path).map_err(|e| SimError::io("read", &ca_path, e))?;
        (pem, key)
    } else {
        let key = KeyPair::generate().map_err(|e| tls_err("ca key", e))?;
        let cert = ca_params()?
            .self_signed(&key)
            .map_err(|e| tls_err("ca certificate", e))?;
        crate::files::write_file(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
        crate::files::write_file(&ca_path, cert.pem().as_bytes(), 0o644)?;
        (cert.pem(), key)
    };
    let issuer = Issuer::new(ca_params()?, ca_key);

    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    for n in extra_names {
        if !n.is_empty() && !names.contains(n) {
            names.push(n.clone());
        }
    }
    let mut params = CertificateParams::new(names).map_err(|e| tls_err("server names", e))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "odac-sim");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().map_err(|e| tls_err("server key", e))?;
    let server_cert = params
        .signed_by(&server_key, &issuer)
        .map_err(|e| tls_err("server certificate", e))?;

    let chain = vec![server_cert.der().clone()];
    let key = PrivateKeyDer::try_from(server_key.serialize_der())
        .map_err(|e| tls_err("server key", e))?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("server config", e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls_err("server config", e))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_path,
        ca_pem,
        server_config: Arc::new(cfg),
    })
}

/// A rustls client configuration trusting exactly the certificates in `ca_pem`.
pub fn client_config(ca_pem: &[u8]) -> Result<Arc<ClientConfig>, SimError> {
    let mut roots = RootCertStore::empty();
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| tls_err("ca certificate", e))?;
        roots.add(cert).map_err(|e| tls_err("ca certificate", e))?;
        n += 1;
    }
    if n == 0 {
        return Err(SimError::Tls(
            "ca certificate: no PEM certificate found".to_owned(),
        ));
    }
    client_config_with(roots)
}

/// A client configuration that trusts the public web PKI roots (`webpki-roots`), for a
/// control plane with a publicly issued certificate.
pub fn public_client_config() -> Result<Arc<ClientConfig>, SimError> {
    let roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    client_config_with(roots)
}

/// A client configuration (ring provider, safe protocol versions) trusting `roots`.
fn client_config_with(roots: RootCertStore) -> Result<Arc<ClientConfig>, SimError> {
    let cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("client config", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn ca_is_created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path(), &[]).unwrap();
        let b = load_or_create(dir.path(), &["10.0.0.1".into()]).unwrap();
        assert_eq!(a.ca_pem, b.ca_pem);
        assert!(client_config(a.ca_pem.as_bytes()).is_ok());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(CA_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(client_config(b"not a pem").is_err());
    }
}
