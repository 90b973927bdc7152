//! The checks of [`Config::validate`](crate::config::Config::validate) that go beyond one
//! number's range: no fractional number anywhere (the `config` crate would round `1.5` to `2`
//! silently: every numeric key is a whole number), a log filter made only of levels and
//! `target=level` directives (a bare word such as `infoo` is a valid tracing target and would
//! log nothing), and the `[apps]` table: ranges, an instance name the engine accepts in
//! container and volume names, absolute paths, none of the agent's own label keys in
//! `[apps.extra_labels]` (`odac.instance`, `odac.owner`, `odac.app`, the hashes, the restart
//! token, anything under `odac.gpu.` or `odac.git.`: they would be overwritten or, worse, read
//! back as the agent's own facts, e.g. a fake GPU fallback). Other `odac.*` keys stay usable
//! (the test harness marks its containers `odac.test`).

use std::path::{Component, Path};

use crate::appmgr::AppManagerConfig;
use crate::config::ConfigError;

const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

fn key(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::key(key, message)
}

/// Refuses a fractional number at any key (`prefix` is the dotted key of `value`).
pub(crate) fn no_fractions(prefix: &str, value: &config::Value) -> Result<(), ConfigError> {
    use config::ValueKind;
    match &value.kind {
        ValueKind::Float(f) => Err(key(
            prefix,
            format!("{f} is not a whole number (every number in this file is)"),
        )),
        ValueKind::Table(table) => {
            for (name, v) in table {
                let k = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                no_fractions(&k, v)?;
            }
            Ok(())
        }
        ValueKind::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                no_fractions(&format!("{prefix}[{i}]"), v)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A log filter: comma-separated levels and `target=level` directives (what
/// [`Targets`](tracing_subscriber::filter::Targets) reads; no span or field filters).
pub(crate) fn log_filter(filter: &str) -> Result<(), ConfigError> {
    let bad = |m: String| key("log_level", format!("{filter:?}: {m}"));
    if filter.trim().is_empty() {
        return Err(bad("is empty (use a level: info, debug, ...)".into()));
    }
    for directive in filter.split(',').map(str::trim) {
        if directive.contains(['[', ']', '{', '}']) {
            return Err(bad(format!(
                "{directive:?}: span and field filters are not supported (write target=level)"
            )));
        }
        let level = match directive.rsplit_once('=') {
            Some((target, level)) if !target.trim().is_empty() => level,
            Some(_) => return Err(bad(format!("{directive:?} has no target before '='"))),
            None => directive,
        };
        if !LEVELS.contains(&level.trim().to_ascii_lowercase().as_str()) {
            return Err(bad(format!(
                "{level:?} is not a level (one of {}; a target is written target=level)",
                LEVELS.join(", ")
            )));
        }
    }
    filter
        .parse::<tracing_subscriber::filter::Targets>()
        .map_err(|e| bad(e.to_string()))?;
    Ok(())
}

fn range(name: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(key(name, format!("{value} is out of range {min}..={max}")));
    }
    Ok(())
}

pub(crate) fn absolute(name: &str, path: &Path) -> Result<(), ConfigError> {
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(key(
            name,
            format!("{} is not an absolute path without '..'", path.display()),
        ));
    }
    Ok(())
}

/// Whether `name` is usable as the engine's container and volume name prefix.
fn instance_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
        && name.len() <= 64
}

/// Whether `key` is (or, ASCII case aside, reads as) one of the labels the agent writes.
fn reserved_label(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        odac_host::names::INSTANCE,
        odac_host::names::OWNER,
        odac_host::names::APP,
        odac_host::names::SPEC_HASH,
        odac_host::names::GPU_HASH,
        odac_host::names::ACCESS_HASH,
        odac_host::names::RESTART_TOKEN,
    ]
    .contains(&key.as_str())
        || ["odac.gpu.", "odac.git."]
            .iter()
            .any(|prefix| key.starts_with(prefix))
}

/// The `[apps]` table.
pub(crate) fn apps(apps: &AppManagerConfig) -> Result<(), ConfigError> {
    if !instance_name_ok(&apps.instance) {
        return Err(key(
            "apps.instance",
            format!(
                "{:?} is not a valid name: 1 to 64 characters [a-zA-Z0-9][a-zA-Z0-9.-]* (it starts container and volume names, `_` separates it from the app)",
                apps.instance
            ),
        ));
    }
    range(
        "apps.poll_interval_ms",
        apps.poll_interval_ms,
        10,
        3_600_000,
    )?;
    range("apps.backstop_secs", apps.backstop_secs, 1, 86_400)?;
    range("apps.stop_timeout_secs", apps.stop_timeout_secs, 0, 3600)?;
    range(
        "apps.refusal_memory_secs",
        apps.refusal_memory_secs,
        0,
        86_400,
    )?;
    range("apps.pull_stall_secs", apps.pull_stall_secs, 10, 86_400)?;
    range(
        "apps.image_gc_delay_secs",
        apps.image_gc_delay_secs,
        0,
        30 * 86_400,
    )?;
    range(
        "apps.image_gc_min_free_mb",
        apps.image_gc_min_free_mb,
        0,
        1 << 30,
    )?;
    if apps.pids_limit != 0 {
        range("apps.pids_limit", u64::from(apps.pids_limit), 16, 4_194_304)?;
    }
    range(
        "apps.log_max_size_bytes",
        apps.log_max_size_bytes,
        odac_protocol::MIN_LOG_SIZE_BYTES,
        1 << 40,
    )?;
    range(
        "apps.log_max_files",
        u64::from(apps.log_max_files),
        1,
        u64::from(odac_protocol::MAX_LOG_FILES),
    )?;
    if let Some(reserved) = apps.extra_labels.keys().find(|k| reserved_label(k)) {
        return Err(key(
            format!("apps.extra_labels.{reserved}"),
            "is one of the agent's own labels (odac.instance, odac.owner, odac.app, odac.spec-hash, odac.gpu-hash, odac.restart-token, odac.gpu.*, odac.git.*); choose another key",
        ));
    }
    for (i, p) in apps.policy.allowed_bind_prefixes.iter().enumerate() {
        absolute(&format!("apps.policy.allowed_bind_prefixes[{i}]"), p)?;
    }
    for (i, p) in apps.policy.allowed_device_prefixes.iter().enumerate() {
        absolute(&format!("apps.policy.allowed_device_prefixes[{i}]"), p)?;
    }
    let cl = &apps.crash_loop;
    range(
        "apps.crash_loop.initial_backoff_ms",
        cl.initial_backoff_ms,
        1,
        3_600_000,
    )?;
    range(
        "apps.crash_loop.max_backoff_secs",
        cl.max_backoff_secs,
        1,
        86_400,
    )?;
    range(
        "apps.crash_loop.healthy_reset_secs",
        cl.healthy_reset_secs,
        1,
        604_800,
    )?;
    let b = &apps.build;
    if b.git.as_os_str().is_empty() {
        return Err(key("apps.build.git", "is empty"));
    }
    range("apps.build.git_timeout_secs", b.git_timeout_secs, 1, 86_400)?;
    range(
        "apps.build.build_timeout_secs",
        b.build_timeout_secs,
        1,
        172_800,
    )?;
    range("apps.build.keep_images", b.keep_images as u64, 1, 100)?;
    range(
        "apps.build.max_context_bytes",
        b.max_context_bytes,
        1,
        1 << 40,
    )?;
    range("apps.build.max_parallel", b.max_parallel as u64, 1, 64)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_filters() {
        for ok in [
            "info",
            "INFO",
            "info,odac_agent::uplink=debug",
            "warn,hyper=off",
            "off",
        ] {
            assert!(log_filter(ok).is_ok(), "{ok}");
        }
        for bad in ["infoo", "", "info,odac_agent", "odac=loud", "=info", "5"] {
            assert!(log_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn instance_names() {
        for ok in ["odac", "odac-t1.x", "A9"] {
            assert!(instance_name_ok(ok), "{ok}");
        }
        for bad in ["Bad Name!", "", "-x", "a/b", "a_b", &"x".repeat(65)] {
            assert!(!instance_name_ok(bad), "{bad}");
        }
    }
}
