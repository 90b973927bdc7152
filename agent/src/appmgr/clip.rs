//! Engine and builder texts in statuses and events: kept whole when short, cut at
//! [`MAX_ERROR_BYTES`] otherwise. Used by every part of the app manager that reports what
//! the engine, a registry or a build said.

/// Longest engine text kept in a status (the protocol allows 16 KiB per string).
pub const MAX_ERROR_BYTES: usize = 4096;

/// Cut an engine text to [`MAX_ERROR_BYTES`] at a character boundary, marking the cut.
pub fn clip(mut text: String) -> String {
    if text.len() <= MAX_ERROR_BYTES {
        return text;
    }
    let mut end = MAX_ERROR_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(" [...]");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let long = format!("nvml error: {}", "é".repeat(5000));
        let clipped = clip(long);
        assert!(clipped.len() <= MAX_ERROR_BYTES + 6 && clipped.ends_with(" [...]"));
        assert!(std::str::from_utf8(clipped.as_bytes()).is_ok());
        assert_eq!(clip("short".into()), "short");
    }
}
