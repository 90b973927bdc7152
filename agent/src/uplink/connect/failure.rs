//! How a failed dial reads: the control plane's words in a refused upgrade (its JSON `error`,
//! clipped), its `Retry-After`, the upgrade error as a [`ConnectError`], and a TLS failure in
//! words an operator can act on (an unknown issuer names `control_plane.ca_file`).

use std::time::Duration;

use odac_protocol::refusal_text;
use tokio_tungstenite::tungstenite::http::{HeaderValue, header};

use super::{ConnectError, MAX_RETRY_AFTER};

/// `Retry-After` in its delta-seconds form; an HTTP date or garbage is ignored.
fn parse_retry_after(value: Option<&HeaderValue>) -> Option<Duration> {
    let secs: u64 = value?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

pub(crate) fn upgrade_error(
    authority: &str,
    e: tokio_tungstenite::tungstenite::Error,
) -> ConnectError {
    use tokio_tungstenite::tungstenite::Error as WsError;
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    match e {
        WsError::Http(response) => {
            let status = response.status().as_u16();
            if status == 401 || status == 403 {
                ConnectError::Unauthorized {
                    status,
                    message: refusal_text(response.body().as_deref()),
                }
            } else {
                ConnectError::Refused {
                    status,
                    retry_after: parse_retry_after(response.headers().get(header::RETRY_AFTER)),
                }
            }
        }
        WsError::Protocol(ProtocolError::SecWebSocketSubProtocolError(_)) => {
            ConnectError::Subprotocol { got: None }
        }
        other => ConnectError::Handshake {
            authority: authority.to_owned(),
            reason: other.to_string(),
        },
    }
}

/// A TLS failure in words an operator can act on.
pub(super) fn tls_reason(e: &std::io::Error) -> String {
    use rustls::{CertificateError, Error as TlsError};
    let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<TlsError>())
    else {
        return e.to_string();
    };
    match tls {
        TlsError::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the server certificate is not trusted (unknown issuer); if the control plane uses a private ca, set control_plane.ca_file".into()
        }
        TlsError::InvalidCertificate(CertificateError::BadSignature) => {
            "the server certificate is not trusted (its signature does not verify against the trusted ca); check control_plane.ca_file".into()
        }
        TlsError::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!("the server certificate does not match the host name ({tls})"),
        TlsError::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => format!("the server certificate has expired ({tls})"),
        TlsError::InvalidCertificate(
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. },
        ) => format!("the server certificate is not valid yet; check the host clock ({tls})"),
        other => other.to_string(),
    }
}
