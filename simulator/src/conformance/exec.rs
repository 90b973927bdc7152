//! The exec-socket rule of the conformance kit (PROTOCOL.md § 3.11): the scripted agent dials
//! `<url>/exec` with its token, its agent id, the `odac.exec.v1` subprotocol and a ticket the
//! control plane never issued; the upgrade must be refused with 401 or 403 before any frame.
//! (The kit cannot ask for a real session without an app to exec into; the replay, expiry and
//! foreign-agent refusals are tested against the simulator in its integration tests.)

use std::time::Duration;

use odac_protocol::{
    AGENT_ID_HEADER, EXEC_PATH_SUFFIX, EXEC_SUBPROTOCOL, EXEC_TICKET_HEADER, refusal_text,
};
use tokio_tungstenite::Connector;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, header};

use super::ConformanceConfig;

/// How long the dial and the upgrade may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// `refuses_an_unknown_exec_ticket`.
pub async fn refuses_an_unknown_exec_ticket(cfg: &ConformanceConfig) -> Result<String, String> {
    let tls = if cfg.ca_pem.is_empty() {
        crate::server::tls::public_client_config()
    } else {
        crate::server::tls::client_config(&cfg.ca_pem)
    }
    .map_err(|e| e.to_string())?;
    let url = format!("{}{EXEC_PATH_SUFFIX}", cfg.url.trim_end_matches('/'));
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    let value = |v: String, what: &str| {
        HeaderValue::from_str(&v).map_err(|_| format!("the {what} is not a valid header value"))
    };
    let never_issued = format!("conformance-{}", uuid::Uuid::new_v4().simple());
    let headers = request.headers_mut();
    headers.insert(
        header::AUTHORIZATION,
        value(format!("Bearer {}", cfg.token), "token")?,
    );
    headers.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(EXEC_SUBPROTOCOL),
    );
    headers.insert(EXEC_TICKET_HEADER, value(never_issued, "exec ticket")?);
    headers.insert(AGENT_ID_HEADER, value(cfg.agent_id.clone(), "agent id")?);
    let dial = tokio_tungstenite::connect_async_tls_with_config(
        request,
        None,
        true,
        Some(Connector::Rustls(tls)),
    );
    match tokio::time::timeout(TIMEOUT, dial).await {
        Err(_) => Err(format!(
            "expected http 401 or 403, got no answer in {TIMEOUT:?}"
        )),
        Ok(Err(WsError::Http(response))) => {
            let status = response.status().as_u16();
            if status == 401 || status == 403 {
                let message = refusal_text(response.body().as_deref());
                Ok(format!(
                    "http {status} for a ticket never issued{}",
                    message.map(|m| format!(" ({m})")).unwrap_or_default()
                ))
            } else {
                Err(format!("expected http 401 or 403, got http {status}"))
            }
        }
        Ok(Err(e)) => Err(format!("expected http 401 or 403, got: {e}")),
        Ok(Ok(_)) => Err("an exec socket was opened with a ticket never issued".to_owned()),
    }
}
