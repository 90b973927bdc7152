//! Request bodies of the REST API: JSON parsed into a typed request where every refusal is a
//! 400 `{error, field}` naming the field the way the protocol's validation does (`gpu.count`,
//! `ports[0].container`), and where a field the type does not know (`{"cuont": 2}`) is refused
//! instead of silently ignored: a misspelt key must never turn into "use the default".

use serde_json::Value;

use crate::server::api_error::ApiError;

type ApiResult<T> = Result<T, ApiError>;

/// Parses a non-empty JSON body.
pub fn parse_json(body: &[u8]) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("body", "the request body is empty"));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("body", format!("body: not valid JSON: {e}")))
}

/// `prefix` and `field` joined as a dotted path (`body` when both are empty).
fn join(prefix: &str, field: &str) -> String {
    match (prefix.is_empty(), field.is_empty()) {
        (true, true) => "body".to_owned(),
        (true, false) => field.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) if field.starts_with('[') => format!("{prefix}{field}"),
        (false, false) => format!("{prefix}.{field}"),
    }
}

/// A `serde_ignored` path as the protocol names fields: `ports[0].foo`, `gpu.cuont`.
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => join_plain(&field_path(parent), key),
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => field_path(parent),
    }
}

fn join_plain(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// Deserialises `value` as `T`, naming a bad or unknown field with `prefix` in front.
pub fn typed<T: serde::de::DeserializeOwned>(value: Value, prefix: &str) -> ApiResult<T> {
    let mut unknown: Option<String> = None;
    let result = {
        let mut note = |path: serde_ignored::Path<'_>| {
            if unknown.is_none() {
                unknown = Some(field_path(&path));
            }
        };
        let de = serde_ignored::Deserializer::new(value, &mut note);
        serde_path_to_error::deserialize::<_, T>(de)
    };
    let parsed = result.map_err(|e| {
        // the protocol's naming (`ports[0].container`, `gpu.count: is missing`)
        let odac_protocol::ValidationError {
            mut field,
            mut message,
        } = odac_protocol::ValidationError::from_serde_path(e);
        if let Some(name) = message
            .strip_prefix("unknown field `")
            .and_then(|r| r.split_once('`'))
            .map(|(name, _)| name.to_owned())
        {
            // serde_path_to_error's path already ends with the unknown key
            let at = if field == "." { "" } else { field.as_str() };
            if at != name && !at.ends_with(&format!(".{name}")) {
                field = join_plain(at, &name);
            }
            message = "unknown field".to_owned();
        }
        if field == "." {
            field.clear();
        }
        let field = join(prefix, &field);
        ApiError::bad_request(field.clone(), format!("{field}: {message}"))
    })?;
    if let Some(path) = unknown {
        let field = join(prefix, &path);
        return Err(ApiError::bad_request(
            field.clone(),
            format!("{field}: unknown field"),
        ));
    }
    Ok(parsed)
}

/// Parses a body that must be absent, empty or `{}` (endpoints that take no parameters).
pub fn no_fields(body: &[u8]) -> ApiResult<()> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match parse_json(body)? {
        Value::Object(m) if m.is_empty() => Ok(()),
        Value::Object(m) => {
            let key = m.keys().next().cloned().unwrap_or_default();
            Err(ApiError::bad_request(
                key.clone(),
                format!("{key}: unknown field (this endpoint takes no body)"),
            ))
        }
        _ => Err(ApiError::bad_request(
            "body",
            "body: this endpoint takes no body",
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use odac_protocol::{AppSpec, GpuRequest};

    fn field<T: serde::de::DeserializeOwned + std::fmt::Debug>(json: &str, prefix: &str) -> String {
        let e = typed::<T>(serde_json::from_str(json).unwrap(), prefix).unwrap_err();
        assert!(
            e.error
                .starts_with(&format!("{}: ", e.field.as_deref().unwrap())),
            "{e:?}"
        );
        e.field.unwrap()
    }

    #[test]
    fn unknown_fields_are_named_at_any_depth() {
        assert_eq!(
            field::<GpuRequest>(r#"{"cuont":2,"runtme":"nvidia"}"#, "gpu"),
            "gpu.cuont"
        );
        assert_eq!(
            field::<AppSpec>(r#"{"name":"a","image":"x","imgae":"y"}"#, ""),
            "imgae"
        );
        assert_eq!(
            field::<AppSpec>(
                r#"{"name":"a","image":"x","ports":[{"container":1,"hots":2}]}"#,
                ""
            ),
            "ports[0].hots"
        );
        assert_eq!(
            field::<AppSpec>(r#"{"name":"a","image":"x","resources":{"cpu":1}}"#, ""),
            "resources.cpu"
        );
        assert_eq!(
            field::<AppSpec>(
                r#"{"name":"a","source":{"url":"https://h/r","brnch":"x"}}"#,
                ""
            ),
            "source.brnch"
        );
        assert!(
            typed::<AppSpec>(
                serde_json::json!({"name":"a","image":"x","env":{"K":"v"}}),
                ""
            )
            .is_ok()
        );
    }

    #[test]
    fn bodies_without_parameters() {
        assert!(no_fields(b"").is_ok());
        assert!(no_fields(b"{}").is_ok());
        assert_eq!(
            no_fields(br#"{"x":1}"#).unwrap_err().field.as_deref(),
            Some("x")
        );
        assert_eq!(no_fields(b"[]").unwrap_err().field.as_deref(), Some("body"));
    }
}
