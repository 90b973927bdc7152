//! The `odac` CLI's HTTP client: ureq over rustls (ring), trusting `--ca-file` when given,
//! sending `--token` as a bearer token. Every failure becomes one line: the API's own `error`
//! for an HTTP error status, or "cannot reach the API at URL: why" for transport failures.

use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// A failed request: the message to print (one line) and, for an API refusal, the request
/// field the API named (`gpu.count`, `host`, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ClientError {
    /// What went wrong, one line.
    pub message: String,
    /// The API's `field`, when it named one.
    pub field: Option<String>,
}

impl ClientError {
    /// A failure that names no request field.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            field: None,
        }
    }
}

/// The API base from what a user may give: `https://HOST:PORT`, with or without a trailing
/// `/`, or the `api:` URL `odac-sim serve` prints (`https://HOST:PORT/api/`).
pub fn api_base(url: &str) -> String {
    let trimmed = url.trim().trim_end_matches('/');
    trimmed
        .strip_suffix("/api")
        .unwrap_or(trimmed)
        .trim_end_matches('/')
        .to_owned()
}

/// A client of one control plane's REST API.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Client {
    /// A client for `base` (e.g. `https://127.0.0.1:7443`, or the same with `/api/`),
    /// trusting `ca_file` if given.
    pub fn new(
        base: &str,
        ca_file: Option<&Path>,
        token: Option<String>,
    ) -> Result<Self, ClientError> {
        let mut tls = TlsConfig::builder();
        if let Some(path) = ca_file {
            let pem = std::fs::read(path).map_err(|e| {
                ClientError::new(format!("cannot read CA file {}: {e}", path.display()))
            })?;
            let certs = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect::<Vec<Certificate<'static>>>();
            if certs.is_empty() {
                return Err(ClientError::new(format!(
                    "CA file {} holds no PEM certificate",
                    path.display()
                )));
            }
            tls = tls.root_certs(RootCerts::new_with_certs(&certs));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .timeout_connect(Some(Duration::from_secs(5)))
            .tls_config(tls.build())
            .build()
            .into();
        Ok(Self {
            agent,
            base: api_base(base),
            token: token.filter(|t| !t.is_empty()),
        })
    }

    /// The control plane's base URL (`https://HOST:PORT`, no `/api/`).
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn finish(
        &self,
        result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value, ClientError> {
        let mut resp = result.map_err(|e| {
            ClientError::new(one_line(&format!(
                "cannot reach the API at {}: {e}",
                self.base
            )))
        })?;
        let status = resp.status();
        let text = resp.body_mut().read_to_string().map_err(|e| {
            ClientError::new(one_line(&format!(
                "cannot read the answer of {}: {e}",
                self.base
            )))
        })?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let message = body
            .get("error")
            .and_then(Value::as_str)
            .map_or_else(|| format!("http {status}: {}", one_line(&text)), one_line);
        let field = body.get("field").and_then(Value::as_str).map(str::to_owned);
        Err(ClientError { message, field })
    }

    fn auth<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => req.header("Authorization", &format!("Bearer {t}")),
            None => req,
        }
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.finish(self.auth(self.agent.get(&self.url(path))).call())
    }

    /// `GET path`, typed.
    pub fn get_as<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        serde_json::from_value(self.get(path)?)
            .map_err(|e| ClientError::new(format!("unexpected answer from {path}: {e}")))
    }

    /// `GET path` answered by a stream (no overall timeout), read as it arrives.
    pub fn get_stream(&self, path: &str) -> Result<impl std::io::BufRead, ClientError> {
        let req = self
            .auth(self.agent.get(&self.url(path)))
            .config()
            .timeout_global(None)
            .build();
        let resp = req.call().map_err(|e| {
            ClientError::new(one_line(&format!(
                "cannot reach the API at {}: {e}",
                self.base
            )))
        })?;
        if !resp.status().is_success() {
            return Err(self
                .finish(Ok(resp))
                .err()
                .unwrap_or_else(|| ClientError::new(format!("unexpected answer from {path}"))));
        }
        Ok(std::io::BufReader::new(resp.into_body().into_reader()))
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.finish(self.auth(self.agent.post(&self.url(path))).send_json(body))
    }

    /// `PUT path` with a JSON body.
    pub fn put(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.finish(self.auth(self.agent.put(&self.url(path))).send_json(body))
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Result<Value, ClientError> {
        self.finish(self.auth(self.agent.delete(&self.url(path))).call())
    }
}

/// Percent-encodes one path segment.
pub fn segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_api_url_and_the_base_are_the_same() {
        for given in [
            "https://127.0.0.1:7443",
            "https://127.0.0.1:7443/",
            "https://127.0.0.1:7443/api",
            "https://127.0.0.1:7443/api/",
            " https://127.0.0.1:7443/api// ",
        ] {
            assert_eq!(api_base(given), "https://127.0.0.1:7443", "{given:?}");
        }
        assert_eq!(
            api_base("https://cp.example/odac"),
            "https://cp.example/odac"
        );
    }
}
