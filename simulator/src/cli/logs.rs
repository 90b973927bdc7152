//! `odac app logs NAME [--follow] [--tail N] [--since DURATION] [--timeout DURATION]`: reads the API's live-log
//! Server-Sent Events and prints each line as it comes. Dropped lines are reported on stderr
//! (`[N lines dropped]`); a stream that ends for any reason other than its natural end or
//! its timeout (agent disconnected, shutting down, no container) prints why and exits 1.
//! Lines are printed with their control characters shown as escapes ([`super::term`]): a
//! container cannot drive the terminal; `--raw` prints them as they are.

use std::io::{BufRead, Write};

use clap::Args;
use serde_json::Value;

use super::client::{Client, ClientError, segment};
use super::term::visible;
use crate::clock::rfc3339;
use crate::state::views::AppView;

/// `odac app logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// App name.
    pub name: String,
    /// Keep printing new output until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only the last N lines of what exists.
    #[arg(long, value_name = "N")]
    pub tail: Option<u32>,
    /// Only output of the last DURATION (`90`, `30s`, `10m`, `2h`, `1d`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub since: Option<u64>,
    /// End the stream after DURATION (the agent's default: 10m; at most 1d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<u64>,
    /// Print the lines as they are, control characters and terminal escapes included (by
    /// default they are shown as `\x1b`...).
    #[arg(long)]
    pub raw: bool,
}

/// Parses `90`, `30s`, `10m`, `2h` or `1d` into seconds.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("expected a duration such as 90, 30s, 10m, 2h or 1d, got {s:?}"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "unknown duration unit {unit:?} in {s:?} (s, m, h or d)"
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("duration {s:?} is too long"))
}

/// Streams the logs of `args.name` to `out`, notes to `err`.
pub fn logs(
    client: &Client,
    args: &LogsArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), ClientError> {
    let mut query = vec![format!("follow={}", args.follow)];
    if let Some(t) = args.tail {
        query.push(format!("tail={t}"));
    }
    if let Some(s) = args.since {
        query.push(format!("since={s}"));
    }
    if let Some(t) = args.timeout {
        query.push(format!("timeout={t}"));
    }
    let path = format!("/api/apps/{}/logs?{}", segment(&args.name), query.join("&"));
    let reader = client.get_stream(&path)?;
    let io = |e: std::io::Error| ClientError::new(format!("writing the logs failed: {e}"));
    let mut event = String::new();
    for line in reader.lines() {
        let line = line.map_err(|e| ClientError::new(format!("the log stream broke: {e}")))?;
        if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_owned();
            continue;
        }
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
        let dropped = data.get("dropped").and_then(Value::as_u64).unwrap_or(0);
        if dropped > 0 {
            writeln!(err, "[{dropped} lines dropped]").map_err(io)?;
        }
        match event.as_str() {
            "logs" => {
                for l in data
                    .get("lines")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let l = l.as_str().unwrap_or_default();
                    if args.raw {
                        writeln!(out, "{l}").map_err(io)?;
                    } else {
                        writeln!(out, "{}", visible(l)).map_err(io)?;
                    }
                }
                out.flush().map_err(io)?;
            }
            "end" => {
                let reason = data.get("reason").and_then(Value::as_str).unwrap_or("");
                let message = data.get("message").and_then(Value::as_str).unwrap_or("");
                return match reason {
                    "complete" if args.follow => {
                        let note = not_following(client, &args.name);
                        writeln!(err, "{}", visible(&note)).map_err(io)?;
                        Ok(())
                    }
                    "complete" => Ok(()),
                    "timeout" => {
                        writeln!(err, "log stream ended: {}", visible(message)).map_err(io)?;
                        Ok(())
                    }
                    _ => Err(ClientError::new(format!(
                        "log stream ended ({reason}): {message}"
                    ))),
                };
            }
            _ => {}
        }
    }
    Err(ClientError::new(
        "the log stream closed without an end (control plane gone?)",
    ))
}

/// Why a followed stream ended at its natural end: the container is not running (any more).
fn not_following(client: &Client, name: &str) -> String {
    let view = client
        .get(&format!("/api/apps/{}", segment(name)))
        .ok()
        .and_then(|v| serde_json::from_value::<AppView>(v).ok());
    let Some(view) = view else {
        return format!("log stream ended: the container of {name} stopped");
    };
    let retry = super::diagnosis::crash(&view)
        .and_then(|c| c.next_retry_at_ms)
        .map(|ms| format!("; the agent restarts it at {}", rfc3339(ms)))
        .unwrap_or_default();
    if view.state == "running" {
        return format!("log stream ended: the container of {name} stopped{retry}");
    }
    format!(
        "log stream ended: {name} is not running (state {}){retry}; nothing more to follow until it runs again (then run this command again)",
        view.state
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("30s"), Ok(30));
        assert_eq!(parse_duration("10m"), Ok(600));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("1d"), Ok(86_400));
        assert!(parse_duration("5w").is_err());
        assert!(parse_duration("m").is_err());
    }
}
