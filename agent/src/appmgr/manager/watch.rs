//! The engine watch: one event stream per engine (the containers of the agent's instance
//! plus the daemon's `reload`), opened when the loop starts and again after every fault.
//!
//! - A container event (`start`, `die`, `oom`, `kill`, `destroy`, `health_status`) marks its
//!   app and wakes the loop for a quiet pass that reads that app afresh; the other apps cost
//!   nothing beyond the pass's one listing.
//! - A full pass runs right after every subscription that follows a fault (events missed
//!   while the stream was down are lost) and, through the loop, every `apps.backstop_secs`.
//! - A daemon `reload`, and a resubscription after a fault (the engine may have restarted),
//!   bump [`Watch::engine_changes`]: the agent rescans its inventory at once.
//! - Faults (the stream closed or failed, the engine gone) make the stream *down*: the loop
//!   polls every `apps.poll_interval_ms`, the watch resubscribes on an exponential backoff
//!   (1 s to 30 s, jittered; a stream that dies within [`STABLE`] of opening does not reset
//!   it), and the outage is logged once. `doctor` reads the stream's state from
//!   [`STREAM_FILE`].
//! - A stream silent for [`SILENCE_BACKSTOPS`] backstops is checked: when the engine does not
//!   answer `GET /_ping` it is a fault; when it does, the stream is renewed with `since` (the
//!   last event seen), so nothing is lost, and events it replays that the old stream never
//!   delivered show that the old one was hung (logged, and a full pass follows).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::appmgr::crash::diagnosis::wall_ms;
use odac_host::engine::{ContainerEngine, EngineEvent, EventFilter, EventKind};
use odac_host::lock::lock;

/// The stream's state for `doctor`, in the state directory.
pub const STREAM_FILE: &str = "engine_events.json";
/// A stream that lived this long before its fault starts a new outage (a fresh backoff, a
/// new log line); one that died sooner goes on with the backoff.
pub const STABLE: Duration = Duration::from_secs(30);
/// A stream silent for this many backstop intervals is checked (ping, then renewal).
pub const SILENCE_BACKSTOPS: u32 = 5;

/// The stream's state as `doctor` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Whether events are streaming now.
    pub live: bool,
    /// Since when (Unix ms) it is up or down.
    pub since_ms: u64,
    /// Why it is down.
    pub problem: Option<String>,
    /// The interval the loop polls at while it is down, in ms.
    pub poll_interval_ms: u64,
}

impl StreamReport {
    /// The report saved in `state_dir`, if any.
    pub fn load(state_dir: &Path) -> Option<StreamReport> {
        let text = std::fs::read_to_string(state_dir.join(STREAM_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// What the watch shares with the reconcile loop and the agent.
#[derive(Debug)]
pub(in crate::appmgr) struct Watch {
    live: Mutex<bool>,
    /// Apps an event concerned, until a pass takes them.
    dirty: Mutex<BTreeSet<String>>,
    /// Woken by a container event: a quiet pass.
    pub(in crate::appmgr) event_wake: Notify,
    /// Bumped on a daemon `reload` and on a resubscription after a fault.
    engine_changes: watch::Sender<u64>,
}

impl Default for Watch {
    fn default() -> Self {
        Self {
            live: Mutex::new(false),
            dirty: Mutex::new(BTreeSet::new()),
            event_wake: Notify::new(),
            engine_changes: watch::channel(0).0,
        }
    }
}

/// What the watch needs besides its shared state.
pub(in crate::appmgr) struct WatchInput<'a> {
    pub engine: &'a dyn ContainerEngine,
    pub instance: &'a str,
    pub backstop: Duration,
    pub poll_interval: Duration,
    pub state_dir: PathBuf,
    /// The loop's wake-up for a full pass.
    pub full_pass: &'a Notify,
}

/// An outage of the stream: its backoff, and whether its recovery was logged.
struct Outage {
    backoff: ExponentialBackoff,
    announced_back: bool,
}

/// The pace of reaching the engine again, after a lost event stream or an engine outage of
/// a pass alike: 1 s doubling to 30 s, jittered, never giving up.
pub(in crate::appmgr) fn engine_backoff() -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(30))
        .with_jitter()
        .without_max_times()
        .build()
}

/// The wall clock in Unix nanoseconds.
fn wall_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl Watch {
    /// Whether events are streaming now.
    pub(in crate::appmgr) fn live(&self) -> bool {
        *lock(&self.live)
    }

    /// The apps events concerned since the last call.
    pub(in crate::appmgr) fn take_dirty(&self) -> BTreeSet<String> {
        std::mem::take(&mut *lock(&self.dirty))
    }

    /// Changes of the engine worth a rescan (daemon reload, resubscription after a fault).
    pub(in crate::appmgr) fn engine_changes(&self) -> watch::Receiver<u64> {
        self.engine_changes.subscribe()
    }

    fn set_live(&self, live: bool, input: &WatchInput<'_>, problem: Option<String>) {
        *lock(&self.live) = live;
        let report = StreamReport {
            live,
            since_ms: wall_ms(),
            problem,
            poll_interval_ms: u64::try_from(input.poll_interval.as_millis()).unwrap_or(u64::MAX),
        };
        let path = input.state_dir.join(STREAM_FILE);
        // best effort: doctor then says nothing about the stream
        tokio::task::spawn_blocking(move || {
            if let Ok(json) = serde_json::to_vec_pretty(&report)
                && let Err(e) = odac_host::atomic_file::write_atomic(&path, &json, 0o600)
            {
                tracing::debug!(error = %e, "could not save the event stream's state");
            }
        });
    }

    fn engine_changed(&self) {
        self.engine_changes.send_modify(|n| *n += 1);
    }

    /// Acts on one event.
    fn handle(&self, event: &EngineEvent, input: &WatchInput<'_>) {
        match &event.kind {
            EventKind::Reload => {
                tracing::info!("the engine reloaded its configuration: rescanning");
                self.engine_changed();
                input.full_pass.notify_one();
            }
            EventKind::Start
            | EventKind::Die
            | EventKind::Oom
            | EventKind::Kill
            | EventKind::Destroy
            | EventKind::Health(_) => {
                let app = event.attributes.get(odac_host::names::APP);
                tracing::debug!(app = ?app, kind = ?event.kind, container = ?event.container, "engine event");
                if let Some(app) = app {
                    lock(&self.dirty).insert(app.clone());
                }
                self.event_wake.notify_one();
            }
            EventKind::Other(_) => {}
        }
    }

    /// Runs the watch until `shutdown` (see the module documentation).
    pub(in crate::appmgr) async fn run(&self, input: WatchInput<'_>, shutdown: &CancellationToken) {
        let silence = input.backstop * SILENCE_BACKSTOPS;
        let mut outage: Option<Outage> = None;
        let mut last_seen: Option<i64> = None;
        // a renewal after a silence: since when (wall clock) events are replays
        let mut renewed_at: Option<i64> = None;
        let mut subscribed_at = wall_nanos();
        let mut first = true;
        while !shutdown.is_cancelled() {
            // the request goes out when the stream is first polled: `since` covers the gap,
            // and after a fault or a renewal replays what the engine still holds
            let since = match (first, last_seen) {
                (_, Some(t)) => t,
                (true, None) => wall_nanos(),
                (false, None) => subscribed_at - 1_000_000_000,
            };
            let filter = EventFilter {
                labels: vec![format!("{}={}", odac_host::names::INSTANCE, input.instance)],
                since_nanos: Some(since),
            };
            let opened = tokio::select! {
                () = shutdown.cancelled() => return,
                r = input.engine.events(&filter) => r,
            };
            let mut stream = match opened {
                Ok(s) => s,
                Err(e) => {
                    renewed_at = None;
                    let delay = self.fault(
                        &mut outage,
                        &input,
                        &format!("cannot subscribe to the engine's events: {e}"),
                    );
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                    continue;
                }
            };
            let opened_at = Instant::now();
            if renewed_at.is_none() {
                subscribed_at = wall_nanos();
                self.set_live(true, &input, None);
                if let Some(o) = outage.as_mut().filter(|o| !o.announced_back) {
                    tracing::info!("engine event stream resubscribed: a full pass follows");
                    o.announced_back = true;
                }
                if !first {
                    self.engine_changed();
                }
                input.full_pass.notify_one();
            }
            first = false;
            let mut hung_logged = false;
            let problem = loop {
                let next = tokio::select! {
                    () = shutdown.cancelled() => return,
                    n = tokio::time::timeout(silence, stream.next()) => n,
                };
                match next {
                    Ok(Some(Ok(event))) => {
                        if last_seen.is_some_and(|t| event.time_nanos <= t) {
                            continue;
                        }
                        last_seen = Some(event.time_nanos);
                        if let Some(at) = renewed_at
                            && event.time_nanos < at
                            && !hung_logged
                        {
                            tracing::warn!(
                                "the engine's event stream was hung (silent while the engine answered its ping): renewed, missed events replayed, a full pass follows"
                            );
                            hung_logged = true;
                            input.full_pass.notify_one();
                        }
                        self.handle(&event, &input);
                    }
                    Ok(Some(Err(e))) => {
                        break Some(format!("the engine's event stream failed: {e}"));
                    }
                    Ok(None) => break Some("the engine closed the event stream".to_owned()),
                    Err(_) => match input.engine.ping().await {
                        Ok(()) => break None,
                        Err(e) => {
                            break Some(format!(
                                "no event for {} s and the engine does not answer its ping: {e}",
                                silence.as_secs()
                            ));
                        }
                    },
                }
            };
            match problem {
                None => {
                    tracing::debug!("event stream silent while the engine answers: renewing it");
                    renewed_at = Some(wall_nanos());
                }
                Some(problem) => {
                    renewed_at = None;
                    if opened_at.elapsed() >= STABLE {
                        outage = None;
                    }
                    let delay = self.fault(&mut outage, &input, &problem);
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// The stream is down: poll meanwhile; the delay before the next subscription. Logged
    /// once per outage.
    fn fault(
        &self,
        outage: &mut Option<Outage>,
        input: &WatchInput<'_>,
        problem: &str,
    ) -> Duration {
        let new = outage.is_none();
        let o = outage.get_or_insert_with(|| {
            tracing::warn!(
                problem,
                poll_interval_ms = input.poll_interval.as_millis() as u64,
                "engine event stream down: polling the engine until it is resubscribed"
            );
            Outage {
                backoff: engine_backoff(),
                announced_back: false,
            }
        });
        if new || self.live() {
            self.set_live(false, input, Some(problem.to_owned()));
            // the loop sleeps on the backstop: a pass now, and the poll interval from then on
            self.event_wake.notify_one();
        }
        o.backoff.next().unwrap_or(Duration::from_secs(30))
    }
}
