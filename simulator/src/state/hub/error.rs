//! Why the hub refused a change: a typed error that names what was wrong (the host key, the
//! app name) and knows nothing of HTTP. The REST layer maps each case to a status and the
//! request field at fault (`server/api_error.rs`).

/// A refused hub operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// No host was given and none is connected.
    #[error("no host is connected: give host")]
    NoHostConnected,
    /// No host was given and several are connected.
    #[error("{0} hosts are connected: give host")]
    ManyHostsConnected(usize),
    /// The host key names neither a host id nor a host name.
    #[error("unknown host {0:?}")]
    UnknownHost(String),
    /// The host key is a host name that several hosts have.
    #[error("{count} hosts are named {key:?}: give the host id")]
    AmbiguousHost {
        /// The host name given.
        key: String,
        /// How many hosts have it.
        count: usize,
    },
    /// An app of that name exists already.
    #[error("app {0:?} already exists")]
    AppExists(String),
    /// No app of that name.
    #[error("unknown app {0:?}")]
    UnknownApp(String),
    /// The change would make the host's desired-state snapshot larger than a frame.
    #[error(
        "app {app:?} does not fit: the desired state of host {host} would be {bytes} bytes, over the frame limit of {limit} bytes (MAX_FRAME_BYTES); its largest field is {field} ({field_bytes} bytes)"
    )]
    TooLarge {
        /// The app.
        app: String,
        /// The host.
        host: String,
        /// The snapshot's encoded size with the change.
        bytes: usize,
        /// The frame limit.
        limit: usize,
        /// The app's largest top-level field (`env`, `command`, ...).
        field: String,
        /// Its encoded size.
        field_bytes: usize,
    },
}
