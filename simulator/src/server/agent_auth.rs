//! Who is on the other end of an agent session. The upgrade request carries the bearer token
//! and, from agents that send it, the `odac-agent-id` header: the token must be allowed to
//! speak for that id (`identity.rs`), else the upgrade is answered 403 (400 for an id that
//! breaks the agent-id rule) before any frame, so an impersonator never receives a host's
//! desired state and never displaces the real agent's session. Without the header the same
//! check runs on `hello`'s `agent_id`, before `welcome`: `error unauthorized`, close 1008.

use std::sync::Arc;

use axum::extract::ws::Message;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use odac_protocol::{AGENT_ID_HEADER, ErrorCode, ErrorMessage, Hello};
use tokio::sync::mpsc;

use crate::server::api_error::ApiError;
use crate::state::hub::Hub;
use crate::state::identity::Refusal;
use crate::state::model::hash_secret;

/// An upgrade that was refused.
#[derive(Debug)]
pub struct Refused(ApiError);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        self.0.into_response()
    }
}

impl From<Refusal> for Refused {
    fn from(r: Refusal) -> Self {
        // 401 unknown token, 400 bad id, 403 otherwise
        let status = match &r {
            Refusal::UnknownToken => StatusCode::UNAUTHORIZED,
            Refusal::BadId(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::FORBIDDEN,
        };
        let field = (status != StatusCode::UNAUTHORIZED).then(|| AGENT_ID_HEADER.to_owned());
        Refused(ApiError {
            status,
            error: match &r {
                Refusal::BadId(e) => format!("{AGENT_ID_HEADER}: {}", e.message),
                other => other.to_string(),
            },
            field,
        })
    }
}

/// The credential of one upgrade: the token's hash and the agent id it claimed, if any.
#[derive(Debug, Clone)]
pub struct Caller {
    token_sha256: String,
    claimed: Option<String>,
}

impl Caller {
    /// Reads the caller of an upgrade whose `token` is known; refuses a claimed id the token
    /// may not speak for.
    pub async fn from_upgrade(
        hub: &Arc<Hub>,
        token: &str,
        headers: &HeaderMap,
    ) -> Result<Self, Refused> {
        let token_sha256 = hash_secret(token);
        let claimed = match headers.get(AGENT_ID_HEADER) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| {
                        Refused(ApiError::bad_request(
                            AGENT_ID_HEADER,
                            format!("{AGENT_ID_HEADER}: is not printable ascii"),
                        ))
                    })?
                    .to_owned(),
            ),
        };
        if let Some(id) = &claimed {
            hub.authorize(&token_sha256, id).await?;
        }
        Ok(Self {
            token_sha256,
            claimed,
        })
    }

    /// The agent id the upgrade claimed (`odac-agent-id`), allowed for the token.
    pub fn claimed(&self) -> Option<&str> {
        self.claimed.as_deref()
    }

    /// Checks `hello` against the credential: its `agent_id` must be the claimed one (when the
    /// upgrade named one) and the token must be allowed to speak for it. On refusal an `error
    /// unauthorized` and a close 1008 are queued on `out` and `None` is returned.
    pub async fn check_hello(
        &self,
        hub: &Arc<Hub>,
        hello: Hello,
        out: &mpsc::UnboundedSender<Message>,
    ) -> Option<Hello> {
        let refusal = match &self.claimed {
            Some(c) if *c != hello.agent_id => Some(format!(
                "agent_id: differs from the {AGENT_ID_HEADER} header of the upgrade"
            )),
            _ => hub
                .authorize(&self.token_sha256, &hello.agent_id)
                .await
                .err()
                .map(|r| r.to_string()),
        };
        let Some(message) = refusal else {
            return Some(hello);
        };
        tracing::warn!(agent_id = %hello.agent_id.escape_debug(), "agent session refused: {message}");
        let err = ErrorMessage::new(ErrorCode::Unauthorized, message, None);
        let _ = out.send(Message::Text(
            odac_protocol::encode(&odac_protocol::ControlMessage::Error(err)).into(),
        ));
        let _ = out.send(Message::Close(Some(axum::extract::ws::CloseFrame {
            code: 1008,
            reason: "agent id refused".into(),
        })));
        None
    }
}

/// A 400 naming `protocol` unless the upgrade request offers that WebSocket subprotocol (the
/// main link's and the exec socket's upgrades both require theirs); `None` when it does.
pub fn subprotocol_refusal(headers: &HeaderMap, protocol: &str) -> Option<Response> {
    let offered = headers
        .get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == protocol);
    (!offered).then(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the websocket subprotocol {protocol} is required"),
        )
        .into_response()
    })
}
