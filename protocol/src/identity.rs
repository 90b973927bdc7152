//! Agent identity: the one rule every control plane and every agent applies to an `agent_id`
//! (in `hello`, in the `Odac-Agent-Id` upgrade header, in an enrollment request, in the agent's
//! own id file). An id is 1 to [`MAX_AGENT_ID`] bytes of ASCII letters, digits, `.`, `_`, `:`
//! and `-`, starting with a letter or a digit and never containing `..`: printable, bounded,
//! and safe as a file name or a path component on any control plane (no `/`, `\`, spaces or
//! control characters).

use crate::validation::ValidationError;

/// Longest accepted agent id, in bytes.
pub const MAX_AGENT_ID: usize = 128;

/// HTTP header on the WebSocket upgrade naming the agent the token speaks for, so a control
/// plane can refuse a token used for another agent's id with `403` before the session opens.
pub const AGENT_ID_HEADER: &str = "odac-agent-id";

/// Checks `id` against the agent-id rule; the error names `field` and says what is wrong
/// (quoting at most the first characters of the id, with control characters escaped).
pub fn validate_agent_id(field: &str, id: &str) -> Result<(), ValidationError> {
    let shown = || {
        let head: String = id.chars().take(40).collect();
        format!("{head:?}{}", if id.len() > head.len() { "…" } else { "" })
    };
    if id.is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if id.len() > MAX_AGENT_ID {
        return Err(ValidationError::new(
            field,
            format!("is {} bytes long, the limit is {MAX_AGENT_ID}", id.len()),
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(ValidationError::new(
            field,
            format!(
                "{} contains {bad:?}: an agent id is ascii letters, digits, '.', '_', ':' and '-'",
                shown()
            ),
        ));
    }
    if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(ValidationError::new(
            field,
            format!("{} must start with a letter or a digit", shown()),
        ));
    }
    if id.contains("..") {
        return Err(ValidationError::new(
            field,
            format!("{} must not contain \"..\"", shown()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_ids() {
        for id in [
            "agt_7f3c2a9e",
            "0b9f6a1e-5c1d-4b8e-9f3a-2d6c8e1f4a7b",
            "host.example.com",
            "t-0001",
            "a",
            "urn:odac:h1",
        ] {
            assert_eq!(validate_agent_id("agent_id", id), Ok(()), "{id}");
        }
        assert_eq!(
            validate_agent_id("agent_id", &"a".repeat(MAX_AGENT_ID)),
            Ok(())
        );
    }

    #[test]
    fn refused_ids_name_the_field_and_the_problem() {
        for (id, why) in [
            ("", "must not be empty"),
            ("../../etc", "contains '/'"),
            ("..", "must start with a letter or a digit"),
            ("a..b", "must not contain \"..\""),
            ("a/b", "contains '/'"),
            ("a\\b", "contains '\\\\'"),
            ("a b", "contains ' '"),
            ("a\u{7}b", "contains '\\u{7}'"),
            ("a\nb", "contains '\\n'"),
            ("é", "contains 'é'"),
            ("-x", "must start with a letter or a digit"),
            (".hidden", "must start with a letter or a digit"),
        ] {
            let e = validate_agent_id("agent_id", id).unwrap_err();
            assert_eq!(e.field, "agent_id", "{id:?}");
            assert!(e.message.contains(why), "{id:?}: {e}");
            assert!(!e.message.contains('\n'), "{id:?}: {e}");
        }
        let e = validate_agent_id("agent_id", &"a".repeat(MAX_AGENT_ID + 1)).unwrap_err();
        assert_eq!(e.message, "is 129 bytes long, the limit is 128");
    }
}
