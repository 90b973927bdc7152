//! Domain types of the engine's event stream (`GET /events`): [`EngineEvent`] (what the
//! engine did, to which container, when), [`EventKind`] (the actions the agent acts on),
//! [`EventFilter`] (the labels that pick the agent's own containers) and [`EngineEvents`],
//! the stream an engine yields. Daemon events (`reload`) always pass the filter. Nothing here
//! knows bollard.

use std::collections::BTreeMap;
use std::pin::Pin;

use futures_util::Stream;

use super::error::EngineError;

/// The container actions that change what the agent reports, and the daemon's `reload`.
pub const CONTAINER_ACTIONS: &[&str] = &["start", "die", "oom", "kill", "destroy", "health_status"];

/// What the engine did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A container started.
    Start,
    /// A container's process ended (its exit code is in the attributes, `exitCode`).
    Die,
    /// The kernel's OOM killer hit a process of the container.
    Oom,
    /// A signal was sent to the container (`docker kill`, a stop's SIGTERM/SIGKILL).
    Kill,
    /// A container was removed.
    Destroy,
    /// A health check verdict changed (`healthy`, `unhealthy`, `starting`).
    Health(String),
    /// The daemon reloaded its configuration (runtimes, registries, ...).
    Reload,
    /// Any other action, kept by name.
    Other(String),
}

impl EventKind {
    /// The kind of a Docker event `action` of object type `typ` (`container`, `daemon`).
    pub fn parse(typ: &str, action: &str) -> Self {
        if typ == "daemon" {
            return if action == "reload" {
                Self::Reload
            } else {
                Self::Other(action.to_owned())
            };
        }
        if let Some(verdict) = action.strip_prefix("health_status") {
            return Self::Health(verdict.trim_start_matches(':').trim().to_owned());
        }
        match action {
            "start" => Self::Start,
            "die" => Self::Die,
            "oom" => Self::Oom,
            "kill" => Self::Kill,
            "destroy" => Self::Destroy,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// One event of the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineEvent {
    /// What happened.
    pub kind: EventKind,
    /// The container's id (`None` for daemon events).
    pub container: Option<String>,
    /// The actor's attributes: for containers, their labels plus `name`, `image`,
    /// `exitCode` (on `die`).
    pub attributes: BTreeMap<String, String>,
    /// When the engine says it happened, Unix nanoseconds (0 when it did not say).
    pub time_nanos: i64,
}

impl EngineEvent {
    /// A container event.
    pub fn container(
        kind: EventKind,
        id: &str,
        attributes: BTreeMap<String, String>,
        time_nanos: i64,
    ) -> Self {
        Self {
            kind,
            container: Some(id.to_owned()),
            attributes,
            time_nanos,
        }
    }

    /// A daemon `reload`.
    pub fn reload(time_nanos: i64) -> Self {
        Self {
            kind: EventKind::Reload,
            container: None,
            attributes: BTreeMap::new(),
            time_nanos,
        }
    }

    /// Whether this is a daemon event.
    pub fn is_daemon(&self) -> bool {
        self.container.is_none()
    }
}

/// Which containers' events to stream: those carrying every label of `labels` (`key` or
/// `key=value`). Daemon events always pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Labels every streamed container carries.
    pub labels: Vec<String>,
    /// Replay events from this Unix time in nanoseconds (events the engine still holds), so
    /// a resubscription loses nothing; `None`: from now.
    pub since_nanos: Option<i64>,
}

impl EventFilter {
    /// Whether a container with these labels passes.
    pub fn passes(&self, attributes: &BTreeMap<String, String>) -> bool {
        self.labels
            .iter()
            .all(|l| super::types::label_matches(attributes, l))
    }

    /// `since_nanos` as the engine's `since` parameter (`seconds.nanoseconds`).
    pub fn since_param(&self) -> Option<String> {
        self.since_nanos.map(|n| {
            let n = n.max(0);
            format!("{}.{:09}", n / 1_000_000_000, n % 1_000_000_000)
        })
    }
}

/// The engine's events, oldest first; the stream ends (or yields an error) when the
/// connection does. Dropping it unsubscribes.
pub type EngineEvents = Pin<Box<dyn Stream<Item = Result<EngineEvent, EngineError>> + Send>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_as_docker_names_them() {
        assert_eq!(EventKind::parse("container", "die"), EventKind::Die);
        assert_eq!(
            EventKind::parse("container", "health_status: unhealthy"),
            EventKind::Health("unhealthy".into())
        );
        assert_eq!(EventKind::parse("daemon", "reload"), EventKind::Reload);
        assert_eq!(
            EventKind::parse("container", "exec_start: sh"),
            EventKind::Other("exec_start: sh".into())
        );
    }

    #[test]
    fn since_is_seconds_dot_nanoseconds_and_labels_must_all_match() {
        let f = EventFilter {
            labels: vec!["odac.instance=a".into(), "odac.owner".into()],
            since_nanos: Some(1_700_000_000_000_000_042),
        };
        assert_eq!(f.since_param().as_deref(), Some("1700000000.000000042"));
        let mut attrs = BTreeMap::from([("odac.instance".to_owned(), "a".to_owned())]);
        assert!(!f.passes(&attrs));
        attrs.insert("odac.owner".into(), "x".into());
        assert!(f.passes(&attrs));
    }
}
