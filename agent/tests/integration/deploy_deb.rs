//! The Debian package's recipe (`[package.metadata.deb]` in agent/Cargo.toml) agrees with the
//! files in deploy/: every asset exists, the binary lands where the unit's ExecStart expects
//! it, agent.toml is a conffile with mode 0644, the unit is picked up by cargo-deb's systemd
//! integration, and the maintainer scripts are valid sh with the `#DEBHELPER#` hook.
//! Building and inspecting the real .deb (`dpkg-deb -I/-c/-x`) is deploy/check-deb.sh, which
//! needs a release build and cargo-deb, so CI runs it as its own step.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn agent_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn metadata() -> config::Config {
    let text = std::fs::read_to_string(agent_dir().join("Cargo.toml")).unwrap();
    config::Config::builder()
        .add_source(config::File::from_str(&text, config::FileFormat::Toml))
        .build()
        .unwrap()
}

fn get<T: serde::de::DeserializeOwned>(key: &str) -> T {
    metadata()
        .get::<T>(&format!("package.metadata.deb.{key}"))
        .unwrap_or_else(|e| panic!("package.metadata.deb.{key}: {e}"))
}

#[test]
fn assets_exist_and_land_where_the_unit_expects() {
    let assets: Vec<Vec<String>> = get("assets");
    let find = |src: &str| {
        assets
            .iter()
            .find(|a| a[0] == src)
            .unwrap_or_else(|| panic!("no asset {src} in {assets:?}"))
            .clone()
    };
    assert_eq!(find("target/release/odac-agent")[1..], ["usr/bin/", "755"]);
    assert_eq!(
        find("../deploy/agent.toml")[1..],
        ["etc/odac/agent.toml", "644"]
    );
    for a in &assets {
        assert_eq!(a.len(), 3, "{a:?}");
        if !a[0].starts_with("target/release/") {
            assert!(
                agent_dir().join(&a[0]).is_file(),
                "asset {} is missing",
                a[0]
            );
        }
    }
    let conf: Vec<String> = get("conf-files");
    assert_eq!(conf, ["/etc/odac/agent.toml"]);

    // cargo-deb installs deploy/odac-agent.service through its systemd integration
    let units_dir: String = get("systemd-units.unit-scripts");
    let unit = agent_dir().join(&units_dir).join("odac-agent.service");
    let unit_text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        unit_text
            .lines()
            .any(|l| l.starts_with("ExecStart=/usr/bin/odac-agent run")),
        "the unit must start the packaged binary:\n{unit_text}"
    );
    assert!(unit_text.contains("\nConfigurationDirectory=odac\n"));
    assert!(get::<bool>("systemd-units.enable"));
    // no start on first install (no token yet); a running agent restarts on upgrade
    assert!(!get::<bool>("systemd-units.start"));
    assert!(get::<bool>("systemd-units.restart-after-upgrade"));
}

#[test]
fn maintainer_scripts_are_valid_sh_with_the_debhelper_hook() {
    let dir: String = get("maintainer-scripts");
    let dir = agent_dir().join(dir);
    for name in ["postinst", "postrm"] {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("#!/bin/sh\n"), "{name}");
        // exactly once: cargo-deb replaces every occurrence, comments included
        assert_eq!(text.matches("#DEBHELPER#").count(), 1, "{name}");
        assert!(text.contains("\n#DEBHELPER#\n"), "{name} lacks #DEBHELPER#");
        assert!(text.contains("\nset -e\n"), "{name} lacks set -e");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{name} is not executable");
        let ok = Command::new("sh").arg("-n").arg(&path).status().unwrap();
        assert!(ok.success(), "{name} is not valid sh");
    }
    let postrm = std::fs::read_to_string(dir.join("postrm")).unwrap();
    assert!(postrm.contains("\"$1\" = \"purge\""));
    assert!(postrm.contains("/etc/odac/token"));
}

#[test]
fn postrm_purge_removes_only_what_the_agent_wrote() {
    // run the purge branch against a fake root by rewriting the absolute paths
    let dir: String = get("maintainer-scripts");
    let script = std::fs::read_to_string(agent_dir().join(dir).join("postrm")).unwrap();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let script = script
        .replace("#DEBHELPER#", "")
        .replace(" /etc/", &format!(" {}/etc/", r.display()))
        .replace(" /var/", &format!(" {}/var/", r.display()));
    for f in [
        "etc/odac/token",
        "etc/odac/ca.pem",
        "var/lib/odac-agent/desired.json",
    ] {
        let p = r.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
    }
    let run = |arg: &str| {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg("postrm")
            .arg(arg)
            .status()
            .unwrap();
        assert!(ok.success(), "postrm {arg}");
    };
    run("remove");
    assert!(
        r.join("etc/odac/token").exists(),
        "remove must keep the token"
    );
    run("purge");
    assert!(!Path::new(&r.join("etc/odac")).exists());
    assert!(!r.join("var/lib/odac-agent").exists());
}
