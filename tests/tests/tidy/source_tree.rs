//! The source tree as the tidy checks read it, and the one definition of product code: a
//! member's `src/` files, less unit-test files (`tests.rs`, or anything under a `tests/`
//! folder) and less `#[cfg(test)]` items, with comments dropped and string literals emptied so
//! only real code remains.

use std::fs;
use std::path::{Path, PathBuf};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// The workspace members, read from the root `Cargo.toml` (`members = [...]`).
pub fn members(root: &Path) -> Vec<String> {
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("root Cargo.toml lists its members on one line");
    let list = &line[line.find('[').unwrap() + 1..line.rfind(']').unwrap()];
    let members: Vec<String> = list
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    assert!(!members.is_empty(), "no workspace members in {line}");
    members
}

/// Every `.rs` file under `dir`, skipping `target/`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let path = entry.path();
            // not through symbolic links: the fixture host trees link in circles, as /sys does
            if entry.file_type().unwrap().is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    todo.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

pub fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The code of a Rust file without comments (doc comments included) and with every string and
/// character literal emptied, so only real paths remain.
pub fn code_only(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&s, i) {
            out.push_str("\"\"");
            i = end;
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == '\'' && next == Some('\\') {
            // an escaped character literal: '\n', '\'', '\u{..}'
            i += 2;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            out.push_str("' '");
            i += 1;
        } else if c == '\'' && s.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where a raw string starting at `i` (`r"`, `r#"`, `br#"`) ends, if one starts there.
pub fn raw_string_end(s: &[char], i: usize) -> Option<usize> {
    if s[i] != 'r'
        || (i > 0 && is_ident(s[i - 1]) && !(s[i - 1] == 'b' && (i < 2 || !is_ident(s[i - 2]))))
    {
        return None;
    }
    let mut j = i + 1;
    let mut hashes = 0;
    while s.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if s.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < s.len() {
        if s[j] == '"' && (1..=hashes).all(|k| s.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(s.len())
}

/// The code without `#[cfg(test)]` items (inline test modules, test-only imports).
pub fn without_cfg_test(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let semi = item.find(';').unwrap_or(item.len());
        let brace = item.find('{').unwrap_or(item.len());
        let end = if semi < brace {
            semi + 1
        } else {
            let mut depth = 0usize;
            let mut end = item.len();
            for (k, c) in item.char_indices().skip_while(|(k, _)| *k < brace) {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            end
        };
        rest = &item[end.min(item.len())..];
    }
    out.push_str(rest);
    out
}

/// A unit-test file (`rel` relative to its crate or its `src/`): named `tests.rs` or under a
/// `tests/` folder.
pub fn is_unit_test_file(rel: &Path) -> bool {
    rel.file_name().is_some_and(|n| n == "tests.rs")
        || rel.components().any(|c| c.as_os_str() == "tests")
}

/// The product code of a source file (`rel` relative to its crate): nothing for a unit-test
/// file; otherwise its code without comments, string contents and `#[cfg(test)]` items.
pub fn product_code(rel: &Path, text: &str) -> String {
    if is_unit_test_file(rel) {
        return String::new();
    }
    without_cfg_test(&code_only(text))
}
