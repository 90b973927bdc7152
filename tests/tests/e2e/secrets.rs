//! Secrets at rest and in logs: the real agent runs at `log_level =
//! "trace"` against the real simulator and is given an app from a git source carrying an
//! access token; neither its bearer token nor the git secret appears anywhere in its output,
//! and the state files holding them are private (dir 0700, files 0600, builds/ 0700).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use odac_e2e::require_docker;
use odac_e2e::stack::{Stack, TOKEN};
use serde_json::json;

const SECRET: &str = "ghs_e2eGitSecret0123456789abcdefXYZ";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn trace_logs_never_show_the_token_or_a_git_secret_and_state_files_are_private() {
    const SCENARIO: &str = "secrets";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO)
        .agent_options(|o| o.log_level = "trace".to_owned())
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let mut env = serde_json::Map::new();
    env.insert("API_KEY".into(), json!("env-value-at-rest"));
    stack
        .sim
        .create_app(&json!({
            "name": "gitapp",
            "source": {"url": "https://127.0.0.1:9/odac/none.git", "secret": SECRET},
            "env": env,
        }))
        .unwrap();
    // the fetch fails (nothing listens there): the secret went through the whole path
    stack
        .wait_app("gitapp", Duration::from_secs(60), "failed fetch", |a| {
            a.state == "failed"
        })
        .unwrap();
    let agent = stack.agent().unwrap();
    let state = agent.state_dir();
    assert!(
        std::fs::read_to_string(state.join("desired.json"))
            .unwrap()
            .contains(SECRET),
        "the secret is kept at rest (the agent needs it to fetch again)"
    );
    let modes = [
        mode(&state),
        mode(&state.join("desired.json")),
        mode(&state.join("statuses.json")),
        mode(&state.join("builds")),
    ]
    .map(|m| format!("{m:o}"));

    let process = agent.process().unwrap();
    let mut text = String::new();
    for log in [process.stdout_log(), process.stderr_log()] {
        text.push_str(&std::fs::read_to_string(log).unwrap_or_default());
    }
    // the dependencies' own log lines come through (up to their caps): tungstenite's
    // handshake line is the one whose trace sibling dumped the upgrade request
    assert!(text.contains("Client handshake done"), "{text}");
    let token_hits = text.matches(TOKEN).count();
    let secret_hits = text.matches(SECRET).count();
    println!("modes {modes:?}; token in logs {token_hits}x; git secret in logs {secret_hits}x");
    assert_eq!(
        (modes, token_hits, secret_hits),
        (["700", "600", "600", "700"].map(String::from), 0, 0),
        "state dir, desired.json, statuses.json, builds/ private; token and git secret never logged"
    );
}
