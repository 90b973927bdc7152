//! The open live-log viewers of the fleet, by request id: which host and session each one
//! waits on, its bounded queue (a slow viewer loses chunks, counted in the next `dropped`,
//! never the agent's session), and how a stream ends. The hub routes an agent's `logs_chunk`
//! / `logs_end` here; `server/logs.rs` is the HTTP side (the SSE stream of one viewer).

use odac_host::lock::lock;
use std::collections::HashMap;
use std::sync::Mutex;

use odac_protocol::{LogsChunk, LogsEnd};
use tokio::sync::mpsc;

/// Chunks waiting for one viewer.
pub(crate) const VIEWER_QUEUE: usize = 64;

/// What a viewer receives.
#[derive(Debug, Clone)]
pub(crate) enum ViewerMsg {
    Chunk {
        lines: Vec<String>,
        dropped: u64,
    },
    End {
        reason: String,
        message: String,
        dropped: u64,
    },
}

pub(crate) struct Viewer {
    pub(crate) host: String,
    pub(crate) session_id: String,
    pub(crate) tx: mpsc::Sender<ViewerMsg>,
    /// Chunks lost because the viewer was slow, in lines.
    pub(crate) lost: u64,
}

/// The open viewers, by request id.
#[derive(Default)]
pub struct LogViewers {
    pub(crate) open: Mutex<HashMap<String, Viewer>>,
}

impl LogViewers {
    /// Viewers open now.
    pub fn len(&self) -> usize {
        lock(&self.open).len()
    }

    /// Whether no viewer is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn add(
        &self,
        request_id: &str,
        host: &str,
        session_id: &str,
    ) -> mpsc::Receiver<ViewerMsg> {
        let (tx, rx) = mpsc::channel(VIEWER_QUEUE);
        lock(&self.open).insert(
            request_id.to_owned(),
            Viewer {
                host: host.to_owned(),
                session_id: session_id.to_owned(),
                tx,
                lost: 0,
            },
        );
        rx
    }

    /// Relays a `logs_chunk` of `host` to its viewer.
    pub fn chunk(&self, host: &str, chunk: LogsChunk) {
        let mut open = lock(&self.open);
        let Some(v) = open.get_mut(&chunk.request_id).filter(|v| v.host == host) else {
            return;
        };
        let n = chunk.lines.len() as u64;
        let msg = ViewerMsg::Chunk {
            lines: chunk.lines,
            dropped: chunk.dropped + v.lost,
        };
        match v.tx.try_send(msg) {
            Ok(()) => v.lost = 0,
            Err(_) => v.lost += n + chunk.dropped,
        }
    }

    /// Relays a `logs_end` of `host` to its viewer and forgets the viewer.
    pub fn end(&self, host: &str, end: LogsEnd) {
        let mut open = lock(&self.open);
        if open.get(&end.request_id).is_none_or(|v| v.host != host) {
            return;
        }
        if let Some(v) = open.remove(&end.request_id) {
            let reason = serde_json::to_value(end.reason)
                .ok()
                .and_then(|r| r.as_str().map(str::to_owned))
                .unwrap_or_else(|| "error".to_owned());
            finish(&v, reason, end.message, end.dropped);
        }
    }

    /// Ends every viewer of `host`'s session `session_id`: the session is gone.
    pub fn session_ended(&self, host: &str, session_id: &str) {
        let mut open = lock(&self.open);
        let gone: Vec<String> = open
            .iter()
            .filter(|(_, v)| v.host == host && v.session_id == session_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(v) = open.remove(&id) {
                finish(
                    &v,
                    "agent_disconnected".to_owned(),
                    format!(
                        "the agent of host {host} disconnected (agent restart or link cut); the stream ended"
                    ),
                    0,
                );
            }
        }
    }

    /// Forgets a viewer that went away; `true` when it was still open.
    pub(crate) fn forget(&self, request_id: &str) -> Option<String> {
        lock(&self.open).remove(request_id).map(|v| v.host)
    }
}

pub(crate) fn finish(v: &Viewer, reason: String, message: String, dropped: u64) {
    let end = ViewerMsg::End {
        reason,
        message,
        dropped: dropped + v.lost,
    };
    // the end must arrive even when the queue is full: make room from a task
    let tx = v.tx.clone();
    if let Err(mpsc::error::TrySendError::Full(end)) = tx.try_send(end) {
        tokio::spawn(async move {
            let _ = tx.send(end).await;
        });
    }
}
