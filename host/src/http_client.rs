//! The agent's one HTTP client for plain request/answer exchanges (enrollment, the registry's
//! manifest API before a pull): hyper's HTTP/1.1 client connection (the stack the engine
//! client already brings) over a fresh TCP connection per request, TLS with rustls and the
//! ring provider for `https` (the given CA certificates or the WebPKI roots), plain TCP for
//! `http`. Each request has a timeout and reads at most a given number of answer bytes.
//! Redirects are not followed. Errors name the method, host and path, never a header value
//! (credentials travel only in headers) nor the query.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Uri};
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};

/// The `User-Agent` of every request (the simulator's registry check too, as before).
const USER_AGENT: &str = concat!("odac-agent/", env!("CARGO_PKG_VERSION"));

/// A failed exchange: where, and why (never a credential).
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{url:?} is not a usable url: {why}")]
    BadUrl { url: String, why: String },
    #[error("{method} {target}: {why}")]
    Failed {
        method: Method,
        target: String,
        why: String,
    },
    /// The answer's body is longer than the request's `max_body` (said by its
    /// `Content-Length`, or found while reading: at most `max_body` bytes are read).
    #[error("{method} {target}: the answer is larger than {limit} bytes")]
    TooLarge {
        method: Method,
        target: String,
        limit: usize,
    },
    #[error("{method} {target}: no answer within {} s", timeout.as_secs())]
    Timeout {
        method: Method,
        target: String,
        timeout: Duration,
    },
}

/// One request: method, absolute `http://` or `https://` URL, extra headers, optional body.
/// `Debug` shows header names only (values may be credentials) and no query or body.
pub struct Request {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(HeaderName, String)>,
    pub body: Option<Bytes>,
    /// Longest answer body read, in bytes; a longer one is an error.
    pub max_body: usize,
    pub timeout: Duration,
}

impl Request {
    /// A `GET` of `url` without extra headers.
    pub fn get(url: impl Into<String>, max_body: usize, timeout: Duration) -> Self {
        Self {
            method: Method::GET,
            url: url.into(),
            headers: Vec::new(),
            body: None,
            max_body,
            timeout,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("url", &self.url.split('?').next().unwrap_or_default())
            .field("headers", &names)
            .field("body_bytes", &self.body.as_ref().map(Bytes::len))
            .field("max_body", &self.max_body)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The answer: status, headers and the whole body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Response {
    /// A header's value as text, when present and visible ASCII.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The TLS configuration: the given CA certificates or the WebPKI roots, ALPN `http/1.1`.
pub fn tls_config(ca: Option<Vec<CertificateDer<'static>>>) -> Result<ClientConfig, String> {
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
    let mut config = ClientConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Whether `server` (`host[:port]`) is a literal loopback address, the only registries (and
/// token realms) asked over plain HTTP: `127.0.0.0/8`, `[::1]`, `localhost` exactly.
pub fn is_loopback(server: &str) -> bool {
    let host = match server.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((host, after)) if after.is_empty() || after.starts_with(':') => host,
            _ => return false,
        },
        None => match server.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') && port.parse::<u16>().is_ok() => host,
            Some(_) => server,
            None => server,
        },
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(std::net::IpAddr::V6(ip)) => ip.is_loopback(),
        Err(_) => false,
    }
}
/// Percent-encodes `text` for a query component (everything but RFC 3986 unreserved bytes).
pub fn query_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where a request goes: scheme, authority (for `Host`), host and port to connect to, and
/// the path with query to send.
struct Target {
    https: bool,
    authority: String,
    host: String,
    port: u16,
    path_and_query: String,
}

impl Target {
    fn parse(url: &str) -> Result<Self, HttpError> {
        let bad = |why: &str| HttpError::BadUrl {
            url: url.split('?').next().unwrap_or_default().to_owned(),
            why: why.to_owned(),
        };
        let uri: Uri = url.parse().map_err(|_| bad("not a valid url"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("user information is not allowed"));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Self {
            https,
            authority: authority.as_str().to_owned(),
            host: host.to_owned(),
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            path_and_query: uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
        })
    }

    /// `scheme://authority/path`, without the query, for messages.
    fn display(&self) -> String {
        let path = self.path_and_query.split('?').next().unwrap_or_default();
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.authority)
    }
}

/// Sends `request` (a new connection, `Connection: close`) and reads the answer. `tls` is used
/// for `https` URLs (see [`tls_config`]).
pub async fn send(tls: &Arc<ClientConfig>, request: Request) -> Result<Response, HttpError> {
    let target = Target::parse(&request.url)?;
    let (method, timeout) = (request.method.clone(), request.timeout);
    let shown = target.display();
    let limit = request.max_body;
    match tokio::time::timeout(timeout, exchange(tls, &target, request)).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(Failure::TooLarge)) => Err(HttpError::TooLarge {
            method,
            target: shown,
            limit,
        }),
        Ok(Err(Failure::Other(why))) => Err(HttpError::Failed {
            method,
            target: shown,
            why,
        }),
        Err(_) => Err(HttpError::Timeout {
            method,
            target: shown,
            timeout,
        }),
    }
}

/// Why an exchange failed: a body over the limit, or anything else (in words).
enum Failure {
    TooLarge,
    Other(String),
}

impl From<String> for Failure {
    fn from(why: String) -> Self {
        Failure::Other(why)
    }
}

async fn exchange(
    tls: &Arc<ClientConfig>,
    target: &Target,
    request: Request,
) -> Result<Response, Failure> {
    let (host, port) = (target.host.as_str(), target.port);
    let tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    if !target.https {
        return over(TokioIo::new(tcp), target, request).await;
    }
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host:?} is not a valid server name"))?;
    let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls with {host}:{port}: {e}"))?;
    over(TokioIo::new(stream), target, request).await
}

/// The HTTP/1.1 exchange on an open connection.
async fn over<T>(io: TokioIo<T>, target: &Target, request: Request) -> Result<Response, Failure>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let mut builder = hyper::Request::builder()
        .method(request.method)
        .uri(target.path_and_query.as_str())
        .header(hyper::header::HOST, target.authority.as_str())
        // the workspace shares one version: this is the agent's
        .header(hyper::header::USER_AGENT, USER_AGENT)
        .header(hyper::header::CONNECTION, "close");
    for (name, value) in request.headers {
        // The value is not echoed: it may be a credential.
        let value = HeaderValue::try_from(value)
            .map_err(|_| format!("the {name} header holds characters http does not allow"))?;
        builder = builder.header(name, value);
    }
    let http_request = builder
        .body(Full::new(request.body.unwrap_or_default()))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(http_request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let (parts, body) = response.into_parts();
    let declared = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > request.max_body as u64) {
        driver.abort();
        return Err(Failure::TooLarge);
    }
    let collected = Limited::new(body, request.max_body).collect().await;
    driver.abort();
    let body = match collected {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(Failure::TooLarge),
        Err(e) => {
            return Err(Failure::Other(format!(
                "reading the answer (at most {} bytes): {e}",
                request.max_body
            )));
        }
    };
    Ok(Response {
        status,
        headers: parts.headers,
        body,
    })
}

/// The crypto provider every TLS object of the agent uses: rustls with `ring` only (a second
/// provider in the build would panic at run time).
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn targets_parse() {
        let t = Target::parse("http://127.0.0.1:5000/v2/a/manifests/1?x=secret").unwrap();
        assert!(!t.https);
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 5000));
        assert_eq!(t.path_and_query, "/v2/a/manifests/1?x=secret");
        assert_eq!(t.display(), "http://127.0.0.1:5000/v2/a/manifests/1");
        let t = Target::parse("https://[::1]/token").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.https), ("::1", 443, true));
        for bad in ["ftp://x/", "/path", "https://u:p@x/", "x"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            query_encode("repository:a/b:pull"),
            "repository%3Aa%2Fb%3Apull"
        );
    }

    /// A one-shot HTTP server on 127.0.0.1 answering `answer`; returns its URL and the
    /// request it received.
    async fn serve_once(answer: Vec<u8>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            s.write_all(&answer).await.unwrap();
            s.shutdown().await.unwrap();
            String::from_utf8_lossy(&seen).into_owned()
        });
        (url, task)
    }

    #[tokio::test]
    async fn get_reads_status_headers_and_a_limited_body() {
        let tls = Arc::new(tls_config(None).unwrap());
        let (url, seen) = serve_once(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"r\"\r\ncontent-length: 5\r\n\r\nhello".to_vec(),
        )
        .await;
        let response = send(
            &tls,
            Request::get(format!("{url}/v2/x?scope=s"), 16, Duration::from_secs(10))
                .header(hyper::header::AUTHORIZATION, "Basic c2VjcmV0"),
        )
        .await
        .unwrap();
        assert_eq!(response.status, 401);
        assert_eq!(
            response.header_str("www-authenticate"),
            Some("Bearer realm=\"r\"")
        );
        assert_eq!(&response.body[..], b"hello");
        let seen = seen.await.unwrap().to_ascii_lowercase();
        assert!(seen.starts_with("get /v2/x?scope=s http/1.1"), "{seen}");
        assert!(seen.contains("authorization: basic c2vjcmv0"), "{seen}");

        let (url, _seen) = serve_once(
            b"HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\n01234567890123456789".to_vec(),
        )
        .await;
        let e = send(
            &tls,
            Request::get(format!("{url}/big"), 4, Duration::from_secs(10))
                .header(hyper::header::AUTHORIZATION, "Bearer s3cret"),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/big") && e.contains("larger than 4 bytes"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
        let shown = format!(
            "{:?}",
            Request::get("http://h/p?scope=x", 1, Duration::from_secs(1))
                .header(hyper::header::AUTHORIZATION, "Bearer s3cret")
        );
        assert!(
            shown.contains("authorization") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
