//! Domain types of a container's live log stream: [`LogStreamOptions`] (follow, tail, since)
//! and [`LogLines`], the stream of lines an engine yields, oldest first, without line ends,
//! stdout and stderr interleaved. Nothing here knows bollard.

use std::pin::Pin;

use futures_util::Stream;
use odac_protocol::LOGS_CUT_MARK as CUT_MARK;

use super::error::EngineError;

/// What part of a container's output to stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStreamOptions {
    /// Keep streaming new output until the container stops or the stream is dropped.
    pub follow: bool,
    /// Only the last `tail` lines of what exists (all of it when `None`).
    pub tail: Option<u32>,
    /// Only output written at or after this Unix time, in seconds.
    pub since_unix: Option<i64>,
}

/// A container's output, one line per item; dropping it stops the stream.
pub type LogLines = Pin<Box<dyn Stream<Item = Result<String, EngineError>> + Send>>;

/// Splits engine output into lines; a partial line is kept until its end arrives. A line
/// longer than `max` bytes is cut: its first bytes (at a character boundary) and
/// the cut mark (`…`, PROTOCOL.md 3.6), `max` bytes at most, go out as one line and the rest of it, up to its line
/// end, is dropped. One line written is one line out, so the buffer stays bounded whatever
/// the container prints and a viewer's counts add up.
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
    /// The current line was cut and went out: its rest is dropped up to its end.
    skipping: bool,
}

impl LineSplitter {
    /// Feeds `bytes`, pushing every complete line (lossily decoded) to `out`.
    pub fn feed(&mut self, bytes: &[u8], max: usize, out: &mut Vec<String>) {
        for &b in bytes {
            if b == b'\n' {
                if !std::mem::take(&mut self.skipping) {
                    out.push(self.take());
                }
            } else if !self.skipping {
                self.partial.push(b);
                if self.partial.len() > max {
                    out.push(self.take_cut(max));
                    self.skipping = true;
                }
            }
        }
    }

    /// The unterminated rest, if any (at the end of the stream).
    pub fn finish(&mut self) -> Option<String> {
        self.skipping = false;
        (!self.partial.is_empty()).then(|| self.take())
    }

    /// The line so far, cut to `max` bytes with the cut mark.
    fn take_cut(&mut self, max: usize) -> String {
        let text = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        let mut end = max.saturating_sub(CUT_MARK.len()).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}{CUT_MARK}", &text[..end])
    }

    fn take(&mut self) -> String {
        let line = String::from_utf8_lossy(&self.partial)
            .trim_end_matches('\r')
            .to_owned();
        self.partial.clear();
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_chunks_and_long_ones_cut_once() {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        s.feed(b"one\ntw", 8, &mut out);
        s.feed(b"o\r\nthree", 8, &mut out);
        assert_eq!(out, ["one", "two"]);
        s.feed(b"-and-a-long-", 8, &mut out);
        s.feed(b"tail\nexactly8\nlast", 8, &mut out);
        assert_eq!(out, ["one", "two", "three\u{2026}", "exactly8"]);
        assert_eq!(s.finish().as_deref(), Some("last"));
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn a_6000_byte_line_is_one_cut_line_of_at_most_4096_bytes() {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        let mut text = "é".repeat(3000).into_bytes();
        text.extend_from_slice(b"\nnext\n");
        for chunk in text.chunks(1000) {
            s.feed(chunk, 4096, &mut out);
        }
        assert_eq!(out.len(), 2, "two lines written, two out");
        assert!(out[0].len() <= 4096 && out[0].ends_with(CUT_MARK));
        assert!(out[0].trim_end_matches(CUT_MARK).chars().all(|c| c == 'é'));
        assert_eq!(out[1], "next");
        assert_eq!(s.finish(), None);
    }
}
