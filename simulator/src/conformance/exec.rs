//! The exec-socket rule of the conformance kit (PROTOCOL.md § 3.11): the scripted agent dials
//! `<url>/exec` with its token, its agent id, the `odac.exec.v1` subprotocol and a ticket the
//! control plane never issued; the upgrade must be refused with 401 or 403 before any frame.
//! (The kit cannot ask for a real session without an app to exec into; the replay, expiry and
//! foreign-agent refusals are tested against the simulator in its integration tests.)

use std::time::Duration;

use odac_agent::uplink::{ConnectError, Dialer, Endpoint, Token};
use odac_protocol::Ticket;

use super::ConformanceConfig;

/// `refuses_an_unknown_exec_ticket`.
pub async fn refuses_an_unknown_exec_ticket(cfg: &ConformanceConfig) -> Result<String, String> {
    let endpoint = Endpoint::parse(&cfg.url).map_err(|e| e.to_string())?;
    let tls = if cfg.ca_pem.is_empty() {
        crate::server::tls::public_client_config()
    } else {
        crate::server::tls::client_config(&cfg.ca_pem)
    }
    .map_err(|e| e.to_string())?;
    let token = Token::new(cfg.token.clone()).map_err(|e| e.to_string())?;
    let dialer =
        Dialer::new(endpoint, tls, token, Duration::from_secs(5)).with_agent_id(&cfg.agent_id);
    let never_issued = Ticket(format!("conformance-{}", uuid::Uuid::new_v4().simple()));
    match dialer.dial_exec(&never_issued).await {
        Err(ConnectError::Unauthorized { status, message }) => Ok(format!(
            "http {status} for a ticket never issued{}",
            message.map(|m| format!(" ({m})")).unwrap_or_default()
        )),
        Err(e) => Err(format!("expected http 401 or 403, got: {e}")),
        Ok(_) => Err("an exec socket was opened with a ticket never issued".to_owned()),
    }
}
