//! Plain-text tables for `odac app list` and `odac host list`: the requested GPU intent, the
//! attached devices and the fallback reason side by side (and, for apps built from git, the
//! commit running), and the fleet's GPUs per vendor.

use odac_protocol::{Attached, GpuRequest};

use crate::state::views::{AppView, HostView};

/// Renders rows under headers, columns padded to their widest cell.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    // one cell stays one cell, and nothing in it reaches the terminal raw
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| super::term::visible_cell(c).into_owned())
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                let w = widths.get(i).copied().unwrap_or(0);
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// A GPU request as sent, e.g. `nvidia count=1 optional`, `auto count=all`.
pub fn request(g: Option<&GpuRequest>) -> String {
    let Some(g) = g else {
        return "-".to_owned();
    };
    let mut parts = Vec::new();
    let runtime = g
        .runtime
        .as_ref()
        .map(|r| r.to_string().trim_matches('"').to_owned());
    let vendor = g
        .vendor
        .as_ref()
        .map(|v| v.to_string().trim_matches('"').to_owned());
    parts.push(runtime.or(vendor).unwrap_or_else(|| "auto".to_owned()));
    if let Some(c) = &g.count {
        parts.push(format!("count={}", c.to_string().trim_matches('"')));
    }
    if g.is_optional() {
        parts.push("optional".to_owned());
    }
    if let Some(set) = g.driver_capabilities() {
        parts.push(format!("caps={}", set.short()));
    }
    if let Some(mib) = g.min_vram_mib() {
        parts.push(format!("vram>={mib}MiB"));
    }
    parts.join(" ")
}

/// Attached devices with the driver capabilities in short form, e.g.
/// `nvidia: GPU-… [compute,utility,video]`, `nvidia: GPU-… [all]` or `-`.
pub fn attached(a: Option<&Attached>) -> String {
    let Some(a) = a else {
        return "-".to_owned();
    };
    let mut cell = if a.devices.is_empty() {
        a.vendor.to_string()
    } else {
        format!("{}: {}", a.vendor, a.devices.join(","))
    };
    if !a.capabilities.is_empty() {
        let set =
            odac_protocol::DriverCapabilities::parse(a.capabilities.iter().map(String::as_str));
        let short = set.map_or_else(|_| a.capabilities.join(","), |s| s.short());
        cell.push_str(&format!(" [{short}]"));
    }
    cell
}

/// The commit an app runs, shortened to 12 hex digits, or `-`.
pub fn commit(a: &AppView) -> String {
    a.status
        .as_ref()
        .and_then(|s| s.commit.as_deref())
        .map_or_else(|| "-".to_owned(), |c| c.chars().take(12).collect())
}

/// The DIGEST cell: the first 12 hex digits of the repo digest the container runs; for an
/// image that never came from a registry (a local tag, a build), its local image id, labelled
/// `id:` so it is never mistaken for a repo digest; `-` before the agent reports one.
pub fn digest(a: &AppView) -> String {
    let short = |d: &str| -> String { d.trim_start_matches("sha256:").chars().take(12).collect() };
    let Some(s) = a.status.as_ref() else {
        return "-".to_owned();
    };
    match (s.repo_digest.as_deref(), s.image_id.as_deref()) {
        (Some(d), _) => short(d.rsplit_once('@').map_or(d, |(_, d)| d)),
        (None, Some(id)) => format!("id:{}", short(id)),
        (None, None) => "-".to_owned(),
    }
}

/// Longest failure text shown in a table cell (`--json` has it whole).
const MAX_ERROR_CHARS: usize = 100;

/// The REASON cell: the fallback's code (`(on CPU)` when the app runs without its GPU) or, for
/// an app that failed for any reason, the failure itself (`last_error`) with the GPU reason
/// after it when that is not what the failure says.
pub fn reason(a: &AppView) -> String {
    // a crash has its own reason: a GPU reason left from before would mislead
    if let Some(c) = super::diagnosis::crash(a) {
        return super::diagnosis::crash_cell(c);
    }
    if let Some(cell) = super::diagnosis::rollout(a).and_then(super::diagnosis::rollout_cell) {
        return cell;
    }
    let code = a.reason.map(|r| {
        if a.attached.is_none() && a.state == "running" {
            format!("{r} (on CPU)")
        } else {
            r.to_string()
        }
    });
    let failed = matches!(a.state.as_str(), "failed" | "crash_loop");
    let error = a
        .status
        .as_ref()
        .and_then(|s| s.last_error.as_deref())
        .filter(|e| failed && !e.is_empty())
        .map(|e| {
            let one_line = e.split_whitespace().collect::<Vec<_>>().join(" ");
            if one_line.chars().count() > MAX_ERROR_CHARS {
                let cut: String = one_line.chars().take(MAX_ERROR_CHARS - 1).collect();
                format!("{cut}…")
            } else {
                one_line
            }
        });
    match (code, error) {
        // the agent's error often is the reason already (`no_container_runtime: …`)
        (Some(c), Some(e)) if e.starts_with(&c) => e,
        (Some(c), Some(e)) => format!("{e} (gpu: {c})"),
        (Some(c), None) => c,
        (None, Some(e)) => e,
        (None, None) => super::diagnosis::restarts_cell(a).unwrap_or_else(|| "-".to_owned()),
    }
}

/// The `odac app list` table.
pub fn apps(apps: &[AppView]) -> String {
    let rows: Vec<Vec<String>> = apps
        .iter()
        .map(|a| {
            let mut state = super::diagnosis::state_with_health(&a.state, a.status.as_ref());
            if a.restart_required {
                state.push_str(" (restart required)");
            }
            if let Some(r) = super::diagnosis::rollout(a) {
                state.push_str(&format!(" ({})", r.state));
            }
            let reason = reason(a);
            vec![
                a.name.clone(),
                if a.hostname.is_empty() {
                    a.host.clone()
                } else {
                    a.hostname.clone()
                },
                state,
                a.image.clone().unwrap_or_else(|| "-".to_owned()),
                commit(a),
                digest(a),
                request(a.requested.as_ref()),
                attached(a.attached.as_ref()),
                reason,
            ]
        })
        .collect();
    render(
        &[
            "NAME",
            "HOST",
            "STATE",
            "IMAGE",
            "COMMIT",
            "DIGEST",
            "GPU REQUEST",
            "ATTACHED",
            "REASON",
        ],
        &rows,
    )
}

/// The items joined by `sep`, or `-` when there are none.
fn joined_or_dash(items: impl Iterator<Item = String>, sep: &str) -> String {
    let parts: Vec<String> = items.collect();
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(sep)
    }
}

/// The `odac host list` table.
pub fn hosts(hosts: &[HostView]) -> String {
    fn non_empty_or_dash(s: &str) -> String {
        if s.is_empty() { "-" } else { s }.to_owned()
    }
    let rows: Vec<Vec<String>> = hosts
        .iter()
        .map(|h| {
            let gpus = if h.gpus.is_empty() {
                if h.inventory.is_some() { "none" } else { "-" }.to_owned()
            } else {
                h.gpus
                    .iter()
                    .map(|g| format!("{}×{} ({})", g.vendor, g.count, g.models.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let sched = joined_or_dash(h.schedulable.iter().map(ToString::to_string), ",");
            // the same as `--json`'s `reasons`: vendors present but not schedulable
            let reason = joined_or_dash(h.reasons.iter().map(|(v, r)| format!("{v}: {r}")), "; ");
            vec![
                format!("{} ({})", h.hostname, h.id),
                if h.connected { "yes" } else { "no" }.to_owned(),
                gpus,
                sched,
                reason,
                h.engine.clone(),
                non_empty_or_dash(&h.agent_version),
                super::agent_update::update_state(h.update.as_ref()),
            ]
        })
        .collect();
    render(
        &[
            "HOST",
            "CONNECTED",
            "GPUS",
            "SCHEDULABLE",
            "REASON",
            "ENGINE",
            "AGENT",
            "UPDATE",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn columns_align() {
        let t = render(
            &["A", "BB"],
            &[vec!["xxx".into(), "y".into()], vec!["z".into(), "w".into()]],
        );
        assert_eq!(t, "A    BB\nxxx  y\nz    w\n");
    }

    #[test]
    fn app_rows_show_the_commit_built() {
        let spec = odac_protocol::AppSpec {
            name: "svc".into(),
            ..odac_protocol::AppSpec::default()
        };
        let status = odac_protocol::AppStatus {
            name: "svc".into(),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            ..odac_protocol::AppStatus::default()
        };
        let mut view = AppView {
            name: "svc".into(),
            host: "h1".into(),
            hostname: "gpu-1".into(),
            state: "running".into(),
            image: Some("odac/svc:0123456789ab".into()),
            requested: None,
            attached: None,
            fallback: None,
            image_failure: None,
            reason: None,
            restart_required: false,
            restart_token: None,
            spec,
            status: Some(status),
        };
        let table = apps(std::slice::from_ref(&view));
        let mut lines = table.lines();
        assert!(lines.next().unwrap().contains("COMMIT"));
        assert!(lines.next().unwrap().contains(" 0123456789ab "), "{table}");
        view.status = None;
        assert_eq!(commit(&view), "-");
        assert_eq!(digest(&view), "-");
        view.status = Some(odac_protocol::AppStatus {
            image_id: Some("sha256:aaed00369d7d0875".into()),
            repo_digest: Some("127.0.0.1:5000/odac/x@sha256:6267e2b6b2c6f75f".into()),
            ..odac_protocol::AppStatus::default()
        });
        assert_eq!(digest(&view), "6267e2b6b2c6");
        let table = apps(std::slice::from_ref(&view));
        assert!(table.lines().next().unwrap().contains("DIGEST"), "{table}");
        view.status.as_mut().unwrap().repo_digest = None;
        assert_eq!(
            digest(&view),
            "id:aaed00369d7d",
            "a local image id is labelled"
        );
    }

    #[test]
    fn failed_apps_show_why() {
        let status = |state: odac_protocol::AppState, err: Option<&str>| odac_protocol::AppStatus {
            name: "svc".into(),
            state,
            last_error: err.map(str::to_owned),
            ..odac_protocol::AppStatus::default()
        };
        let mut view = AppView {
            name: "svc".into(),
            host: "h1".into(),
            hostname: "gpu-1".into(),
            state: "failed".into(),
            image: None,
            requested: None,
            attached: None,
            fallback: None,
            image_failure: None,
            reason: None,
            restart_required: false,
            restart_token: None,
            spec: odac_protocol::AppSpec::default(),
            status: Some(status(
                odac_protocol::AppState::Failed,
                Some("git clone failed:\n could not resolve host"),
            )),
        };
        assert_eq!(reason(&view), "git clone failed: could not resolve host");
        view.reason = Some(odac_protocol::Reason::BuildFailed);
        assert_eq!(
            reason(&view),
            "git clone failed: could not resolve host (gpu: build_failed)"
        );
        view.status = Some(status(
            odac_protocol::AppState::Failed,
            Some("build_failed: git clone failed"),
        ));
        assert_eq!(reason(&view), "build_failed: git clone failed", "said once");
        view.state = "running".into();
        view.status = Some(status(odac_protocol::AppState::Running, Some("old")));
        assert_eq!(
            reason(&view),
            "build_failed (on CPU)",
            "no error while running"
        );
        view.reason = None;
        assert_eq!(reason(&view), "-");
        view.state = "failed".into();
        view.status = Some(status(
            odac_protocol::AppState::Failed,
            Some(&"x".repeat(300)),
        ));
        assert_eq!(reason(&view).chars().count(), MAX_ERROR_CHARS);
    }

    #[test]
    fn requests_keep_the_spelling_sent() {
        let g: GpuRequest =
            serde_json::from_str(r#"{"runtime":"amd","count":"1","optional":"yes"}"#).unwrap();
        assert_eq!(request(Some(&g)), "amd count=1 optional");
        assert_eq!(request(None), "-");
        let g: GpuRequest = serde_json::from_str(r#"{"optional":true}"#).unwrap();
        assert_eq!(request(Some(&g)), "auto optional");
        let g: GpuRequest =
            serde_json::from_str(r#"{"runtime":"nvidia","capabilities":"video,compute"}"#).unwrap();
        assert_eq!(request(Some(&g)), "nvidia caps=compute,video");
    }

    #[test]
    fn attached_shows_capabilities_in_short_form() {
        let mut a = odac_protocol::Attached {
            vendor: odac_protocol::Vendor::Nvidia,
            mechanism: odac_protocol::Mechanism::NvidiaRuntime,
            devices: vec!["GPU-1".into()],
            capabilities: vec!["compute".into(), "utility".into(), "video".into()],
        };
        assert_eq!(attached(Some(&a)), "nvidia: GPU-1 [compute,utility,video]");
        a.capabilities = odac_protocol::DriverCapabilities::all().names();
        assert_eq!(attached(Some(&a)), "nvidia: GPU-1 [all]");
        a.capabilities.clear();
        assert_eq!(
            attached(Some(&a)),
            "nvidia: GPU-1",
            "older agents say nothing"
        );
    }
}
