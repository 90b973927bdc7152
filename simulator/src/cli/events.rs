//! `odac events [--app NAME] [--tail N] [--json]`: the control plane's event log
//! (`GET /api/events/log`), oldest first: agents' events (exec session starts and ends with who
//! asked, the command, the duration and the exit code; crashes; conflicts) and the control
//! plane's own. One line per event, `TIME LEVEL HOST APP MESSAGE`, every field from an agent
//! shown with its control characters escaped ([`super::term`]).

use clap::Args;
use serde_json::Value;

use super::client::{Client, ClientError};
use super::term::visible;
use crate::clock::rfc3339;

/// `odac events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only the events of this app.
    #[arg(long, value_name = "NAME")]
    pub app: Option<String>,
    /// Only the last N events (after `--app`).
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,
    /// Print the API's JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

fn field<'a>(e: &'a Value, key: &str) -> &'a str {
    e[key].as_str().unwrap_or("-")
}

/// One line of an event.
pub fn line(e: &Value) -> String {
    let ts = e["ts_ms"].as_u64().map_or_else(|| "-".to_owned(), rfc3339);
    format!(
        "{ts}  {:<5}  {}  {}  {}",
        field(e, "level"),
        visible(field(e, "host")),
        visible(field(e, "app")),
        visible(field(e, "message"))
    )
}

/// Runs `odac events`.
pub fn events(client: &Client, args: &EventsArgs) -> Result<(), ClientError> {
    let log = client.get("/api/events/log")?;
    let mut picked: Vec<&Value> = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            args.app
                .as_deref()
                .is_none_or(|app| e["app"].as_str() == Some(app))
        })
        .collect();
    if let Some(n) = args.tail {
        picked = picked.split_off(picked.len().saturating_sub(n));
    }
    if args.json {
        let json = serde_json::to_string_pretty(&picked).unwrap_or_default();
        super::term::println(&json);
        return Ok(());
    }
    for e in picked {
        super::term::println(&line(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_line_escapes_what_an_agent_sent() {
        let e = serde_json::json!({"ts_ms": 0, "level": "info", "host": "h1", "app": "web",
            "message": "exec ended: sh -c \"x\u{1b}[2J\"; exited after 0.2s, exit code 7"});
        assert_eq!(
            line(&e),
            "1970-01-01T00:00:00.000Z  info   h1  web  exec ended: sh -c \"x\\x1b[2J\"; exited after 0.2s, exit code 7"
        );
    }
}
