//! The bytes of one exec session between the engine's exec and the session's own WebSocket.
//! Output is framed (stream byte, data) and queued for a writer task; the queue is the only
//! buffer the agent keeps, and past `max_unsent_bytes` (a reader that stopped reading: the
//! socket's send blocks, the queue grows) the session ends with `backpressure`, so memory
//! stays bounded. Input (stdin bytes, `resize`) is read by its own task. The session ends when
//! the command's output ends and everything is sent (`exited`, with the exit code), when the
//! viewer goes away (`cancelled`), after the idle timeout or the maximum lifetime, on shutdown,
//! or when the engine fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use odac_protocol::{
    ExecEndReason, ExecExit, ExecFrame, STREAM_STDERR, STREAM_STDIN, STREAM_STDOUT,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::audit::Ending;
use super::config::ExecConfig;
use odac_host::engine::{ExecChunk, ExecControl, ExecInput, ExecProcess};
use odac_host::lock::lock;

/// How long the end of a session waits for its last frames to go out.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How often a finished command's remaining output and exit code are checked.
const DRAIN_POLL: Duration = Duration::from_millis(50);

type Activity = Arc<Mutex<Instant>>;

fn touch(activity: &Activity) {
    *lock(activity) = Instant::now();
}

fn ending(reason: ExecEndReason, message: impl Into<String>) -> Ending {
    Ending {
        reason,
        code: None,
        message: message.into(),
    }
}

/// A binary frame: stream byte, then the data.
fn data_frame(chunk: &ExecChunk) -> Vec<u8> {
    let (stream, bytes) = match chunk {
        ExecChunk::Stdout(b) => (STREAM_STDOUT, b),
        ExecChunk::Stderr(b) => (STREAM_STDERR, b),
    };
    let mut frame = Vec::with_capacity(bytes.len() + 1);
    frame.push(stream);
    frame.extend_from_slice(bytes);
    frame
}

/// Runs the session to its end, sends the `exit` frame and closes the socket.
pub async fn pump<T>(
    ws: WebSocketStream<T>,
    process: ExecProcess,
    cfg: &ExecConfig,
    stdin: bool,
    stop: &CancellationToken,
) -> Ending
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sink, stream) = ws.split();
    let unsent = Arc::new(AtomicUsize::new(0));
    let activity: Activity = Arc::new(Mutex::new(Instant::now()));
    let (out, out_rx) = mpsc::unbounded_channel::<Message>();
    let mut writer = tokio::spawn(write_loop(sink, out_rx, Arc::clone(&unsent)));
    let mut input = tokio::spawn(read_loop(
        stream,
        process.input,
        Arc::clone(&process.control),
        Arc::clone(&activity),
        stdin,
    ));
    let started = Instant::now();
    let mut output = process.output;
    let (mut output_done, mut input_done) = (false, false);
    let idle = cfg.idle_timeout();
    let mut end = loop {
        let idle_at = *lock(&activity) + idle;
        tokio::select! {
            biased;
            () = stop.cancelled() => break ending(ExecEndReason::Shutdown, "the agent is shutting down"),
            () = tokio::time::sleep_until(started + cfg.max_lifetime()) => {
                break ending(ExecEndReason::MaxLifetime, format!(
                    "the session reached its maximum lifetime of {}s ([exec] max_lifetime_secs)",
                    cfg.max_lifetime_secs
                ));
            }
            () = tokio::time::sleep_until(idle_at) => {
                if lock(&activity).elapsed() >= idle {
                    break ending(ExecEndReason::IdleTimeout, format!(
                        "no input or output for {}s ([exec] idle_timeout_secs)",
                        cfg.idle_timeout_secs
                    ));
                }
            }
            _ = &mut input, if !input_done => {
                input_done = true;
                if !output_done {
                    break ending(ExecEndReason::Cancelled, "the viewer went away");
                }
            }
            item = output.next(), if !output_done => match item {
                Some(Ok(chunk)) => {
                    touch(&activity);
                    let frame = data_frame(&chunk);
                    let total = unsent.fetch_add(frame.len(), Ordering::SeqCst) + frame.len();
                    let _ = out.send(Message::Binary(frame.into()));
                    if total > cfg.max_unsent_bytes {
                        break ending(ExecEndReason::Backpressure, format!(
                            "the reader stopped reading: more than {} bytes of output unsent ([exec] max_unsent_bytes)",
                            cfg.max_unsent_bytes
                        ));
                    }
                }
                Some(Err(e)) => break ending(ExecEndReason::Error, format!("the engine failed: {e}")),
                None => output_done = true,
            },
            () = tokio::time::sleep(DRAIN_POLL), if output_done => {
                // everything sent (or the socket gone): the exit code ends it
                if (unsent.load(Ordering::SeqCst) == 0 || writer.is_finished())
                    && let Some(code) = exit_code(process.control.as_ref()).await
                {
                    break Ending { reason: ExecEndReason::Exited, code: Some(code), message: String::new() };
                }
            }
        }
    };
    if end.reason == ExecEndReason::Exited {
        end.message = format!("the command exited with code {}", end.code.unwrap_or(-1));
    }
    input.abort();
    let exit = ExecFrame::Exit(ExecExit {
        reason: end.reason,
        code: end.code,
        message: end.message.clone(),
    });
    let _ = out.send(Message::Text(exit.encode().into()));
    let _ = out.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: end.reason.as_str().into(),
    })));
    drop(out);
    if tokio::time::timeout(CLOSE_WAIT, &mut writer).await.is_err() {
        writer.abort();
        debug!("exec session: the last frames could not be sent; socket dropped");
    }
    end
}

/// The exit code once the engine reports the command finished.
async fn exit_code(control: &dyn ExecControl) -> Option<i64> {
    match control.exit_code().await {
        Ok(code) => code,
        Err(e) => {
            debug!("exec exit code unavailable: {e}");
            Some(-1)
        }
    }
}

async fn write_loop<T>(
    mut sink: SplitSink<WebSocketStream<T>, Message>,
    mut rx: mpsc::UnboundedReceiver<Message>,
    unsent: Arc<AtomicUsize>,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(m) = rx.recv().await {
        let n = match &m {
            Message::Binary(b) => b.len(),
            _ => 0,
        };
        let close = matches!(m, Message::Close(_));
        if sink.send(m).await.is_err() {
            break;
        }
        unsent.fetch_sub(n, Ordering::SeqCst);
        if close {
            break;
        }
    }
    let _ = sink.close().await;
}

/// Reads the viewer's frames until it goes away: stdin bytes to the command (`stdin_eof`
/// closes its input), `resize` to the engine.
async fn read_loop<T>(
    mut stream: SplitStream<WebSocketStream<T>>,
    mut input: ExecInput,
    control: Arc<dyn ExecControl>,
    activity: Activity,
    stdin: bool,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(frame) = stream.next().await {
        match frame {
            Ok(Message::Binary(b)) => {
                touch(&activity);
                if stdin && b.first() == Some(&STREAM_STDIN) {
                    let data = b.get(1..).unwrap_or_default();
                    if input.write_all(data).await.is_err() || input.flush().await.is_err() {
                        debug!("exec session: the command's input is closed");
                    }
                }
            }
            Ok(Message::Text(t)) => match ExecFrame::decode(&t) {
                Ok(ExecFrame::Resize(r)) => {
                    touch(&activity);
                    if let Err(e) = control.resize(r.cols, r.rows).await {
                        debug!("exec resize failed: {e}");
                    }
                }
                Ok(ExecFrame::StdinEof(_)) => {
                    touch(&activity);
                    if input.shutdown().await.is_err() {
                        debug!("exec session: the command's input was closed already");
                    }
                }
                Ok(ExecFrame::Exit(_)) => {
                    debug!("exec session: ignoring an exit frame from the viewer")
                }
                Err(e) => debug!("exec session: ignoring a bad frame: {e}"),
            },
            Ok(Message::Close(_)) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
