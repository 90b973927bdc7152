//! The bounded tail of a container's output: the last lines that fit a byte budget, cut at a
//! line boundary (one overlong last line is cut at a character boundary instead, so the tail
//! is never empty when there was output). [`TailBuffer`] keeps at most twice the budget while
//! the engine streams, so a container that printed megabytes per line costs kilobytes here.
//! One run's output out of a container's whole log: [`frame_since`] keeps a timestamped log
//! frame written at or after the run's start ([`time_key`] orders the engine's timestamps).

/// Collects streamed output, keeping only what a tail of `max_bytes` can need.
#[derive(Debug)]
pub struct TailBuffer {
    bytes: Vec<u8>,
    max_bytes: usize,
    /// Bytes were dropped from the front: the first line held may be partial.
    cut_front: bool,
}

impl TailBuffer {
    /// A buffer for a tail of at most `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            bytes: Vec::new(),
            max_bytes,
            cut_front: false,
        }
    }

    /// Append a chunk, dropping the front beyond twice the budget.
    pub fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        let keep = self.max_bytes.saturating_mul(2).max(1);
        if self.bytes.len() > keep {
            let drop = self.bytes.len() - keep;
            self.bytes.drain(..drop);
            self.cut_front = true;
        }
    }

    /// The tail: at most `max_lines` lines and `max_bytes` bytes.
    pub fn finish(self, max_lines: usize) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let text = if self.cut_front {
            // the first line held is partial
            text.split_once('\n').map_or("", |(_, rest)| rest)
        } else {
            &text
        };
        cut_tail(text, max_lines, self.max_bytes)
    }
}

/// The last `max_lines` lines of `text` within `max_bytes`, cut at a line boundary.
pub fn cut_tail(text: &str, max_lines: usize, max_bytes: usize) -> String {
    if max_lines == 0 || text.is_empty() {
        return String::new();
    }
    // a trailing newline does not start a line
    let body = text.strip_suffix('\n').unwrap_or(text);
    let fits = |start: usize, lines: usize| lines <= max_lines && text.len() - start <= max_bytes;
    let mut start = text.len();
    let mut lines = 0;
    let mut whole = true;
    for (i, _) in body.rmatch_indices('\n') {
        if !fits(i + 1, lines + 1) {
            whole = false;
            break;
        }
        start = i + 1;
        lines += 1;
    }
    if whole && fits(0, lines + 1) {
        start = 0;
    }
    if start == text.len() {
        // one line longer than the budget: its end, at a character boundary
        let mut cut = text.len().saturating_sub(max_bytes);
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        start = cut;
    }
    text[start..].to_owned()
}

/// An engine timestamp (RFC 3339 in UTC, `2026-12-05T14:42:18.1234Z`, a fraction of 0 to 9
/// digits: Docker's `State.StartedAt` trims trailing zeros, its log timestamps keep nine) as a
/// key that orders like the time it names: the fraction padded to nine digits. `None` when
/// `stamp` is not of that form.
pub fn time_key(stamp: &str) -> Option<String> {
    let body = stamp.strip_suffix('Z')?;
    let (secs, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let shape = secs.len() == 19
        && secs.as_bytes().get(10) == Some(&b'T')
        && digits(&secs.as_bytes()[..4])
        && frac.len() <= 9
        && digits(frac.as_bytes());
    shape.then(|| format!("{secs}.{frac:0<9}"))
}

/// A log frame read with timestamps (`<stamp> <output>`) without its stamp, when it was
/// written at or after `since` (a [`time_key`]); `None` for earlier output. A frame without
/// a readable stamp is kept whole.
pub fn frame_since<'a>(frame: &'a [u8], since: &str) -> Option<&'a [u8]> {
    let Some(space) = frame.iter().position(|&b| b == b' ') else {
        return Some(frame);
    };
    let key = std::str::from_utf8(&frame[..space]).ok().and_then(time_key);
    match key {
        Some(key) if key.as_str() < since => None,
        Some(_) => Some(&frame[space + 1..]),
        None => Some(frame),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_within_the_budget() {
        assert_eq!(cut_tail("a\nb\nc\n", 2, 100), "b\nc\n");
        assert_eq!(cut_tail("a\nb\nc\n", 5, 100), "a\nb\nc\n");
        assert_eq!(cut_tail("a\nb\nc", 2, 100), "b\nc");
        assert_eq!(cut_tail("aaaa\nbb\ncc\n", 10, 6), "bb\ncc\n");
        assert_eq!(cut_tail("aaaa\nbb\ncc\n", 10, 5), "cc\n");
        assert_eq!(cut_tail("", 5, 5), "");
        assert_eq!(cut_tail("x\n", 0, 5), "");
        assert_eq!(
            cut_tail("abcdefgh\n", 5, 4),
            "fgh\n",
            "an overlong line keeps its end"
        );
        assert_eq!(cut_tail("ééé", 5, 3), "é", "cut at a character boundary");
    }

    #[test]
    fn bounds_hold_for_every_shape() {
        for n in 0..300 {
            let text: String = (0..n)
                .map(|i| format!("{}\n", "x".repeat(i % 97)))
                .collect();
            let t = cut_tail(&text, 50, 4096);
            assert!(t.len() <= 4096 && t.lines().count() <= 50, "{n}");
            assert!(text.ends_with(&t));
            assert!(
                t.is_empty()
                    || text.len() == t.len()
                    || text.as_bytes()[text.len() - t.len() - 1] == b'\n'
            );
        }
    }

    #[test]
    fn the_buffer_stays_bounded_and_agrees() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let mut b = TailBuffer::new(100);
        for chunk in text.as_bytes().chunks(37) {
            b.push(chunk);
            assert!(b.bytes.len() <= 200);
        }
        assert_eq!(b.finish(50), cut_tail(&text, 50, 100));
    }

    #[test]
    fn only_the_run_s_own_frames_are_kept() {
        let start = time_key("2026-12-05T14:42:18.5Z").unwrap_or_default();
        assert_eq!(start, "2026-12-05T14:42:18.500000000");
        let earlier = b"2026-12-05T14:42:18.499999999Z run 1\n";
        let same = b"2026-12-05T14:42:18.500000000Z run 2\n";
        let later = b"2026-12-05T14:42:19.000000001Z run 2 again\n";
        assert_eq!(frame_since(earlier, &start), None);
        assert_eq!(frame_since(same, &start), Some(&b"run 2\n"[..]));
        assert_eq!(frame_since(later, &start), Some(&b"run 2 again\n"[..]));
        assert_eq!(
            frame_since(b"no stamp here\n", &start),
            Some(&b"no stamp here\n"[..])
        );
        assert_eq!(
            time_key("2026-12-05T14:42:18Z").as_deref(),
            Some("2026-12-05T14:42:18.000000000")
        );
        assert_eq!(time_key("2026-12-05T14:42:18+01:00"), None);
        assert_eq!(time_key("yesterday"), None);
        assert_eq!(
            time_key("2é6-12-05T14:42:18Z"),
            None,
            "no panic on odd bytes"
        );
        assert_eq!(time_key("2026-12-05T14:42:18.1234567891Z"), None);
    }
}
