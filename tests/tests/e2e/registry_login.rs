//! `odac registry login` is honest (issue 31 finding 7), through the real binaries and a real
//! registry (Debian's docker-registry with htpasswd auth, `odac_e2e::registry`): a wrong
//! password is refused with the registry's answer and nothing is stored; the right one is
//! "verified with the registry"; a registry the control plane cannot reach is "stored, not
//! verified (the host's agent will check on its next pull)". The logins survive a simulator
//! restart, their passwords sealed in the state dir (never in clear in any file there), and an
//! agent started after the restart pulls the private image with them. The password shows in
//! no output.

use std::time::Duration;

use odac_e2e::image::ensure_sleeper_image;
use odac_e2e::registry::Registry;
use odac_e2e::require_docker;

/// Every file under `dir`, as text.
fn files_text(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_text(&path));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path.display().to_string(), text));
        }
    }
    out
}

#[test]
fn registry_login_is_checked_kept_sealed_across_a_restart_and_used_after_it() {
    require_docker!("registry login");
    let sleeper = ensure_sleeper_image().unwrap();
    let password = format!("login-pw-{}", std::process::id());
    let mut registry = Registry::start("odac", &password).unwrap();
    let image = registry.push(sleeper, "odac/login-private:1").unwrap();
    let mut stack = odac_e2e::stack::Stack::builder("registry_login")
        .no_agent()
        .start()
        .unwrap();
    let host = registry.host();
    let login = format!("odac registry login {host} --username odac --password-stdin");
    let mut seen = Vec::new();

    let wrong = stack.sim.odac_line(&login, Some("not-the-password\n"));
    let said = format!("{wrong:?}");
    println!("wrong password: {said}");
    assert!(wrong.is_err(), "a wrong password must fail: {said}");
    assert!(
        said.contains("refused") && said.contains("nothing was stored"),
        "{said}"
    );
    let list = stack
        .sim
        .odac_line("odac registry list", None)
        .unwrap()
        .stdout;
    assert!(
        !list.contains(&host),
        "a refused login is not stored: {list}"
    );

    let right = stack
        .sim
        .odac_line(&login, Some(&format!("{password}\n")))
        .unwrap()
        .stdout;
    println!("right password: {right}");
    assert!(
        right.contains(&format!(
            "logged in to {host} as odac (verified with the registry)"
        )),
        "{right}"
    );

    let closed = odac_e2e::ports::free_port().unwrap();
    let unreachable = format!("127.0.0.1:{closed}");
    let stored = stack
        .sim
        .odac_line(
            &format!("odac registry login {unreachable} --username someone --password-stdin"),
            Some("whatever\n"),
        )
        .unwrap()
        .stdout;
    println!("unreachable registry: {stored}");
    assert!(
        stored.contains("stored, not verified (the host's agent will check on its next pull)"),
        "{stored}"
    );
    seen.extend([right, stored]);

    stack.sim.restart().unwrap();
    let list = stack
        .sim
        .odac_line("odac registry list", None)
        .unwrap()
        .stdout;
    println!("after the restart:\n{list}");
    let row = |h: &str| {
        list.lines()
            .find(|l| l.contains(h))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        row(&host).contains("odac") && row(&host).contains("yes"),
        "{list}"
    );
    assert!(row(&unreachable).contains("no (stored)"), "{list}");
    seen.push(list);
    for (path, text) in files_text(&stack.dir().join("sim")) {
        assert!(
            !text.contains(&password),
            "{path} holds the password in clear"
        );
    }

    stack.start_agent().unwrap();
    stack.wait_connected(Duration::from_secs(60)).unwrap();
    stack
        .sim
        .odac_line(
            &format!("odac app create -n login-private --image {image}"),
            None,
        )
        .unwrap();
    let app = stack
        .wait_app("login-private", Duration::from_secs(90), "running", |a| {
            a.state == "running"
        })
        .unwrap();
    let digest = app.status.and_then(|s| s.repo_digest).unwrap_or_default();
    assert!(digest.contains("@sha256:"), "{digest}");

    seen.push(
        stack
            .sim
            .odac_line("odac registry list --json", None)
            .unwrap()
            .stdout,
    );
    seen.extend(stack.sim.process().map(|p| p.lines()).unwrap_or_default());
    for text in &seen {
        assert!(!text.contains(&password), "the password shows in: {text}");
    }
    drop(stack);
    registry.stop().unwrap();
}
