//! The one HTTP exchange of enrollment: `POST {cp}/api/enroll` with `{"code": "..."}`; a 2xx
//! answer carries `{"token": "..."}`, a refusal `{"error": "..."}`. The request goes through
//! the agent's one HTTP client ([`odac_host::http_client`]: hyper, rustls with the ring provider)
//! on a short-lived current-thread runtime, trusting either the given CA certificates or the
//! WebPKI roots. Redirects are not followed (a code is never sent anywhere but the control
//! plane named on the command line).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::Uri;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde::Deserialize;

use super::{EnrollCode, EnrollError};
use odac_host::http_client;

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

/// POST the code, read the answer (at most [`MAX_BODY`] bytes) with the shared
/// [`http_client`](odac_host::http_client): status and body.
async fn exchange(
    base: &BaseUrl,
    code: &EnrollCode,
    ca: Option<Vec<CertificateDer<'static>>>,
) -> Result<(u16, String), String> {
    let tls = Arc::new(http_client::tls_config(ca)?);
    let body = serde_json::json!({ "code": code.expose() }).to_string();
    let request = http_client::Request {
        method: hyper::Method::POST,
        url: base.enroll_url(),
        headers: vec![
            (hyper::header::ACCEPT, "application/json".to_owned()),
            (hyper::header::CONTENT_TYPE, "application/json".to_owned()),
        ],
        body: Some(Bytes::from(body)),
        max_body: MAX_BODY,
        timeout: TIMEOUT,
    };
    let response = http_client::send(&tls, request)
        .await
        .map_err(|e| match e {
            // The url is in the enrollment error already: only the cause.
            http_client::HttpError::Failed { why, .. } => why,
            http_client::HttpError::Timeout { timeout, .. } => {
                format!("no answer within {} s", timeout.as_secs())
            }
            other => other.to_string(),
        })?;
    let text = String::from_utf8(response.body.to_vec())
        .map_err(|_| "reading the answer: not utf-8".to_owned())?;
    Ok((response.status, text))
}

#[derive(Deserialize)]
struct Answer {
    token: Option<String>,
    /// The control plane's release keys (`ed25519:…`), for `[update] public_keys`.
    #[serde(default)]
    release_keys: Vec<String>,
}

/// What a redeemed code gives.
#[derive(Debug)]
pub struct Granted {
    /// The bearer token.
    pub token: String,
    /// Release keys to trust, each checked (possibly none).
    pub release_keys: Vec<String>,
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
) -> Result<Granted, EnrollError> {
    let url = base.enroll_url();
    let failed = |why: String| EnrollError::Http {
        url: url.clone(),
        why: code.redact(&why),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format!("starting the runtime: {e}")))?;
    let (status, text) = runtime.block_on(exchange(base, code, ca)).map_err(failed)?;
    if (200..300).contains(&status) {
        let granted: Answer = serde_json::from_str(&text).map_err(|e| EnrollError::BadAnswer {
            url: url.clone(),
            why: format!("not the expected json: {e}"),
        })?;
        let token = granted.token.unwrap_or_default().trim().to_owned();
        check_token(&token).map_err(|why| EnrollError::BadAnswer {
            url: url.clone(),
            why: why.to_owned(),
        })?;
        for (i, key) in granted.release_keys.iter().enumerate() {
            crate::update::PublicKey::parse(key).map_err(|why| EnrollError::BadAnswer {
                url: url.clone(),
                why: format!("release_keys[{i}]: {why}"),
            })?;
        }
        return Ok(Granted {
            token,
            release_keys: granted.release_keys,
        });
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
