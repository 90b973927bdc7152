//! Checking a registry login before the control plane stores it (`odac registry login`): the
//! registry's API root (`GET /v2/`) is asked the way `docker login` asks it. A registry that
//! answers `401` with a Basic challenge is asked again with the credentials; one with a Bearer
//! challenge is asked for a token at its realm with them. `200` means the registry accepted
//! them ([`Check::Verified`]); `401`/`403` means it refused them ([`Check::Refused`], the
//! login is not stored). Anything else — the registry cannot be reached from the control
//! plane, answers without asking for a login, or in a way this check does not know — stores
//! the login as "not verified" with the reason ([`Check::NotVerified`]): the host's agent
//! checks it on its next pull. Plain HTTP is used only for a loopback registry, as the agent
//! does (`odac_host::http_client::is_loopback`), and credentials never go to a plain-HTTP
//! token realm off loopback. No message holds the password.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use odac_host::http_client::{self, Request, is_loopback};
use odac_protocol::RegistryAuth;

/// Longest one request of the check may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read.
const MAX_BODY: usize = 64 * 1024;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The registry accepted the credentials.
    Verified,
    /// The registry refused them: why, in words.
    Refused(String),
    /// They could not be checked from here: why, in words.
    NotVerified(String),
}

/// The server the API of registry `host` lives on (`docker.io` is served elsewhere).
fn api_server(host: &str) -> &str {
    if host == "docker.io" {
        "registry-1.docker.io"
    } else {
        host
    }
}

/// `name="value"` of a `WWW-Authenticate` challenge.
fn challenge_param(header: &str, name: &str) -> Option<String> {
    let start = header.find(&format!("{name}=\""))? + name.len() + 2;
    let end = header[start..].find('"')? + start;
    Some(header[start..end].to_owned())
}

/// Checks `auth` against its registry (see the module documentation).
pub async fn check(auth: &RegistryAuth) -> Check {
    let server = api_server(&auth.server);
    let scheme = if is_loopback(server) { "http" } else { "https" };
    let root = format!("{scheme}://{server}/v2/");
    let tls = match http_client::tls_config(None) {
        Ok(tls) => Arc::new(tls),
        Err(why) => return Check::NotVerified(format!("no TLS client: {why}")),
    };
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", auth.username, auth.password))
    );
    let get = |url: String, authorization: Option<&str>| {
        let mut request = Request::get(url, MAX_BODY, TIMEOUT);
        if let Some(value) = authorization {
            request = request.header(axum::http::header::AUTHORIZATION, value);
        }
        let tls = Arc::clone(&tls);
        async move { http_client::send(&tls, request).await }
    };
    let first = match get(root.clone(), None).await {
        Ok(answer) => answer,
        Err(e) => {
            return Check::NotVerified(format!("the control plane cannot reach it: {e}"));
        }
    };
    match first.status {
        200 => {
            return Check::NotVerified(format!(
                "{root} answers without asking for a login, so there was nothing to check"
            ));
        }
        401 => {}
        other => return Check::NotVerified(format!("{root} answered http {other}")),
    }
    let challenge = first
        .header_str("www-authenticate")
        .unwrap_or_default()
        .to_owned();
    let kind = challenge.to_ascii_lowercase();
    let (url, what) = if kind.starts_with("basic") {
        (root.clone(), root.clone())
    } else if kind.starts_with("bearer") {
        let Some(realm) = challenge_param(&challenge, "realm") else {
            return Check::NotVerified(format!("{root} asked for a token without a realm"));
        };
        let plain = realm.strip_prefix("http://").map(|rest| {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            &rest[..end]
        });
        if plain.is_some_and(|authority| !is_loopback(authority)) {
            return Check::NotVerified(
                "its token realm is plain http off loopback: credentials are not sent there"
                    .to_owned(),
            );
        }
        let mut url = format!(
            "{realm}{}account={}",
            if realm.contains('?') { '&' } else { '?' },
            http_client::query_encode(&auth.username)
        );
        if let Some(service) = challenge_param(&challenge, "service") {
            url = format!("{url}&service={}", http_client::query_encode(&service));
        }
        let end = realm.find('?').unwrap_or(realm.len());
        (url, format!("the token service {}", &realm[..end]))
    } else {
        return Check::NotVerified(format!("{root} asked for an unknown kind of login"));
    };
    match get(url, Some(&basic)).await {
        Ok(answer) if answer.status == 200 => Check::Verified,
        Ok(answer) if matches!(answer.status, 401 | 403) => Check::Refused(format!(
            "{what} refused user {:?} (http {}): check the user name and password",
            auth.username, answer.status
        )),
        Ok(answer) => Check::NotVerified(format!("{what} answered http {}", answer.status)),
        Err(e) => Check::NotVerified(format!("the control plane cannot reach it: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn challenges_and_servers() {
        let h = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io""#;
        assert_eq!(
            challenge_param(h, "realm").as_deref(),
            Some("https://auth.docker.io/token")
        );
        assert_eq!(
            challenge_param(h, "service").as_deref(),
            Some("registry.docker.io")
        );
        assert_eq!(challenge_param(h, "scope"), None);
        assert_eq!(api_server("docker.io"), "registry-1.docker.io");
        assert_eq!(api_server("127.0.0.1:5000"), "127.0.0.1:5000");
    }

    #[tokio::test]
    async fn an_unreachable_registry_is_stored_not_verified_and_the_password_is_not_said() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let auth = RegistryAuth {
            server: format!("127.0.0.1:{port}"),
            username: "u".into(),
            password: "pw-not-shown".into(),
        };
        match check(&auth).await {
            Check::NotVerified(why) => {
                assert!(why.contains("cannot reach"), "{why}");
                assert!(!why.contains("pw-not-shown"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }
}
