//! `odac app shell NAME [--cmd /bin/sh] [--user U]`: an interactive shell in an app's container
//! through the control plane (like `docker exec -it` / `kubectl exec -it`). The session gets
//! a TTY of the terminal's size; the terminal is put in raw mode, so every key (Ctrl-C, Ctrl-D,
//! arrows) goes to the shell, and is restored when the session ends, however it ends. A window
//! resize (SIGWINCH) is sent as a `resize` frame. The shell's exit status becomes the CLI's;
//! a session that ends otherwise prints why and exits 125. Standard input must be a terminal.

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use odac_protocol::{ExecFrame, ExecResize};
use rustix::termios::{OptionalActions, Termios, isatty, tcgetattr, tcgetwinsize, tcsetattr};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::client::ClientError;
use super::exec_conn::{Ask, Target, connect, read_stdin, read_to_end};

/// `odac app shell`.
#[derive(Debug, Args)]
pub struct ShellArgs {
    /// App name.
    pub name: String,
    /// The shell (or any program) to run.
    #[arg(long, default_value = "/bin/sh", value_name = "PROGRAM")]
    pub cmd: String,
    /// Run as this user (`user`, `uid`, `user:group`), if the agent's policy allows it.
    #[arg(long, short = 'u')]
    pub user: Option<String>,
}

/// The terminal in raw mode; its settings come back when this drops.
struct RawMode {
    saved: Termios,
}

impl RawMode {
    fn enter() -> Result<Self, ClientError> {
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin)
            .map_err(|e| ClientError::new(format!("cannot read the terminal's settings: {e}")))?;
        let mut raw = saved.clone();
        raw.make_raw();
        tcsetattr(&stdin, OptionalActions::Now, &raw)
            .map_err(|e| ClientError::new(format!("cannot put the terminal in raw mode: {e}")))?;
        Ok(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
    }
}

/// The terminal's size, `(cols, rows)`.
fn term_size() -> Option<(u16, u16)> {
    let w = tcgetwinsize(std::io::stdout())
        .or_else(|_| tcgetwinsize(std::io::stdin()))
        .ok()?;
    (w.ws_col > 0 && w.ws_row > 0).then_some((w.ws_col.min(1000), w.ws_row.min(1000)))
}

/// Runs `odac app shell`; returns the exit code.
pub fn shell(target: Target<'_>, args: &ShellArgs) -> Result<i32, ClientError> {
    terminal(
        target,
        &args.name,
        vec![args.cmd.clone()],
        args.user.clone(),
    )
}

/// Runs `cmd` in `app` on a TTY, the CLI's terminal in raw mode; returns the exit code.
pub fn terminal(
    target: Target<'_>,
    app: &str,
    cmd: Vec<String>,
    user: Option<String>,
) -> Result<i32, ClientError> {
    if !isatty(std::io::stdin()) {
        return Err(ClientError::new(
            "a shell or -t needs a terminal on standard input (the input device is not a tty); for a command use odac app exec [-i] NAME -- CMD",
        ));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClientError::new(format!("cannot start the runtime: {e}")))?;
    let ask = Ask {
        cmd,
        tty: true,
        stdin: false,
        user,
        size: term_size(),
    };
    let result = rt.block_on(async {
        let ws = connect(target, app, &ask).await?;
        let raw = RawMode::enter()?;
        let (mut sink, mut stream) = ws.split();
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
        read_stdin(tx);
        let mut winch =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok();
        let writer = tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    data = rx.recv() => match data {
                        Some(frame) => Message::Binary(frame.into()),
                        None => return,
                    },
                    Some(()) = async { match winch.as_mut() { Some(w) => w.recv().await, None => None } } => {
                        let Some((cols, rows)) = term_size() else { continue };
                        Message::Text(ExecFrame::Resize(ExecResize { cols, rows }).encode().into())
                    }
                };
                if sink.send(msg).await.is_err() {
                    return;
                }
            }
        });
        let mut out = std::io::stdout().lock();
        let mut err = std::io::stderr().lock();
        let ended = read_to_end(&mut stream, &mut out, &mut err).await;
        writer.abort();
        drop(raw);
        Ok::<_, ClientError>(ended)
    });
    rt.shutdown_background();
    Ok(super::exec_conn::ended(result?))
}
