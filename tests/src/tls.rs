//! Certificates made at test time for the trust scenarios: a CA nobody else knows (what an
//! agent configured with the wrong `ca_file` would trust). The simulator makes its own CA and
//! server certificate on first start in the test's state directory.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

use crate::error::{Error, Result};

/// Writes a fresh self-signed CA certificate to `dir/NAME.pem`; returns the path.
pub fn write_foreign_ca(dir: &Path, name: &str) -> Result<PathBuf> {
    let key = KeyPair::generate().map_err(|e| Error::Other(format!("ca key: {e}")))?;
    let mut params = CertificateParams::new(Vec::<String>::new())
        .map_err(|e| Error::Other(format!("ca params: {e}")))?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("odac e2e {name}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params
        .self_signed(&key)
        .map_err(|e| Error::Other(format!("ca certificate: {e}")))?;
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, cert.pem()).map_err(|e| Error::io("write", &path, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn writes_a_pem_ca() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_foreign_ca(dir.path(), "rogue").unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        assert!(text.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
