//! The architecture invariants of ARCHITECTURE.md that the manifests, the lock file and a
//! reading of the source can check without a build: `odac-protocol` does no IO and depends on
//! no async runtime, rustls has the `ring` provider only, the GPU decision reads nothing but
//! its arguments, and the domain types of the agent and of `odac-host` become the protocol's
//! inventory in one file (`host/src/inventory/wire.rs`); vendor facts come from the vendor
//! table, never from comparisons of vendors; and every invariant there names the tests that
//! check it, each of which exists. Each test names every offender, not just the first.

use std::fs;

use crate::source_tree::{members, product_code, rust_files, workspace_root};

/// The names under one `[section]` of a Cargo manifest.
fn section_keys(manifest: &str, section: &str) -> Vec<String> {
    let header = format!("[{section}]");
    manifest
        .lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().to_owned()))
        .filter(|k| !k.is_empty() && !k.starts_with('#'))
        .collect()
}

/// Crates that do IO or are an async runtime; none of them may be a dependency of the protocol.
const IO_CRATES: &[&str] = &[
    "tokio",
    "async-std",
    "smol",
    "futures",
    "mio",
    "hyper",
    "reqwest",
    "ureq",
    "axum",
    "tungstenite",
    "rustls",
    "bollard",
    "tempfile",
    "walkdir",
    "nix",
    "libc",
];

/// Paths in source that do IO or need a runtime.
const IO_PATHS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::io::stdin",
    "std::io::stdout",
    "std::env",
    "tokio",
    "async fn",
    "File::",
    "TcpStream",
];

fn io_offenders(cargo_toml: &str, sources: &[(String, String)]) -> Vec<String> {
    let mut bad: Vec<String> = section_keys(cargo_toml, "dependencies")
        .into_iter()
        .filter(|d| {
            IO_CRATES
                .iter()
                .any(|c| d == c || d.starts_with(&format!("{c}-")))
        })
        .map(|d| format!("Cargo.toml [dependencies]: {d}"))
        .collect();
    for (name, code) in sources {
        for p in IO_PATHS {
            if code.contains(p) {
                bad.push(format!("{name}: {p}"));
            }
        }
    }
    bad
}

#[test]
fn the_protocol_does_no_io_and_depends_on_no_async_runtime() {
    let protocol = workspace_root().join("protocol");
    let manifest = fs::read_to_string(protocol.join("Cargo.toml")).unwrap();
    let src = protocol.join("src");
    let sources: Vec<(String, String)> = rust_files(&src)
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(&p).unwrap();
            let rel = p.strip_prefix(&protocol).unwrap();
            (rel.display().to_string(), product_code(rel, &text))
        })
        .collect();
    assert!(sources.len() > 3, "protocol/src has its sources");
    let bad = io_offenders(&manifest, &sources);
    assert!(bad.is_empty(), "odac-protocol does IO: {bad:#?}");
}

#[test]
fn the_io_check_finds_a_runtime_dependency_and_a_file_read() {
    let manifest = "[dependencies]\nserde.workspace = true\ntokio = \"1\"\n\n[dev-dependencies]\ntempfile = \"3\"\n";
    let sources = vec![
        ("src/a.rs".to_owned(), "use std::fs::read;".to_owned()),
        ("src/b.rs".to_owned(), "pub struct B;".to_owned()),
    ];
    assert_eq!(
        io_offenders(manifest, &sources),
        vec![
            "Cargo.toml [dependencies]: tokio".to_owned(),
            "src/a.rs: std::fs".to_owned()
        ]
    );
}

/// What a pure function may not use: IO, a clock, randomness or shared state.
const IMPURE: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "tokio",
    "async fn",
    "File::",
    "Instant",
    "SystemTime",
    "rand::",
    "thread_local",
    "OnceLock",
    "LazyLock",
    "Mutex",
    "static mut",
];

#[test]
fn the_gpu_decision_reads_nothing_but_its_arguments() {
    let host = workspace_root().join("host");
    let mut files = rust_files(&host.join("src/gpu"));
    files.push(host.join("src/inventory/verdict.rs"));
    let mut bad = Vec::new();
    for p in &files {
        let rel = p.strip_prefix(&host).unwrap();
        let code = product_code(rel, &fs::read_to_string(p).unwrap());
        bad.extend(
            IMPURE
                .iter()
                .filter(|w| code.contains(**w))
                .map(|w| format!("{}: {w}", rel.display())),
        );
    }
    assert!(files.len() > 3, "host/src/gpu has its sources: {files:?}");
    assert!(bad.is_empty(), "the GPU decision is not pure: {bad:#?}");
}

/// The packages of `Cargo.lock` that bring a second rustls crypto provider.
fn second_providers(lock: &str) -> Vec<String> {
    lock.lines()
        .filter_map(|l| l.strip_prefix("name = "))
        .map(|n| n.trim_matches('"').to_owned())
        .filter(|n| n.starts_with("aws-lc") || n == "rustls-openssl" || n == "rustls-graviola")
        .collect()
}

/// Workspace manifest lines that give rustls (or a crate wrapping it) its default features,
/// which bring the `aws-lc-rs` provider.
fn rustls_with_defaults(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter(|l| {
            let key = l.split('=').next().unwrap_or("").trim();
            matches!(key, "rustls" | "tokio-rustls")
                && l.contains("version")
                && !l.contains("default-features = false")
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn rustls_has_the_ring_provider_only() {
    let root = workspace_root();
    let lock = fs::read_to_string(root.join("Cargo.lock")).unwrap();
    assert!(
        lock.contains("name = \"ring\""),
        "ring is in the build (Cargo.lock)"
    );
    let bad = second_providers(&lock);
    assert!(
        bad.is_empty(),
        "a second rustls provider in Cargo.lock: {bad:?}"
    );
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let bad = rustls_with_defaults(&manifest);
    assert!(bad.is_empty(), "rustls with its default features: {bad:?}");
}

#[test]
fn the_provider_check_finds_aws_lc_and_default_features() {
    let lock =
        "[[package]]\nname = \"aws-lc-rs\"\nversion = \"1\"\n\n[[package]]\nname = \"ring\"\n";
    assert_eq!(second_providers(lock), vec!["aws-lc-rs".to_owned()]);
    let manifest = "rustls = { version = \"0.23\", features = [\"ring\"] }\ntokio-rustls = { version = \"0.26\", default-features = false }\n";
    assert_eq!(
        rustls_with_defaults(manifest),
        vec!["rustls = { version = \"0.23\", features = [\"ring\"] }".to_owned()]
    );
}

/// The wire types of the inventory that only `inventory/wire.rs` builds from domain types.
const WIRE_TYPES: &[&str] = &["Inventory", "HostInfo", "EngineInfo"];

/// `(file, type)` for every struct literal of a wire type in product code.
fn wire_literals(files: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, code) in files {
        for ty in WIRE_TYPES {
            let literal = format!("{ty} {{");
            let builds = code.lines().any(|l| {
                l.match_indices(&literal).any(|(i, _)| {
                    let before = &l[..i];
                    let whole = !before.ends_with(|c: char| c.is_alphanumeric() || c == '_');
                    let decl = ["->", "struct ", "impl ", "enum ", "for "]
                        .iter()
                        .any(|k| before.contains(k));
                    whole && !decl
                })
            });
            if builds {
                out.push((name.clone(), (*ty).to_owned()));
            }
        }
    }
    out
}

#[test]
fn domain_types_become_the_wire_inventory_in_one_place() {
    let root = workspace_root();
    let files: Vec<(String, String)> = ["host", "agent"]
        .iter()
        .flat_map(|krate| {
            let dir = root.join(krate);
            rust_files(&dir.join("src")).into_iter().map(move |p| {
                let text = fs::read_to_string(&p).unwrap();
                let rel = p.strip_prefix(&dir).unwrap();
                (
                    format!("{krate}/{}", rel.display()),
                    product_code(rel, &text),
                )
            })
        })
        .collect();
    let found = wire_literals(&files);
    let elsewhere: Vec<_> = found
        .iter()
        .filter(|(f, _)| f != "host/src/inventory/wire.rs")
        .collect();
    assert!(
        elsewhere.is_empty(),
        "wire inventory types built outside host/src/inventory/wire.rs: {elsewhere:?}"
    );
    assert!(
        found.contains(&(
            "host/src/inventory/wire.rs".to_owned(),
            "Inventory".to_owned()
        )),
        "host/src/inventory/wire.rs builds the Inventory: {found:?}"
    );
}

#[test]
fn the_wire_check_tells_a_literal_from_a_signature() {
    let files = vec![
        (
            "a.rs".to_owned(),
            "fn f() -> Inventory {\n    Inventory { gpus }\n}".to_owned(),
        ),
        (
            "b.rs".to_owned(),
            "fn g() -> Inventory {\n    x\n}".to_owned(),
        ),
        ("c.rs".to_owned(), "let x = GpuInventory { a };".to_owned()),
    ];
    assert_eq!(
        wire_literals(&files),
        vec![("a.rs".to_owned(), "Inventory".to_owned())]
    );
}

/// The invariants of ARCHITECTURE.md, each as its text (bullet and continuation lines).
fn invariants(doc: &str) -> Vec<String> {
    let section = doc
        .split("\n## Architecture invariants\n")
        .nth(1)
        .expect("ARCHITECTURE.md has an invariants section");
    let section = section.split("\n## ").next().unwrap();
    let mut out: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(first) = line.strip_prefix("- ") {
            out.push(first.to_owned());
        } else if let Some(last) = out.last_mut() {
            last.push('\n');
            last.push_str(line.trim());
        }
    }
    out
}

/// The `(file, test)` pairs an invariant's "Checked by" names: each `path.rs` is followed by
/// a parenthesis of backquoted test names.
fn checked_by(invariant: &str) -> Vec<(String, String)> {
    let Some((_, names)) = invariant.split_once("Checked by ") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut file = String::new();
    let mut in_parens = false;
    for (i, part) in names.split('`').enumerate() {
        if i % 2 == 0 {
            if part.contains('(') {
                in_parens = true;
            }
            if part.contains(')') {
                in_parens = false;
            }
        } else if in_parens {
            out.push((file.clone(), part.to_owned()));
        } else {
            file = part.to_owned();
        }
    }
    out
}

#[test]
fn every_invariant_names_tests_that_exist() {
    let root = workspace_root();
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let all = invariants(&doc);
    assert!(all.len() > 10, "{all:#?}");
    let mut bad = Vec::new();
    for inv in &all {
        let head: String = inv.chars().take(60).collect();
        let tests = checked_by(inv);
        if tests.is_empty() {
            bad.push(format!("no test named: {head}"));
        }
        for (file, test) in tests {
            let text = fs::read_to_string(root.join(&file)).unwrap_or_default();
            if !text.contains(&format!("fn {test}(")) {
                bad.push(format!("{file} has no fn {test}: {head}"));
            }
        }
    }
    assert!(bad.is_empty(), "invariants without a real test: {bad:#?}");
}

#[test]
fn checked_by_reads_files_and_their_tests() {
    let inv = "No loops.\nChecked by `a/x.rs` (`one`,\n`two`), `b/y.rs` (`three`).";
    let pairs = checked_by(inv);
    let want = [("a/x.rs", "one"), ("a/x.rs", "two"), ("b/y.rs", "three")];
    assert_eq!(
        pairs,
        want.map(|(f, t)| (f.to_owned(), t.to_owned())).to_vec()
    );
    assert!(checked_by("No loops, and no test.").is_empty());
}

/// Vendor comparisons (`== Vendor::X`, `!= Vendor::X`) in product code: each is a fact about a
/// vendor that belongs in the vendor table (`odac_protocol::VendorFacts`), where an exhaustive
/// match makes the compiler point at it when a vendor is added.
fn vendor_comparisons(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, code) in files {
        let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
        for op in ["== Vendor::", "!= Vendor::", "LabVendor"] {
            if flat.contains(op) {
                out.push(format!("{name}: {op}"));
            }
        }
    }
    out
}

#[test]
fn vendor_facts_come_from_the_vendor_table_not_from_comparisons() {
    let root = workspace_root();
    let mut files = Vec::new();
    for member in members(&root) {
        let dir = root.join(&member);
        for p in rust_files(&dir.join("src")) {
            let rel = p.strip_prefix(&dir).unwrap().to_path_buf();
            let code = product_code(&rel, &fs::read_to_string(&p).unwrap());
            files.push((format!("{member}/{}", rel.display()), code));
        }
    }
    assert!(
        files.len() > 100,
        "the product code was read: {}",
        files.len()
    );
    let bad = vendor_comparisons(&files);
    assert!(
        bad.is_empty(),
        "vendor comparisons outside the table: {bad:#?}"
    );
}

#[test]
fn the_vendor_check_finds_a_comparison_split_over_lines() {
    let files = vec![
        (
            "a.rs".to_owned(),
            "if g.vendor\n    == Vendor::Amd {}".to_owned(),
        ),
        ("b.rs".to_owned(), "match v { Vendor::Amd => 1 }".to_owned()),
        ("c.rs".to_owned(), "x.vendor != Vendor::Intel".to_owned()),
    ];
    assert_eq!(
        vendor_comparisons(&files),
        vec![
            "a.rs: == Vendor::".to_owned(),
            "c.rs: != Vendor::".to_owned()
        ]
    );
}
