//! Unit tests of loading and checking the configuration.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::Path;

use super::*;

fn load(toml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, toml).unwrap();
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    Config::load_with_env(Some(&path), env)
}

fn key_of(e: ConfigError) -> String {
    match e {
        ConfigError::Key { key, .. } => key,
        other => format!("file: {other}"),
    }
}

#[test]
fn minimal_file_gets_the_documented_defaults() {
    let c = load(
        "[control_plane]\nurl = \"wss://cp.example/agent/v1\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.control_plane.token_file, Some("/etc/odac/token".into()));
    assert_eq!(c.control_plane.heartbeat_secs, 20);
    assert_eq!(c.state_dir, PathBuf::from("/var/lib/odac-agent"));
    assert_eq!(c.apps.state_dir, c.state_dir);
    assert_eq!(c.log_format, LogFormat::Text);
    assert_eq!(c.inventory.interval_secs, 10);
    assert_eq!(c.telemetry.interval_secs, 60);
    assert_eq!(c.gpu.health_recovery_secs, 300);
    let exec = &c.exec;
    assert!(exec.enabled && !exec.allow_user);
    assert_eq!(exec.max_sessions, 3);
    assert_eq!(exec.idle_timeout(), std::time::Duration::from_secs(15 * 60));
    assert_eq!(
        exec.max_lifetime(),
        std::time::Duration::from_secs(4 * 3600)
    );
    assert_eq!(exec.max_unsent_bytes, 8 * 1024 * 1024);
    assert_eq!(c.backoff(), BackoffPolicy::default());
    assert_eq!(c.outbox(), OutboxLimits::default());
}

#[test]
fn the_example_file_loads_as_is() {
    let text = include_str!("../../../deploy/agent.toml");
    let c = load(text, &[]).unwrap();
    assert_eq!(c.control_plane.url, "wss://app.odac.run/agent/v1");
    assert_eq!(c.backoff(), BackoffPolicy::default());
    // the endpoint is off until `[metrics] listen` is set
    assert_eq!(c.metrics.listen().unwrap(), None);
    assert_eq!(
        c.apps,
        AppManagerConfig {
            state_dir: c.state_dir.clone(),
            ..AppManagerConfig::default()
        }
    );
}

#[test]
fn environment_overlays_the_file_with_nested_keys() {
    let c = load(
        "state_dir = \"/srv/odac\"\n[control_plane]\nurl = \"wss://a/agent/v1\"\n",
        &[
            ("ODAC_AGENT__CONTROL_PLANE__URL", "wss://b:7443/agent/v1"),
            ("ODAC_AGENT__CONTROL_PLANE__HEARTBEAT_SECS", "5"),
            ("ODAC_AGENT__LOG_FORMAT", "json"),
            ("ODAC_AGENT__DOCKER__HOST", "unix:///run/docker.sock"),
            ("ODAC_AGENT__CONTROL_PLANE__CA_FILE", ""),
            ("ODAC_AGENT_TOKEN", "not-a-config-key"),
        ],
    )
    .unwrap();
    assert_eq!(c.control_plane.url, "wss://b:7443/agent/v1");
    assert_eq!(c.control_plane.heartbeat_secs, 5);
    assert_eq!(c.log_format, LogFormat::Json);
    assert_eq!(c.docker.host.as_deref(), Some("unix:///run/docker.sock"));
    assert_eq!(c.control_plane.ca_file, None);
    assert_eq!(c.apps.state_dir, PathBuf::from("/srv/odac"));
}

#[test]
fn state_dir_is_one_key_and_the_old_apps_key_is_only_its_other_name() {
    let cp = "[control_plane]\nurl = \"wss://a/agent/v1\"\n";
    // the old key alone moves the whole state, agent id included
    let c = load(&format!("{cp}[apps]\nstate_dir = \"/srv/old\"\n"), &[]).unwrap();
    assert_eq!(c.state_dir, PathBuf::from("/srv/old"));
    assert_eq!(c.apps.state_dir, c.state_dir);
    // both, naming the same directory: fine
    let same = format!("state_dir = \"/srv/a\"\n{cp}[apps]\nstate_dir = \"/srv/a\"\n");
    assert_eq!(
        load(&same, &[]).unwrap().apps.state_dir,
        PathBuf::from("/srv/a")
    );
    // two homes for one agent's state: refused, naming the old key and both directories
    let two = format!("state_dir = \"/srv/a\"\n{cp}[apps]\nstate_dir = \"/srv/b\"\n");
    let e = load(&two, &[]).unwrap_err();
    assert_eq!(key_of(e.clone()), "apps.state_dir");
    let text = e.to_string();
    assert!(text.contains("/srv/a") && text.contains("/srv/b"), "{text}");
    // the same through the environment
    let e = load(
        &format!("state_dir = \"/srv/a\"\n{cp}"),
        &[("ODAC_AGENT__APPS__STATE_DIR", "/srv/c")],
    )
    .unwrap_err();
    assert_eq!(key_of(e), "apps.state_dir");
}

#[test]
fn errors_name_the_key() {
    let ok = "[control_plane]\nurl = \"wss://a/agent/v1\"\n";
    assert_eq!(key_of(load("", &[]).unwrap_err()), "control_plane");
    assert_eq!(
        key_of(load("[control_plane]\n", &[]).unwrap_err()),
        "control_plane.url"
    );
    let e = load("[control_plane]\nurl = \"ws://a/\"\n", &[]).unwrap_err();
    assert_eq!(key_of(e.clone()), "control_plane.url");
    assert!(e.to_string().contains("only wss://"), "{e}");
    // ODAC_AGENT__<variable>=<value> -> the key the error names
    let cases: &[&str] = &[
        "CONTROL_PLANE__HEARTBEAT_SECS=0 -> control_plane.heartbeat_secs",
        "CONTROL_PLANE__HEARTBEAT_SECS=soon -> control_plane.heartbeat_secs",
        "LOG_FORMAT=xml -> log_format",
        "LOG_LEVEL=info,=[ -> log_level",
        "INVENTORY__INTERVAL_SECS=60 -> inventory.interval_secs",
        "STATE_DIR=relative/dir -> state_dir",
        "CONTROL_PLANE__CLIENT_CERT=/x.pem -> control_plane.client_key",
        "CONTROL_PLANE__TYPO=1 -> control_plane.typo",
        "APPS__POLL_INTERVAL_MS=fast -> apps.poll_interval_ms",
        "LOG_LEVEL=infoo -> log_level",
        "TELEMETRY__INTERVAL_SECS=5 -> telemetry.interval_secs",
        "GPU__HEALTH_RECOVERY_SECS=0 -> gpu.health_recovery_secs",
        "GPU__HEALTH_RECOVERY_SECS=soon -> gpu.health_recovery_secs",
        "APPS__POLL_INTERVAL_MS=0 -> apps.poll_interval_ms",
        "APPS__BUILD__KEEP_IMAGES=0 -> apps.build.keep_images",
        "APPS__INSTANCE=Bad Name! -> apps.instance",
        "APPS__PIDS_LIMIT=3 -> apps.pids_limit",
        "APPS__PULL_STALL_SECS=5 -> apps.pull_stall_secs",
        "APPS__LOG_MAX_SIZE_BYTES=1024 -> apps.log_max_size_bytes",
        "APPS__LOG_MAX_FILES=0 -> apps.log_max_files",
        "APPS__CRASH_LOOP__MAX_BACKOFF_SECS=0 -> apps.crash_loop.max_backoff_secs",
        "EXEC__MAX_SESSIONS=0 -> exec.max_sessions",
        "EXEC__IDLE_TIMEOUT_SECS=0 -> exec.idle_timeout_secs",
        "EXEC__MAX_LIFETIME_SECS=999999999 -> exec.max_lifetime_secs",
        "EXEC__MAX_UNSENT_BYTES=1024 -> exec.max_unsent_bytes",
        "EXEC__ENABLED=perhaps -> exec.enabled",
    ];
    for case in cases {
        let (var, want) = case.rsplit_once(" -> ").unwrap();
        let (k, v) = var.split_once('=').unwrap();
        let k = format!("{ENV_PREFIX}__{k}");
        let e = load(ok, &[(&k, v)]).unwrap_err();
        let text = e.to_string();
        assert_eq!(key_of(e), want, "{k}={v}: {text}");
        assert!(text.contains(want), "{text}");
    }
}

#[test]
fn fractions_and_relative_paths_in_the_file_are_refused() {
    let ok = "[control_plane]\nurl = \"wss://a/agent/v1\"\n";
    let cases: &[(&str, &str)] = &[
        ("heartbeat_secs = 1.5\n", "control_plane.heartbeat_secs"),
        ("[apps]\npoll_interval_ms = 0\n", "apps.poll_interval_ms"),
        ("[apps]\nbackstop_secs = 0\n", "apps.backstop_secs"),
        (
            "[apps]\nimage_gc_delay_secs = 9999999\n",
            "apps.image_gc_delay_secs",
        ),
        (
            "[apps]\nimage_gc_min_free_mb = -1\n",
            "apps.image_gc_min_free_mb",
        ),
        ("[apps.build]\nkeep_images = 0\n", "apps.build.keep_images"),
        (
            "[apps.policy]\nallowed_bind_prefixes = [\"/srv\", \"data\"]\n",
            "apps.policy.allowed_bind_prefixes[1]",
        ),
        (
            "[apps.policy]\nallowed_device_prefixes = [\"dev/apex_0\"]\n",
            "apps.policy.allowed_device_prefixes[0]",
        ),
        ("[apps]\ninstance = \"Bad Name!\"\n", "apps.instance"),
        ("[apps]\nstate_dir = \"rel\"\n", "apps.state_dir"),
        (
            "[apps.extra_labels]\nteam = \"ml\"\n\"odac.gpu.fallback\" = \"x\"\n",
            "apps.extra_labels.odac.gpu.fallback",
        ),
        (
            "[apps.extra_labels]\n\"ODAC.owner\" = \"x\"\n",
            "apps.extra_labels.ODAC.owner",
        ),
        (
            "[apps.extra_labels]\n\"odac.git.url\" = \"x\"\n",
            "apps.extra_labels.odac.git.url",
        ),
    ];
    for (extra, want) in cases {
        let e = load(&format!("{ok}{extra}"), &[]).unwrap_err();
        let text = e.to_string();
        assert_eq!(key_of(e), *want, "{extra}: {text}");
    }
}

#[test]
fn explicit_missing_file_is_an_error_but_the_default_may_be_absent() {
    let e = Config::load_with_env(Some(Path::new("/nonexistent/agent.toml")), vec![]).unwrap_err();
    assert!(matches!(e, ConfigError::File { .. }));
    let c = Config::load_with_env(
        None,
        vec![(
            "ODAC_AGENT__CONTROL_PLANE__URL".to_owned(),
            "wss://x/agent/v1".to_owned(),
        )],
    );
    // the default file may exist on a dev machine; without it, env alone is enough
    if !Path::new(DEFAULT_CONFIG_FILE).exists() {
        assert_eq!(c.unwrap().control_plane.url, "wss://x/agent/v1");
    }
}

#[test]
fn extra_labels_outside_the_agents_own_keys_are_kept() {
    let toml = "[control_plane]\nurl = \"wss://a/agent/v1\"\n[apps.extra_labels]\n\"odac.test\" = \"1\"\n\"odac.e2e.run\" = \"r\"\nteam = \"ml\"\n";
    let config = load(toml, &[]).unwrap();
    assert_eq!(config.apps.extra_labels.len(), 3);
    assert_eq!(
        config
            .apps
            .extra_labels
            .get("odac.test")
            .map(String::as_str),
        Some("1")
    );
}

/// PROTOCOL.md 1.1: the auth back-off is [A/2, A] with A = `control_plane.auth_retry_secs`,
/// 300 s by default, 2..=86400.
#[test]
fn the_auth_back_off_is_the_documented_key_and_range() {
    let url = "[control_plane]\nurl = \"wss://cp.example/agent/v1\"\n";
    assert_eq!(
        load(url, &[]).unwrap().backoff().auth_retry,
        Duration::from_secs(300)
    );
    let c = load(&format!("{url}auth_retry_secs = 40\n"), &[]).unwrap();
    assert_eq!(c.backoff().auth_retry, Duration::from_secs(40));
    for bad in [1, 86_401] {
        let e = load(&format!("{url}auth_retry_secs = {bad}\n"), &[]).unwrap_err();
        assert_eq!(key_of(e), "control_plane.auth_retry_secs");
    }
}
