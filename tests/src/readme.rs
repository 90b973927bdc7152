//! The README's walk-through as the tests type it: the workspace's `README.md` read at test
//! time (so the README and its tests cannot drift), a fenced code block found by the marker
//! `<!-- walkthrough: NAME -->` on the line before it, its command lines with their trailing
//! `# comment`s split off, the prose paragraph after the block, and the backticked answers in
//! that prose, split at their `…` elisions into the fragments an output must contain.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// One command line of a block and its comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The command as typed (placeholders still in it).
    pub command: String,
    /// The text after ` # `, if any.
    pub comment: Option<String>,
}

/// The workspace's README.
pub fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md")
}

/// The README's text.
pub fn text() -> Result<String> {
    let p = path();
    std::fs::read_to_string(&p).map_err(|e| Error::io("read", p, e))
}

/// The marker before block `name` (`<!-- walkthrough: NAME -->`, or with a note after the
/// name: `<!-- walkthrough: NAME (typed by …) -->`).
fn marker(name: &str) -> String {
    format!("<!-- walkthrough: {name} -->")
}

fn is_marker(line: &str, name: &str) -> bool {
    let line = line.trim();
    line.strip_prefix("<!-- walkthrough: ")
        .and_then(|rest| rest.strip_suffix("-->"))
        .and_then(|rest| rest.strip_prefix(name))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

/// The lines of block `name` and the lines after it.
fn split<'a>(readme: &'a str, name: &str) -> Result<(Vec<&'a str>, Vec<&'a str>)> {
    let marker = marker(name);
    let lines: Vec<&str> = readme.lines().collect();
    let at = lines
        .iter()
        .position(|l| is_marker(l, name))
        .ok_or_else(|| Error::Other(format!("README.md has no {marker} line")))?;
    let open = at + 1;
    if !lines.get(open).is_some_and(|l| l.starts_with("```")) {
        return Err(Error::Other(format!(
            "README.md: {marker} is not followed by a fenced code block"
        )));
    }
    let close = lines[open + 1..]
        .iter()
        .position(|l| l.starts_with("```"))
        .map(|i| open + 1 + i)
        .ok_or_else(|| Error::Other(format!("README.md: the block after {marker} never ends")))?;
    Ok((lines[open + 1..close].to_vec(), lines[close + 1..].to_vec()))
}

/// Splits `cmd  # comment` (a `#` after a space, outside quotes).
pub fn split_comment(line: &str) -> Line {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => {
                return Line {
                    command: line[..i].trim().to_owned(),
                    comment: Some(line[i + 1..].trim().to_owned()),
                };
            }
            _ => {}
        }
        prev = c;
    }
    Line {
        command: line.trim().to_owned(),
        comment: None,
    }
}

/// The command lines of block `name` (blank lines and whole-line comments skipped).
pub fn block(readme: &str, name: &str) -> Result<Vec<Line>> {
    let (block, _) = split(readme, name)?;
    Ok(block
        .iter()
        .map(|l| split_comment(l))
        .filter(|l| !l.command.is_empty())
        .collect())
}

/// The prose after block `name` up to the next blank line or heading, lines joined by spaces.
pub fn prose_after(readme: &str, name: &str) -> Result<String> {
    let (_, after) = split(readme, name)?;
    let text: Vec<&str> = after
        .iter()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.trim())
        .collect();
    Ok(text.join(" "))
}

/// The backticked spans of `prose`.
pub fn quoted(prose: &str) -> Vec<String> {
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The backticked span of `prose` that starts with `start`, split at `…` into its fragments.
pub fn promise(prose: &str, start: &str) -> Result<Vec<String>> {
    let span = quoted(prose)
        .into_iter()
        .find(|q| q.starts_with(start))
        .ok_or_else(|| Error::Other(format!("README.md promises no `{start}…` in: {prose}")))?;
    Ok(span
        .split('…')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const README: &str = "intro\n<!-- walkthrough: xy -->\n<!-- walkthrough: x (note) -->\n```sh\n\
        echo \"$P\" | odac a b   # the # in a comment\nodac c 'd # e'\n\n```\n\
        The answer is `a … b (c)` and `d`.\nmore\n\nnext\n";

    #[test]
    fn a_marked_block_its_comments_and_promises() {
        let lines = block(README, "x").unwrap();
        assert_eq!(
            lines,
            vec![
                Line {
                    command: "echo \"$P\" | odac a b".into(),
                    comment: Some("the # in a comment".into())
                },
                Line {
                    command: "odac c 'd # e'".into(),
                    comment: None
                },
            ]
        );
        let prose = prose_after(README, "x").unwrap();
        assert_eq!(prose, "The answer is `a … b (c)` and `d`. more");
        assert_eq!(promise(&prose, "a ").unwrap(), vec!["a", "b (c)"]);
        assert!(promise(&prose, "zz").is_err());
        assert!(block(README, "y").is_err());
        assert!(block(README, "xy").is_err(), "a marker without its block");
    }
}
