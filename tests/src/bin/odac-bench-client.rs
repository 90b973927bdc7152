//! `odac-bench-client`: the footprint baseline of `odac-bench`. The least a program needs to
//! hold the agent's kind of link: a tokio runtime (multi-threaded, as the agent's), a
//! tokio-tungstenite WebSocket over rustls with the `ring` provider, trusting one CA, a bearer
//! token and the `odac.agent.v1` subprotocol; it says `hello`, acks every control message that
//! carries a sequence number and pings every heartbeat (the `welcome`'s interval when given). No Docker, no
//! inventory, no state, no logging framework: what the agent's RSS and idle CPU are compared to.
//!
//! `odac-bench-client --url wss://… --ca-file CA.pem --token-file FILE [--heartbeat-secs 20]
//! [--id NAME]`; prints `welcome` once the session is up, then runs until killed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use odac_protocol::{
    Ack, AgentMessage, ControlMessage, Hello, PROTOCOL_VERSION, SUBPROTOCOL, decode_control, encode,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{Connector, connect_async_tls_with_config};

/// Why the client stopped.
#[derive(Debug, thiserror::Error)]
enum ClientError {
    #[error("usage: {0}")]
    Usage(String),
    #[error("cannot read {path}: {source}", path = path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tls: {0}")]
    Tls(String),
    #[error("websocket {url}: {message}")]
    Ws { url: String, message: String },
    #[error("the control plane closed the link")]
    Closed,
}

/// The command line.
#[derive(Debug)]
struct Args {
    url: String,
    ca_file: PathBuf,
    token_file: PathBuf,
    heartbeat: Duration,
    id: String,
}

fn parse_args() -> Result<Args, ClientError> {
    let mut url = None;
    let mut ca_file = None;
    let mut token_file = None;
    let mut heartbeat = Duration::from_secs(20);
    let mut id = "bench-bare-client".to_owned();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| ClientError::Usage(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--url" => url = Some(value()?),
            "--ca-file" => ca_file = Some(PathBuf::from(value()?)),
            "--token-file" => token_file = Some(PathBuf::from(value()?)),
            "--heartbeat-secs" => {
                let v = value()?;
                let secs: u64 = v.parse().map_err(|_| {
                    ClientError::Usage(format!("--heartbeat-secs: not a number: {v:?}"))
                })?;
                heartbeat = Duration::from_secs(secs.max(1));
            }
            "--id" => id = value()?,
            other => return Err(ClientError::Usage(format!("unknown argument {other:?}"))),
        }
    }
    let need = |what: &str| ClientError::Usage(format!("{what} is required"));
    Ok(Args {
        url: url.ok_or_else(|| need("--url"))?,
        ca_file: ca_file.ok_or_else(|| need("--ca-file"))?,
        token_file: token_file.ok_or_else(|| need("--token-file"))?,
        heartbeat,
        id,
    })
}

fn tls_config(ca_file: &PathBuf) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let pem = std::fs::read(ca_file).map_err(|source| ClientError::Read {
        path: ca_file.clone(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| ClientError::Tls(format!("{}: {e}", ca_file.display())))?;
        roots
            .add(cert)
            .map_err(|e| ClientError::Tls(format!("{}: {e}", ca_file.display())))?;
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ClientError::Tls(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(cfg))
}

async fn run(args: Args) -> Result<(), ClientError> {
    let ws_err = |e: &dyn std::fmt::Display| ClientError::Ws {
        url: args.url.clone(),
        message: e.to_string(),
    };
    let token = std::fs::read_to_string(&args.token_file).map_err(|source| ClientError::Read {
        path: args.token_file.clone(),
        source,
    })?;
    let mut req = args
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| ws_err(&e))?;
    let auth = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
        .map_err(|_| ws_err(&"the token is not a valid header value"))?;
    req.headers_mut().insert("authorization", auth);
    req.headers_mut().insert(
        "sec-websocket-protocol",
        HeaderValue::from_static(SUBPROTOCOL),
    );
    let connector = Connector::Rustls(tls_config(&args.ca_file)?);
    let (mut ws, _) = connect_async_tls_with_config(req, None, false, Some(connector))
        .await
        .map_err(|e| ws_err(&e))?;
    let hello = AgentMessage::Hello(Hello {
        agent_id: args.id.clone(),
        hostname: args.id.clone(),
        agent_version: "bench-bare-client".to_owned(),
        protocol_version: PROTOCOL_VERSION,
        last_generation: None,
    });
    ws.send(Message::Text(encode(&hello).into()))
        .await
        .map_err(|e| ws_err(&e))?;
    let mut beat = tokio::time::interval(args.heartbeat);
    beat.tick().await;
    loop {
        tokio::select! {
            frame = ws.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let Ok(msg) = decode_control(text.as_bytes()) else { continue };
                    if let ControlMessage::Welcome(w) = &msg {
                        // the control plane's interval wins, as in the agent
                        if let Some(secs) = w.heartbeat_secs {
                            beat = tokio::time::interval(Duration::from_secs(u64::from(secs)));
                            beat.tick().await;
                        }
                        println!("welcome");
                    }
                    if let Some(seq) = msg.seq() {
                        let ack = encode(&AgentMessage::Ack(Ack { seq }));
                        ws.send(Message::Text(ack.into())).await.map_err(|e| ws_err(&e))?;
                    }
                }
                Some(Ok(Message::Close(_))) | None => return Err(ClientError::Closed),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(ws_err(&e)),
            },
            _ = beat.tick() => {
                ws.send(Message::Ping(Vec::new().into())).await.map_err(|e| ws_err(&e))?;
            }
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("odac-bench-client: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("odac-bench-client: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("odac-bench-client: {e}");
            ExitCode::FAILURE
        }
    }
}
