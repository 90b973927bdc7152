//! Validation errors: every error names the field that failed (a dotted path such as
//! `apps[2].gpu.count`) and what was wrong with the value, so a REST API can answer
//! `{error, field}` and an operator can see at once what to change.

use serde::Serialize;

use crate::limits::MAX_STRING;

/// A field that failed validation. `Display` is `<field>: <message>`, e.g.
/// `apps[2].gpu.count: 0 is out of range 1..=64` (just the message when no field applies).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ValidationError {
    /// Dotted path of the field, e.g. `apps[2].gpu.count`.
    pub field: String,
    /// What is wrong with its value (lowercase, no trailing period).
    pub message: String,
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ValidationError {}

impl ValidationError {
    /// Builds an error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A serde error at a path, named the way validation names fields (`ports[0].container`):
    /// a map key that failed names the map, and a missing field is named itself with the
    /// message `is missing` (serde reports it at its parent).
    pub fn from_serde_path(e: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let path = e.path().to_string();
        // `.?` stands for a map key that failed to deserialise: name the map instead
        let mut field = path
            .trim_end_matches(".?")
            .trim_start_matches('.')
            .to_owned();
        let mut message = e.into_inner().to_string();
        if let Some(name) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            field = if field.is_empty() {
                name.to_owned()
            } else {
                format!("{field}.{name}")
            };
            message = "is missing".to_owned();
        }
        Self::new(field, message)
    }

    /// Prefixes the field path, e.g. `gpu.count` under `apps[2]` becomes `apps[2].gpu.count`.
    #[must_use]
    pub fn under(mut self, prefix: &str) -> Self {
        if prefix.is_empty() {
            return self;
        }
        self.field = if self.field.is_empty() {
            prefix.to_owned()
        } else if self.field.starts_with('[') {
            format!("{prefix}{}", self.field)
        } else {
            format!("{prefix}.{}", self.field)
        };
        self
    }
}

/// Checks that `value`, when set, lies in `range`: `<v> is out of range <min>..=<max>`.
pub(crate) fn check_range<T: PartialOrd + std::fmt::Display>(
    field: &str,
    value: Option<T>,
    range: std::ops::RangeInclusive<T>,
) -> Result<(), ValidationError> {
    match value {
        Some(v) if !range.contains(&v) => Err(ValidationError::new(
            field,
            format!("{v} is out of range {}..={}", range.start(), range.end()),
        )),
        _ => Ok(()),
    }
}

/// Checks that a size in bytes, when set, lies in `min..=max`: `<v> is below the minimum of
/// <min> bytes` or `<v> is above the maximum of <max> bytes`.
pub(crate) fn check_bytes(
    field: &str,
    value: Option<u64>,
    min: u64,
    max: u64,
) -> Result<(), ValidationError> {
    match value {
        Some(v) if v < min => Err(ValidationError::new(
            field,
            format!("{v} is below the minimum of {min} bytes"),
        )),
        Some(v) if v > max => Err(ValidationError::new(
            field,
            format!("{v} is above the maximum of {max} bytes"),
        )),
        _ => Ok(()),
    }
}

/// Checks that a string is at most `max` bytes long.
pub(crate) fn check_len(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.len() > max {
        return Err(ValidationError::new(
            field,
            format!("is {} bytes long, the limit is {max}", value.len()),
        ));
    }
    Ok(())
}

/// Checks that a string is at most [`MAX_STRING`] bytes long.
pub(crate) fn check_string(field: &str, value: &str) -> Result<(), ValidationError> {
    check_len(field, value, MAX_STRING)
}

/// Checks an optional string against [`MAX_STRING`].
pub(crate) fn check_opt_string(field: &str, value: Option<&String>) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |v| check_string(field, v))
}

/// Checks that a string is non-empty (after trimming) and at most [`MAX_STRING`] bytes.
pub(crate) fn check_required(field: &str, value: &str) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    check_string(field, value)
}

/// Checks a list's length and every string in it.
pub(crate) fn check_string_list(
    field: &str,
    values: &[String],
    max: usize,
) -> Result<(), ValidationError> {
    if values.len() > max {
        return Err(ValidationError::new(
            field,
            format!("has {} entries, the limit is {max}", values.len()),
        ));
    }
    for (i, v) in values.iter().enumerate() {
        check_string(&format!("{field}[{i}]"), v)?;
    }
    Ok(())
}

/// Checks a command's argument count (at most [`crate::limits::MAX_COMMAND_ARGS`]) and every
/// argument, for an app's command and a health check's alike.
pub(crate) fn check_command(field: &str, command: &[String]) -> Result<(), ValidationError> {
    let max = crate::limits::MAX_COMMAND_ARGS;
    if command.len() > max {
        return Err(ValidationError::new(
            field,
            format!("has {} arguments, the limit is {max}", command.len()),
        ));
    }
    for (i, arg) in command.iter().enumerate() {
        check_string(&format!("{field}[{i}]"), arg)?;
    }
    Ok(())
}

/// Checks that `name` is a lowercase DNS label of at most 63 characters: `[a-z0-9]`
/// and inner `-`, starting and ending with a letter or digit.
pub fn check_dns_label(field: &str, name: &str) -> Result<(), ValidationError> {
    let bad = |why: &str| ValidationError::new(field, format!("{name:?} {why}"));
    if name.is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if name.len() > crate::limits::MAX_NAME {
        return Err(bad(&format!(
            "is {} characters long, the limit is {}",
            name.len(),
            crate::limits::MAX_NAME
        )));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(bad(
            "is not a lowercase DNS label (only a-z, 0-9 and '-' are allowed)",
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(bad("must start and end with a letter or a digit"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_field_colon_message() {
        let e = ValidationError::new("count", "0 is out of range 1..=64")
            .under("gpu")
            .under("apps[2]");
        assert_eq!(e.to_string(), "apps[2].gpu.count: 0 is out of range 1..=64");
    }

    #[test]
    fn index_paths_join_without_dot() {
        let e = ValidationError::new("[3]", "bad").under("command");
        assert_eq!(e.field, "command[3]");
    }

    #[test]
    fn dns_labels() {
        for ok in ["a", "ollama-app", "x1", &"a".repeat(63)] {
            assert!(check_dns_label("name", ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "Ollama", "a_b", "a.b", &"a".repeat(64)] {
            assert!(check_dns_label("name", bad).is_err(), "{bad}");
        }
    }
}
