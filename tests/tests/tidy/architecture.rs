//! The architecture invariants of ARCHITECTURE.md that a reading of the source tree can check,
//! without a build or an engine: only `host/src/engine/` uses bollard, no product source file
//! is over 450 lines, every source file is in the code map, no two modules of one folder import
//! each other (directly or through a chain), every `.rs` file opens with a `//!` paragraph, and
//! no paragraph of ARCHITECTURE.md is over 150 words. Each test names every offender, not just
//! the first.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::Path;

use crate::source_tree::{
    code_only, is_ident, is_unit_test_file, members, rust_files, without_cfg_test, workspace_root,
};

/// Most lines in a product source file (unit tests go to a sibling `tests.rs`).
const MAX_LINES: usize = 450;

/// One `.rs` file under a member's `src/`.
struct Source {
    /// The member (`agent`, `simulator`, ...).
    krate: String,
    /// Path relative to the member's `src/`, `/`-separated.
    rel: String,
    text: String,
}

impl Source {
    /// `<member>/src/<rel>`, as offenders are named.
    fn display(&self) -> String {
        format!("{}/src/{}", self.krate, self.rel)
    }

    /// A unit-test file: named `tests.rs` or under a `tests/` folder.
    fn is_test(&self) -> bool {
        is_unit_test_file(Path::new(&self.rel))
    }

    /// The folder of the file, relative to `src/` (`""` at the top).
    fn folder(&self) -> &str {
        self.rel.rfind('/').map_or("", |i| &self.rel[..i])
    }

    fn name(&self) -> &str {
        self.rel.rsplit('/').next().unwrap_or(&self.rel)
    }

    /// Its module path in the member's library (`uplink/session.rs` → `[uplink, session]`);
    /// `None` for binaries (`main.rs`, `bin/`), which are crates of their own.
    fn module(&self) -> Option<Vec<String>> {
        if self.rel == "main.rs" || self.rel.starts_with("bin/") {
            return None;
        }
        let stem = self.rel.strip_suffix(".rs")?;
        let stem = stem.strip_suffix("/mod").unwrap_or(stem);
        if stem == "lib" || stem == "mod" {
            return Some(Vec::new());
        }
        Some(stem.split('/').map(str::to_owned).collect())
    }
}

fn sources(root: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    for krate in members(root) {
        let src = root.join(&krate).join("src");
        for path in rust_files(&src) {
            let rel = path.strip_prefix(&src).unwrap();
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let text = fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            out.push(Source {
                krate: krate.clone(),
                rel,
                text,
            });
        }
    }
    assert!(out.len() > 50, "too few source files found: {}", out.len());
    out
}

// ---------------------------------------------------------------- (a) bollard only in engine/

#[test]
fn only_host_engine_uses_bollard() {
    let root = workspace_root();
    let mut offenders = Vec::new();
    for src in sources(&root) {
        if src.krate == "host" && src.rel.starts_with("engine/") {
            continue;
        }
        let code = code_only(&src.text);
        for (n, line) in code.lines().enumerate() {
            if mentions_word(line, "bollard") {
                offenders.push(format!("{}:{}: {}", src.display(), n + 1, line.trim()));
            }
        }
    }
    for krate in members(&root).into_iter().filter(|m| m != "host") {
        let manifest = fs::read_to_string(root.join(&krate).join("Cargo.toml")).unwrap();
        if manifest
            .lines()
            .any(|l| l.trim_start().starts_with("bollard"))
        {
            offenders.push(format!("{krate}/Cargo.toml depends on bollard"));
        }
    }
    assert!(
        offenders.is_empty(),
        "bollard used outside host/src/engine/ (ARCHITECTURE.md: only engine/ imports bollard):\n  {}",
        offenders.join("\n  ")
    );
}

/// `word` as a whole identifier in `line`.
fn mentions_word(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

#[test]
fn mentions_word_needs_a_whole_identifier() {
    assert!(mentions_word("use bollard::Docker;", "bollard"));
    assert!(!mentions_word("let not_bollard = 1;", "bollard"));
    assert!(!mentions_word(
        &code_only("let t = \"bollard=warn\"; // bollard"),
        "bollard"
    ));
}

// ---------------------------------------------------------------- (b) file size

#[test]
fn no_product_source_file_is_over_450_lines() {
    let mut offenders: Vec<String> = sources(&workspace_root())
        .iter()
        .filter(|s| !s.is_test())
        .map(|s| (s.text.lines().count(), s.display()))
        .filter(|(n, _)| *n > MAX_LINES)
        .map(|(n, path)| format!("{path}: {n} lines"))
        .collect();
    offenders.sort();
    assert!(
        offenders.is_empty(),
        "product source files over {MAX_LINES} lines (split by concern; unit tests may move to a sibling tests.rs):\n  {}",
        offenders.join("\n  ")
    );
}

// ---------------------------------------------------------------- (c) the code map

/// A backtick-quoted name in ARCHITECTURE.md: its text and byte range.
struct Token<'a> {
    text: &'a str,
    start: usize,
    end: usize,
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find('`').map(|i| from + i) {
        let Some(close) = text[open + 1..].find('`').map(|i| open + 1 + i) else {
            break;
        };
        out.push(Token {
            text: &text[open + 1..close],
            start: open,
            end: close + 1,
        });
        from = close + 1;
    }
    out
}

/// Where the description of a folder named at `token` ends: the end of its bullet when the
/// bullet starts with it (`` - `engine/` — ... ``), else the end of its clause: a `.` or `;`
/// outside the parentheses opened after it, the `)` closing the group it sits in, or the end
/// of the bullet or paragraph.
fn scope_end(section: &str, token: &Token<'_>) -> usize {
    let line_start = section[..token.start].rfind('\n').map_or(0, |i| i + 1);
    let bullet_end = section[token.end..]
        .find("\n- ")
        .into_iter()
        .chain(section[token.end..].find("\n\n"))
        .min()
        .map_or(section.len(), |i| token.end + i);
    if section[line_start..token.start].trim() == "-" {
        return bullet_end;
    }
    let bytes = section.as_bytes();
    let mut depth = 0i32;
    let mut in_code = false;
    let mut i = token.end;
    while i < bullet_end {
        match bytes[i] {
            b'`' => in_code = !in_code,
            _ if in_code => {}
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth < 0 {
                    return i;
                }
            }
            b';' if depth == 0 => return i,
            b'.' if depth == 0 && bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace) => {
                return i;
            }
            _ => {}
        }
        i += 1;
    }
    bullet_end
}

/// The parts of a crate's code-map section that describe `folder` (`""`: the whole section).
fn folder_scopes(section: &str, folder: &str) -> Vec<(usize, usize)> {
    if folder.is_empty() {
        return vec![(0, section.len())];
    }
    let (parent, last) = folder.rsplit_once('/').unwrap_or(("", folder));
    let parent_scopes = folder_scopes(section, parent);
    let full = format!("{folder}/");
    let short = format!("{last}/");
    tokens(section)
        .iter()
        .filter(|t| {
            t.text == full
                || (t.text == short
                    && parent_scopes
                        .iter()
                        .any(|(s, e)| *s <= t.start && t.end <= *e))
        })
        .map(|t| (t.start, scope_end(section, t)))
        .collect()
}

/// Every folder named in a section (`` `x/` `` tokens), for the top-level files: a name inside
/// a folder's description is that folder's file.
fn all_scopes(section: &str) -> Vec<(usize, usize)> {
    let heading_end = section.find('\n').unwrap_or(section.len());
    tokens(section)
        .iter()
        .filter(|t| {
            // a folder (`engine/`), not the heading nor a URL path (`/api/`)
            t.start > heading_end
                && t.text.ends_with('/')
                && !t.text.starts_with('/')
                && !t.text.contains(' ')
        })
        .map(|t| (t.start, scope_end(section, t)))
        .collect()
}

/// Is `src` named in the code map? `doc` is the whole of ARCHITECTURE.md, `section` its
/// crate's part of the code map.
fn mapped(doc: &str, section: &str, src: &Source) -> bool {
    let full = src.display();
    let with_src = format!("src/{}", src.rel);
    if tokens(doc).iter().any(|t| t.text == full)
        || tokens(section)
            .iter()
            .any(|t| (t.text == src.rel && src.rel.contains('/')) || t.text == with_src)
    {
        return true;
    }
    let folder = src.folder();
    if src.rel == "lib.rs" {
        return true; // the crate root is the section itself
    }
    let scopes = folder_scopes(section, folder);
    if src.name() == "mod.rs" {
        return !scopes.is_empty(); // a folder's root is the folder
    }
    let named: Vec<Token<'_>> = tokens(section)
        .into_iter()
        .filter(|t| t.text == src.name())
        .collect();
    if folder.is_empty() {
        let inside = all_scopes(section);
        named
            .iter()
            .any(|t| !inside.iter().any(|(s, e)| *s <= t.start && t.end <= *e))
    } else {
        named
            .iter()
            .any(|t| scopes.iter().any(|(s, e)| *s <= t.start && t.end <= *e))
    }
}

/// ARCHITECTURE.md's code map, per member: the text under `` ### `member/` ``.
fn code_map_sections(doc: &str) -> BTreeMap<String, &str> {
    let start = doc
        .find("## Code map")
        .expect("ARCHITECTURE.md has a code map");
    let map = &doc[start..];
    let map = &map[..map[3..].find("\n## ").map_or(map.len(), |i| i + 3)];
    let mut out = BTreeMap::new();
    let heads: Vec<usize> = map.match_indices("\n### `").map(|(i, _)| i + 1).collect();
    for (k, &h) in heads.iter().enumerate() {
        let end = heads.get(k + 1).copied().unwrap_or(map.len());
        let head = &map[h + 5..];
        let name = &head[..head.find('`').unwrap()];
        out.insert(name.trim_end_matches('/').to_owned(), &map[h..end]);
    }
    out
}

fn unmapped(doc: &str, sources: &[Source]) -> Vec<String> {
    let sections = code_map_sections(doc);
    sources
        .iter()
        .filter(|s| !s.is_test())
        .filter(|s| {
            let section = sections.get(&s.krate).copied().unwrap_or("");
            !mapped(doc, section, s)
        })
        .map(Source::display)
        .collect()
}

#[test]
fn every_source_file_is_in_the_code_map() {
    let root = workspace_root();
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let offenders = unmapped(&doc, &sources(&root));
    assert!(
        offenders.is_empty(),
        "source files missing from ARCHITECTURE.md's code map (name each in its folder's entry):\n  {}",
        offenders.join("\n  ")
    );
}

#[test]
fn the_code_map_reads_names_within_their_folder() {
    let doc = "## Code map\n### `agent/` (crate `odac-agent`). The agent:\n- `engine/` — `api.rs` (the trait).\n\
               - `config.rs` (keys), `run.rs`: `enroll/` (`client.rs`); `logging.rs`.\n\
               - `telemetry/` — `cli.rs`, `nested/` (`deep.rs`), `top.rs`\n## Next\n";
    let src = |rel: &str| Source {
        krate: "agent".into(),
        rel: rel.into(),
        text: String::new(),
    };
    let files: Vec<Source> = [
        "engine/api.rs",
        "engine/docker.rs",
        "config.rs",
        "logging.rs",
        "enroll/client.rs",
        "enroll/mod.rs",
        "api.rs",
        "cli.rs",
        "telemetry/cli.rs",
        "telemetry/nested/deep.rs",
        "telemetry/top.rs",
        "engine/tests.rs",
        "lib.rs",
    ]
    .into_iter()
    .map(src)
    .collect();
    assert_eq!(
        unmapped(doc, &files),
        [
            "agent/src/engine/docker.rs",
            "agent/src/api.rs",
            "agent/src/cli.rs"
        ]
    );
}

// ---------------------------------------------------------------- (c2) short paragraphs

/// Most words in one paragraph of ARCHITECTURE.md (a big folder gets one bullet per role).
const MAX_PARAGRAPH_WORDS: usize = 150;

/// The paragraphs of a Markdown text: `(first line, 1-based; word count)`. A paragraph ends at
/// a blank line, and each `- ` bullet and each `#` heading line starts a new one (a heading's
/// paragraph runs on through the lines under it). Words are whitespace-separated, markers
/// included.
fn paragraphs(text: &str) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut open = false;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            open = false;
            continue;
        }
        if !open || trimmed.starts_with("- ") || line.starts_with('#') {
            out.push((n + 1, 0));
            open = true;
        }
        if let Some((_, words)) = out.last_mut() {
            *words += line.split_whitespace().count();
        }
    }
    out
}

/// The paragraphs of `text` over `max` words, as `(first line, word count)`.
fn long_paragraphs(text: &str, max: usize) -> Vec<(usize, usize)> {
    paragraphs(text)
        .into_iter()
        .filter(|(_, words)| *words > max)
        .collect()
}

#[test]
fn no_architecture_paragraph_is_over_150_words() {
    let doc = fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap();
    let lines: Vec<&str> = doc.lines().collect();
    let offenders: Vec<String> = long_paragraphs(&doc, MAX_PARAGRAPH_WORDS)
        .into_iter()
        .map(|(line, words)| {
            let opening: String = lines[line - 1].chars().take(70).collect();
            format!("line {line}: {words} words: {opening}")
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "ARCHITECTURE.md paragraphs over {MAX_PARAGRAPH_WORDS} words (split a folder's bullet by role, \
         each new bullet starting with the folder's token again):\n  {}",
        offenders.join("\n  ")
    );
}

#[test]
fn long_paragraphs_are_found_between_blank_lines_bullets_and_headings() {
    let words = |n: usize| vec!["w"; n].join(" ");
    // 150 words each: a heading with the text under it, a bullet with its continuation line, a
    // bullet, a plain paragraph
    let short = format!(
        "# {}\n{}\n\n- {}\n  {}\n- {}\n\n{}\n",
        words(4),
        words(145),
        words(99),
        words(50),
        words(149),
        words(150)
    );
    assert_eq!(paragraphs(&short), [(1, 150), (4, 150), (6, 150), (8, 150)]);
    assert!(long_paragraphs(&short, 150).is_empty());
    let long = format!(
        "intro\n\n- {}\n  {}\n- short bullet\n## {}\n\n{}\n{}\n",
        words(100),
        words(50),
        words(150),
        words(100),
        words(51)
    );
    assert_eq!(long_paragraphs(&long, 150), [(3, 151), (6, 151), (8, 151)]);
}

// ---------------------------------------------------------------- (d) import cycles

/// Every `crate::`, `super::` and `self::` path in `code`, use-trees expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let s: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let boundary = i == 0 || !(is_ident(s[i - 1]) || s[i - 1] == '$' || s[i - 1] == ':');
        let word: String = s[i..].iter().take_while(|c| is_ident(**c)).collect();
        if boundary && matches!(word.as_str(), "crate" | "super" | "self") {
            let mut j = i;
            tree(&s, &mut j, Vec::new(), &mut out);
            i = j.max(i + 1);
        } else {
            i += word.chars().count().max(1);
        }
    }
    out
}

fn skip_ws(s: &[char], i: &mut usize) {
    while *i < s.len() && s[*i].is_whitespace() {
        *i += 1;
    }
}

/// Parses a use-tree (or a plain path) at `i`, pushing each full path onto `out`.
fn tree(s: &[char], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    loop {
        skip_ws(s, i);
        if s.get(*i) == Some(&'{') {
            *i += 1;
            loop {
                skip_ws(s, i);
                match s.get(*i) {
                    Some('}') => {
                        *i += 1;
                        return;
                    }
                    Some(',') => *i += 1,
                    None => return,
                    _ => {
                        let before = *i;
                        tree(s, i, prefix.clone(), out);
                        if *i == before {
                            *i += 1;
                        }
                    }
                }
            }
        }
        let word: String = s[*i..].iter().take_while(|c| is_ident(**c)).collect();
        if word.is_empty() {
            if !prefix.is_empty() {
                out.push(prefix);
            }
            return;
        }
        *i += word.chars().count();
        prefix.push(word);
        skip_ws(s, i);
        if s.get(*i) == Some(&':') && s.get(*i + 1) == Some(&':') {
            *i += 2;
        } else {
            out.push(prefix);
            skip_alias(s, i);
            return;
        }
    }
}

/// Skips ` as name` after a path in a use-tree.
fn skip_alias(s: &[char], i: &mut usize) {
    let mut j = *i;
    skip_ws(s, &mut j);
    let word: String = s[j..].iter().take_while(|c| is_ident(**c)).collect();
    if word == "as" {
        j += 2;
        skip_ws(s, &mut j);
        *i = j + s[j..].iter().take_while(|c| is_ident(**c)).count();
    }
}

/// `path` as seen from `module`, as an absolute module path.
fn resolve(module: &[String], path: &[String]) -> Vec<String> {
    let mut abs: Vec<String> = Vec::new();
    for (k, seg) in path.iter().enumerate() {
        match seg.as_str() {
            "crate" if k == 0 => abs.clear(),
            "self" if k == 0 => abs = module.to_vec(),
            "super" if k == 0 => {
                abs = module.to_vec();
                abs.pop();
            }
            "super" => {
                abs.pop();
            }
            "self" => {}
            _ => abs.push(seg.clone()),
        }
    }
    abs
}

/// Per folder (`krate/src/folder`), the references between its modules: `a → b`.
type Graphs = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn module_graphs(sources: &[Source]) -> Graphs {
    let modules: BTreeSet<(String, Vec<String>)> = sources
        .iter()
        .filter_map(|s| Some((s.krate.clone(), s.module()?)))
        .collect();
    let mut graphs = Graphs::new();
    for src in sources.iter().filter(|s| !s.is_test()) {
        let Some(module) = src.module() else {
            continue;
        };
        for path in paths(&without_cfg_test(&code_only(&src.text))) {
            let target = resolve(&module, &path);
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= module.len() || common >= target.len() {
                continue; // itself, its parent or its children
            }
            let sibling = target[..=common].to_vec();
            if !modules.contains(&(src.krate.clone(), sibling)) {
                continue; // an item of the parent, not a module
            }
            let folder = format!("{}/src/{}", src.krate, module[..common].join("/"));
            graphs
                .entry(folder.trim_end_matches('/').to_owned())
                .or_default()
                .entry(module[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    graphs
}

/// One shortest cycle through each group of modules that reach each other, as `a → b → a`.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = vec![from];
        while let Some(n) = todo.pop() {
            for m in graph.get(n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for (start, reached) in &reaches {
        if done.contains(*start) || !reached.contains(*start) {
            continue;
        }
        let group: BTreeSet<String> = reached
            .iter()
            .filter(|m| reaches.get(m).is_some_and(|r| r.contains(*start)))
            .cloned()
            .collect();
        done.extend(group.iter().cloned());
        out.push(shortest_cycle(graph, start, &group).join(" → "));
    }
    out
}

/// The shortest path from `start` back to itself within `group`.
fn shortest_cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &String,
    group: &BTreeSet<String>,
) -> Vec<String> {
    let mut parent: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue: VecDeque<&String> = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for m in graph.get(n).into_iter().flatten() {
            if m == start {
                let mut chain = Vec::new();
                let mut at = n;
                while at != start {
                    chain.push(at.clone());
                    at = parent[at];
                }
                chain.reverse();
                let mut path = vec![start.clone()];
                path.extend(chain);
                path.push(start.clone());
                return path;
            }
            if group.contains(m) && !parent.contains_key(m) {
                parent.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    vec![start.clone()]
}

#[test]
fn no_import_cycle_between_modules_of_one_folder() {
    let graphs = module_graphs(&sources(&workspace_root()));
    let offenders: Vec<String> = graphs
        .iter()
        .flat_map(|(folder, graph)| {
            cycles(graph)
                .into_iter()
                .map(move |c| format!("{folder}: {c}"))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "import cycles between modules of one folder (make the dependency one-way):\n  {}",
        offenders.join("\n  ")
    );
}

#[test]
fn cycles_are_found_through_use_trees_and_chains() {
    let src = |rel: &str, text: &str| Source {
        krate: "agent".into(),
        rel: rel.into(),
        text: text.into(),
    };
    let files = [
        src("lib.rs", "//! root\npub mod m;\n"),
        src(
            "m/mod.rs",
            "//! m\nmod a; mod b; mod c; mod d;\npub use self::a::X;\n",
        ),
        src("m/a.rs", "//! a\nuse super::{d, b::{Y, Z as c}};\n"),
        src("m/b.rs", "//! b\nfn f() { crate::m::c::g(); }\n"),
        src(
            "m/c.rs",
            "//! c\n/// [`super::a`]\nuse super::super::m::a::X; // super::d\n",
        ),
        src(
            "m/d.rs",
            "//! d\nconst S: &str = \"super::a\";\n#[cfg(test)]\nmod tests { use super::super::a; }\n",
        ),
        src("m/tests.rs", "//! t\nuse super::a;\n"),
    ];
    let graphs = module_graphs(&files);
    let graph = &graphs["agent/src/m"];
    assert_eq!(graph["a"], BTreeSet::from(["b".into(), "d".into()]));
    assert!(!graph.contains_key("d"), "{graph:?}");
    assert_eq!(cycles(graph), ["a → b → c → a"]);
}

// ---------------------------------------------------------------- (e) module docs

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let root = workspace_root();
    let mut offenders = Vec::new();
    for krate in members(&root) {
        for path in rust_files(&root.join(&krate)) {
            let text = fs::read_to_string(&path).unwrap();
            if !text.starts_with("//!") {
                let rel = path.strip_prefix(&root).unwrap_or(&path);
                offenders.push(rel.display().to_string());
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "files that do not open with a `//!` paragraph saying what they are for:\n  {}",
        offenders.join("\n  ")
    );
}

/// The words of `list` (a shell word list), without options.
fn words(list: &str) -> BTreeSet<String> {
    list.split_whitespace()
        .filter(|w| !w.starts_with('-'))
        .map(|w| {
            w.trim_matches(|c| c == '`' || c == '"' || c == ';')
                .to_owned()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// What `.ci/run` installs: its Debian packages (`for pkg in …; do`) and its cargo tools
/// (`cargo install --locked NAME`).
fn ci_installs(script: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let debian = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("for pkg in "))
        .and_then(|l| l.split(';').next())
        .map(words)
        .expect(".ci/run lists its Debian packages in `for pkg in …; do`");
    let cargo = script
        .lines()
        .filter_map(|l| l.split("cargo install --locked ").nth(1))
        .flat_map(words)
        .collect();
    (debian, cargo)
}

/// What the README's "All at once" line installs: `apt-get install …` and `cargo install
/// --locked …`.
fn readme_installs(readme: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let start = readme
        .find("All at once:")
        .expect("README has an `All at once:` install line");
    let text = &readme[start..];
    let text = &text[..text.find("\n\n").unwrap_or(text.len())];
    let after = |marker: &str| {
        text.split(marker)
            .nth(1)
            .and_then(|t| t.split('`').next())
            .map(words)
            .unwrap_or_default()
    };
    (after("apt-get install "), after("cargo install --locked "))
}

#[test]
fn readme_prerequisites_are_what_ci_installs() {
    let root = workspace_root();
    let (ci_debian, ci_cargo) = ci_installs(&fs::read_to_string(root.join(".ci/run")).unwrap());
    let (readme_debian, readme_cargo) =
        readme_installs(&fs::read_to_string(root.join("README.md")).unwrap());
    // the machines CI runs on come with the engine; a newcomer installs it with the rest
    let readme_debian: BTreeSet<String> = readme_debian
        .into_iter()
        .filter(|p| p != "docker.io")
        .collect();
    assert_eq!(
        readme_debian, ci_debian,
        "README's `All at once` apt-get line vs .ci/run's packages"
    );
    assert_eq!(
        readme_cargo, ci_cargo,
        "README's `All at once` cargo line vs .ci/run's cargo tools"
    );
}

#[test]
fn the_install_lists_are_read_from_their_lines() {
    let (debian, cargo) = ci_installs(
        "for pkg in git procps; do\ncommand -v x || cargo install --locked cargo-nextest\n",
    );
    assert_eq!(debian, words("git procps"));
    assert_eq!(cargo, words("cargo-nextest"));
    let (debian, cargo) = readme_installs(
        "All at once: `apt-get install docker.io git` and\n`cargo install --locked a b`.\n\nnext",
    );
    assert_eq!(debian, words("docker.io git"));
    assert_eq!(cargo, words("a b"));
}
