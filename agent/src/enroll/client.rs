//! The one HTTP exchange of enrollment: `POST {cp}/api/enroll` with `{"code": "..."}`; a 2xx
//! answer carries `{"token": "..."}`, a refusal `{"error": "..."}`. TLS is rustls with the ring
//! provider, trusting either the given CA certificates or the WebPKI roots. Redirects are not
//! followed (a code is never sent anywhere but the control plane named on the command line).

use std::time::Duration;

use serde::Deserialize;
use ureq::http::Uri;
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

use super::{EnrollCode, EnrollError};

/// Path of the enrollment endpoint under the control plane's base URL.
pub const ENROLL_PATH: &str = "/api/enroll";

/// How long the whole exchange may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Longest answer body read, in bytes.
const MAX_BODY: u64 = 64 * 1024;

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
) -> Result<Vec<Certificate<'static>>, EnrollError> {
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(EnrollError::BadCa {
                    path: path.to_owned(),
                    why: e.to_string(),
                });
            }
        }
    }
    if certs.is_empty() {
        return Err(EnrollError::BadCa {
            path: path.to_owned(),
            why: "no PEM certificate found".to_owned(),
        });
    }
    Ok(certs)
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
    ca: Option<Vec<Certificate<'static>>>,
) -> Result<String, EnrollError> {
    let roots = match ca {
        Some(certs) => RootCerts::Specific(std::sync::Arc::new(certs)),
        None => RootCerts::WebPki,
    };
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(roots)
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls)
        .https_only(true)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(TIMEOUT))
        .user_agent(format!("odac-agent/{}", crate::AGENT_VERSION))
        .build()
        .into();
    let url = base.enroll_url();
    let body = serde_json::json!({ "code": code.expose() });
    let mut response = agent
        .post(&url)
        .header("Accept", "application/json")
        .send_json(&body)
        .map_err(|e| EnrollError::Http {
            url: url.clone(),
            why: code.redact(&e.to_string()),
        })?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| EnrollError::Http {
            url: url.clone(),
            why: format!("reading the answer: {}", code.redact(&e.to_string())),
        })?;
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
