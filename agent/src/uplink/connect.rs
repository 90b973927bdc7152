//! Dialing the control plane: TCP, then TLS (rustls, the agent's trust settings), then the
//! WebSocket upgrade with the bearer token, the agent id (`odac-agent-id`) and the
//! `odac.agent.v1` subprotocol (an exec session's own socket: `<url>/exec`, `odac.exec.v1`
//! and its ticket, see [`Dialer::dial_exec`]). Each failure becomes a [`ConnectError`] that says what to fix
//! (an untrusted certificate names `control_plane.ca_file`, a refused token — 401, or 403 when
//! the token may not speak for this agent id — names the token settings) and never carries
//! the token.

use std::sync::Arc;
use std::time::Duration;

use odac_protocol::{
    AGENT_ID_HEADER, EXEC_PATH_SUFFIX, EXEC_SUBPROTOCOL, EXEC_TICKET_HEADER, MAX_FRAME_BYTES,
    SUBPROTOCOL, Ticket,
};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Uri, header};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::token::Token;

/// A live WebSocket session over TLS.
pub type WsStream = WebSocketStream<TlsStream<TcpStream>>;

/// Frames larger than this are refused by the WebSocket layer itself (the session refuses
/// anything above [`MAX_FRAME_BYTES`] with close 1009 before decoding).
pub const WS_HARD_LIMIT: usize = 4 * MAX_FRAME_BYTES;

/// Where the control plane is. Only `wss://` URLs are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
    host: String,
    port: u16,
}

/// Why a control-plane URL is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("control_plane.url: {0}")]
pub struct UrlError(String);

impl UrlError {
    /// The problem, without the key.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl Endpoint {
    /// Parses and checks a `wss://host[:port]/path` URL.
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| UrlError(format!("{url:?} is not a url: {e}")))?;
        match uri.scheme_str() {
            Some("wss") => {}
            Some(other) => {
                return Err(UrlError(format!(
                    "scheme {other:?} is not allowed, only wss:// (tls) is"
                )));
            }
            None => return Err(UrlError(format!("{url:?} has no scheme, expected wss://"))),
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(UrlError(
                "credentials in the url are not allowed; use control_plane.token_file".into(),
            ));
        }
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| UrlError(format!("{url:?} has no host")))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        ServerName::try_from(host.clone())
            .map_err(|e| UrlError(format!("host {host:?} is not a valid tls server name: {e}")))?;
        Ok(Self {
            url: url.to_owned(),
            port: uri.port_u16().unwrap_or(443),
            host,
        })
    }

    /// The URL as configured.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `host:port`, for logs.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot reach {authority}: {source}")]
    Tcp {
        authority: String,
        source: std::io::Error,
    },
    #[error("tls handshake with {authority} failed: {reason}")]
    Tls { authority: String, reason: String },
    #[error(
        "the control plane refused the agent's token (http {status}){}; check control_plane.token_file or ODAC_AGENT_TOKEN, retrying slowly",
        said(message.as_deref())
    )]
    Unauthorized {
        status: u16,
        /// What the control plane said in the refusal's body (its `error` when JSON),
        /// control characters escaped, clipped.
        message: Option<String>,
    },
    #[error("the control plane refused the websocket upgrade with http {status}{}", retry_after_text(*.retry_after))]
    Refused {
        status: u16,
        /// The `Retry-After` it sent (delta seconds, at most [`MAX_RETRY_AFTER`]).
        retry_after: Option<Duration>,
    },
    #[error("the control plane did not agree on subprotocol {SUBPROTOCOL} (it answered {got:?})")]
    Subprotocol { got: Option<String> },
    #[error("websocket handshake with {authority} failed: {reason}")]
    Handshake { authority: String, reason: String },
    #[error("{phase} with {authority} timed out after {after:?}")]
    Timeout {
        phase: &'static str,
        authority: String,
        after: Duration,
    },
}

impl ConnectError {
    /// True when the token was refused (401/403): retry only after a long delay.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, ConnectError::Unauthorized { .. })
    }

    /// How long the control plane asked the agent to wait (`Retry-After` on a refused
    /// upgrade, typically 429 or 503); the agent waits at least that long.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ConnectError::Refused { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The longest `Retry-After` honoured; a larger value is taken as this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

fn said(message: Option<&str>) -> String {
    message
        .map(|m| format!(": the control plane says {m:?}"))
        .unwrap_or_default()
}

fn retry_after_text(d: Option<Duration>) -> String {
    d.map(|d| format!(" (retry after {}s)", d.as_secs()))
        .unwrap_or_default()
}

/// Dials the control plane.
#[derive(Clone)]
pub struct Dialer {
    endpoint: Endpoint,
    tls: Arc<rustls::ClientConfig>,
    token: Token,
    timeout: Duration,
    agent_id: Option<HeaderValue>,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Dialer {
    /// A dialer; `timeout` bounds each phase (tcp, tls, upgrade).
    pub fn new(
        endpoint: Endpoint,
        tls: Arc<rustls::ClientConfig>,
        token: Token,
        timeout: Duration,
    ) -> Self {
        Self {
            endpoint,
            tls,
            token,
            timeout,
            agent_id: None,
        }
    }

    /// Names `agent_id` on every upgrade (`odac-agent-id`), so a control plane can refuse a
    /// token that may not speak for it (403) before the session opens. An id that is not a
    /// valid header value is not sent (it cannot pass the agent-id rule either).
    #[must_use]
    pub fn with_agent_id(mut self, agent_id: &str) -> Self {
        self.agent_id = HeaderValue::from_str(agent_id).ok();
        self
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// TCP, TLS, WebSocket upgrade.
    pub async fn dial(&self) -> Result<WsStream, ConnectError> {
        self.dial_to(&self.endpoint.url, SUBPROTOCOL, None).await
    }

    /// Dials the socket of one exec session: `<url>/exec`, subprotocol `odac.exec.v1`, the
    /// same trust and token, and `ticket` in the `odac-exec-ticket` header (sensitive: never
    /// logged).
    pub async fn dial_exec(&self, ticket: &Ticket) -> Result<WsStream, ConnectError> {
        let url = format!(
            "{}{EXEC_PATH_SUFFIX}",
            self.endpoint.url.trim_end_matches('/')
        );
        self.dial_to(&url, EXEC_SUBPROTOCOL, Some(ticket)).await
    }

    async fn dial_to(
        &self,
        url: &str,
        subprotocol: &'static str,
        ticket: Option<&Ticket>,
    ) -> Result<WsStream, ConnectError> {
        let authority = self.endpoint.authority();
        let timeout = |phase| ConnectError::Timeout {
            phase,
            authority: authority.clone(),
            after: self.timeout,
        };
        let tcp = tokio::time::timeout(
            self.timeout,
            TcpStream::connect((self.endpoint.host.as_str(), self.endpoint.port)),
        )
        .await
        .map_err(|_| timeout("tcp connect"))?
        .map_err(|source| ConnectError::Tcp {
            authority: authority.clone(),
            source,
        })?;
        let _ = tcp.set_nodelay(true);

        let name =
            ServerName::try_from(self.endpoint.host.clone()).map_err(|e| ConnectError::Tls {
                authority: authority.clone(),
                reason: e.to_string(),
            })?;
        let tls = tokio::time::timeout(
            self.timeout,
            TlsConnector::from(self.tls.clone()).connect(name, tcp),
        )
        .await
        .map_err(|_| timeout("tls handshake"))?
        .map_err(|e| ConnectError::Tls {
            authority: authority.clone(),
            reason: tls_reason(&e),
        })?;

        let mut request = url
            .into_client_request()
            .map_err(|e| ConnectError::Handshake {
                authority: authority.clone(),
                reason: e.to_string(),
            })?;
        let mut bearer = HeaderValue::from_str(&format!("Bearer {}", self.token.expose()))
            .map_err(|_| ConnectError::Handshake {
                authority: authority.clone(),
                reason: "the token is not a valid header value".into(),
            })?;
        bearer.set_sensitive(true);
        let headers = request.headers_mut();
        headers.insert(header::AUTHORIZATION, bearer);
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(subprotocol),
        );
        if let Some(ticket) = ticket {
            let mut value =
                HeaderValue::from_str(&ticket.0).map_err(|_| ConnectError::Handshake {
                    authority: authority.clone(),
                    reason: "the exec ticket is not a valid header value".into(),
                })?;
            value.set_sensitive(true);
            headers.insert(EXEC_TICKET_HEADER, value);
        }
        if let Some(id) = &self.agent_id {
            headers.insert(AGENT_ID_HEADER, id.clone());
        }
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("odac-agent/", env!("CARGO_PKG_VERSION"))),
        );

        let (ws, response) = tokio::time::timeout(
            self.timeout,
            tokio_tungstenite::client_async_with_config(request, tls, Some(ws_config())),
        )
        .await
        .map_err(|_| timeout("websocket upgrade"))?
        .map_err(|e| upgrade_error(&authority, e))?;
        let got = response
            .headers()
            .get(header::SEC_WEBSOCKET_PROTOCOL)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if got.as_deref() != Some(subprotocol) {
            return Err(ConnectError::Subprotocol { got });
        }
        Ok(ws)
    }
}

/// The WebSocket's read buffer. tungstenite zero-fills the whole buffer before every read, so
/// its default (128 KiB) is resident for the link's life; the control plane's frames are a
/// few KiB (a large desired state grows the buffer for as long as it takes to read it).
pub const WS_READ_BUFFER: usize = 16 * 1024;

/// WebSocket limits: generous enough that an oversize frame can be refused politely (close
/// 1009) by the session rather than by the transport.
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(WS_READ_BUFFER)
        .max_message_size(Some(WS_HARD_LIMIT))
        .max_frame_size(Some(WS_HARD_LIMIT))
}

mod failure;
#[cfg(test)]
mod tests;

use failure::tls_reason;
pub(super) use failure::upgrade_error;
