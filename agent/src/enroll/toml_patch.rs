//! Sets a few string keys in an operator's `agent.toml` without rewriting the rest of it:
//! comments, ordering and every other key stay as they were. Enrollment uses it to record the
//! control plane's URL, CA file and token file, and the release keys it trusts.
//!
//! It works on lines, which is enough for the files this project writes and documents: a key
//! is found as `key = ...` inside its `[table]` (or as a dotted `table.key = ...` before the
//! first table); a missing key is added after the last key of its table; a missing table is
//! appended. Keys are never searched inside multi-line strings or inline tables.

/// One key to set: `table` (`None` = top level), key name, string value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<'a> {
    /// Table name, e.g. `control_plane`; `None` for a top-level key.
    pub table: Option<&'a str>,
    /// Key name, e.g. `url`.
    pub key: &'a str,
    /// The value.
    pub value: Value,
}

/// A value enrollment writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A TOML basic string.
    Str(String),
    /// An array of basic strings.
    List(Vec<String>),
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl Value {
    /// The value as written in the file.
    fn rendered(&self) -> String {
        match self {
            Value::Str(s) => quote(s),
            Value::List(items) => {
                let quoted: Vec<String> = items.iter().map(|i| quote(i)).collect();
                format!("[{}]", quoted.join(", "))
            }
        }
    }
}

/// Returns `text` with every setting applied, in order.
pub fn apply(text: &str, settings: &[Setting<'_>]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for s in settings {
        set_one(&mut lines, s);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// `value` as a TOML basic string, quotes included.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The table a header line opens (`[a]` → `a`, `[[a]]` → `[a]`), or `None`.
fn header(line: &str) -> Option<String> {
    let t = strip_comment(line).trim();
    if t.starts_with("[[") && t.ends_with("]]") && t.len() >= 4 {
        return Some(format!("[{}]", t[2..t.len() - 2].trim()));
    }
    if t.starts_with('[') && t.ends_with(']') && t.len() >= 2 {
        return Some(t[1..t.len() - 1].trim().to_owned());
    }
    None
}

/// The line up to a `#` that is not inside a string (good enough for header and key lines).
fn strip_comment(line: &str) -> &str {
    let mut in_basic = false;
    let mut in_literal = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_basic => escaped = true,
            '"' if !in_literal => in_basic = !in_basic,
            '\'' if !in_basic => in_literal = !in_literal,
            '#' if !in_basic && !in_literal => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Whether `line` assigns `key` (bare or quoted), e.g. `url = "..."` or `"url"="..."`.
fn assigns(line: &str, key: &str) -> bool {
    let t = strip_comment(line).trim_start();
    let Some((lhs, _)) = t.split_once('=') else {
        return false;
    };
    let lhs = lhs.trim();
    lhs == key || lhs == format!("\"{key}\"") || lhs == format!("'{key}'")
}

/// Whether `line` is a commented-out assignment of `key`, e.g. `# ca_file = "/x"  # note`.
fn commented(line: &str, key: &str) -> bool {
    line.trim_start()
        .strip_prefix('#')
        .is_some_and(|rest| assigns(rest, key))
}

/// Whether `line` is a key/value line (not blank, not a comment, not a header).
fn is_key_line(line: &str) -> bool {
    let t = strip_comment(line).trim();
    !t.is_empty() && header(line).is_none() && t.contains('=')
}

/// Line range `[start, end)` of the body of `table` (`None` = before the first header).
fn region(lines: &[String], table: Option<&str>) -> Option<(usize, usize)> {
    let start = match table {
        None => 0,
        Some(name) => {
            lines
                .iter()
                .position(|l| header(l).as_deref() == Some(name))?
                + 1
        }
    };
    let end = lines[start..]
        .iter()
        .position(|l| header(l).is_some())
        .map_or(lines.len(), |i| start + i);
    Some((start, end))
}

fn set_one(lines: &mut Vec<String>, s: &Setting<'_>) {
    let assignment = format!("{} = {}", s.key, s.value.rendered());
    // a dotted key before the first table (`control_plane.url = ...`) counts as the same key
    if let Some(table) = s.table {
        let dotted = format!("{table}.{}", s.key);
        if let Some((start, end)) = region(lines, None)
            && let Some(i) = (start..end).find(|&i| assigns(&lines[i], &dotted))
        {
            lines[i] = format!("{dotted} = {}", s.value.rendered());
            return;
        }
    }
    match region(lines, s.table) {
        Some((start, end)) => {
            if let Some(i) = (start..end).find(|&i| assigns(&lines[i], s.key)) {
                lines[i] = assignment;
                return;
            }
            // a documented but commented-out key (`# ca_file = ...`) is replaced where it is
            if let Some(i) = (start..end).find(|&i| commented(&lines[i], s.key)) {
                lines[i] = assignment;
                return;
            }
            // after the table's last key line, else right after its header; at the top
            // level without keys, after the file's opening comments
            let after_keys = (start..end).rev().find(|&i| is_key_line(&lines[i]));
            let at = match (after_keys, s.table) {
                (Some(i), _) => i + 1,
                (None, Some(_)) => start,
                (None, None) => (start..end)
                    .rev()
                    .find(|&i| !lines[i].trim().is_empty())
                    .map_or(start, |i| i + 1),
            };
            lines.insert(at, assignment);
        }
        None => {
            // the table does not exist: append it (table is Some here)
            while lines.last().is_some_and(|l| l.trim().is_empty()) {
                lines.pop();
            }
            if !lines.is_empty() {
                lines.push(String::new());
            }
            lines.push(format!("[{}]", s.table.unwrap_or_default()));
            lines.push(assignment);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn set<'a>(table: Option<&'a str>, key: &'a str, value: &str) -> Setting<'a> {
        Setting {
            table,
            key,
            value: value.to_owned().into(),
        }
    }

    #[test]
    fn replaces_in_place_and_keeps_everything_else() {
        let text = "# top comment\nlog_level = \"info\"\n\n[control_plane]\n# the endpoint\nurl = \"wss://old/agent/v1\" # old\nca_file = \"/x\"\n\n[docker]\nhost = \"unix:///run/docker.sock\"\n";
        let out = apply(
            text,
            &[set(Some("control_plane"), "url", "wss://new:7443/agent/v1")],
        );
        assert_eq!(
            out,
            text.replace(
                "url = \"wss://old/agent/v1\" # old",
                "url = \"wss://new:7443/agent/v1\""
            )
        );
    }

    #[test]
    fn adds_missing_key_after_last_key_of_table() {
        let text = "[control_plane]\nurl = \"a\"\n\n[docker]\nhost = \"b\"\n";
        let out = apply(
            text,
            &[set(Some("control_plane"), "token_file", "/etc/odac/token")],
        );
        assert_eq!(
            out,
            "[control_plane]\nurl = \"a\"\ntoken_file = \"/etc/odac/token\"\n\n[docker]\nhost = \"b\"\n"
        );
    }

    #[test]
    fn appends_missing_table_and_ignores_commented_header() {
        let text = "# [control_plane]\n# url = \"x\"\nstate_dir = \"/s\"\n\n";
        let out = apply(
            text,
            &[
                set(Some("control_plane"), "url", "wss://h/agent/v1"),
                set(Some("control_plane"), "token_file", "/t"),
            ],
        );
        assert_eq!(
            out,
            "# [control_plane]\n# url = \"x\"\nstate_dir = \"/s\"\n\n[control_plane]\nurl = \"wss://h/agent/v1\"\ntoken_file = \"/t\"\n"
        );
    }

    #[test]
    fn top_level_key_goes_before_the_first_table() {
        let text = "log_level = \"info\"\n\n[control_plane]\nurl = \"a\"\n";
        let out = apply(text, &[set(None, "state_dir", "/var/lib/x")]);
        assert_eq!(
            out,
            "log_level = \"info\"\nstate_dir = \"/var/lib/x\"\n\n[control_plane]\nurl = \"a\"\n"
        );
        let out = apply("[docker]\nhost = \"h\"\n", &[set(None, "state_dir", "/s")]);
        assert_eq!(out, "state_dir = \"/s\"\n[docker]\nhost = \"h\"\n");
        // no keys yet: after the opening comments, not above them
        let out = apply(
            "# head\n# more\n\n[docker]\n",
            &[set(None, "state_dir", "/s")],
        );
        assert_eq!(out, "# head\n# more\nstate_dir = \"/s\"\n\n[docker]\n");
        let out = apply("# head\n", &[set(None, "state_dir", "/s")]);
        assert_eq!(out, "# head\nstate_dir = \"/s\"\n");
    }

    #[test]
    fn commented_key_is_replaced_in_place() {
        let text = "[control_plane]\nurl = \"a\"\n# ca_file = \"/etc/odac/ca.pem\"  # default: unset\nheartbeat_secs = 20\n";
        let out = apply(text, &[set(Some("control_plane"), "ca_file", "/x/ca.pem")]);
        assert_eq!(
            out,
            "[control_plane]\nurl = \"a\"\nca_file = \"/x/ca.pem\"\nheartbeat_secs = 20\n"
        );
        // a commented key in another table is not touched
        let text = "[docker]\n# ca_file = \"x\"\n[control_plane]\nurl = \"a\"\n";
        let out = apply(text, &[set(Some("control_plane"), "ca_file", "/y")]);
        assert_eq!(
            out,
            "[docker]\n# ca_file = \"x\"\n[control_plane]\nurl = \"a\"\nca_file = \"/y\"\n"
        );
    }

    #[test]
    fn dotted_top_level_key_is_replaced() {
        let text = "control_plane.url = \"old\"\n[docker]\n";
        let out = apply(text, &[set(Some("control_plane"), "url", "new")]);
        assert_eq!(out, "control_plane.url = \"new\"\n[docker]\n");
    }

    #[test]
    fn empty_file_gets_the_table() {
        let out = apply("", &[set(Some("control_plane"), "url", "u")]);
        assert_eq!(out, "[control_plane]\nurl = \"u\"\n");
    }

    #[test]
    fn similar_keys_and_hash_in_strings_are_not_confused() {
        let text = "[control_plane]\nurl_fallback = \"x#y\"\nname = \"a # b\"\n";
        let out = apply(text, &[set(Some("control_plane"), "url", "u")]);
        assert_eq!(
            out,
            "[control_plane]\nurl_fallback = \"x#y\"\nname = \"a # b\"\nurl = \"u\"\n"
        );
    }

    #[test]
    fn a_list_of_strings_is_written_as_a_toml_array() {
        let keys = vec!["ed25519:AAA=".to_owned(), "ed25519:B\"B".to_owned()];
        let out = apply(
            "[update]\npublic_keys = []\n",
            &[Setting {
                table: Some("update"),
                key: "public_keys",
                value: Value::List(keys),
            }],
        );
        assert_eq!(
            out,
            "[update]\npublic_keys = [\"ed25519:AAA=\", \"ed25519:B\\\"B\"]\n"
        );
    }

    #[test]
    fn quote_escapes() {
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("x\ny\u{1}"), "\"x\\ny\\u0001\"");
    }
}
