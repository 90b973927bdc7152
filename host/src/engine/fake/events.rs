//! The fake engine's event stream: every state change the fake makes (start, exit, OOM kill,
//! health verdict, removal) is an [`EngineEvent`] kept in a history and sent to the live
//! subscribers whose filter it passes; a subscription with `since` first replays the history
//! from then, as the real engine does. Tests also emit events by hand
//! ([`FakeEngine::emit`]) and break the stream: close it ([`FakeEngine::close_events`]), hang
//! it (open, but silent: [`FakeEngine::hang_events`]) or refuse new subscriptions
//! ([`FakeEngine::refuse_events`]). An unavailable engine ends every stream with an error.

use std::collections::BTreeMap;

use futures_util::stream;
use tokio::sync::mpsc;

use super::FakeEngine;
use crate::engine::error::EngineError;
use crate::engine::events::{EngineEvent, EngineEvents, EventFilter, EventKind};
use crate::lock::lock;

type Sender = mpsc::UnboundedSender<Result<EngineEvent, EngineError>>;

/// The subscribers and the history of the fake's events.
#[derive(Debug, Default)]
pub(super) struct Hub {
    live: Vec<(EventFilter, Sender)>,
    /// Streams left open but never fed again (a hung stream).
    hung: Vec<Sender>,
    history: Vec<EngineEvent>,
    /// Unix nanoseconds of the last event: the wall clock, one nanosecond later when it stood.
    clock: i64,
    subscriptions: u32,
    refuse: u32,
    hang_next: bool,
}

impl Hub {
    fn send(&mut self, mut event: EngineEvent) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        self.clock = now.max(self.clock + 1);
        if event.time_nanos == 0 {
            event.time_nanos = self.clock;
        }
        self.live.retain(|(filter, tx)| {
            if !event.is_daemon() && !filter.passes(&event.attributes) {
                return !tx.is_closed();
            }
            tx.send(Ok(event.clone())).is_ok()
        });
        self.history.push(event);
    }
}

/// A `die` event's attributes: the container's labels and its `exitCode`.
pub(super) fn with_exit(
    mut labels: BTreeMap<String, String>,
    code: i64,
) -> BTreeMap<String, String> {
    labels.insert("exitCode".into(), code.to_string());
    labels
}

impl FakeEngine {
    fn hub(&self) -> std::sync::MutexGuard<'_, Hub> {
        lock(&self.events)
    }

    /// Emits `event` to the subscribers whose filter it passes (and to later subscriptions
    /// that ask for it with `since`). Its time is the fake clock's when it has none.
    pub fn emit(&self, event: EngineEvent) {
        self.hub().send(event);
    }

    /// Emits a container event for container `id` with its current labels (nothing when no
    /// such container exists).
    pub(super) fn emit_for(&self, kind: EventKind, id: &str, labels: BTreeMap<String, String>) {
        self.emit(EngineEvent::container(kind, id, labels, 0));
    }

    /// Ends every live event stream (as when the engine restarts or closes the connection).
    pub fn close_events(&self) {
        let mut hub = self.hub();
        hub.live.clear();
        hub.hung.clear();
    }

    /// Leaves every live event stream open but silent from now on (a hung stream); with
    /// `next`, the next subscription hangs too.
    pub fn hang_events(&self, next: bool) {
        let mut hub = self.hub();
        let live: Vec<Sender> = hub.live.drain(..).map(|(_, tx)| tx).collect();
        hub.hung.extend(live);
        hub.hang_next = next;
    }

    /// Refuses the next `n` subscriptions as unavailable.
    pub fn refuse_events(&self, n: u32) {
        self.hub().refuse = n;
    }

    /// How many subscriptions were made (refused ones included).
    pub fn event_subscriptions(&self) -> u32 {
        self.hub().subscriptions
    }

    /// Every event emitted so far, oldest first.
    pub fn emitted(&self) -> Vec<EngineEvent> {
        self.hub().history.clone()
    }

    /// Ends every live stream with an unavailable error (the engine went away).
    pub(super) fn break_events(&self) {
        let mut hub = self.hub();
        for (_, tx) in hub.live.drain(..) {
            // a dropped receiver is fine
            let _ = tx.send(Err(EngineError::Unavailable(
                "fake engine: connection reset".into(),
            )));
        }
        hub.hung.clear();
    }

    /// The stream of `events`.
    pub(super) fn subscribe(&self, filter: &EventFilter) -> Result<EngineEvents, EngineError> {
        let unavailable = lock(&self.state).unavailable;
        let mut hub = self.hub();
        hub.subscriptions += 1;
        if unavailable || hub.refuse > 0 {
            hub.refuse = hub.refuse.saturating_sub(1);
            return Err(EngineError::Unavailable(
                "fake engine: connection refused".into(),
            ));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(since) = filter.since_nanos {
            for event in hub.history.iter().filter(|e| e.time_nanos >= since) {
                if event.is_daemon() || filter.passes(&event.attributes) {
                    // the receiver is right here
                    let _ = tx.send(Ok(event.clone()));
                }
            }
        }
        if std::mem::take(&mut hub.hang_next) {
            hub.hung.push(tx);
        } else {
            hub.live.push((filter.clone(), tx));
        }
        Ok(Box::pin(stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })))
    }

    /// What `ping` answers: the engine is there unless it was made unavailable.
    pub(super) fn answer_ping(&self) -> Result<(), EngineError> {
        if lock(&self.state).unavailable {
            return Err(EngineError::Unavailable(
                "fake engine: connection refused".into(),
            ));
        }
        Ok(())
    }
}
