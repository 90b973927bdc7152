//! Engine and builder texts in statuses and events: kept whole when short, cut at
//! [`MAX_ERROR_BYTES`] otherwise. Used by every part of the app manager that reports what
//! the engine, a registry or a build said. [`redact`] removes the credentials of a pull from a
//! registry's words before they are clipped: a registry (or a proxy) that echoes the request
//! it refused must not put the password in a status, an event or `odac app list`.

use base64::Engine as _;

use odac_host::engine::RegistryAuth;

/// What a removed credential reads as.
const REDACTED: &str = "<redacted>";

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

/// `text` without the credentials of `auth` (the password; the user when 3 characters or
/// longer, as shorter names are ordinary words; the base64 of `user:password` in standard and
/// URL-safe alphabets, padded or not) and without whatever follows `Basic ` or `Bearer ` (a
/// token the engine obtained, which the agent never saw).
pub fn redact(text: String, auth: Option<&RegistryAuth>) -> String {
    let mut secrets: Vec<String> = Vec::new();
    if let Some(a) = auth {
        let pair = format!("{}:{}", a.username, a.password);
        for engine in [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::URL_SAFE,
        ] {
            let b64 = engine.encode(&pair);
            secrets.push(b64.trim_end_matches('=').to_owned());
            secrets.push(b64);
        }
        secrets.push(pair);
        secrets.push(a.password.clone());
        if a.username.chars().count() >= 3 {
            secrets.push(a.username.clone());
        }
    }
    // longest first, so the base64 goes before a password it may contain
    secrets.retain(|s| !s.is_empty());
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut text = text;
    for secret in &secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), REDACTED);
        }
    }
    redact_schemes(&text)
}

/// Whatever follows `Basic ` or `Bearer ` (any case) up to a space, quote or comma.
fn redact_schemes(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let rest = &lower[i..];
        let scheme = ["basic ", "bearer "]
            .into_iter()
            .find(|s| rest.starts_with(s));
        let at_word = i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphanumeric();
        match scheme {
            Some(s) if at_word => {
                out.push_str(&text[i..i + s.len()]);
                i += s.len();
                let end = text[i..]
                    .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';'))
                    .map_or(text.len(), |n| i + n);
                if end > i {
                    out.push_str(REDACTED);
                }
                i = end;
            }
            _ => {
                let Some(c) = text[i..].chars().next() else {
                    break;
                };
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_echoed_by_a_registry_are_removed() {
        let auth = RegistryAuth {
            server: "r:5000".into(),
            username: "alice".into(),
            password: "s3cret-pw".into(),
        };
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:s3cret-pw");
        let echoed = format!(
            "unauthorized: user alice password s3cret-pw header \"Authorization: Basic {b64}\", bearer tok.en-123, Bearer abc"
        );
        let shown = redact(echoed, Some(&auth));
        for secret in ["alice", "s3cret", &b64, "tok.en-123", "abc"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.starts_with("unauthorized: user <redacted> password <redacted>"),
            "{shown}"
        );
        assert!(shown.contains("Basic <redacted>"), "{shown}");
        // nothing sent: only the schemes; words like "basically" are left alone
        assert_eq!(
            redact("basically fine, Bearer".into(), None),
            "basically fine, Bearer"
        );
        let short = RegistryAuth {
            server: "r".into(),
            username: "al".into(),
            password: "pw".into(),
        };
        assert_eq!(
            redact("all good pw".into(), Some(&short)),
            "all good <redacted>"
        );
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let long = format!("nvml error: {}", "é".repeat(5000));
        let clipped = clip(long);
        assert!(clipped.len() <= MAX_ERROR_BYTES + 6 && clipped.ends_with(" [...]"));
        assert!(std::str::from_utf8(clipped.as_bytes()).is_ok());
        assert_eq!(clip("short".into()), "short");
    }
}
