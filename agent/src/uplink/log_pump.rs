//! One live log stream, from the engine to the session's queue: [`run_stream`] opens the
//! container's output, batches lines into bounded chunks ([`Pump`]: at most `chunk_lines` lines
//! and `chunk_bytes` bytes, a line waiting at most `linger`), drops lines over the rate (a token
//! bucket of lines per second) or that find the queue full, counting them in the next chunk,
//! and ends with the stream (`complete`), an engine error, a missing container or the timeout.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use odac_protocol::{
    LogsChunk, LogsEnd, LogsEndReason, LogsRequest, MAX_LOGS_CHUNK_LINES, cut_log_line,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::log_source::{LogLimits, LogSource};
use odac_host::engine::{EngineError, LogStreamOptions};
use odac_host::names::container_name;

/// What a stream's task queues: chunks (dropped when the queue is full) and, after them, its
/// end (waited for, so it always arrives after the stream's last chunk).
#[derive(Debug)]
pub(super) enum Out {
    /// A chunk.
    Chunk(LogsChunk),
    /// The end.
    End(LogsEnd),
}

/// A token bucket of lines.
struct Bucket {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(per_sec: u32) -> Self {
        let rate = f64::from(per_sec.max(1));
        Self {
            rate,
            tokens: rate,
            at: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.rate);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One stream's batching state.
struct Pump {
    request_id: String,
    limits: LogLimits,
    batch: Vec<String>,
    bytes: usize,
    dropped: u64,
    chunks: mpsc::Sender<Out>,
}

impl Pump {
    fn push(&mut self, line: &str) {
        let line = cut_log_line(line);
        if self.bytes + line.len() > self.limits.chunk_bytes {
            self.flush();
        }
        self.bytes += line.len();
        self.batch.push(line.into_owned());
        if self.batch.len() >= self.limits.chunk_lines.min(MAX_LOGS_CHUNK_LINES) {
            self.flush();
        }
    }

    /// Queues the batch (or, with no line, the count of dropped ones); when the queue is
    /// full its lines are dropped and counted.
    fn flush(&mut self) {
        if self.batch.is_empty() && self.dropped == 0 {
            return;
        }
        let chunk = LogsChunk {
            request_id: self.request_id.clone(),
            lines: std::mem::take(&mut self.batch),
            dropped: std::mem::take(&mut self.dropped),
        };
        self.bytes = 0;
        if let Err(
            mpsc::error::TrySendError::Full(Out::Chunk(chunk))
            | mpsc::error::TrySendError::Closed(Out::Chunk(chunk)),
        ) = self.chunks.try_send(Out::Chunk(chunk))
        {
            self.dropped = chunk.dropped + chunk.lines.len() as u64;
        }
    }

    /// Reads `lines` until they end (`complete`) or fail (`error`).
    async fn run(&mut self, mut lines: odac_host::engine::LogLines) -> (LogsEndReason, String) {
        let mut bucket = Bucket::new(self.limits.lines_per_sec);
        let mut flush_at: Option<Instant> = None;
        loop {
            let linger = async {
                match flush_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                item = lines.next() => match item {
                    Some(Ok(line)) => {
                        if bucket.take() {
                            self.push(&line);
                        } else {
                            self.dropped += 1;
                        }
                        let pending = !self.batch.is_empty() || self.dropped > 0;
                        if !pending {
                            flush_at = None;
                        } else if flush_at.is_none() {
                            flush_at = Some(Instant::now() + self.limits.linger);
                        }
                    }
                    Some(Err(e)) => {
                        self.flush();
                        return (LogsEndReason::Error, format!("reading the container's logs failed: {e}"));
                    }
                    None => {
                        self.flush();
                        return (LogsEndReason::Complete, String::new());
                    }
                },
                () = linger => {
                    self.flush();
                    // a chunk the full queue refused is retried (as a count) a linger later
                    flush_at = (self.dropped > 0).then(|| Instant::now() + self.limits.linger);
                }
            }
        }
    }
}

/// Runs one stream to its end; `None` when it was cancelled (the session answers for it).
pub(super) async fn run_stream(
    source: &LogSource,
    req: LogsRequest,
    chunks: mpsc::Sender<Out>,
    cancel: CancellationToken,
) -> Option<LogsEnd> {
    let container = container_name(&source.instance, &req.app);
    let timeout = req.timeout_secs.map_or(source.limits.default_timeout, |s| {
        Duration::from_secs(u64::from(s))
    });
    let options = LogStreamOptions {
        follow: req.follow,
        tail: req.tail,
        since_unix: req.since_secs.map(since_unix),
    };
    let mut pump = Pump {
        request_id: req.request_id.clone(),
        limits: source.limits,
        batch: Vec::new(),
        bytes: 0,
        dropped: 0,
        chunks,
    };
    let end = |reason, message: String, dropped| LogsEnd {
        request_id: req.request_id.clone(),
        reason,
        dropped,
        message,
    };
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let lines = tokio::select! {
        () = cancel.cancelled() => return None,
        () = &mut deadline => return Some(end(LogsEndReason::Timeout, timeout_message(timeout), 0)),
        r = source.engine.log_stream(&container, options) => r,
    };
    let lines = match lines {
        Ok(lines) => lines,
        Err(EngineError::NotFound(_)) => {
            return Some(end(
                LogsEndReason::NotFound,
                format!("app {:?} has no container ({container})", req.app),
                0,
            ));
        }
        Err(e) => {
            return Some(end(
                LogsEndReason::Error,
                format!("cannot read the logs of {container}: {e}"),
                0,
            ));
        }
    };
    let (reason, message) = tokio::select! {
        () = cancel.cancelled() => return None,
        () = &mut deadline => (LogsEndReason::Timeout, timeout_message(timeout)),
        r = pump.run(lines) => r,
    };
    let (reason, message) = match (reason, &message) {
        // a missing container shows up as the stream's first error
        (LogsEndReason::Error, m) if m.contains("not found") || m.contains("No such container") => {
            (
                LogsEndReason::NotFound,
                format!("app {:?} has no container ({container})", req.app),
            )
        }
        _ => (reason, message),
    };
    let dropped = pump.dropped + pump.batch.len() as u64;
    debug!(request_id = %req.request_id, ?reason, dropped, "log stream ended");
    Some(end(reason, message, dropped))
}

fn timeout_message(timeout: Duration) -> String {
    format!("the stream reached its timeout of {}s", timeout.as_secs())
}

/// Now minus `secs`, in Unix seconds.
fn since_unix(secs: u64) -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    i64::try_from(now.saturating_sub(secs)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines the bucket lets through out of `offered`.
    fn taken(bucket: &mut Bucket, offered: u32) -> u32 {
        (0..offered).map(|_| u32::from(bucket.take())).sum()
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_is_a_bucket_of_one_second_of_lines_refilled_continuously() {
        let mut bucket = Bucket::new(2000);
        assert_eq!(
            taken(&mut bucket, 5000),
            2000,
            "a full bucket: one burst of 2000"
        );
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(taken(&mut bucket, 5000), 500, "refilled at 2000 per second");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(taken(&mut bucket, 5000), 2000, "never more than 2000 held");
        // over 3 s of steady offers, at most 2000 × (1 + 3) lines pass
        let mut bucket = Bucket::new(2000);
        let mut passed = 0;
        for _ in 0..300 {
            passed += taken(&mut bucket, 100);
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        assert!(passed <= 2000 * 4, "{passed}");
        assert!(passed >= 2000 + 2000 * 29 / 10, "{passed}");
    }
}
