//! A timing HTTP client for the simulator's REST API: ureq over rustls, trusting the
//! simulator's CA, one kept-alive connection; it reads each answer's body to the end and
//! counts its bytes without parsing it, so a timed request measures the server and the
//! transfer, not the benchmark's JSON decoding.

use std::path::Path;
use std::time::{Duration, Instant};

use odac_e2e::{Error, Result};
use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// The client.
pub struct TimingClient {
    agent: ureq::Agent,
    base: String,
}

impl TimingClient {
    /// A client of `base` (`https://127.0.0.1:PORT`) trusting the PEM CA at `ca_file`.
    pub fn new(base: &str, ca_file: &Path) -> Result<TimingClient> {
        let pem = std::fs::read(ca_file).map_err(|e| Error::io("read", ca_file, e))?;
        let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(Error::Other(format!(
                "{}: no PEM certificate",
                ca_file.display()
            )));
        }
        let tls = TlsConfig::builder()
            .root_certs(RootCerts::new_with_certs(&certs))
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .tls_config(tls)
            .build()
            .into();
        Ok(TimingClient {
            agent,
            base: base.trim_end_matches('/').to_owned(),
        })
    }

    /// `GET path`: how long until the whole body was read, and its size in bytes.
    pub fn get(&self, path: &str) -> Result<(Duration, usize)> {
        let url = format!("{}{path}", self.base);
        let t = Instant::now();
        let mut resp = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| Error::Other(format!("GET {url}: {e}")))?;
        let body = resp
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .map_err(|e| Error::Other(format!("GET {url}: reading the body: {e}")))?;
        Ok((t.elapsed(), body.len()))
    }
}
