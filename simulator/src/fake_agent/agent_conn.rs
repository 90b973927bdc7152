//! A protocol-level agent connection: TLS WebSocket to the control plane with a bearer token
//! and the `odac.agent.v1` subprotocol, sending [`AgentMessage`]s and receiving decoded
//! [`ControlMessage`]s. Used by the simulated fleet and by tests that need a host to exist
//! without a real agent.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use odac_protocol::{
    AGENT_ID_HEADER, AgentMessage, ControlMessage, DecodeError, Hello, MAX_FRAME_BYTES,
    PROTOCOL_VERSION, SUBPROTOCOL, Welcome, decode_control, encode,
};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// Why a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The upgrade was answered with an HTTP status (401 token refused, 503 refusing, …).
    #[error("control plane answered http {status} to the websocket upgrade at {url}")]
    Http {
        /// The URL.
        url: String,
        /// HTTP status.
        status: u16,
        /// The `Retry-After` header, as sent.
        retry_after: Option<String>,
    },
    /// TLS, TCP or WebSocket failure.
    #[error("cannot connect to {url}: {message}")]
    Transport {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The CA file did not parse.
    #[error("{0}")]
    Tls(#[from] crate::SimError),
    /// The peer broke the protocol (e.g. no `welcome`).
    #[error("protocol: {0}")]
    Protocol(String),
    /// The connection closed.
    #[error("connection closed{}", .0.as_ref().map(|c| format!(" with code {c}")).unwrap_or_default())]
    Closed(Option<u16>),
    /// Nothing arrived in time.
    #[error("timed out waiting for the control plane")]
    Timeout,
}

/// What [`AgentConn::recv`] got.
// One value at a time, consumed at once: boxing the message would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Incoming {
    /// A valid control-plane message.
    Message(ControlMessage),
    /// A text frame that failed decoding (malformed, unknown type, invalid, too large).
    Undecodable(DecodeError),
}

/// One live agent connection.
pub struct AgentConn {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The close frame received, if any: code and reason.
    closed_with: Option<(u16, String)>,
}

impl AgentConn {
    /// Connects to `url` (`wss://…/agent/v1`) trusting `ca_pem` (empty: the public web PKI
    /// roots), authenticating with `token`,
    /// without naming an agent id on the upgrade (the control plane checks `hello`'s instead).
    pub async fn connect(url: &str, ca_pem: &[u8], token: &str) -> Result<Self, ConnError> {
        Self::connect_as(url, ca_pem, token, None).await
    }

    /// [`AgentConn::connect`] naming `agent_id` in the `odac-agent-id` header, so a token
    /// that may not speak for it is refused with HTTP 403 before the session opens.
    pub async fn connect_as(
        url: &str,
        ca_pem: &[u8],
        token: &str,
        agent_id: Option<&str>,
    ) -> Result<Self, ConnError> {
        let tls = if ca_pem.is_empty() {
            crate::server::tls::public_client_config()?
        } else {
            crate::server::tls::client_config(ca_pem)?
        };
        let transport = |message: String| ConnError::Transport {
            url: url.to_owned(),
            message,
        };
        let mut req = url
            .into_client_request()
            .map_err(|e| transport(e.to_string()))?;
        let auth = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| transport("the token is not a valid header value".to_owned()))?;
        req.headers_mut().insert("authorization", auth);
        req.headers_mut().insert(
            "sec-websocket-protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        if let Some(id) = agent_id {
            let v = HeaderValue::from_str(id)
                .map_err(|_| transport(format!("agent id {id:?} is not a valid header value")))?;
            req.headers_mut().insert(AGENT_ID_HEADER, v);
        }
        let cfg = WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME_BYTES * 2))
            .max_frame_size(Some(MAX_FRAME_BYTES * 2));
        let fut = tokio_tungstenite::connect_async_tls_with_config(
            req,
            Some(cfg),
            true,
            Some(Connector::Rustls(tls)),
        );
        let (ws, _resp) = match tokio::time::timeout(Duration::from_secs(15), fut).await {
            Err(_) => return Err(ConnError::Timeout),
            Ok(Err(WsError::Http(resp))) => {
                return Err(ConnError::Http {
                    url: url.to_owned(),
                    status: resp.status().as_u16(),
                    retry_after: resp
                        .headers()
                        .get("retry-after")
                        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
                });
            }
            Ok(Err(e)) => return Err(transport(e.to_string())),
            Ok(Ok(c)) => c,
        };
        Ok(Self {
            ws,
            closed_with: None,
        })
    }

    /// Connects and does the handshake: `hello` → `welcome`.
    pub async fn connect_hello(
        url: &str,
        ca_pem: &[u8],
        token: &str,
        hello: Hello,
    ) -> Result<(Self, Welcome), ConnError> {
        let mut conn = Self::connect_as(url, ca_pem, token, Some(&hello.agent_id)).await?;
        conn.send(&AgentMessage::Hello(hello)).await?;
        match conn.recv_timeout(Duration::from_secs(10)).await? {
            Incoming::Message(ControlMessage::Welcome(w)) => Ok((conn, w)),
            other => Err(ConnError::Protocol(format!(
                "expected welcome, got {other:?}"
            ))),
        }
    }

    /// A `hello` for `agent_id` / `hostname`.
    pub fn hello(agent_id: &str, hostname: &str) -> Hello {
        Hello {
            agent_id: agent_id.to_owned(),
            hostname: hostname.to_owned(),
            agent_version: format!("sim-{}", env!("CARGO_PKG_VERSION")),
            protocol_version: PROTOCOL_VERSION,
            last_generation: None,
        }
    }

    /// Sends a message.
    pub async fn send(&mut self, msg: &AgentMessage) -> Result<(), ConnError> {
        self.send_raw(encode(msg)).await
    }

    /// Sends a text frame as is.
    pub async fn send_raw(&mut self, text: String) -> Result<(), ConnError> {
        self.ws
            .send(Message::Text(text.into()))
            .await
            .map_err(|e| ConnError::Protocol(format!("send failed: {e}")))
    }

    /// Sends a binary frame (the protocol refuses them; tests use this to check how).
    pub async fn send_binary(&mut self, bytes: Vec<u8>) -> Result<(), ConnError> {
        self.ws
            .send(Message::Binary(bytes.into()))
            .await
            .map_err(|e| ConnError::Protocol(format!("send failed: {e}")))
    }

    /// Sends a WebSocket ping.
    pub async fn ping(&mut self) -> Result<(), ConnError> {
        self.ws
            .send(Message::Ping(Vec::new().into()))
            .await
            .map_err(|e| ConnError::Protocol(format!("ping failed: {e}")))
    }

    /// Receives the next text frame, decoded; pings and pongs are skipped.
    pub async fn recv(&mut self) -> Result<Incoming, ConnError> {
        loop {
            match self.ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    return Ok(match decode_control(t.as_bytes()) {
                        Ok(m) => Incoming::Message(m),
                        Err(e) => Incoming::Undecodable(e),
                    });
                }
                Some(Ok(Message::Binary(_))) => {
                    return Ok(Incoming::Undecodable(DecodeError::Malformed(
                        "binary frame".to_owned(),
                    )));
                }
                Some(Ok(Message::Close(frame))) => {
                    let code = frame.as_ref().map(|f| u16::from(f.code));
                    self.closed_with = frame.map(|f| (u16::from(f.code), f.reason.to_string()));
                    return Err(ConnError::Closed(code));
                }
                Some(Ok(_)) => {}
                Some(Err(WsError::Capacity(_))) => {
                    return Err(ConnError::Closed(Some(u16::from(CloseCode::Size))));
                }
                Some(Err(e)) => return Err(ConnError::Protocol(format!("receive failed: {e}"))),
                None => return Err(ConnError::Closed(None)),
            }
        }
    }

    /// [`AgentConn::recv`] with a deadline.
    pub async fn recv_timeout(&mut self, d: Duration) -> Result<Incoming, ConnError> {
        tokio::time::timeout(d, self.recv())
            .await
            .map_err(|_| ConnError::Timeout)?
    }

    /// Receives until a message matches `pick`, within `d`; other messages are skipped.
    pub async fn recv_until<T>(
        &mut self,
        d: Duration,
        mut pick: impl FnMut(&Incoming) -> Option<T>,
    ) -> Result<T, ConnError> {
        let deadline = tokio::time::Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let m = self.recv_timeout(left).await?;
            if let Some(t) = pick(&m) {
                return Ok(t);
            }
        }
    }

    /// The code and reason of the close frame received, once [`AgentConn::recv`] has seen one.
    pub fn closed_with(&self) -> Option<(u16, &str)> {
        self.closed_with.as_ref().map(|(c, r)| (*c, r.as_str()))
    }

    /// Closes with 1000.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
