//! Diagnostic events of the app manager: build progress and failures of git-sourced apps and
//! every GPU fallback decision, containers the kernel's OOM killer ended, and images the
//! clean-up removed ([`ImageRemoved`]). They are logged here and broadcast to subscribers
//! ([`AppManager::subscribe_events`](crate::appmgr::AppManager::subscribe_events)); `run.rs`
//! forwards them to the control plane as `event` messages. A subscriber that lags loses events;
//! nothing here blocks the reconcile loop.

use odac_protocol::EventLevel;
use tokio::sync::broadcast;

/// Capacity of the event broadcast.
const CAPACITY: usize = 256;

/// One event, about one app or the manager as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppEvent {
    /// Severity.
    pub level: EventLevel,
    /// App concerned, if any.
    pub app: Option<String>,
    /// What happened (never carries a secret).
    pub message: String,
    /// An image the agent removed ([`image_gc`](crate::appmgr::gc::image_gc)), for the `event`
    /// message's `image_removed` part.
    pub image_removed: Option<ImageRemoved>,
}

/// An image the agent removed: which, how much space came back, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRemoved {
    /// The image id (`sha256:…`).
    pub image: String,
    /// The reference it was pulled or built as.
    pub reference: String,
    /// Its size as the engine reported it before the removal, bytes.
    pub bytes: u64,
    /// Why it went.
    pub reason: RemovalReason,
}

/// Why an image was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalReason {
    /// No app used it for `apps.image_gc_delay_secs`.
    Delay,
    /// The engine's data root had less than `apps.image_gc_min_free_mb` free.
    LowDisk,
}

impl ImageRemoved {
    /// The `event` message's `image_removed` part.
    pub fn wire(self) -> odac_protocol::ImageRemoved {
        odac_protocol::ImageRemoved {
            image: self.image,
            reference: self.reference,
            bytes: self.bytes,
            reason: match self.reason {
                RemovalReason::Delay => odac_protocol::ImageRemovalReason::Delay,
                RemovalReason::LowDisk => odac_protocol::ImageRemovalReason::LowDisk,
            },
        }
    }
}

impl RemovalReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RemovalReason::Delay => "delay",
            RemovalReason::LowDisk => "low_disk",
        }
    }
}

/// The sending side, shared by the reconcile pass and the build jobs.
#[derive(Debug, Clone)]
pub(crate) struct EventTx(broadcast::Sender<AppEvent>);

impl Default for EventTx {
    fn default() -> Self {
        Self(broadcast::channel(CAPACITY).0)
    }
}

impl EventTx {
    /// Every event from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<AppEvent> {
        self.0.subscribe()
    }

    /// Log the event and broadcast it (no subscriber is fine).
    pub(crate) fn emit(&self, level: EventLevel, app: &str, message: impl Into<String>) {
        let message = message.into();
        match level {
            EventLevel::Info => tracing::info!(app = %app, "{message}"),
            EventLevel::Warn => tracing::warn!(app = %app, "{message}"),
            EventLevel::Error => tracing::error!(app = %app, "{message}"),
        }
        let _ = self.0.send(AppEvent {
            level,
            app: Some(app.to_owned()),
            message,
            image_removed: None,
        });
    }

    /// An image removed by the clean-up: an info event that says so in words and carries it.
    pub(crate) fn image_removed(&self, app: &str, removed: ImageRemoved) {
        let why = match removed.reason {
            RemovalReason::Delay => "no app used it for apps.image_gc_delay_secs",
            RemovalReason::LowDisk => {
                "the engine's data root had less free space than apps.image_gc_min_free_mb"
            }
        };
        let short = removed.image.get(..19).unwrap_or(&removed.image);
        let message = format!(
            "removed image {} ({short}): {:.1} MB back; {why}",
            removed.reference,
            removed.bytes as f64 / 1_000_000.0
        );
        tracing::info!(app = %app, image = %removed.image, bytes = removed.bytes, reason = removed.reason.as_str(), "{message}");
        let _ = self.0.send(AppEvent {
            level: EventLevel::Info,
            app: Some(app.to_owned()),
            message,
            image_removed: Some(removed),
        });
    }

    pub(crate) fn info(&self, app: &str, message: impl Into<String>) {
        self.emit(EventLevel::Info, app, message);
    }

    pub(crate) fn warn(&self, app: &str, message: impl Into<String>) {
        self.emit(EventLevel::Warn, app, message);
    }

    pub(crate) fn error(&self, app: &str, message: impl Into<String>) {
        self.emit(EventLevel::Error, app, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_see_events_in_order() {
        let tx = EventTx::default();
        tx.info("nobody-listens", "dropped quietly");
        let mut rx = tx.subscribe();
        tx.info("web", "fetching");
        tx.error("web", "build failed");
        let first = rx.recv().await.unwrap();
        assert_eq!(
            (first.level, first.app.as_deref(), first.message.as_str()),
            (EventLevel::Info, Some("web"), "fetching")
        );
        assert_eq!(rx.recv().await.unwrap().level, EventLevel::Error);
    }
}
