//! The event stream and the ping of [`DockerEngine`]. `GET /events` cannot filter "these
//! labels, or a daemon event" in one request (the engine ANDs a label filter with every
//! event, daemon ones included), so two requests are merged into one stream: the agent's
//! containers (`type=container`, the filter's labels, the actions in [`CONTAINER_ACTIONS`])
//! and the daemon's `reload`. The merged stream ends when either does: the watcher
//! resubscribes both. The request timeout covers only the answer's headers, so a stream lasts
//! as long as the connection.

use std::collections::{BTreeMap, HashMap};

use bollard::models::{EventMessage, EventMessageTypeEnum};
use bollard::query_parameters::EventsOptions;
use futures_util::{Stream, StreamExt, stream};

use super::convert::map_error;
use super::docker::{CONNECT_TIMEOUT, DockerEngine};
use super::error::EngineError;
use super::events::{CONTAINER_ACTIONS, EngineEvent, EngineEvents, EventFilter, EventKind};

impl DockerEngine {
    /// Subscribes to the engine's events for `filter` (see the module documentation).
    pub(super) async fn stream_events(
        &self,
        filter: &EventFilter,
    ) -> Result<EngineEvents, EngineError> {
        let docker = self.docker().await?;
        let since = filter.since_param();
        let mut containers = HashMap::from([
            ("type".to_owned(), vec!["container".to_owned()]),
            (
                "event".to_owned(),
                CONTAINER_ACTIONS.iter().map(|a| (*a).to_owned()).collect(),
            ),
        ]);
        if !filter.labels.is_empty() {
            containers.insert("label".to_owned(), filter.labels.clone());
        }
        let daemon = HashMap::from([
            ("type".to_owned(), vec!["daemon".to_owned()]),
            ("event".to_owned(), vec!["reload".to_owned()]),
        ]);
        let open = |filters| {
            docker.events(Some(EventsOptions {
                since: since.clone(),
                until: None,
                filters: Some(filters),
            }))
        };
        // A `None` from either stream ends the merged one, and an error from either is
        // passed on (the watcher resubscribes on both).
        let merged = stream::select(ended(open(containers)), ended(open(daemon)))
            .take_while(|item| std::future::ready(item.is_some()))
            .filter_map(|item| {
                std::future::ready(item.map(|r| r.map(to_event).map_err(map_error)))
            });
        Ok(Box::pin(merged))
    }

    /// `GET /_ping`, bounded by [`CONNECT_TIMEOUT`].
    pub(super) async fn ping_engine(&self) -> Result<(), EngineError> {
        let docker = self.docker().await?;
        let answer = tokio::time::timeout(CONNECT_TIMEOUT, docker.ping())
            .await
            .map_err(|_| {
                EngineError::Unavailable(format!(
                    "no answer to GET /_ping within {} s",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })
            .and_then(|r| r.map(|_| ()).map_err(map_error));
        self.observe(answer)
    }
}

type Messages = Result<EventMessage, bollard::errors::Error>;

/// `messages` as `Some` items followed by one `None` when it ends.
fn ended(
    messages: impl Stream<Item = Messages> + Send + 'static,
) -> impl Stream<Item = Option<Messages>> + Send + 'static {
    messages.map(Some).chain(stream::once(async { None }))
}

/// A Docker event as the domain sees it.
fn to_event(message: EventMessage) -> EngineEvent {
    let typ = match message.typ {
        Some(EventMessageTypeEnum::DAEMON) => "daemon",
        Some(EventMessageTypeEnum::CONTAINER) => "container",
        _ => "",
    };
    let kind = EventKind::parse(typ, message.action.as_deref().unwrap_or_default());
    let actor = message.actor.unwrap_or_default();
    let attributes: BTreeMap<String, String> =
        actor.attributes.unwrap_or_default().into_iter().collect();
    let time_nanos = message
        .time_nano
        .or(message.time.map(|s| s.saturating_mul(1_000_000_000)))
        .unwrap_or(0);
    EngineEvent {
        kind,
        container: (typ != "daemon").then(|| actor.id.unwrap_or_default()),
        attributes,
        time_nanos,
    }
}
