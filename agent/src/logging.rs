//! Tracing setup: human-readable lines on a terminal (with colours and timestamps), plain
//! lines without timestamps when stderr is not a terminal (journald stamps them), or one JSON
//! object per line with `log_format = "json"`. The filter comes from `log_level`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

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
    let filter = EnvFilter::try_new(level).map_err(|e| LoggingError::Filter(e.to_string()))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Text if std::io::stderr().is_terminal() => builder.with_ansi(true).try_init(),
        LogFormat::Text => builder.with_ansi(false).without_time().try_init(),
    };
    result.map_err(|e| LoggingError::Install(e.to_string()))
}
