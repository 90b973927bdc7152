//! `odac app exec [-i] [-t] NAME [--user U] -- CMD…`: runs a command in an app's container
//! through the control plane (like `docker exec`; `-i` passes the CLI's standard input and its
//! end, `-t` allocates a TTY, `-it` is an interactive terminal as `odac app shell` gives). Its standard output and standard error
//! come back on the CLI's own, apart, as they are (bytes, not lines); the command's exit code
//! becomes the CLI's. A session the agent refuses or ends early (exec disabled, too many
//! sessions, not this agent's container, idle timeout, the reader too slow, …) prints
//! `error: exec session ended (REASON): MESSAGE` and exits 125, as `docker exec` does for
//! its own failures. The connection ([`connect`]) and the frame loop ([`Session`]) are shared
//! with `odac app shell` ([`super::shell`]).

use std::io::Write;
use std::path::Path;

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use odac_protocol::{EXEC_SUBPROTOCOL, ExecEndReason, ExecFrame, STREAM_STDERR, STREAM_STDOUT};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, header};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use super::client::{ClientError, api_base, segment};

/// The exit code of a session that ended without the command's own.
pub const SESSION_FAILED: i32 = 125;

/// `odac app exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// App name.
    pub name: String,
    /// Run as this user (`user`, `uid`, `user:group`), if the agent's policy allows it.
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Keep standard input open: what the CLI reads is the command's input, its end closes it.
    #[arg(long, short = 'i')]
    pub interactive: bool,
    /// Allocate a TTY (with `-i`, an interactive terminal like `odac app shell`).
    #[arg(long, short = 't')]
    pub tty: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

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

/// Runs `odac app exec`; returns the exit code.
pub fn exec(target: Target<'_>, args: &ExecArgs) -> Result<i32, ClientError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClientError::new(format!("cannot start the runtime: {e}")))?;
    if args.tty {
        return super::shell::terminal(target, &args.name, args.cmd.clone(), args.user.clone());
    }
    let ask = Ask {
        cmd: args.cmd.clone(),
        tty: false,
        stdin: args.interactive,
        user: args.user.clone(),
        size: None,
    };
    let result = rt.block_on(async {
        let ws = connect(target, &args.name, &ask).await?;
        let (mut sink, mut stream) = ws.split();
        let writer = args.interactive.then(|| {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
            super::shell::read_stdin(tx);
            tokio::spawn(async move {
                while let Some(frame) = rx.recv().await {
                    if sink.send(Message::Binary(frame.into())).await.is_err() {
                        return;
                    }
                }
                let eof = ExecFrame::StdinEof(odac_protocol::ExecStdinEof {});
                let _ = sink.send(Message::Text(eof.encode().into())).await;
                // the sink stays open until the session ends
                std::future::pending::<()>().await;
            })
        });
        let mut out = std::io::stdout().lock();
        let mut err = std::io::stderr().lock();
        let ended = read_to_end(&mut stream, &mut out, &mut err).await;
        if let Some(w) = writer {
            w.abort();
        }
        Ok::<_, ClientError>(ended)
    });
    rt.shutdown_background();
    let (code, why) = result?;
    if let Some(why) = why {
        eprintln!("error: {}", super::term::visible(&why));
    }
    Ok(code)
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
