//! Nothing raw on a terminal: every string the `odac` CLI prints that came from an app, an
//! engine or an image (log lines, last output, errors, image names) goes through [`visible`]
//! first, so a container cannot retitle the window, clear the screen, move the cursor over
//! earlier lines or write the clipboard (OSC 52). Control characters are shown as text: C0
//! and DEL as `\x1b`, C1 as `\u{9b}`. [`visible`] keeps `\n` and `\t` (log lines, multi-line
//! errors), [`visible_cell`] escapes them too (one table cell stays one cell), [`json_safe`]
//! leaves JSON valid. `odac app logs --raw` is the one way to get the bytes as they are.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must be escaped; `keep_layout` keeps `\n` and `\t`.
fn unsafe_char(c: char, keep_layout: bool) -> bool {
    c.is_control() && !(keep_layout && (c == '\n' || c == '\t'))
}

fn escape(text: &str, keep_layout: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| unsafe_char(c, keep_layout)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !unsafe_char(c, keep_layout) {
            out.push(c);
        } else if u32::from(c) < 0x80 {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
    Cow::Owned(out)
}

/// `text` with every control character but `\n` and `\t` shown as an escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// `text` with every control character (`\n` and `\t` too) shown as an escape: for one cell
/// or one line.
pub fn visible_cell(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// JSON text with DEL and the C1 controls (which JSON does not require escaped) written as
/// `\u00XX`; the other controls are escaped by the serializer already.
pub fn json_safe(json: &str) -> Cow<'_, str> {
    let c1 = |c: char| c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c);
    if !json.chars().any(c1) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if c1(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Print `text` to standard output through [`visible`].
pub fn print(text: &str) {
    print!("{}", visible(text));
}

/// Print `text` and a newline to standard output through [`visible`].
pub fn println(text: &str) {
    println!("{}", visible(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_and_layout_is_kept() {
        let line = "a\u{1b}]0;owned\u{7}b\u{1b}]52;c;ZXZpbA==\u{7}c\u{1b}[2J\u{1b}[1;1H\r\td\u{9b}2J\u{7f}";
        assert_eq!(
            visible(line),
            "a\\x1b]0;owned\\x07b\\x1b]52;c;ZXZpbA==\\x07c\\x1b[2J\\x1b[1;1H\\x0d\td\\u{9b}2J\\x7f"
        );
        assert_eq!(visible("one\ntwo\tthree"), "one\ntwo\tthree");
        assert_eq!(visible_cell("one\ntwo\tthree"), "one\\x0atwo\\x09three");
        assert!(matches!(visible("plain ünïcode"), Cow::Borrowed(_)));
        assert_eq!(visible(&visible(line)), visible(line), "idempotent");
    }

    #[test]
    fn json_stays_json() {
        let v = serde_json::json!({"line": "x\u{1b}[2J\u{9b}y"});
        let text = json_safe(&v.to_string()).into_owned();
        assert!(!text.chars().any(char::is_control), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, v);
    }
}
