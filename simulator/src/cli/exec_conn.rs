//! The exec socket as the `odac` CLI uses it (`odac app exec`, `odac app shell`): [`connect`]
//! opens `GET /api/apps/{name}/exec` as a WebSocket (the API's CA and token, the
//! `odac.exec.v1` subprotocol; an API refusal comes back as its own words), [`read_to_end`]
//! writes stdout and stderr frames to their fds until the `exit` frame, [`exit_code`] turns
//! that into the CLI's code (the command's own, or 125 with why), and [`read_stdin`] reads the
//! CLI's standard input on a thread of its own.

use std::io::{Read, Write};
use std::path::Path;

use futures_util::StreamExt;
use odac_protocol::{
    EXEC_SUBPROTOCOL, ExecEndReason, ExecFrame, STREAM_STDERR, STREAM_STDIN, STREAM_STDOUT,
};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, header};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use super::client::{ClientError, api_base, segment};

/// The exit code of a session that ended without the command's own.
pub const SESSION_FAILED: i32 = 125;

/// Where and how to reach the API (from the global flags).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// `--api`.
    pub api: &'a str,
    /// `--ca-file`.
    pub ca_file: Option<&'a Path>,
    /// `--token`.
    pub token: Option<&'a str>,
}

/// The exec socket.
pub type ExecSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What an exec session asks for.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// Command.
    pub cmd: Vec<String>,
    /// TTY.
    pub tty: bool,
    /// Standard input attached (without a TTY).
    pub stdin: bool,
    /// User.
    pub user: Option<String>,
    /// Terminal size `(cols, rows)`.
    pub size: Option<(u16, u16)>,
}

fn tls(ca_file: Option<&Path>) -> Result<Connector, ClientError> {
    let config = match ca_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                ClientError::new(format!("cannot read CA file {}: {e}", path.display()))
            })?;
            crate::server::tls::client_config(&pem)
        }
        None => crate::server::tls::public_client_config(),
    }
    .map_err(|e| ClientError::new(e.to_string()))?;
    Ok(Connector::Rustls(config))
}

/// Opens the exec socket of `app`.
pub async fn connect(target: Target<'_>, app: &str, ask: &Ask) -> Result<ExecSocket, ClientError> {
    let base = api_base(target.api);
    let ws_base = if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        return Err(ClientError::new(format!(
            "--api {:?}: expected an https:// url",
            target.api
        )));
    };
    let cmd = serde_json::to_string(&ask.cmd).unwrap_or_default();
    let mut url = format!(
        "{ws_base}/api/apps/{}/exec?cmd={}&tty={}",
        segment(app),
        segment(&cmd),
        ask.tty
    );
    if ask.stdin {
        url.push_str("&stdin=true");
    }
    if let Some(user) = &ask.user {
        url.push_str(&format!("&user={}", segment(user)));
    }
    if let Some((cols, rows)) = ask.size {
        url.push_str(&format!("&cols={cols}&rows={rows}"));
    }
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| ClientError::new(format!("bad exec url {url:?}: {e}")))?;
    let headers = request.headers_mut();
    headers.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(EXEC_SUBPROTOCOL),
    );
    if let Some(token) = target.token {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| ClientError::new("--token: is not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, value);
    }
    let connector = tls(target.ca_file)?;
    let (ws, _) =
        tokio_tungstenite::connect_async_tls_with_config(request, None, true, Some(connector))
            .await
            .map_err(|e| upgrade_error(&base, e))?;
    Ok(ws)
}

fn upgrade_error(base: &str, e: tokio_tungstenite::tungstenite::Error) -> ClientError {
    use tokio_tungstenite::tungstenite::Error as WsError;
    match e {
        WsError::Http(response) => {
            let body = response.body().as_deref().unwrap_or_default();
            let said = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
            ClientError::new(if said.is_empty() {
                format!(
                    "the API refused the exec session (http {})",
                    response.status()
                )
            } else {
                said
            })
        }
        other => ClientError::new(format!("cannot reach the API at {base}: {other}")),
    }
}

/// How a session ended: the CLI's exit code, and why when it is not the command's own.
pub fn exit_code(frame: &odac_protocol::ExecExit) -> (i32, Option<String>) {
    match (frame.reason, frame.code) {
        (ExecEndReason::Exited, Some(code)) => (i32::try_from(code & 0xff).unwrap_or(1), None),
        (reason, _) => (
            SESSION_FAILED,
            Some(format!("exec session ended ({reason}): {}", frame.message)),
        ),
    }
}

/// The CLI's exit code for a session that ended with `(code, why)`; `why` (the reason a
/// session ended without the command's own exit) goes to stderr with its control characters
/// shown.
pub fn ended((code, why): (i32, Option<String>)) -> i32 {
    if let Some(why) = why {
        eprintln!("error: {}", super::term::visible(&why));
    }
    code
}

/// Reads the session to its end, writing output to `out` and `err`; returns the exit code.
pub async fn read_to_end(
    ws: &mut futures_util::stream::SplitStream<ExecSocket>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> (i32, Option<String>) {
    while let Some(frame) = ws.next().await {
        match frame {
            Ok(Message::Binary(b)) => {
                let written = match b.split_first() {
                    Some((&STREAM_STDOUT, data)) => out.write_all(data).and_then(|()| out.flush()),
                    Some((&STREAM_STDERR, data)) => err.write_all(data).and_then(|()| err.flush()),
                    _ => continue,
                };
                if written.is_err() {
                    return (SESSION_FAILED, Some("cannot write the output".into()));
                }
            }
            Ok(Message::Text(t)) => {
                if let Ok(ExecFrame::Exit(exit)) = ExecFrame::decode(&t) {
                    return exit_code(&exit);
                }
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    (
        SESSION_FAILED,
        Some("the exec session closed without an exit status".into()),
    )
}

/// Reads standard input on a thread of its own (its reads block) into `tx`, as stdin frames;
/// `tx` is dropped at its end.
pub fn read_stdin(tx: mpsc::Sender<Vec<u8>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut stdin = std::io::stdin().lock();
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut frame = Vec::with_capacity(n + 1);
                    frame.push(STREAM_STDIN);
                    frame.extend_from_slice(&buf[..n]);
                    if tx.blocking_send(frame).is_err() {
                        break;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use odac_protocol::ExecExit;

    #[test]
    fn the_command_s_code_is_the_cli_s_and_other_ends_are_125() {
        let exited = ExecExit {
            reason: ExecEndReason::Exited,
            code: Some(7),
            message: String::new(),
        };
        assert_eq!(exit_code(&exited), (7, None));
        let busy = ExecExit {
            reason: ExecEndReason::Busy,
            code: None,
            message: "3 exec sessions are already open".into(),
        };
        let (code, why) = exit_code(&busy);
        assert_eq!(code, SESSION_FAILED);
        assert_eq!(
            why.as_deref(),
            Some("exec session ended (busy): 3 exec sessions are already open")
        );
    }
}
