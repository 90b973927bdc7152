//! The bounded tail of a container's output: the last lines that fit a byte budget, cut at a
//! line boundary (one overlong last line is cut at a character boundary instead, so the tail
//! is never empty when there was output). [`TailBuffer`] keeps at most twice the budget while
//! the engine streams, so a container that printed megabytes per line costs kilobytes here.
//! One run's output out of a container's whole log: [`frame_after`] keeps a timestamped log
//! frame written after the [`run_boundary`] between the previous run and this one.

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
/// digits: Docker's `State.StartedAt` trims trailing zeros, its log timestamps keep nine) in
/// nanoseconds since the Unix epoch. `None` when `stamp` is not of that form.
pub fn unix_nanos(stamp: &str) -> Option<i128> {
    let body = stamp.strip_suffix('Z')?;
    let (secs, frac) = body.split_once('.').unwrap_or((body, ""));
    let b = secs.as_bytes();
    let shape = b.len() == 19
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && b[10] == b'T'
        && [13, 16].iter().all(|&i| b[i] == b':')
        && frac.len() <= 9
        && frac.bytes().all(|c| c.is_ascii_digit());
    if !shape {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i128> {
        let part = &b[from..to];
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, d| n * 10 + i128::from(d - b'0')))
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // days from the civil date (H. Hinnant's algorithm)
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let nanos = format!("{frac:0<9}").parse::<i128>().ok()?;
    Some(((days * 24 + hour) * 60 + minute) * 60 * 1_000_000_000 + second * 1_000_000_000 + nanos)
}

/// Where one run's output begins in a container's log: halfway between the end of the
/// previous run (`previous_end`, its `State.FinishedAt`) and the start of this one
/// (`started_at`). Not at either: the engine stamps output when it copies it, so a run's last
/// lines can be stamped after its recorded end and its first lines before its recorded start;
/// the restart backoff between them is far longer than either slip.
pub fn run_boundary(previous_end: &str, started_at: &str) -> Option<i128> {
    let (end, start) = (unix_nanos(previous_end)?, unix_nanos(started_at)?);
    (start >= end).then(|| end + (start - end) / 2)
}

/// A log frame read with timestamps (`<stamp> <output>`) without its stamp, when it was
/// written after `after` (Unix nanoseconds); `None` for output until then. A frame without a
/// readable stamp is kept whole.
pub fn frame_after(frame: &[u8], after: i128) -> Option<&[u8]> {
    let Some(space) = frame.iter().position(|&b| b == b' ') else {
        return Some(frame);
    };
    let at = std::str::from_utf8(&frame[..space])
        .ok()
        .and_then(unix_nanos);
    match at {
        Some(at) if at <= after => None,
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
        assert_eq!(unix_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            unix_nanos("2026-12-05T14:42:18.5Z"),
            Some(1_796_481_738_500_000_000)
        );
        assert_eq!(
            unix_nanos("2000-03-01T00:00:00.000000001Z"),
            Some(951_868_800_000_000_001)
        );
        let after = run_boundary("2026-12-05T14:42:18.5Z", "2026-12-05T14:42:19.5Z").unwrap_or(0);
        assert_eq!(unix_nanos("2026-12-05T14:42:19Z"), Some(after));
        // the previous run's last line, copied a little after its recorded end
        let late = b"2026-12-05T14:42:18.600000000Z run 1 ends\n";
        // this run's first line, copied a little before its recorded start
        let early = b"2026-12-05T14:42:19.400000000Z run 2 starting\n";
        assert_eq!(frame_after(late, after), None);
        assert_eq!(frame_after(early, after), Some(&b"run 2 starting\n"[..]));
        assert_eq!(
            frame_after(b"no stamp here\n", after),
            Some(&b"no stamp here\n"[..])
        );
        assert_eq!(
            run_boundary("2026-12-05T14:42:19Z", "2026-12-05T14:42:18Z"),
            None
        );
        assert_eq!(unix_nanos("2026-12-05T14:42:18+01:00"), None);
        assert_eq!(unix_nanos("yesterday"), None);
        assert_eq!(
            unix_nanos("2é6-12-05T14:42:18Z"),
            None,
            "no panic on odd bytes"
        );
        assert_eq!(unix_nanos("2026-12-05T14:42:18.1234567891Z"), None);
        assert_eq!(unix_nanos("2026-13-05T14:42:18Z"), None);
    }
}
