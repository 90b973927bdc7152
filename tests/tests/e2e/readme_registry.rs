//! The README's "Private registries" block typed as a user would, read out of README.md at
//! test time (`odac_e2e::readme`, the block marked `<!-- walkthrough: registry -->`), against
//! the real `odac`, `odac-sim` and a real registry (Debian's docker-registry with htpasswd
//! auth on loopback, user `me` as in the README). Only the documented placeholders change:
//! `registry.example.com:5000` becomes the test's registry and `$PASSWORD` a password of the
//! test's. Each answer the prose after the block promises is checked against what the command
//! printed: a wrong password refused with the registry's words and nothing stored (exit 1),
//! the right one verified, an unreachable registry stored but not verified, `odac registry
//! list` with the columns its comment names and never the password, the login kept across a
//! restart of `odac-sim`, and gone after `logout`.

use odac_e2e::readme::{self, Line};
use odac_e2e::registry::Registry;
use odac_e2e::sim::CliOutput;
use odac_e2e::stack::Stack;

/// The README's placeholder registry.
const PLACEHOLDER: &str = "registry.example.com:5000";
/// The user the README logs in as.
const USER: &str = "me";

/// Types one line of the block with `host` for the placeholder and `password` for
/// `$PASSWORD`: `Ok` on exit 0, else the command's error text.
fn type_line(stack: &Stack, line: &Line, host: &str, password: &str) -> Result<CliOutput, String> {
    let command = line.command.replace(PLACEHOLDER, host);
    let (stdin, command) = match command.split_once(" | ") {
        Some((feed, command)) => {
            assert_eq!(
                feed, "echo \"$PASSWORD\"",
                "the README feeds the password with echo: {}",
                line.command
            );
            (Some(format!("{password}\n")), command.to_owned())
        }
        None => (None, command),
    };
    println!("$ {command}");
    let out = stack
        .sim
        .odac_line(&command, stdin.as_deref())
        .map_err(|e| e.to_string());
    match &out {
        Ok(o) => print!("{}", o.stdout),
        Err(e) => println!("{e}"),
    }
    out
}

/// Asserts that `said` holds every fragment of the README's promise starting with `start`.
fn promised(prose: &str, start: &str, said: &str) {
    for fragment in readme::promise(prose, start).unwrap() {
        assert!(
            said.contains(&fragment),
            "README promises {fragment:?} (in `{start}…`); the command said: {said}"
        );
    }
}

#[test]
fn the_readme_private_registry_commands_do_what_it_says() {
    let text = readme::text().unwrap();
    let block = readme::block(&text, "registry").unwrap();
    let prose = readme::prose_after(&text, "registry").unwrap();
    let [login, list, logout] = block.as_slice() else {
        panic!("the README's registry block is login, list, logout: {block:?}");
    };
    assert!(login.command.contains("odac registry login"), "{login:?}");
    assert!(list.command.starts_with("odac registry list"), "{list:?}");
    assert!(
        logout.command.starts_with("odac registry logout"),
        "{logout:?}"
    );

    let password = format!("readme-pw-{}", std::process::id());
    let registry = Registry::start(USER, &password).unwrap();
    let host = registry.host();
    let mut stack = Stack::builder("readme_registry")
        .no_agent()
        .start()
        .unwrap();
    let mut seen = Vec::new();

    // a wrong password: refused by the registry, nothing stored, exit 1
    let wrong = type_line(&stack, login, &host, "not-the-password").unwrap_err();
    assert!(wrong.contains("exit 1"), "{wrong}");
    promised(&prose, "registry ", &wrong);
    assert!(
        wrong.contains(&host),
        "the refusal names the registry: {wrong}"
    );

    // the right one: verified with the registry
    let right = type_line(&stack, login, &host, &password).unwrap();
    promised(&prose, "(verified", &right.stdout);
    // one the control plane cannot reach: stored, not verified
    let closed = odac_e2e::ports::free_port().unwrap();
    let unreachable = format!("127.0.0.1:{closed}");
    let stored = type_line(&stack, login, &unreachable, "whatever").unwrap();
    promised(&prose, "stored, not verified", &stored.stdout);
    seen.extend([wrong, right.stdout, stored.stdout]);

    // the list: the columns its comment names, never the password
    let comment = list.comment.clone().unwrap_or_default();
    let columns = comment.split(';').next().unwrap_or_default();
    let table = type_line(&stack, list, &host, &password).unwrap().stdout;
    let header = table.lines().next().unwrap_or_default();
    for column in columns.split(',').map(str::trim) {
        assert!(
            header.contains(column),
            "column {column} (README: {comment}): {table}"
        );
    }
    assert!(comment.contains("never the password"), "{comment}");
    let row = |table: &str, h: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{h} ")))
            .map(str::to_owned)
    };
    let verified = row(&table, &host).unwrap_or_else(|| panic!("no row for {host}: {table}"));
    assert!(
        verified.contains(USER) && verified.contains("yes"),
        "{table}"
    );
    seen.push(table);

    // "Logins survive a restart of odac-sim"
    assert!(
        prose.contains("Logins survive a restart of `odac-sim`"),
        "{prose}"
    );
    stack.sim.restart().unwrap();
    let table = type_line(&stack, list, &host, &password).unwrap().stdout;
    assert!(
        row(&table, &host).is_some(),
        "kept across the restart: {table}"
    );
    assert!(row(&table, &unreachable).is_some(), "{table}");

    // logout: gone from the list
    let out = type_line(&stack, logout, &host, &password).unwrap().stdout;
    assert!(out.contains(&format!("logged out of {host}")), "{out}");
    let table = type_line(&stack, list, &host, &password).unwrap().stdout;
    assert!(row(&table, &host).is_none(), "logged out: {table}");
    assert!(
        row(&table, &unreachable).is_some(),
        "only that one: {table}"
    );
    seen.push(table);
    seen.extend(stack.sim.process().map(|p| p.lines()).unwrap_or_default());
    for said in &seen {
        assert!(!said.contains(&password), "the password shows in: {said}");
    }
}
