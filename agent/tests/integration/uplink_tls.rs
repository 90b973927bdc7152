//! Trust: a server whose certificate chains to a private CA is refused under the default
//! (public web) roots with a reason that says what to do, and accepted once `ca_file` names
//! that CA; a CA that did not issue the certificate is refused too; a server that demands a
//! client certificate gets the configured one (mTLS) and refuses an agent without it.

use crate::uplink_support;

use std::time::Duration;

use odac_agent::uplink::{ConnectError, Dialer, Endpoint, TlsSettings, Token, tls};
use uplink_support::*;

fn dialer(url: &str, settings: &TlsSettings) -> Dialer {
    Dialer::new(
        Endpoint::parse(url).unwrap(),
        tls::client_config(settings).unwrap(),
        Token::new(TOKEN).unwrap(),
        Duration::from_secs(10),
    )
}

/// A dialer to `url` that trusts only the CA in `ca_file`.
fn dialer_trusting(url: &str, ca_file: &std::path::Path) -> Dialer {
    dialer(
        url,
        &TlsSettings {
            ca_file: Some(ca_file.to_path_buf()),
            ..Default::default()
        },
    )
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_certificate_is_refused_and_ca_file_makes_it_trusted() {
    let pki = Pki::new();
    let server = TestServer::start(&pki, Behaviour::default()).await;

    let err = dialer(&server.url(), &TlsSettings::default())
        .dial()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ConnectError::Tls { .. }), "{err:?}");
    assert!(text.contains("not trusted (unknown issuer)"), "{text}");
    assert!(text.contains("control_plane.ca_file"), "{text}");
    assert!(!text.contains(TOKEN));
    assert_eq!(server.log.lock().unwrap().auth_ok, 0, "no request was sent");

    let other = Pki::new();
    let err = dialer_trusting(&server.url(), &other.ca_file)
        .dial()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not trusted"), "{err}");

    let ws = dialer_trusting(&server.url(), &pki.ca_file).dial().await;
    assert!(ws.is_ok(), "{:?}", ws.err());
    assert_eq!(server.log.lock().unwrap().auth_ok, 1);
}

#[tokio::test(start_paused = true)]
async fn mutual_tls_presents_the_configured_client_certificate() {
    let pki = Pki::new();
    let server = TestServer::start_mtls(&pki, Behaviour::default()).await;
    let with_identity = TlsSettings {
        ca_file: Some(pki.ca_file.clone()),
        client_cert: Some(pki.client_cert_file.clone()),
        client_key: Some(pki.client_key_file.clone()),
    };
    let ws = dialer(&server.url(), &with_identity).dial().await;
    assert!(ws.is_ok(), "{:?}", ws.err());
    assert_eq!(server.log.lock().unwrap().auth_ok, 1);

    let without = TlsSettings {
        ca_file: Some(pki.ca_file.clone()),
        ..Default::default()
    };
    let err = dialer(&server.url(), &without).dial().await.unwrap_err();
    assert!(
        matches!(
            err,
            ConnectError::Tls { .. } | ConnectError::Handshake { .. }
        ),
        "{err:?}"
    );
    assert_eq!(server.log.lock().unwrap().auth_ok, 1);
    assert!(!server.log.lock().unwrap().tls_failures.is_empty());
}
