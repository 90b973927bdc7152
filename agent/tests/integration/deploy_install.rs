//! `deploy/install.sh` into a temporary root: install, reinstall and uninstall round-trip with
//! the file modes an operator relies on (binary 0755, unit and config 0644, token 0600, even
//! under umask 000), the operator's configuration survives reinstalls, systemctl is never
//! called with `--root`, bad arguments exit 2, and `--enroll-code` runs the real
//! `odac-agent enroll` against a tiny HTTPS control plane.

use crate::enroll_support as support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::FakeCp;

const AGENT_BIN: &str = env!("CARGO_BIN_EXE_odac-agent");

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A scratch dir with a fake `systemctl` first on PATH that records every call.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let shims = dir.path().join("shims");
        std::fs::create_dir(&shims).unwrap();
        let log = dir.path().join("systemctl.log");
        write_exec(
            &shims.join("systemctl"),
            &format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()),
        );
        std::fs::create_dir(dir.path().join("root")).unwrap();
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn root(&self) -> PathBuf {
        self.path("root")
    }

    /// Runs install.sh with `args` under umask 000 (modes must not depend on the umask).
    fn install(&self, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.path("shims").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg("-c")
            .arg("umask 000; exec bash \"$0\" \"$@\"")
            .arg(deploy_dir().join("install.sh"))
            .args(args)
            .env("PATH", path)
            .env_remove("ODAC_ENROLL_CODE")
            .output()
            .unwrap()
    }

    fn systemctl_calls(&self) -> String {
        std::fs::read_to_string(self.path("systemctl.log")).unwrap_or_default()
    }
}

fn write_exec(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file and directory under `root`: relative path → (mode, contents).
fn snapshot(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(rel, (mode(&p), Vec::new()));
                stack.push(p);
            } else {
                out.insert(rel, (mode(&p), std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

#[test]
fn install_reinstall_uninstall_round_trip() {
    let sb = Sandbox::new();
    let root = sb.root();
    let r = root.to_str().unwrap();
    let bin = sb.path("odac-agent-v1");
    write_exec(&bin, "#!/bin/sh\necho v1\n");
    let token = sb.path("token-in");
    std::fs::write(&token, "odac_tok_1").unwrap();

    // install
    let out = sb.install(&[
        "--root",
        r,
        "--bin",
        bin.to_str().unwrap(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("odac_tok_1"), "token printed");
    let bin_dst = root.join("usr/local/bin/odac-agent");
    let unit = root.join("etc/systemd/system/odac-agent.service");
    let config = root.join("etc/odac/agent.toml");
    let token_dst = root.join("etc/odac/token");
    assert_eq!(mode(&bin_dst), 0o755);
    assert_eq!(
        std::fs::read_to_string(&bin_dst).unwrap(),
        "#!/bin/sh\necho v1\n"
    );
    assert_eq!(mode(&unit), 0o644);
    let unit_text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        unit_text.contains("\nExecStart=/usr/local/bin/odac-agent run"),
        "{unit_text}"
    );
    assert!(unit_text.contains("\nType=notify\n"));
    assert_eq!(mode(&config), 0o644);
    let example = deploy_dir().join("agent.toml");
    if example.exists() {
        assert_eq!(
            std::fs::read(&config).unwrap(),
            std::fs::read(&example).unwrap()
        );
    } else {
        assert!(
            std::fs::read_to_string(&config)
                .unwrap()
                .contains("[control_plane]")
        );
    }
    assert_eq!(mode(&token_dst), 0o600);
    assert_eq!(std::fs::read_to_string(&token_dst).unwrap(), "odac_tok_1");
    assert_eq!(mode(&root.join("etc/odac")), 0o755);

    // the same install again changes nothing
    let before = snapshot(&root);
    let out = sb.install(&[
        "--root",
        r,
        "--bin",
        bin.to_str().unwrap(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        snapshot(&root),
        before,
        "a repeated install changed the tree"
    );

    // reinstall: new binary, no token given; operator edits and a loosened token mode
    std::fs::write(
        &config,
        "# mine\n[control_plane]\nurl = \"wss://mine/agent/v1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&token_dst, std::fs::Permissions::from_mode(0o644)).unwrap();
    let bin2 = sb.path("odac-agent-v2");
    write_exec(&bin2, "#!/bin/sh\necho v2\n");
    let out = sb.install(&["--root", r, "--bin", bin2.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("kept"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&bin_dst).unwrap(),
        "#!/bin/sh\necho v2\n"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# mine\n[control_plane]\nurl = \"wss://mine/agent/v1\"\n"
    );
    assert_eq!(std::fs::read_to_string(&token_dst).unwrap(), "odac_tok_1");
    assert_eq!(
        mode(&token_dst),
        0o600,
        "reinstall restores the token's mode"
    );

    // a new token replaces the old one
    std::fs::write(&token, "odac_tok_2").unwrap();
    let out = sb.install(&[
        "--root",
        r,
        "--bin",
        bin2.to_str().unwrap(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&token_dst).unwrap(), "odac_tok_2");
    assert_eq!(mode(&token_dst), 0o600);

    // uninstall keeps configuration and token
    let out = sb.install(&["--root", r, "--uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!bin_dst.exists() && !unit.exists());
    assert!(config.exists() && token_dst.exists());
    // and is idempotent
    let out = sb.install(&["--root", r, "--uninstall"]);
    assert!(out.status.success(), "{}", text(&out));

    // purge removes them
    std::fs::create_dir_all(root.join("var/lib/odac-agent")).unwrap();
    let out = sb.install(&["--root", r, "--uninstall", "--purge"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!root.join("etc/odac").exists());
    assert!(!root.join("var/lib/odac-agent").exists());

    assert_eq!(sb.systemctl_calls(), "", "systemctl called with --root");
    // no temporary files anywhere
    assert!(
        snapshot(&root).keys().all(|k| !k.ends_with(".new")),
        "{:?}",
        snapshot(&root).keys()
    );
}

#[test]
fn bad_arguments_exit_2_and_failures_exit_1() {
    let sb = Sandbox::new();
    let r = sb.root();
    let r = r.to_str().unwrap();
    let bin = sb.path("bin");
    write_exec(&bin, "#!/bin/sh\n");
    let b = bin.to_str().unwrap();
    let tok = sb.path("tok");
    std::fs::write(&tok, "t").unwrap();
    let t = tok.to_str().unwrap();
    let empty = sb.path("empty");
    std::fs::write(&empty, "").unwrap();
    let e = empty.to_str().unwrap();

    for (args, want) in [
        (vec!["--root", r, "--bogus"], 2),
        (vec!["--root", r, "--bin"], 2),
        (
            vec![
                "--root",
                r,
                "--bin",
                b,
                "--token-file",
                t,
                "--enroll-code",
                "c",
                "--cp",
                "https://x",
            ],
            2,
        ),
        (vec!["--root", r, "--bin", b, "--enroll-code", "c"], 2),
        (vec!["--root", r, "--bin", b, "--cp", "https://x"], 2),
        (vec!["--root", r, "--purge"], 2),
        (vec!["--root", r, "--bin", "/nonexistent/odac-agent"], 1),
        (
            vec!["--root", r, "--bin", b, "--token-file", "/nonexistent/tok"],
            1,
        ),
        (vec!["--root", r, "--bin", b, "--token-file", e], 1),
        (vec!["--root", "/nonexistent/root", "--bin", b], 1),
    ] {
        let out = sb.install(&args);
        assert_eq!(out.status.code(), Some(want), "{args:?}: {}", text(&out));
    }
    assert_eq!(
        std::fs::read_dir(sb.root()).unwrap().count(),
        0,
        "failed runs wrote files"
    );
    assert_eq!(sb.systemctl_calls(), "");
}

#[test]
fn enroll_code_installs_a_ready_host() {
    let cp = FakeCp::start();
    cp.add_code("enr_install_1", "odac_tok_enrolled");
    let sb = Sandbox::new();
    let root = sb.root();
    let r = root.to_str().unwrap();
    let ca = sb.path("ca.pem");
    cp.write_ca(&ca);
    let url = cp.url();
    let args = [
        "--root",
        r,
        "--bin",
        AGENT_BIN,
        "--enroll-code",
        "enr_install_1",
        "--cp",
        &url,
        "--ca-file",
        ca.to_str().unwrap(),
    ];
    let out = sb.install(&args);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        !all.contains("enr_install_1") && !all.contains("odac_tok_enrolled"),
        "{all}"
    );

    let etc = root.join("etc/odac");
    assert_eq!(
        std::fs::read_to_string(etc.join("token")).unwrap(),
        "odac_tok_enrolled"
    );
    assert_eq!(mode(&etc.join("token")), 0o600);
    assert_eq!(mode(&etc.join("agent.toml")), 0o644);
    assert_eq!(mode(&etc.join("ca.pem")), 0o644);
    let toml = std::fs::read_to_string(etc.join("agent.toml")).unwrap();
    assert!(
        toml.contains(&format!(
            "url = \"wss://127.0.0.1:{}/agent/v1\"",
            cp.addr.port()
        )),
        "{toml}"
    );
    assert!(
        toml.contains(&format!("ca_file = \"{}\"", etc.join("ca.pem").display())),
        "{toml}"
    );
    if deploy_dir().join("agent.toml").exists() {
        // the example's other settings are still there
        assert!(toml.contains("[docker]"), "{toml}");
        assert_eq!(toml.matches("[control_plane]").count(), 1, "{toml}");
    }
    assert_eq!(mode(&root.join("usr/local/bin/odac-agent")), 0o755);

    // the code works once: a second run fails clearly and keeps the token
    let out = sb.install(&args);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("already used") && all.contains("enrollment failed"),
        "{all}"
    );
    assert!(!all.contains("enr_install_1"), "{all}");
    assert_eq!(
        std::fs::read_to_string(etc.join("token")).unwrap(),
        "odac_tok_enrolled"
    );
    assert_eq!(sb.systemctl_calls(), "");
}
