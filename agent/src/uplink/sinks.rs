//! The handles other tasks queue reports through: diagnostic events (bounded, drops counted),
//! the latest GPU sample, the latest agent-update report, and the channel `update_offer`s go
//! to. Each queues into the uplink's outbox and wakes the session to send.

use std::sync::{Arc, Mutex};

use odac_protocol::EventLevel;
use tokio::sync::Notify;

use super::Outbox;
use odac_host::lock::lock;

/// Queues diagnostic events for the control plane (bounded; drops are counted and reported).
#[derive(Debug, Clone)]
pub struct EventSink {
    pub(super) outbox: Arc<Mutex<Outbox>>,
    pub(super) wake: Arc<Notify>,
}

impl EventSink {
    /// Queues one event.
    pub fn push(&self, level: EventLevel, app: Option<&str>, message: impl Into<String>) {
        self.push_with(level, app, message, None);
    }

    /// Queues one event with its `image_removed` part.
    pub fn push_with(
        &self,
        level: EventLevel,
        app: Option<&str>,
        message: impl Into<String>,
        image_removed: Option<odac_protocol::ImageRemoved>,
    ) {
        lock(&self.outbox).push_event_with(
            level,
            app.map(str::to_owned),
            message.into(),
            image_removed,
        );
        self.wake.notify_one();
    }
}

/// Queues GPU samples for the control plane (only the latest is ever pending).
#[derive(Debug, Clone)]
pub struct GpuStatsSink {
    pub(super) outbox: Arc<Mutex<Outbox>>,
    pub(super) wake: Arc<Notify>,
}

impl GpuStatsSink {
    /// Replaces the pending sample with `stats`.
    pub fn put(&self, stats: odac_protocol::GpuStats) {
        lock(&self.outbox).put_gpu_stats(stats);
        self.wake.notify_one();
    }
}

/// Queues agent-update reports for the control plane (only the latest is ever pending).
#[derive(Debug, Clone)]
pub struct UpdateSink {
    pub(super) outbox: Arc<Mutex<Outbox>>,
    pub(super) wake: Arc<Notify>,
}

impl UpdateSink {
    /// Replaces the pending update report with `status` (its `seq` is set by the outbox).
    pub fn put(&self, status: odac_protocol::UpdateStatusReport) {
        lock(&self.outbox).put_update_status(status);
        self.wake.notify_one();
    }
}

/// Where `update_offer`s go (the update task).
pub type UpdateOffers = tokio::sync::mpsc::Sender<odac_protocol::UpdateOffer>;
