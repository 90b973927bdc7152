//! Tests of the pre-pull check: bearer challenges, errors without credentials, plain HTTP only
//! for literal loopback, an endless or oversized manifest refused, the disk-space arithmetic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A registry on 127.0.0.1 that wants a bearer token from its realm, given for basic
/// credentials; answers three requests, then returns what it saw.
async fn token_registry() -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let realm = format!("http://{addr}/token");
    let task = tokio::spawn(async move {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let (status, extra, body) = if head.starts_with("get /token?") {
                (200, String::new(), r#"{"token":"tok123"}"#.to_owned())
            } else if head.contains("authorization: bearer tok123") {
                let m = r#"{"config":{"size":10},"layers":[{"size":20},{"size":30}]}"#;
                (200, String::new(), m.to_owned())
            } else {
                let challenge = format!(
                    "www-authenticate: Bearer realm=\"{realm}\",service=\"reg\",scope=\"repository:odac/x:pull\"\r\n"
                );
                (401, challenge, String::new())
            };
            let answer = format!(
                "HTTP/1.1 {status} X\r\n{extra}content-length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(answer.as_bytes()).await.unwrap();
            s.shutdown().await.unwrap();
            seen.push(head);
        }
        seen
    });
    (addr, task)
}

#[tokio::test]
async fn bearer_challenge_is_answered_with_a_token_from_the_realm() {
    let (addr, seen) = token_registry().await;
    let auth = RegistryAuth {
        username: "odac".into(),
        password: "pw".into(),
        ..RegistryAuth::default()
    };
    let size = compressed_size(&format!("{addr}/odac/x:1"), Some(&auth))
        .await
        .unwrap();
    assert_eq!(size, 60);
    let seen = seen.await.unwrap();
    assert!(
        seen[0].starts_with("get /v2/odac/x/manifests/1 "),
        "{seen:?}"
    );
    assert!(
        seen[0].contains("authorization: basic b2rhyzpwdw=="),
        "{seen:?}"
    );
    assert!(
        seen[1].starts_with("get /token?service=reg&scope=repository%3aodac%2fx%3apull "),
        "{seen:?}"
    );
    assert!(seen[1].contains("authorization: basic"), "{seen:?}");
    assert!(seen[2].contains("authorization: bearer tok123"), "{seen:?}");
}

#[tokio::test]
async fn errors_name_the_path_and_never_the_password() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let auth = RegistryAuth {
        username: "odac".into(),
        password: "s3cret-pw".into(),
        ..RegistryAuth::default()
    };
    let e = compressed_size(&format!("{addr}/odac/x:1"), Some(&auth))
        .await
        .unwrap_err();
    assert!(matches!(e, Precheck::Unknown(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("/v2/odac/x/manifests/1"), "{e}");
    assert!(
        !e.contains("s3cret") && !e.contains("b2RhYzpzM2NyZXQtcHc="),
        "{e}"
    );
}

#[test]
fn plain_http_only_for_literal_loopback() {
    for yes in [
        "127.0.0.1:5000",
        "127.1.2.3",
        "localhost",
        "localhost:5000",
        "LOCALHOST:1",
        "[::1]:5000",
        "[::1]",
        "::1",
    ] {
        assert!(is_loopback(yes), "{yes}");
    }
    for no in [
        "localhost.example.com",
        "localhost.example.com:5000",
        "127.foo",
        "127.foo:5000",
        "127.0.0.1.nip.io",
        "localhostx",
        "128.0.0.1:5000",
        "[::2]:5000",
        "[::1]x",
        "registry.example.com",
    ] {
        assert!(!is_loopback(no), "{no}");
    }
}

/// A registry on 127.0.0.1 whose manifest never ends (chunked, `declared` or not in a
/// `Content-Length`); counts the requests.
async fn endless_registry(declared: bool) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = if declared {
                    "HTTP/1.1 200 OK\r\ncontent-length: 100000000000\r\n\r\n{\"layers\":["
                } else {
                    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                };
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
                let raw = if declared { " ".repeat(0x10000) } else { chunk };
                while s.write_all(raw.as_bytes()).await.is_ok() {}
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn an_endless_manifest_is_refused_not_skipped() {
    for declared in [false, true] {
        let (addr, seen) = endless_registry(declared).await;
        let e = compressed_size(&format!("{addr}/odac/x:1"), None)
            .await
            .unwrap_err();
        let Precheck::Refused(why) = e else {
            panic!("declared {declared}: {e:?}");
        };
        assert!(
            why.contains("/v2/odac/x/manifests/1") && why.contains("larger than 4194304 bytes"),
            "{why}"
        );
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

#[test]
fn challenges_parse_and_space_is_checked() {
    let h = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#;
    assert_eq!(
        challenge_param(h, "realm").as_deref(),
        Some("https://auth.docker.io/token")
    );
    assert_eq!(
        challenge_param(h, "scope").as_deref(),
        Some("repository:library/busybox:pull")
    );
    assert!(check("x:1", "/var/lib/docker", 3_000_000_000, 1_000_000_000, 1024).is_ok());
    let e = check("x:1", "/var/lib/docker", 1_500_000_000, 1_000_000_000, 1024).unwrap_err();
    assert!(e.contains("not enough disk space to pull x:1"), "{e}");
    assert!(e.contains("1500 MB free") && e.contains("1000 MB"), "{e}");
    assert!(free_bytes(Path::new("/")).is_ok_and(|b| b > 0));
}

/// A registry on 127.0.0.1 that answers every manifest request 401 with a bearer challenge
/// (its realm hands out a token that never works) and echoes the request in the body; counts
/// requests.
async fn refusing_registry() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let realm = format!("http://{addr}/token");
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let answer = if head.starts_with("GET /token") {
                let body = r#"{"token":"never-good"}"#;
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
            } else {
                format!(
                    "HTTP/1.1 401 X\r\nwww-authenticate: Bearer realm=\"{realm}\",service=\"r\"\r\ncontent-length: {}\r\n\r\n{head}",
                    head.len()
                )
            };
            let _ = s.write_all(answer.as_bytes()).await;
            let _ = s.shutdown().await;
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn a_401_loop_ends_after_one_token_and_never_shows_the_credentials() {
    let (addr, seen) = refusing_registry().await;
    let auth = RegistryAuth {
        username: "odac".into(),
        password: "s3cret-pw".into(),
        ..RegistryAuth::default()
    };
    let e = compressed_size(&format!("{addr}/odac/x:1"), Some(&auth))
        .await
        .unwrap_err();
    assert!(matches!(e, Precheck::Unknown(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("1: http 401"), "{e}");
    assert!(
        !e.contains("s3cret") && !e.contains("b2RhYzpzM2NyZXQtcHc="),
        "{e}"
    );
    // manifest, token, manifest: then it stops
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn basic_credentials_never_go_to_a_plain_http_realm_off_loopback() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await;
        let answer = "HTTP/1.1 401 X\r\nwww-authenticate: Bearer realm=\"http://192.0.2.1/token\",service=\"r\"\r\ncontent-length: 0\r\n\r\n";
        let _ = s.write_all(answer.as_bytes()).await;
        let _ = s.shutdown().await;
    });
    let auth = RegistryAuth {
        username: "odac".into(),
        password: "pw".into(),
        ..RegistryAuth::default()
    };
    let started = std::time::Instant::now();
    let e = compressed_size(&format!("{addr}/odac/x:1"), Some(&auth))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("credentials are not sent"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no connection tried"
    );
}
