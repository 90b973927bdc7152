//! The test layout that keeps the build cheap: each crate's integration tests are one
//! executable (`tests/integration/main.rs`; the end-to-end crate has `tests/e2e/` and
//! `tests/tidy/`), so a new subject is a module of it, never a new `tests/*.rs` file (cargo
//! would build and link one more executable for each). Binaries without unit tests say
//! `test = false`, so they are not built as test executables either.

use std::fs;

use crate::source_tree::{members, workspace_root};

/// The integration executables each member may have under its `tests/` folder.
fn allowed(member: &str) -> &'static [&'static str] {
    match member {
        "tests" => &["e2e", "tidy"],
        _ => &["integration"],
    }
}

/// What a member's `tests/` folder holds that cargo would build as an executable of its own:
/// a `*.rs` file at its top, or a folder with a `main.rs` not in the allowed list.
fn extra_executables(member: &str, entries: &[(String, bool, bool)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, is_dir, has_main) in entries {
        if !is_dir && name.ends_with(".rs") {
            out.push(format!("{member}/tests/{name}"));
        } else if *is_dir && *has_main && !allowed(member).contains(&name.as_str()) {
            out.push(format!("{member}/tests/{name}/main.rs"));
        }
    }
    out
}

#[test]
fn each_crate_has_one_integration_executable() {
    let root = workspace_root();
    let mut extra = Vec::new();
    for member in members(&root) {
        let Ok(read) = fs::read_dir(root.join(&member).join("tests")) else {
            continue;
        };
        let entries: Vec<(String, bool, bool)> = read
            .map(|e| {
                let e = e.unwrap();
                let is_dir = e.file_type().unwrap().is_dir();
                let has_main = is_dir && e.path().join("main.rs").is_file();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    is_dir,
                    has_main,
                )
            })
            .collect();
        extra.extend(extra_executables(&member, &entries));
    }
    assert!(
        extra.is_empty(),
        "test executables beside the crate's one integration executable (make each a module of \
         tests/integration/main.rs, or tests/e2e/main.rs in the end-to-end crate): {extra:#?}"
    );
}

#[test]
fn the_layout_check_finds_a_file_and_a_folder_executable() {
    let entries = vec![
        ("integration".to_owned(), true, true),
        ("new_subject.rs".to_owned(), false, false),
        ("other".to_owned(), true, true),
        ("fixtures".to_owned(), true, false),
        ("gpu_resolve.expected".to_owned(), false, false),
    ];
    assert_eq!(
        extra_executables("agent", &entries),
        ["agent/tests/new_subject.rs", "agent/tests/other/main.rs"]
    );
}

#[test]
fn binaries_without_unit_tests_are_not_test_executables() {
    let root = workspace_root();
    let mut missing = Vec::new();
    for member in members(&root) {
        let manifest = fs::read_to_string(root.join(&member).join("Cargo.toml")).unwrap();
        for bin in manifest.split("[[bin]]").skip(1) {
            let bin = bin.split("\n[").next().unwrap_or(bin);
            let path = bin
                .lines()
                .find_map(|l| l.trim().strip_prefix("path = "))
                .map(|p| p.trim_matches('"').to_owned());
            let Some(path) = path else { continue };
            let text = fs::read_to_string(root.join(&member).join(&path)).unwrap_or_default();
            // its own tests, or modules of its own that may hold some
            let has_tests = text.contains("#[test]")
                || text.contains("#[cfg(test)]")
                || text.lines().any(|l| l.starts_with("mod "));
            if !has_tests && !bin.contains("test = false") {
                missing.push(format!("{member}/{path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "binaries with no unit tests but built as test executables (add `test = false`): {missing:#?}"
    );
}
