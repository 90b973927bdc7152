//! `odac app exec [-i] [-t] NAME [--user U] -- CMD…`: runs a command in an app's container
//! through the control plane (like `docker exec`; `-i` passes the CLI's standard input and its
//! end, `-t` allocates a TTY, `-it` is an interactive terminal as `odac app shell` gives). Its standard output and standard error
//! come back on the CLI's own, apart, as they are (bytes, not lines); the command's exit code
//! becomes the CLI's. A session the agent refuses or ends early (exec disabled, too many
//! sessions, not this agent's container, idle timeout, the reader too slow, …) prints
//! `error: exec session ended (REASON): MESSAGE` and exits 125, as `docker exec` does for
//! its own failures. The socket and the frame loop are [`super::exec_conn`]'s, shared with
//! `odac app shell` ([`super::shell`]).

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use odac_protocol::ExecFrame;
use tokio_tungstenite::tungstenite::Message;

use super::client::ClientError;
use super::exec_conn::{Ask, Target, connect, read_stdin, read_to_end};

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
            read_stdin(tx);
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
    Ok(super::exec_conn::ended(result?))
}
