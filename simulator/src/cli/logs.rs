//! `odac app logs NAME [--follow] [--tail N] [--since DURATION] [--timeout DURATION]`: reads the API's live-log
//! Server-Sent Events and prints each line as it comes. Dropped lines are reported on stderr
//! (`[N lines dropped]`); a stream that ends for any reason other than its natural end or
//! its timeout (agent disconnected, shutting down, no container) prints why and exits 1.
//! Lines are printed with their control characters shown as escapes ([`super::term`]): a
//! container cannot drive the terminal; `--raw` prints them as they are.
//!
//! `--follow` goes on across restarts: when the container stops and the app's state says the
//! agent starts it again (`restarting`, `crash_loop`, …), the CLI says so on stderr, waits for
//! the new run (another container id or restart count, state `running`) and re-opens the
//! stream from the second the old one ended, skipping lines it printed already; an app the
//! agent leaves down (`failed`, `exited`, …) ends the command with why. `--timeout` bounds
//! the whole follow.

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

/// How one stream ended.
enum Ended {
    /// Done: print nothing more.
    Done,
    /// A followed stream reached its natural end: the container stopped.
    Stopped,
}

/// The run of the app a stream reads: its container and restart count.
type RunKey = (Option<String>, u32);

fn run_key(view: &AppView) -> RunKey {
    let s = view.status.as_ref();
    (
        s.and_then(|s| s.container_id.clone()),
        s.map_or(0, |s| s.restart_count),
    )
}

fn view_of(client: &Client, name: &str) -> Option<AppView> {
    client
        .get(&format!("/api/apps/{}", segment(name)))
        .ok()
        .and_then(|v| serde_json::from_value::<AppView>(v).ok())
}

/// States after which the agent starts the app again by itself.
fn comes_back(view: &AppView) -> bool {
    matches!(
        view.state.as_str(),
        "running" | "restarting" | "crash_loop" | "creating" | "pending" | "pulling"
    )
}

/// The last lines printed (with when), so that a stream re-opened `--since` a little before
/// the previous one ended skips what was printed already: its first lines are skipped while
/// they repeat, in order, lines printed since the cut-off, up to the last one printed.
#[derive(Default)]
struct Recent {
    lines: std::collections::VecDeque<(std::time::Instant, String)>,
    /// Set on re-opening: lines printed before this instant are not repeats.
    cutoff: Option<std::time::Instant>,
    /// While skipping: the next printed line (index into `lines`) a repeat must equal.
    next: Option<usize>,
}

const RECENT_LINES: usize = 500;

impl Recent {
    fn push(&mut self, line: &str) {
        if self.lines.len() == RECENT_LINES {
            self.lines.pop_front();
        }
        self.lines
            .push_back((std::time::Instant::now(), line.to_owned()));
    }

    /// Re-opening: lines printed from `cutoff` on may come again.
    fn reopen(&mut self, cutoff: std::time::Instant) {
        self.cutoff = Some(cutoff);
        self.next = None;
    }

    /// Whether `line` (of a re-opened stream) repeats a line printed already.
    fn seen(&mut self, line: &str) -> bool {
        if let Some(i) = self.next {
            if self.lines.get(i).is_some_and(|(_, l)| l == line) {
                self.next = Some(i + 1).filter(|n| *n < self.lines.len());
                if self.next.is_none() {
                    self.cutoff = None;
                }
                return true;
            }
            self.next = None;
            self.cutoff = None;
            return false;
        }
        let Some(cutoff) = self.cutoff.take() else {
            return false;
        };
        let first = self
            .lines
            .iter()
            .position(|(at, l)| *at >= cutoff && l == line);
        match first {
            Some(i) => {
                self.next = Some(i + 1).filter(|n| *n < self.lines.len());
                self.cutoff = self.next.map(|_| cutoff);
                true
            }
            None => false,
        }
    }
}

/// Streams the logs of `args.name` to `out`, notes to `err`. With `--follow` a stopped
/// container that the agent starts again is followed into its new run (a note on `err`
/// says so); one that stays down ends the command with why.
pub fn logs(
    client: &Client,
    args: &LogsArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), ClientError> {
    let io = |e: std::io::Error| ClientError::new(format!("writing the logs failed: {e}"));
    let deadline = args
        .timeout
        .map(|t| std::time::Instant::now() + std::time::Duration::from_secs(t));
    let mut recent = Recent::default();
    let mut reopened = false;
    let mut key = view_of(client, &args.name).map(|v| run_key(&v));
    let mut query = vec![format!("follow={}", args.follow)];
    if let Some(t) = args.tail {
        query.push(format!("tail={t}"));
    }
    if let Some(s) = args.since {
        query.push(format!("since={s}"));
    }
    loop {
        let mut q = query.clone();
        if let (Some(d), Some(t)) = (deadline, args.timeout) {
            // the first stream gets the --timeout as given; a re-opened one what is left of it
            let left = d.saturating_duration_since(std::time::Instant::now());
            let secs = if reopened { left.as_secs().max(1) } else { t };
            q.push(format!("timeout={secs}"));
        }
        let path = format!("/api/apps/{}/logs?{}", segment(&args.name), q.join("&"));
        if let Ended::Done = stream(client, args, &path, &mut recent, out, err)? {
            return Ok(());
        }
        let ended = std::time::Instant::now();
        let ended_unix = std::time::SystemTime::now();
        // wait for the agent's next run of the container, or say why there is none
        let mut said = false;
        let next = loop {
            let Some(view) = view_of(client, &args.name) else {
                let note = format!("log stream ended: the container of {} stopped", args.name);
                writeln!(err, "{}", visible(&note)).map_err(io)?;
                return Ok(());
            };
            let now_key = run_key(&view);
            if view.state == "running" && key.as_ref() != Some(&now_key) {
                break now_key;
            }
            if !comes_back(&view) {
                writeln!(err, "{}", visible(&not_following(&view))).map_err(io)?;
                return Ok(());
            }
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                writeln!(err, "log stream ended: its --timeout passed").map_err(io)?;
                return Ok(());
            }
            if !said && view.state != "running" {
                let note = format!(
                    "[{} stopped ({}){}; waiting to follow its next run]",
                    args.name,
                    view.state,
                    next_start(&view)
                );
                writeln!(err, "{}", visible(&note)).map_err(io)?;
                said = true;
            }
            std::thread::sleep(std::time::Duration::from_secs(1));
        };
        writeln!(
            err,
            "[{} started again (restart {}): following its new run]",
            visible(&args.name),
            next.1
        )
        .map_err(io)?;
        key = Some(next);
        // from the second the old stream ended (the engine counts whole seconds); lines
        // printed in that second already are skipped
        let since = ended_unix.elapsed().map_or(1, |d| d.as_secs() + 1);
        query = vec!["follow=true".to_owned(), format!("since={since}")];
        recent.reopen(
            ended
                .checked_sub(std::time::Duration::from_secs(1))
                .unwrap_or(ended),
        );
        reopened = true;
    }
}

/// Reads one stream at `path` to its end.
fn stream(
    client: &Client,
    args: &LogsArgs,
    path: &str,
    recent: &mut Recent,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<Ended, ClientError> {
    let reader = client.get_stream(path)?;
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
                    if recent.seen(l) {
                        continue;
                    }
                    recent.push(l);
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
                    "complete" if args.follow => Ok(Ended::Stopped),
                    "complete" => Ok(Ended::Done),
                    "timeout" => {
                        writeln!(err, "log stream ended: {}", visible(message)).map_err(io)?;
                        Ok(Ended::Done)
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

/// `; the agent restarts it at T` when the status says when.
fn next_start(view: &AppView) -> String {
    super::diagnosis::crash(view)
        .and_then(|c| c.next_retry_at_ms)
        .map(|ms| format!("; the agent restarts it at {}", rfc3339(ms)))
        .unwrap_or_default()
}

/// Why a followed stream ends for good: the app is not running and the agent does not start
/// it again by itself.
fn not_following(view: &AppView) -> String {
    format!(
        "log stream ended: {} is not running (state {}){}; the agent does not start it again by itself (nothing more to follow until it runs: then run this command again)",
        view.name,
        view.state,
        next_start(view)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reopened_stream_skips_only_what_was_printed_since_the_cutoff() {
        let mut r = Recent::default();
        r.push("old");
        let cutoff = std::time::Instant::now();
        for l in ["a", "b", "c"] {
            r.push(l);
        }
        r.reopen(cutoff);
        let shown: Vec<&str> = ["b", "c", "d", "b"]
            .into_iter()
            .filter(|l| !r.seen(l))
            .collect();
        assert_eq!(
            shown,
            ["d", "b"],
            "the tail b, c repeats once; later lines print"
        );
        r.reopen(cutoff);
        assert!(
            !r.seen("old"),
            "printed before the cut-off: a new run's line"
        );
        r.reopen(cutoff);
        assert!(r.seen("a"));
        assert!(!r.seen("x"), "a divergence ends the skipping");
        assert!(!r.seen("b"));
    }

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
