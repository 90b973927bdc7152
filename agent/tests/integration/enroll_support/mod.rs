//! A tiny HTTPS control plane for enrollment tests: a CA and a server certificate for
//! 127.0.0.1 made with rcgen, rustls (ring) on a std thread, and `POST /api/enroll` with the
//! simulator's shape: `{"code"}` → 201 `{"token"}`, an unknown or used code → 401
//! `{"error", "field"}`. Codes work once. Every request is recorded.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// What a code does when redeemed.
#[derive(Debug, Clone)]
pub enum Answer {
    /// 201 with this token; the code is then used up.
    Token(String),
    /// This status and raw body, every time.
    Raw(u16, String),
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub body: String,
}

#[derive(Default)]
struct State {
    codes: HashMap<String, Answer>,
    seen: Vec<Seen>,
}

/// A running fake control plane; stops accepting when dropped (the thread is detached).
pub struct FakeCp {
    pub addr: SocketAddr,
    pub ca_pem: String,
    state: Arc<Mutex<State>>,
}

impl FakeCp {
    pub fn start() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "enroll test ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![CertificateDer::from(cert.der().to_vec())],
                    PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
                )
                .unwrap();
        let config = Arc::new(config);

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let st = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let config = Arc::clone(&config);
                let st = Arc::clone(&st);
                std::thread::spawn(move || {
                    let _ = serve(stream, config, &st);
                });
            }
        });
        Self {
            addr,
            ca_pem: ca_cert.pem(),
            state,
        }
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Accepts `code` once, answering with `token`.
    pub fn add_code(&self, code: &str, token: &str) {
        self.add_answer(code, Answer::Token(token.to_owned()));
    }

    pub fn add_answer(&self, code: &str, answer: Answer) {
        self.state
            .lock()
            .unwrap()
            .codes
            .insert(code.to_owned(), answer);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    pub fn write_ca(&self, path: &Path) {
        std::fs::write(path, &self.ca_pem).unwrap();
    }
}

fn serve(
    stream: TcpStream,
    config: Arc<ServerConfig>,
    state: &Mutex<State>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let tls = rustls::StreamOwned::new(conn, stream);
    let mut reader = BufReader::new(tls);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body).into_owned();

    let (status, answer) = {
        let mut st = state.lock().unwrap();
        st.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            body: body.clone(),
        });
        let code = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_owned));
        if method != "POST" || path != "/api/enroll" {
            (404, r#"{"error":"not found"}"#.to_owned())
        } else {
            match code.and_then(|c| st.codes.get(&c).cloned().map(|a| (c, a))) {
                Some((c, Answer::Token(token))) => {
                    st.codes.remove(&c);
                    (201, serde_json::json!({ "token": token }).to_string())
                }
                Some((_, Answer::Raw(status, body))) => (status, body),
                None => (
                    401,
                    r#"{"error":"code: unknown or already used enrollment code","field":"code"}"#
                        .to_owned(),
                ),
            }
        }
    };
    let reason = match status {
        201 => "Created",
        401 => "Unauthorized",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Status",
    };
    let mut tls = reader.into_inner();
    write!(
        tls,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    )?;
    tls.flush()?;
    tls.conn.send_close_notify();
    tls.flush()?;
    Ok(())
}
