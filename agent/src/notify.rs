//! systemd integration through sd-notify: `READY=1` once the agent is useful locally (first
//! inventory and first reconcile done, whether or not the control plane is reachable),
//! `WATCHDOG=1` every half `WatchdogSec`, `STOPPING=1` on shutdown. Without `NOTIFY_SOCKET`
//! (not under systemd) every call is a no-op.

use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

/// Tells systemd that start-up finished.
pub fn ready() {
    send(&[NotifyState::Ready, NotifyState::Status("running")]);
}

/// Tells systemd that the agent is stopping.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// A status line for `systemctl status`.
pub fn status(text: &str) {
    send(&[NotifyState::Status(text)]);
}

/// The watchdog ping interval: half of `WatchdogSec`, if systemd asked for a watchdog.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|d| (d / 2).max(Duration::from_millis(100)))
}

/// Sends `WATCHDOG=1` every half `WatchdogSec` until `shutdown`. Returns at once without a
/// watchdog.
pub async fn watchdog_loop(shutdown: CancellationToken) {
    let Some(every) = watchdog_interval() else {
        return;
    };
    tracing::debug!(
        every_ms = every.as_millis() as u64,
        "systemd watchdog enabled"
    );
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => send(&[NotifyState::Watchdog]),
        }
    }
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}
