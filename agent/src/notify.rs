//! systemd integration through sd-notify: `READY=1` once the agent is useful locally (first
//! inventory and first reconcile done, whether or not the control plane is reachable),
//! `WATCHDOG=1` every half `WatchdogSec` while every watched loop is alive (see
//! [`crate::liveness`]: a stalled uplink or app manager stops the pings, so systemd restarts the
//! agent), `STOPPING=1` on shutdown. Without `NOTIFY_SOCKET` (not under systemd) every call is
//! a no-op.

use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

use crate::liveness::{Liveness, stale_after};

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

/// Sends `WATCHDOG=1` every half `WatchdogSec` (the interval `liveness` was made for, from
/// [`watchdog_interval`]) until `shutdown`, but only while no loop in `liveness` has been
/// silent for longer than [`stale_after`] of the interval. Returns at once without a watchdog.
pub async fn watchdog_loop(shutdown: CancellationToken, liveness: Liveness) {
    let Some(every) = liveness.ping_every() else {
        return;
    };
    tracing::debug!(
        every_ms = every.as_millis() as u64,
        "systemd watchdog enabled"
    );
    ping_while_alive(every, &liveness, &shutdown, || {
        send(&[NotifyState::Watchdog]);
    })
    .await;
}

/// The watchdog's loop: every `every`, `ping` if every loop is alive; logs when pings stop
/// (naming the stalled loops) and when they resume.
async fn ping_while_alive(
    every: Duration,
    liveness: &Liveness,
    shutdown: &CancellationToken,
    mut ping: impl FnMut(),
) {
    let bound = stale_after(every);
    let mut ticker = tokio::time::interval(every);
    let mut withholding = false;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let stale = liveness.stale(bound);
        if stale.is_empty() {
            if withholding {
                tracing::warn!("every loop is alive again: systemd watchdog pings resume");
                withholding = false;
            }
            ping();
        } else if !withholding {
            withholding = true;
            let loops: Vec<String> = stale
                .iter()
                .map(|(name, age)| format!("{name} ({:.1}s)", age.as_secs_f64()))
                .collect();
            tracing::error!(
                stalled = %loops.join(", "),
                bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
                "a loop stopped making progress: withholding the systemd watchdog ping"
            );
            status("stalled");
        }
    }
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts pings over `secs` seconds of paused time.
    async fn pings_during(count: &AtomicUsize, secs: u64) -> usize {
        let before = count.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(secs)).await;
        count.load(Ordering::SeqCst) - before
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_loop_stops_the_pings_and_a_recovered_one_resumes_them() {
        let mut liveness = Liveness::new();
        let uplink = liveness.register("uplink");
        let manager = liveness.register("app manager");
        let shutdown = CancellationToken::new();
        let pings = Arc::new(AtomicUsize::new(0));
        let every = Duration::from_secs(5);
        let watchdog = tokio::spawn({
            let (liveness, shutdown, pings) = (liveness.clone(), shutdown.clone(), pings.clone());
            async move {
                ping_while_alive(every, &liveness, &shutdown, || {
                    pings.fetch_add(1, Ordering::SeqCst);
                })
                .await;
            }
        });
        // the uplink idles (stamping) all along; the app manager only while `manager_alive`
        let uplink_loop = tokio::spawn({
            let uplink = uplink.clone();
            async move { uplink.idle(Duration::from_secs(3600)).await }
        });
        let manager_loop = tokio::spawn({
            let manager = manager.clone();
            async move { manager.idle(Duration::from_secs(30)).await }
        });

        // both alive: a ping every 5 s
        let both = pings_during(&pings, 30).await;
        assert!((6..=7).contains(&both), "{both} pings in 30 s");
        manager_loop.await.expect("manager loop");
        // the app manager stalls: at most the pings within the bound, then none
        let bound = stale_after(every);
        let late = pings_during(&pings, 10).await;
        assert!(late <= 2, "{late} pings while stalled");
        assert_eq!(
            pings_during(&pings, 60).await,
            0,
            "the watchdog kept pinging a stalled loop"
        );
        assert!(manager.age() > bound);

        // the loop recovers: pings resume
        manager.stamp();
        let resumed = tokio::spawn({
            let manager = manager.clone();
            async move { manager.idle(Duration::from_secs(3600)).await }
        });
        assert!(pings_during(&pings, 20).await >= 3);

        shutdown.cancel();
        watchdog.await.expect("watchdog");
        uplink_loop.abort();
        resumed.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn without_loops_it_pings_like_a_timer() {
        let liveness = Liveness::new();
        let shutdown = CancellationToken::new();
        let pings = Arc::new(AtomicUsize::new(0));
        let watchdog = tokio::spawn({
            let (shutdown, pings) = (shutdown.clone(), pings.clone());
            async move {
                ping_while_alive(Duration::from_secs(1), &liveness, &shutdown, || {
                    pings.fetch_add(1, Ordering::SeqCst);
                })
                .await;
            }
        });
        let n = pings_during(&pings, 10).await;
        assert!((10..=11).contains(&n), "{n} pings in 10 s");
        shutdown.cancel();
        watchdog.await.expect("watchdog");
    }
}
