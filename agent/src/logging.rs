//! Tracing setup: human-readable lines on a terminal (with colours and timestamps), plain
//! lines without timestamps when stderr is not a terminal (journald stamps them), or one JSON
//! object per line with `log_format = "json"`. The filter comes from `log_level`: a level and
//! `target=level` directives, read as a [`Targets`] filter (no regular expressions).
//!
//! Some dependencies dump what they carry at their most verbose levels: tungstenite's trace
//! shows the upgrade request (the bearer token) and every frame (git secrets in a desired
//! state), bollard's debug the engine's answers (env values). Their log records above the caps
//! ([`odac_host::log_caps::CAPS`]) are dropped whatever `log_level` says, so no level shows a
//! secret.

use std::io::IsTerminal;

use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::{ParseError, Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("log_level: {0}")]
    Filter(String),
    #[error("a global logger is already installed: {0}")]
    Install(String),
}

/// Installs the global subscriber, writing to stderr.
pub fn init(level: &str, format: LogFormat) -> Result<(), LoggingError> {
    let targets: Targets = level
        .parse()
        .map_err(|e: ParseError| LoggingError::Filter(e.to_string()))?;
    // The most verbose level any directive keeps: the subscriber's hint, from which tracing
    // and the `log` bridge skip every record above it at the call site (dependencies log a
    // lot at debug and trace, and each such record would otherwise reach the filters).
    let most_verbose =
        tracing_subscriber::Layer::<tracing_subscriber::Registry>::max_level_hint(&targets)
            .unwrap_or(LevelFilter::TRACE);
    let builder = tracing_subscriber::fmt()
        .with_max_level(most_verbose)
        .with_writer(std::io::stderr);
    let caps = filter_fn(|meta| odac_host::log_caps::within_caps(meta.target(), meta.level()));
    let result = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .finish()
            .with(targets)
            .with(caps)
            .try_init(),
        LogFormat::Text if std::io::stderr().is_terminal() => builder
            .with_ansi(true)
            .finish()
            .with(targets)
            .with(caps)
            .try_init(),
        LogFormat::Text => builder
            .with_ansi(false)
            .without_time()
            .finish()
            .with(targets)
            .with(caps)
            .try_init(),
    };
    result.map_err(|e| LoggingError::Install(e.to_string()))
}
