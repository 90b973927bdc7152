//! The app status table `apply` and `status` print (NAME, STATE, GPU, RESTART-REQUIRED,
//! RESTARTS, LAST ERROR; `status` adds the ENGINE column), or the statuses as JSON.

use std::collections::BTreeMap;

use odac_protocol::{AppState, AppStatus};

use super::output::emit;
use odac_host::engine::ContainerSummary;

/// The GPU column: what is attached, or the fallback taken.
fn gpu_cell(s: &AppStatus) -> String {
    if let Some(a) = &s.gpu.attached {
        return format!("{} {} [{}]", a.vendor, a.mechanism, a.devices.join(","));
    }
    match (&s.gpu.fallback, &s.gpu.requested) {
        (Some(f), _) => {
            let tier = match f.tier {
                odac_protocol::FallbackTier::Preflight => "preflight",
                odac_protocol::FallbackTier::Engine => "engine",
            };
            let on = if s.state == AppState::Failed {
                "none"
            } else {
                "cpu"
            };
            format!("{on} ({tier}: {})", f.reason)
        }
        (None, Some(_)) => "requested".into(),
        (None, None) => "-".into(),
    }
}

/// Why an app that is not running stopped, e.g. `oom_killed (exit 137)`.
fn crash_cell(c: &odac_protocol::CrashInfo) -> String {
    match c.exit_code {
        Some(code) => format!("{} (exit {code})", c.reason),
        None => c.reason.to_string(),
    }
}

/// A plain table of statuses.
pub fn render_table(statuses: &[AppStatus]) -> String {
    let rows: Vec<[String; 6]> = statuses
        .iter()
        .map(|s| {
            [
                s.name.clone(),
                match &s.health {
                    Some(h) => format!("{} ({})", s.state, h.state),
                    None => s.state.to_string(),
                },
                gpu_cell(s),
                if s.restart_required { "yes" } else { "-" }.into(),
                s.restart_count.to_string(),
                s.last_error
                    .clone()
                    .or_else(|| s.crash.as_ref().map(crash_cell))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "STATE",
        "GPU",
        "RESTART-REQUIRED",
        "RESTARTS",
        "LAST ERROR",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut text = line(&header.map(str::to_owned));
    for row in &rows {
        text.push_str(&line(row));
    }
    if rows.is_empty() {
        text.push_str("(no apps)\n");
    }
    text
}

/// Prints the statuses as a table or as JSON.
pub fn print(statuses: &[AppStatus], json: bool) -> Result<(), String> {
    if json {
        let text = serde_json::to_string_pretty(statuses)
            .map_err(|e| format!("cannot serialise statuses: {e}"))?;
        emit(&format!("{text}\n"));
    } else {
        emit(&render_table(statuses));
    }
    Ok(())
}

/// The ENGINE cell: the recorded container's state on the engine now.
fn engine_cell(s: &AppStatus, live: Option<&BTreeMap<String, ContainerSummary>>) -> String {
    match (live, &s.container_id) {
        (None, _) => "?".into(),
        (Some(_), None) => "-".into(),
        (Some(live), Some(id)) => live
            .get(id)
            .map_or_else(|| "missing".to_owned(), |c| c.state.as_str().to_owned()),
    }
}

/// The status table with an ENGINE column (`?` when the engine was not asked).
pub fn render_with_engine(
    statuses: &[AppStatus],
    live: Option<&BTreeMap<String, ContainerSummary>>,
) -> String {
    let cells: Vec<String> = statuses.iter().map(|s| engine_cell(s, live)).collect();
    let table = render_table(statuses);
    let mut lines = table.lines();
    let Some(header) = lines.next() else {
        return table;
    };
    let width = cells.iter().map(String::len).max().unwrap_or(0).max(6);
    let mut out = format!("{:<width$}  {header}\n", "ENGINE");
    for (i, line) in lines.enumerate() {
        let cell = cells.get(i).map_or("", String::as_str);
        let cell = if statuses.is_empty() { "" } else { cell };
        out.push_str(format!("{cell:<width$}  {line}").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use odac_protocol::{Fallback, FallbackTier, Reason};

    #[test]
    fn table_shows_state_gpu_and_error() {
        let s = AppStatus {
            name: "llm".into(),
            generation: 3,
            state: AppState::Running,
            gpu: odac_protocol::GpuStatus {
                fallback: Some(Fallback {
                    tier: FallbackTier::Preflight,
                    reason: Reason::NoDevice,
                    detail: None,
                }),
                ..Default::default()
            },
            ..AppStatus::default()
        };
        let table = render_table(&[s]);
        assert!(table.starts_with("NAME"), "{table}");
        assert!(
            table.contains("llm   running  cpu (preflight: no_device)"),
            "{table}"
        );
        assert!(render_table(&[]).contains("(no apps)"));
        let crashed = AppStatus {
            name: "oom".into(),
            state: AppState::CrashLoop,
            crash: Some(odac_protocol::CrashInfo {
                reason: odac_protocol::CrashReason::OomKilled,
                exit_code: Some(137),
                oom_killed: true,
                ..Default::default()
            }),
            ..AppStatus::default()
        };
        let table = render_table(&[crashed]);
        assert!(table.contains("oom_killed (exit 137)"), "{table}");
        let mut s = AppStatus {
            name: "web".into(),
            container_id: Some("c1".into()),
            ..AppStatus::default()
        };
        let live = BTreeMap::from([(
            "c1".to_owned(),
            ContainerSummary {
                id: "c1".into(),
                state: odac_host::engine::ContainerState::Exited,
                ..ContainerSummary::default()
            },
        )]);
        let t = render_with_engine(std::slice::from_ref(&s), Some(&live));
        assert!(t.starts_with("ENGINE  NAME"), "{t}");
        assert!(t.lines().nth(1).unwrap().starts_with("exited  web"), "{t}");
        s.container_id = Some("gone".into());
        let t = render_with_engine(std::slice::from_ref(&s), Some(&live));
        assert!(t.lines().nth(1).unwrap().starts_with("missing  web"), "{t}");
        let t = render_with_engine(&[s], None);
        assert!(t.lines().nth(1).unwrap().starts_with("?"), "{t}");
    }
}
