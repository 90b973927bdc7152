//! The words of a refused HTTP exchange (a WebSocket upgrade answered 401/403/429/503, an
//! exec ticket refused): the `error` field of the JSON body every ODAC control plane answers
//! with, else the body as text, clipped. The agent's dialer and the conformance kit both read
//! refusals this way.

/// Longest refusal text kept from an answer.
pub const MAX_REFUSAL_CHARS: usize = 400;

/// The refusal's words: the JSON body's `error`, else the body as text; trimmed, clipped to
/// [`MAX_REFUSAL_CHARS`] characters, `None` when there is no body or it is blank. Control
/// characters are left for the caller to escape when it shows the text (`{:?}`).
pub fn refusal_text(body: Option<&[u8]>) -> Option<String> {
    let body = body?;
    let text = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let text = text.trim();
    (!text.is_empty()).then(|| text.chars().take(MAX_REFUSAL_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_error_else_the_text_clipped() {
        assert_eq!(
            refusal_text(Some(br#"{"error":"token revoked"}"#)).as_deref(),
            Some("token revoked")
        );
        assert_eq!(refusal_text(Some(b" busy \n")).as_deref(), Some("busy"));
        assert_eq!(refusal_text(Some(b"  ")), None);
        assert_eq!(refusal_text(None), None);
        let long = "x".repeat(1000);
        assert_eq!(
            refusal_text(Some(long.as_bytes())).map(|t| t.chars().count()),
            Some(MAX_REFUSAL_CHARS)
        );
    }
}
