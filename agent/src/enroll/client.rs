//! The one HTTP exchange of enrollment: `POST {cp}/api/enroll` with `{"code": "..."}`; a 2xx
//! answer carries `{"token": "..."}`, a refusal `{"error": "..."}`. HTTP/1.1 is hyper's client
//! (the one the engine client brings: the agent has a single HTTP stack) on a short-lived
//! current-thread runtime; TLS is rustls with the ring provider, trusting either the given CA
//! certificates or the WebPKI roots. Redirects are not followed (a code is never sent anywhere
//! but the control plane named on the command line).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde::Deserialize;

use super::{EnrollCode, EnrollError};

/// Path of the enrollment endpoint under the control plane's base URL.
pub const ENROLL_PATH: &str = "/api/enroll";

/// How long the whole exchange may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Longest answer body read, in bytes.
const MAX_BODY: usize = 64 * 1024;

/// Longest token accepted, in bytes.
const MAX_TOKEN_BYTES: usize = 4096;

/// The control plane's base URL (`https://host[:port][/prefix]`, no trailing slash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    authority: String,
    prefix: String,
}

impl BaseUrl {
    /// Parses `--cp`: an `https://` URL without query or fragment.
    pub fn parse(url: &str) -> Result<Self, EnrollError> {
        let bad = |why: &str| EnrollError::BadUrl {
            url: url.to_owned(),
            why: why.to_owned(),
        };
        let uri: Uri = url.trim().parse().map_err(|_| bad("not a valid url"))?;
        match uri.scheme_str() {
            Some("https") => {}
            Some(_) => return Err(bad("the scheme must be https")),
            None => return Err(bad("the scheme must be https (e.g. https://app.odac.run)")),
        }
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .filter(|a| !a.is_empty())
            .ok_or_else(|| bad("no host"))?;
        if authority.contains('@') {
            return Err(bad("user information is not allowed"));
        }
        if uri.query().is_some() || url.contains('#') {
            return Err(bad("a query or fragment is not allowed"));
        }
        let prefix = uri.path().trim_end_matches('/').to_owned();
        Ok(Self { authority, prefix })
    }

    /// `https://authority/prefix`.
    pub fn https(&self) -> String {
        format!("https://{}{}", self.authority, self.prefix)
    }

    /// The enrollment endpoint.
    pub fn enroll_url(&self) -> String {
        format!("{}{ENROLL_PATH}", self.https())
    }

    /// Host (without IPv6 brackets) and port (443 unless given) to connect to.
    fn host_port(&self) -> Result<(String, u16), String> {
        let uri: Uri = format!("https://{}/", self.authority)
            .parse()
            .map_err(|_| format!("{:?} is not a valid host", self.authority))?;
        let host = uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Ok((host.to_owned(), uri.port_u16().unwrap_or(443)))
    }

    /// The agents' WebSocket endpoint on the same host: `wss://authority/prefix{path}`.
    pub fn agent_ws_url(&self, path: &str) -> String {
        format!("wss://{}{}{path}", self.authority, self.prefix)
    }
}

/// Parses PEM CA certificates (at least one).
pub fn parse_ca(
    pem: &[u8],
    path: &std::path::Path,
) -> Result<Vec<CertificateDer<'static>>, EnrollError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| EnrollError::BadCa {
            path: path.to_owned(),
            why: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(EnrollError::BadCa {
            path: path.to_owned(),
            why: "no PEM certificate found".to_owned(),
        });
    }
    Ok(certs)
}

/// The TLS configuration: the given CA certificates or the WebPKI roots, ALPN `http/1.1`.
fn tls_config(ca: Option<Vec<CertificateDer<'static>>>) -> Result<ClientConfig, String> {
    let roots = match ca {
        Some(certs) => {
            let mut roots = RootCertStore::empty();
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("the ca certificate is not usable: {e}"))?;
            }
            roots
        }
        None => RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
    };
    let mut config = ClientConfig::builder_with_provider(crate::uplink::tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Connect, POST the code, read the answer (at most [`MAX_BODY`] bytes): status and body.
async fn exchange(
    base: &BaseUrl,
    code: &EnrollCode,
    ca: Option<Vec<CertificateDer<'static>>>,
) -> Result<(u16, String), String> {
    let config = tls_config(ca)?;
    let (host, port) = base.host_port()?;
    let name = ServerName::try_from(host.clone())
        .map_err(|_| format!("{host:?} is not a valid server name"))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls with {host}:{port}: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let body = serde_json::json!({ "code": code.expose() }).to_string();
    let request = hyper::Request::post(format!("{}{ENROLL_PATH}", base.prefix))
        .header(hyper::header::HOST, &base.authority)
        .header(hyper::header::ACCEPT, "application/json")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(
            hyper::header::USER_AGENT,
            format!("odac-agent/{}", crate::AGENT_VERSION),
        )
        .header(hyper::header::CONNECTION, "close")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    driver.abort();
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| "reading the answer: not utf-8".to_owned())?;
    Ok((status, text))
}

#[derive(Deserialize)]
struct Granted {
    token: Option<String>,
}

#[derive(Deserialize)]
struct Refused {
    error: Option<String>,
}

/// Trades `code` for a token. `ca` = `None` trusts the WebPKI roots.
pub fn redeem(
    base: &BaseUrl,
    code: &EnrollCode,
    ca: Option<Vec<CertificateDer<'static>>>,
) -> Result<String, EnrollError> {
    let url = base.enroll_url();
    let failed = |why: String| EnrollError::Http {
        url: url.clone(),
        why: code.redact(&why),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format!("starting the runtime: {e}")))?;
    let (status, text) = runtime
        .block_on(async { tokio::time::timeout(TIMEOUT, exchange(base, code, ca)).await })
        .map_err(|_| failed(format!("no answer within {} s", TIMEOUT.as_secs())))?
        .map_err(failed)?;
    if (200..300).contains(&status) {
        let granted: Granted = serde_json::from_str(&text).map_err(|e| EnrollError::BadAnswer {
            url: url.clone(),
            why: format!("not the expected json: {e}"),
        })?;
        let token = granted.token.unwrap_or_default().trim().to_owned();
        check_token(&token).map_err(|why| EnrollError::BadAnswer {
            url: url.clone(),
            why: why.to_owned(),
        })?;
        return Ok(token);
    }
    let message = serde_json::from_str::<Refused>(&text)
        .ok()
        .and_then(|r| r.error)
        .unwrap_or_else(|| text.chars().take(200).collect());
    let message = code.redact(message.trim());
    if (400..500).contains(&status) && status != 408 && status != 429 {
        Err(EnrollError::Refused { status, message })
    } else {
        Err(EnrollError::Server {
            url,
            status,
            message,
        })
    }
}

/// The token must fit an HTTP header: printable ASCII, no spaces, at most 4096 bytes.
fn check_token(token: &str) -> Result<(), &'static str> {
    if token.is_empty() {
        return Err("the answer holds no token");
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err("the token is longer than 4096 bytes");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token contains whitespace or non-ascii characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn base_url_parses_https_only() {
        let b = BaseUrl::parse("https://cp.example:7443/").unwrap();
        assert_eq!(b.enroll_url(), "https://cp.example:7443/api/enroll");
        assert_eq!(
            b.agent_ws_url("/agent/v1"),
            "wss://cp.example:7443/agent/v1"
        );
        let b = BaseUrl::parse("https://cp.example/odac").unwrap();
        assert_eq!(b.enroll_url(), "https://cp.example/odac/api/enroll");
        for bad in [
            "http://cp.example",
            "cp.example",
            "wss://cp.example/agent/v1",
            "https://",
            "https://u:p@cp.example",
            "https://cp.example/?x=1",
            "https://cp.example/#x",
            "",
        ] {
            let e = BaseUrl::parse(bad).unwrap_err();
            assert!(matches!(e, EnrollError::BadUrl { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn token_checks() {
        assert!(check_token("odac_abc").is_ok());
        assert!(check_token("").is_err());
        assert!(check_token("a b").is_err());
        assert!(check_token(&"x".repeat(4097)).is_err());
    }

    #[test]
    fn ca_without_certificate_is_refused() {
        let p = std::path::Path::new("/x/ca.pem");
        let e = parse_ca(b"hello", p).unwrap_err();
        assert!(e.to_string().contains("/x/ca.pem"), "{e}");
    }
}
