//! `odac-sim serve` as a process: an open REST API is refused on a non-loopback address (exit
//! 78, naming the fix) unless `--insecure-open-api`; tokens can come from files (mode 0600,
//! else exit 78) so they never show on the command line `ps` prints.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes
)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use odac_simulator::fake_agent::agent_conn::{AgentConn, ConnError};

fn serve(args: &[&str], state: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_odac-sim"));
    cmd.arg("serve")
        .args(args)
        .arg("--state")
        .arg(state)
        .env_remove("ODAC_SIM_TOKENS")
        .env_remove("ODAC_SIM_API_TOKEN")
        .stdin(Stdio::null());
    cmd
}

fn secret_file(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
    f
}

/// Starts `cmd` and returns the child with the API base URL from its banner.
fn start(mut cmd: Command) -> (Child, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no banner within 60 s");
            });
        if let Some(u) = line.strip_prefix("api: ") {
            return (child, u.trim_end_matches("/api/").to_owned());
        }
    }
}

fn get(api: &str, ca: &Path, path: &str, token: Option<&str>) -> u16 {
    use ureq::tls::{Certificate, RootCerts, TlsConfig};
    let pem = std::fs::read(ca).unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::new_with_certs(&[
                    Certificate::from_pem(&pem).unwrap()
                ]))
                .build(),
        )
        .build()
        .into();
    let mut req = agent.get(&format!("{api}{path}"));
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    req.call().unwrap().status().as_u16()
}

#[test]
fn an_open_api_off_loopback_is_refused_with_exit_78() {
    let dir = tempfile::tempdir().unwrap();
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let out = serve(&["--listen", listen], &dir.path().join("s"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{listen}: {err}");
        assert!(err.contains("non-loopback"), "{err}");
        assert!(
            err.contains("--api-token-file") && err.contains("--insecure-open-api"),
            "{err}"
        );
    }
}

#[test]
fn tokens_come_from_private_files_and_stay_out_of_ps() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s");
    let agents = secret_file(
        dir.path(),
        "agents",
        "# fleet\nagent-tok-1\nagent-tok-2\n",
        0o600,
    );
    let api = secret_file(dir.path(), "api", "api-tok-from-file\n", 0o600);

    // a file others can read is refused, naming the file and the fix
    let loose = secret_file(dir.path(), "loose", "api-tok-loose\n", 0o644);
    let out = serve(
        &[
            "--listen",
            "127.0.0.1:0",
            "--api-token-file",
            loose.to_str().unwrap(),
        ],
        &state,
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(err.contains("chmod 600") && err.contains("loose"), "{err}");
    assert!(!err.contains("api-tok-loose"), "{err}");

    let (mut child, url) = start(serve(
        &[
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            agents.to_str().unwrap(),
            "--api-token-file",
            api.to_str().unwrap(),
        ],
        &state,
    ));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    let ca = state.join("ca.pem");
    let result = std::panic::catch_unwind(|| {
        assert!(!cmdline.contains("tok-"), "{cmdline}");
        assert_eq!(get(&url, &ca, "/api/hosts", None), 401);
        assert_eq!(get(&url, &ca, "/api/hosts", Some("api-tok-from-file")), 200);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let agents_url = format!("{}/agent/v1", url.replacen("https://", "wss://", 1));
        let pem = std::fs::read(&ca).unwrap();
        rt.block_on(async {
            for (token, id) in [("agent-tok-1", "agt_1"), ("agent-tok-2", "agt_2")] {
                AgentConn::connect_hello(&agents_url, &pem, token, AgentConn::hello(id, "h"))
                    .await
                    .unwrap();
            }
            let refused = AgentConn::connect(&agents_url, &pem, "api-tok-from-file").await;
            assert!(matches!(refused, Err(ConnError::Http { status: 401, .. })));
        });
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
