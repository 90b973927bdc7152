//! Domain types of a container's live log stream: [`LogStreamOptions`] (follow, tail, since)
//! and [`LogLines`], the stream of lines an engine yields, oldest first, without line ends,
//! stdout and stderr interleaved. Nothing here knows bollard.

use std::pin::Pin;

use futures_util::Stream;

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

/// Splits engine output into lines; a partial line is kept until its end arrives, and one
/// longer than `max` bytes is cut there (the rest becomes the next line), so the buffer stays
/// bounded whatever the container prints.
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// Feeds `bytes`, pushing every complete line (lossily decoded) to `out`.
    pub fn feed(&mut self, bytes: &[u8], max: usize, out: &mut Vec<String>) {
        for &b in bytes {
            if b == b'\n' {
                out.push(self.take());
            } else {
                self.partial.push(b);
                if self.partial.len() >= max {
                    out.push(self.take());
                }
            }
        }
    }

    /// The unterminated rest, if any (at the end of the stream).
    pub fn finish(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| self.take())
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
    fn lines_are_split_across_chunks_and_bounded() {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        s.feed(b"one\ntw", 8, &mut out);
        s.feed(b"o\r\nthree", 8, &mut out);
        assert_eq!(out, ["one", "two"]);
        s.feed(b"-and-a-long-tail", 8, &mut out);
        assert_eq!(out, ["one", "two", "three-an", "d-a-long"]);
        assert_eq!(s.finish().as_deref(), Some("-tail"));
        assert_eq!(s.finish(), None);
    }
}
