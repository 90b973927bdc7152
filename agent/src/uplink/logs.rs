//! Live logs over the uplink: a `logs_request` opens a stream of an app container's output (through
//! [`odac_host::engine::ContainerEngine::log_stream`]), sent back as bounded `logs_chunk`s and one
//! final `logs_end`. Each stream is one task ([`super::log_pump`]); its chunks go through one
//! bounded queue per session that the session drains only when no report, ack or error is waiting,
//! so output never delays a status. A stream is rate-limited (a token bucket of lines per second);
//! lines over the rate, or that find the queue full, are dropped and counted in the next chunk. A
//! stream ends on `logs_cancel`, after its timeout, when the output ends, on shutdown (the session
//! sends `shutdown` ends) and with its session (the tasks are cancelled when [`LogSessions`]
//! drops).

use std::collections::HashMap;
use std::sync::Arc;

use odac_protocol::{AgentMessage, LogsEnd, LogsEndReason, LogsRequest};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::log_pump::{Out, run_stream};
pub use super::log_source::{LogLimits, LogSource};

/// The log streams of one session.
pub(crate) struct LogSessions {
    source: Option<Arc<LogSource>>,
    chunks_tx: mpsc::Sender<Out>,
    chunks: mpsc::Receiver<Out>,
    /// Ends of streams refused at once (they have no chunk).
    ends_tx: mpsc::UnboundedSender<LogsEnd>,
    ends: mpsc::UnboundedReceiver<LogsEnd>,
    /// Open streams by request id.
    open: HashMap<String, CancellationToken>,
}

impl LogSessions {
    /// No stream yet; `source` `None` answers every request with `not_found`.
    pub(crate) fn new(source: Option<Arc<LogSource>>) -> Self {
        let queue = source.as_ref().map_or(1, |s| s.limits.queue.max(1));
        let (chunks_tx, chunks) = mpsc::channel(queue);
        let (ends_tx, ends) = mpsc::unbounded_channel();
        Self {
            source,
            chunks_tx,
            chunks,
            ends_tx,
            ends,
            open: HashMap::new(),
        }
    }

    /// Opens a stream; refusals are queued as its `logs_end`.
    pub(crate) fn request(&mut self, req: LogsRequest) {
        let id = req.request_id.clone();
        if self.open.contains_key(&id) {
            // the open stream keeps its id; this duplicate gets nothing
            debug!(request_id = %id, "ignoring a logs_request for an open stream");
            return;
        }
        let Some(source) = self.source.clone() else {
            self.refuse(
                id,
                LogsEndReason::NotFound,
                "this agent serves no logs".into(),
            );
            return;
        };
        if self.open.len() >= source.limits.max_streams {
            let max = source.limits.max_streams;
            let message = format!("{max} log streams are already open on this session");
            self.refuse(id, LogsEndReason::Busy, message);
            return;
        }
        info!(request_id = %id, app = %req.app, follow = req.follow, "log stream opened");
        let cancel = CancellationToken::new();
        self.open.insert(id, cancel.clone());
        let chunks = self.chunks_tx.clone();
        tokio::spawn(async move {
            let end = run_stream(&source, req, chunks.clone(), cancel).await;
            if let Some(end) = end {
                let _ = chunks.send(Out::End(end)).await;
            }
        });
    }

    /// Ends a stream at once (it counts as open until its end is sent).
    fn refuse(&mut self, request_id: String, reason: LogsEndReason, message: String) {
        self.open
            .insert(request_id.clone(), CancellationToken::new());
        let _ = self.ends_tx.send(LogsEnd {
            request_id,
            reason,
            dropped: 0,
            message,
        });
    }

    /// Ends a stream at the viewer's request; returns its `logs_end` (`None`: unknown id).
    pub(crate) fn cancel(&mut self, request_id: &str) -> Option<LogsEnd> {
        let token = self.open.remove(request_id)?;
        token.cancel();
        info!(request_id, "log stream cancelled by the control plane");
        Some(LogsEnd {
            request_id: request_id.to_owned(),
            reason: LogsEndReason::Cancelled,
            dropped: 0,
            message: "the viewer went away".into(),
        })
    }

    /// Ends every stream for shutdown; returns their `logs_end`s.
    pub(crate) fn shut_down(&mut self) -> Vec<LogsEnd> {
        self.open
            .drain()
            .map(|(request_id, token)| {
                token.cancel();
                LogsEnd {
                    request_id,
                    reason: LogsEndReason::Shutdown,
                    dropped: 0,
                    message: "the agent is shutting down".into(),
                }
            })
            .collect()
    }

    /// The next message to send: an end first, else a chunk of a stream still open.
    pub(crate) async fn next(&mut self) -> AgentMessage {
        loop {
            tokio::select! {
                biased;
                Some(end) = self.ends.recv() => {
                    if self.open.remove(&end.request_id).is_some() {
                        return AgentMessage::LogsEnd(end);
                    }
                }
                Some(out) = self.chunks.recv() => match out {
                    Out::Chunk(chunk) => {
                        if self.open.contains_key(&chunk.request_id) {
                            return AgentMessage::LogsChunk(chunk);
                        }
                    }
                    Out::End(end) => {
                        if self.open.remove(&end.request_id).is_some() {
                            return AgentMessage::LogsEnd(end);
                        }
                    }
                },
            }
        }
    }
}

impl Drop for LogSessions {
    fn drop(&mut self) {
        for token in self.open.values() {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use odac_protocol::LogsChunk;
    use tokio::time::Instant;

    use super::*;
    use odac_host::names::container_name;
    use std::time::Duration;

    use odac_host::engine::{
        ContainerEngine, ContainerSpec, EngineCall, FakeEngine, LogStreamOptions, Op,
    };

    async fn engine_with(app: &str, lines: usize) -> Arc<FakeEngine> {
        let engine = Arc::new(FakeEngine::new());
        engine.add_image("img");
        let spec = ContainerSpec {
            name: container_name("inst", app),
            image: "img".into(),
            ..ContainerSpec::default()
        };
        let id = engine.create(&spec).await.unwrap();
        let text: String = (1..=lines).map(|i| format!("line {i}\n")).collect();
        engine.push_log(&id, &text);
        engine
    }

    fn sessions(engine: &Arc<FakeEngine>, limits: LogLimits) -> LogSessions {
        let engine: Arc<dyn ContainerEngine> = engine.clone();
        LogSessions::new(Some(Arc::new(
            LogSource::new(engine, "inst").with_limits(limits),
        )))
    }

    fn request(id: &str, app: &str) -> LogsRequest {
        LogsRequest {
            request_id: id.into(),
            app: app.into(),
            ..LogsRequest::default()
        }
    }

    /// Every message until the end of stream `id`.
    async fn until_end(s: &mut LogSessions, id: &str) -> (Vec<LogsChunk>, LogsEnd) {
        let mut chunks = Vec::new();
        loop {
            match s.next().await {
                AgentMessage::LogsChunk(c) if c.request_id == id => chunks.push(c),
                AgentMessage::LogsEnd(e) if e.request_id == id => return (chunks, e),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_tail_is_sent_in_bounded_chunks_then_ends_complete() {
        let engine = engine_with("web", 25).await;
        let mut s = sessions(
            &engine,
            LogLimits {
                chunk_lines: 10,
                ..LogLimits::default()
            },
        );
        s.request(LogsRequest {
            tail: Some(23),
            ..request("r1", "web")
        });
        let (chunks, end) = until_end(&mut s, "r1").await;
        let sizes: Vec<usize> = chunks.iter().map(|c| c.lines.len()).collect();
        assert_eq!(sizes, [10, 10, 3]);
        assert_eq!(chunks[0].lines[0], "line 3");
        assert_eq!(end.reason, LogsEndReason::Complete);
        assert_eq!(end.dropped, 0);
        let calls = engine.calls_of(Op::LogStream);
        assert_eq!(
            calls,
            [EngineCall::LogStream(
                "inst_web".into(),
                LogStreamOptions {
                    follow: false,
                    tail: Some(23),
                    since_unix: None
                }
            )]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn lines_over_the_rate_are_dropped_and_counted() {
        let engine = engine_with("web", 100).await;
        let mut s = sessions(
            &engine,
            LogLimits {
                lines_per_sec: 10,
                ..LogLimits::default()
            },
        );
        s.request(request("r1", "web"));
        let (chunks, end) = until_end(&mut s, "r1").await;
        let sent: usize = chunks.iter().map(|c| c.lines.len()).sum();
        let dropped: u64 = chunks.iter().map(|c| c.dropped).sum::<u64>() + end.dropped;
        assert_eq!(sent, 10);
        assert_eq!(sent as u64 + dropped, 100);
    }

    #[tokio::test(start_paused = true)]
    async fn a_followed_stream_ends_at_its_timeout() {
        let engine = engine_with("web", 2).await;
        let mut s = sessions(&engine, LogLimits::default());
        s.request(LogsRequest {
            follow: true,
            timeout_secs: Some(5),
            ..request("r1", "web")
        });
        let started = Instant::now();
        let (chunks, end) = until_end(&mut s, "r1").await;
        assert_eq!(chunks.len(), 1);
        assert_eq!(end.reason, LogsEndReason::Timeout);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_timeout_applies_when_the_request_names_none() {
        let engine = engine_with("web", 0).await;
        let mut s = sessions(&engine, LogLimits::default());
        s.request(LogsRequest {
            follow: true,
            ..request("r1", "web")
        });
        let started = Instant::now();
        let (_, end) = until_end(&mut s, "r1").await;
        assert_eq!(end.reason, LogsEndReason::Timeout);
        assert_eq!(started.elapsed(), Duration::from_secs(600));
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_ends_the_stream_and_nothing_of_it_follows() {
        let engine = engine_with("web", 3).await;
        let mut s = sessions(&engine, LogLimits::default());
        s.request(LogsRequest {
            follow: true,
            ..request("r1", "web")
        });
        s.request(LogsRequest {
            follow: true,
            timeout_secs: Some(60),
            ..request("r2", "web")
        });
        let end = s.cancel("r1").unwrap();
        assert_eq!(end.reason, LogsEndReason::Cancelled);
        assert!(s.cancel("r1").is_none(), "a second cancel is ignored");
        // only r2's chunk and end arrive
        let (chunks, end) = until_end(&mut s, "r2").await;
        assert_eq!(chunks.len(), 1);
        assert_eq!(end.reason, LogsEndReason::Timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn unknown_apps_busy_sessions_and_shutdown_end_streams() {
        let engine = engine_with("web", 1).await;
        let mut s = sessions(
            &engine,
            LogLimits {
                max_streams: 1,
                ..LogLimits::default()
            },
        );
        s.request(request("gone", "nope"));
        let (_, end) = until_end(&mut s, "gone").await;
        assert_eq!(end.reason, LogsEndReason::NotFound);
        assert!(end.message.contains("inst_nope"), "{}", end.message);

        s.request(LogsRequest {
            follow: true,
            ..request("r1", "web")
        });
        s.request(request("r2", "web"));
        let (_, end) = until_end(&mut s, "r2").await;
        assert_eq!(end.reason, LogsEndReason::Busy);
        let ends = s.shut_down();
        assert_eq!(ends.len(), 1);
        assert_eq!(ends[0].request_id, "r1");
        assert_eq!(ends[0].reason, LogsEndReason::Shutdown);
    }

    #[tokio::test]
    async fn without_a_source_every_request_is_not_found() {
        let mut s = LogSessions::new(None);
        s.request(request("r1", "web"));
        let (_, end) = until_end(&mut s, "r1").await;
        assert_eq!(end.reason, LogsEndReason::NotFound);
    }
}
