//! The commands of ODAC's announcement, typed exactly as written, against the real binaries
//! and the real engine (the README's walk-through is this sequence):
//!
//! ```text
//! odac app create -n my-app -u https://github.com/example/ai-service
//! odac app gpu my-app                                  # automatic vendor detection
//! odac app restart my-app
//! odac app gpu my-app --nvidia --count 1 --optional
//! odac app restart my-app
//! odac app list
//! odac app create -f payload.json                      # ODAC's JSON payload, as is
//! ```
//!
//! The public git URL is rewritten to a local repository by the agent's git configuration
//! (`GIT_CONFIG_GLOBAL`, `url.insteadOf`): nothing leaves the machine, the command is the
//! user's. The host is the `nvidia-driver-no-toolkit` fixture (a GPU with its driver, no
//! container toolkit): detection stores `nvidia`, the required request fails with the reason,
//! the optional one runs on the CPU with it. `ollama/ollama` cannot be pulled here (no
//! registry): the payload's app is created as sent and `odac app list` shows why it failed.

use std::time::{Duration, Instant};

use odac_e2e::docker::{RUN_LABEL, has_runtime};
use odac_e2e::figures::{figure, secs};
use odac_e2e::git_repo::{ImageCleanup, LocalRepo};
use odac_e2e::require_docker;
use odac_e2e::stack::{Stack, fixture_host, instance_name};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use serde_json::{Value, json};

const SCENARIO: &str = "seed_commands";
const PUBLIC_URL: &str = "https://github.com/example/ai-service";
const PAYLOAD: &str = r#"{"name":"ollama-app","type":"app","app":"ollama","gpu":{"runtime":"nvidia","count":1,"optional":true}}"#;
/// Clone + classic build + start on a 2-core debug machine.
const BUILD_WAIT: Duration = Duration::from_secs(180);

fn row<'a>(table: &'a str, app: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.starts_with(&format!("{app} ")))
        .unwrap_or_else(|| panic!("no row for {app} in\n{table}"))
}

#[test]
fn the_seed_commands_run_as_written() {
    require_docker!(SCENARIO);
    odac_e2e::image::ensure_busybox_test_image().unwrap();
    let t0 = Instant::now();
    let instance = instance_name(SCENARIO);
    let _images = ImageCleanup(format!("{RUN_LABEL}={instance}"));
    let mut stack = Stack::builder(SCENARIO)
        .instance(&instance)
        .host_root(fixture_host("nvidia-driver-no-toolkit"))
        .no_agent()
        .start()
        .unwrap();
    let repo = LocalRepo::new(&stack.dir().join("repo")).unwrap();
    repo.commit(
        &[(
            "Dockerfile",
            &format!(
                "FROM {BUSYBOX_TEST_IMAGE}\n\
                 CMD [\"sh\", \"-c\", \"trap 'exit 0' TERM INT; sleep 999999999 & wait\"]\n"
            ),
        )],
        "ai-service",
    )
    .unwrap();
    let gitconfig = stack.dir().join("gitconfig");
    repo.write_rewrite_config(&gitconfig, PUBLIC_URL).unwrap();
    stack.options.env.push((
        "GIT_CONFIG_GLOBAL".to_owned(),
        gitconfig.display().to_string(),
    ));
    stack.start_agent().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let sim = &stack.sim;
    // the engine's own nvidia runtime makes the pre-flight pass and the engine refuse
    let reason = if has_runtime("nvidia").unwrap() {
        "engine_rejected"
    } else {
        "no_container_runtime"
    };

    // odac app create -n my-app -u https://github.com/example/ai-service
    let t = Instant::now();
    let out = sim
        .odac_line(
            "odac app create -n my-app -u https://github.com/example/ai-service",
            None,
        )
        .unwrap();
    assert!(
        out.stdout.starts_with("created app my-app on "),
        "{}",
        out.stdout
    );
    let built = stack
        .wait_app("my-app", BUILD_WAIT, "built and running", |a| {
            a.state == "running" && a.status.as_ref().is_some_and(|s| s.commit.is_some())
        })
        .unwrap();
    figure(SCENARIO, "create_from_git_to_running", secs(t.elapsed()));
    assert_eq!(
        built.spec.source.as_ref().map(|s| s.url.as_str()),
        Some(PUBLIC_URL)
    );

    // odac app gpu my-app: the control plane detects the host's vendor (NVIDIA, present but
    // without a container toolkit) and stores it as a concrete runtime
    let out = sim.odac_line("odac app gpu my-app", None).unwrap();
    assert!(
        out.stdout
            .contains("app my-app: gpu request nvidia (vendor detected on "),
        "{}",
        out.stdout
    );
    if reason == "no_container_runtime" {
        assert!(
            out.stdout
                .contains("cannot be used now (no_container_runtime"),
            "{}",
            out.stdout
        );
    }
    assert!(
        out.stdout.contains("restart required to apply"),
        "{}",
        out.stdout
    );
    assert_eq!(
        sim.app("my-app").unwrap().unwrap().requested,
        Some(serde_json::from_value(json!({"runtime": "nvidia"})).unwrap())
    );

    // odac app restart my-app: a required NVIDIA GPU the host cannot pass: failed, with why
    let t = Instant::now();
    sim.odac_line("odac app restart my-app", None).unwrap();
    let failed = stack
        .wait_app(
            "my-app",
            Duration::from_secs(60),
            "failed with the reason",
            |a| a.state == "failed" && a.reason.is_some(),
        )
        .unwrap();
    figure(
        SCENARIO,
        "required_gpu_restart_to_failed",
        secs(t.elapsed()),
    );
    assert_eq!(
        failed.reason.map(|r| r.to_string()).as_deref(),
        Some(reason)
    );
    let table = sim.odac_line("odac app list", None).unwrap().stdout;
    println!("{table}");
    assert!(row(&table, "my-app").contains(reason), "{table}");

    // odac app gpu my-app --nvidia --count 1 --optional, then restart: on the CPU, with why
    let out = sim
        .odac_line("odac app gpu my-app --nvidia --count 1 --optional", None)
        .unwrap();
    assert!(
        out.stdout.contains("gpu request nvidia count=1 optional"),
        "{}",
        out.stdout
    );
    let t = Instant::now();
    sim.odac_line("odac app restart my-app", None).unwrap();
    // the status must be the restart's, not the one the GPU change alone may have produced
    // (the failed app had no container, so the change can start it before the restart lands)
    let restarted = sim.hosts().unwrap()[0].generation;
    let cpu = stack
        .wait_app(
            "my-app",
            Duration::from_secs(90),
            "running on the CPU after the restart",
            |a| {
                a.state == "running"
                    && a.reason.is_some()
                    && !a.restart_required
                    && a.status.as_ref().is_some_and(|s| s.generation >= restarted)
            },
        )
        .unwrap();
    figure(SCENARIO, "optional_gpu_restart_to_cpu", secs(t.elapsed()));
    assert_eq!(cpu.attached, None);

    // odac app create -f payload.json: ODAC's payload as is
    let t = Instant::now();
    let payload = stack.dir().join("payload.json");
    std::fs::write(&payload, PAYLOAD).unwrap();
    let out = sim
        .odac_line(&format!("odac app create -f {}", payload.display()), None)
        .unwrap();
    assert!(
        out.stdout.starts_with("created app ollama-app on "),
        "{}",
        out.stdout
    );
    let ollama = sim.app("ollama-app").unwrap().unwrap();
    assert_eq!(ollama.image.as_deref(), Some("ollama/ollama:0.6.2"));
    let sent: Value = serde_json::from_str(PAYLOAD).unwrap();
    assert_eq!(
        serde_json::to_value(&ollama.requested).unwrap(),
        sent["gpu"],
        "kept as sent"
    );
    // no registry here: the pull fails, and the table says so in REASON
    let pulled = stack
        .wait_app(
            "ollama-app",
            Duration::from_secs(90),
            "a pull failure",
            |a| {
                a.state == "failed"
                    && a.status
                        .as_ref()
                        .is_some_and(|s| s.last_error.as_deref().is_some_and(|e| !e.is_empty()))
            },
        )
        .unwrap();
    figure(SCENARIO, "payload_to_pull_failure", secs(t.elapsed()));
    let error = pulled.status.and_then(|s| s.last_error).unwrap_or_default();

    // odac app list
    let table = sim.odac_line("odac app list", None).unwrap().stdout;
    println!("{table}");
    let mine = row(&table, "my-app");
    for cell in ["running", "nvidia count=1 optional", reason, "(on CPU)"] {
        assert!(mine.contains(cell), "{cell} missing in {mine:?}");
    }
    let theirs = row(&table, "ollama-app");
    let shown: String = error.split_whitespace().collect::<Vec<_>>().join(" ");
    let head: String = shown.chars().take(40).collect();
    assert!(theirs.contains("failed"), "{theirs}");
    assert!(theirs.contains(&head), "the failure {head:?} in {theirs:?}");
    figure(SCENARIO, "reason", reason);
    figure(SCENARIO, "total", secs(t0.elapsed()));
}
