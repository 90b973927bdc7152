//! Unit tests of the dial: refusals (401/403 with the control plane's words), endpoints.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

#[test]
fn a_refused_identity_is_an_auth_failure() {
    use tokio_tungstenite::tungstenite::Error as WsError;
    use tokio_tungstenite::tungstenite::http::Response;
    for (status, unauthorized) in [(401, true), (403, true), (503, false), (400, false)] {
        let resp = Response::builder().status(status).body(None).unwrap();
        let e = upgrade_error("cp:443", WsError::Http(Box::new(resp)));
        assert_eq!(e.is_unauthorized(), unauthorized, "{status}: {e}");
    }
}

#[test]
fn a_refusal_shows_the_control_planes_words() {
    use tokio_tungstenite::tungstenite::Error as WsError;
    use tokio_tungstenite::tungstenite::http::Response;
    let said = r#"{"error":"agent_id: \"b\" is new and this token already registered 1 agent id(s), its limit","field":"odac-agent-id"}"#;
    let resp = Response::builder()
        .status(403)
        .body(Some(said.as_bytes().to_vec()))
        .unwrap();
    let e = upgrade_error("cp:443", WsError::Http(Box::new(resp))).to_string();
    assert!(
        e.contains("(http 403): the control plane says \"agent_id: \\\"b\\\" is new and this token already registered 1 agent id(s)"),
        "{e}"
    );
    assert!(e.contains("check control_plane.token_file"), "{e}");
    let plain = Response::builder()
        .status(401)
        .body(Some(b"no such token\x1b]0;x\x07".to_vec()))
        .unwrap();
    let e = upgrade_error("cp:443", WsError::Http(Box::new(plain))).to_string();
    assert!(e.contains("says \"no such token\\u{1b}]0;x\\u{7}\""), "{e}");
    let empty = Response::builder().status(401).body(None).unwrap();
    let e = upgrade_error("cp:443", WsError::Http(Box::new(empty))).to_string();
    assert!(
        e.starts_with("the control plane refused the agent's token (http 401); check"),
        "{e}"
    );
}

#[test]
fn only_wss_urls() {
    let e = Endpoint::parse("wss://cp.example.com/agent/v1").unwrap();
    assert_eq!(e.authority(), "cp.example.com:443");
    assert_eq!(
        Endpoint::parse("wss://127.0.0.1:8443/x")
            .unwrap()
            .authority(),
        "127.0.0.1:8443"
    );
    let err = Endpoint::parse("ws://cp.example.com/")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("control_plane.url: scheme \"ws\""), "{err}");
    assert!(Endpoint::parse("https://cp.example.com/").is_err());
    assert!(Endpoint::parse("cp.example.com").is_err());
    assert!(Endpoint::parse("wss://user:pw@cp.example.com/").is_err());
}
