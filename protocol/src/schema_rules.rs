//! The validation rules that JSON Schema can express, added to the schemas schemars derives
//! from the types: ranges (`heartbeat_secs`, ports, memory, cpus, GPU counts), lengths and
//! patterns (app names, ids, env names, images), list limits, the words `optional` accepts,
//! and the exclusivity of `image` and `source` (`not`) with "at least one of `image`,
//! `source`, `app`" (`anyOf`), the bounds of a health check and of log limits, the
//! capability allowlist, namespaced sysctl keys and plain non-GPU device paths. The values come from [`crate::limits`], so the schema and the
//! validation code cannot drift apart silently; `tests/integration/schema_rules.rs` runs a table of good
//! and bad values through both. What JSON Schema cannot say (unique app names, the 16 KiB
//! limit counted in bytes, the GPU runtime/vendor agreement, git URL rules) stays in the
//! validation code and PROTOCOL.md. Optional fields keep `null`: the decoder takes `null` as
//! absent, as PROTOCOL.md says.

use schemars::Schema;
use serde_json::{Map, Value, json};

use crate::gpu::GpuOptionalValue;
use crate::host_access::{ALLOWED_CAPS, MAX_HOST_ACCESS_ENTRIES};
use crate::limits::{
    MAX_APPS, MAX_COMMAND_ARGS, MAX_CPUS, MAX_ENV, MAX_GPU_COUNT, MAX_NAME, MAX_PORTS, MAX_VOLUMES,
    MIN_CPUS, MIN_MEMORY_BYTES,
};

/// A lowercase DNS label: `[a-z0-9]`, inner `-`.
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$";

/// Adds the rules to `schema` (any of the three schema files).
pub fn tighten(schema: &mut Schema) {
    let Some(root) = schema.as_object_mut() else {
        return;
    };
    if root.get("title").and_then(Value::as_str) == Some("DesiredState") {
        extend(prop(root, "apps"), json!({"maxItems": MAX_APPS}));
    }
    let Some(defs) = root.get_mut("$defs").and_then(Value::as_object_mut) else {
        return;
    };
    let label = json!({"minLength": 1, "maxLength": MAX_NAME, "pattern": DNS_LABEL_PATTERN});
    let id = json!({"minLength": 1, "maxLength": 256, "pattern": "\\S"});
    // the agent-id rule of `crate::identity` (letters, digits, `.`, `_`, `:`, `-`; a letter or
    // digit first; no `..`)
    let agent_id = json!({"minLength": 1, "maxLength": crate::MAX_AGENT_ID,
        "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]*$", "not": {"pattern": "\\.\\."}});
    let port = json!({"minimum": 1, "maximum": 65535});
    let request_id =
        json!({"minLength": 1, "maxLength": crate::MAX_LOGS_REQUEST_ID, "pattern": "\\S"});
    let session_id =
        json!({"minLength": 1, "maxLength": crate::MAX_EXEC_SESSION_ID, "pattern": "\\S"});
    let term_size = json!({"minimum": 1, "maximum": 1000});
    for (def, field, rules) in [
        ("LogsRequest", "request_id", request_id.clone()),
        ("LogsRequest", "app", label.clone()),
        (
            "LogsRequest",
            "tail",
            json!({"maximum": crate::MAX_LOGS_TAIL}),
        ),
        (
            "LogsRequest",
            "timeout_secs",
            json!({"minimum": 1, "maximum": crate::MAX_LOGS_TIMEOUT_SECS}),
        ),
        ("LogsCancel", "request_id", request_id.clone()),
        ("LogsChunk", "request_id", request_id.clone()),
        (
            "LogsChunk",
            "lines",
            json!({"maxItems": crate::MAX_LOGS_CHUNK_LINES,
                   "items": {"type": "string", "maxLength": crate::MAX_LOGS_LINE}}),
        ),
        ("LogsEnd", "request_id", request_id),
        ("ExecRequest", "session_id", session_id.clone()),
        ("ExecRequest", "app", label.clone()),
        (
            "ExecRequest",
            "cmd",
            json!({"minItems": 1, "maxItems": MAX_COMMAND_ARGS}),
        ),
        ("ExecRequest", "cols", term_size.clone()),
        ("ExecRequest", "rows", term_size.clone()),
        (
            "ExecRequest",
            "principal",
            json!({"minLength": 1, "pattern": "\\S"}),
        ),
        ("ExecRefused", "session_id", session_id),
        ("ExecResize", "cols", term_size.clone()),
        ("ExecResize", "rows", term_size),
        (
            "Welcome",
            "heartbeat_secs",
            json!({"minimum": 1, "maximum": 3600}),
        ),
        ("Welcome", "host_id", id.clone()),
        ("Hello", "agent_id", agent_id),
        ("DesiredStateMessage", "apps", json!({"maxItems": MAX_APPS})),
        ("AppDelete", "name", label.clone()),
        ("AppStatus", "name", label.clone()),
        ("AppSpec", "name", label),
        ("AppSpec", "image", json!({"pattern": crate::IMAGE_PATTERN})),
        ("AppSpec", "app", json!({"pattern": "\\S"})),
        (
            "AppSpec",
            "env",
            json!({"maxProperties": MAX_ENV,
                   "propertyNames": {"minLength": 1, "pattern": "^[^=\\u0000-\\u001f\\u007f-\\u009f]*$"},
                   "additionalProperties": {"pattern": "^[^\\u0000]*$"}}),
        ),
        ("AppSpec", "command", json!({"maxItems": MAX_COMMAND_ARGS})),
        ("AppSpec", "ports", json!({"maxItems": MAX_PORTS})),
        ("AppSpec", "volumes", json!({"maxItems": MAX_VOLUMES})),
        ("AppSpec", "caps", caps_rules()),
        ("AppSpec", "sysctls", sysctls_rules()),
        ("AppSpec", "devices", devices_rules()),
        ("PortMapping", "container", port.clone()),
        ("PortMapping", "host", port),
        ("VolumeMount", "source", json!({"pattern": "\\S"})),
        ("VolumeMount", "target", json!({"pattern": "^\\s*/"})),
        (
            "Resources",
            "memory_bytes",
            json!({"minimum": MIN_MEMORY_BYTES}),
        ),
        (
            "Resources",
            "cpus",
            json!({"minimum": MIN_CPUS, "maximum": MAX_CPUS}),
        ),
    ] {
        if let Some(def) = defs.get_mut(def).and_then(Value::as_object_mut) {
            extend(prop(def, field), rules);
        }
    }
    // how an app runs (`crate::runtime`)
    let secs = |min: u32| json!({"minimum": min, "maximum": crate::runtime::MAX_HEALTH_SECS});
    for (def, field, rules) in [
        (
            "HealthCheck",
            "command",
            json!({"minItems": 1, "maxItems": MAX_COMMAND_ARGS}),
        ),
        ("HealthCheck", "interval_secs", secs(1)),
        ("HealthCheck", "timeout_secs", secs(1)),
        ("HealthCheck", "retries", secs(1)),
        ("HealthCheck", "start_period_secs", secs(0)),
        ("UpdatePolicy", "min_healthy_secs", secs(0)),
        ("UpdatePolicy", "healthy_deadline_secs", secs(1)),
        ("UpdatePolicy", "max_lock_secs", secs(0)),
        (
            "LogLimits",
            "max_size_bytes",
            json!({"minimum": crate::runtime::MIN_LOG_SIZE_BYTES}),
        ),
        (
            "LogLimits",
            "max_files",
            json!({"minimum": 1, "maximum": crate::runtime::MAX_LOG_FILES}),
        ),
    ] {
        if let Some(def) = defs.get_mut(def).and_then(Value::as_object_mut) {
            extend(prop(def, field), rules);
        }
    }
    if let Some(spec) = defs.get_mut("AppSpec").and_then(Value::as_object_mut) {
        let present = |field: &str, kind: &str| json!({"required": [field], "properties": {field: {"type": kind}}});
        spec.insert(
            "allOf".to_owned(),
            json!([
                {"not": {"allOf": [present("image", "string"), present("source", "object")]}},
                {"anyOf": [present("image", "string"), present("source", "object"), present("app", "string")]}
            ]),
        );
    }
    if let Some(count) = defs.get_mut("GpuCountValue") {
        *count = json!({
            "description": count.get("description").cloned().unwrap_or(Value::Null),
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_GPU_COUNT},
                {"type": "string", "pattern": count_pattern()}
            ]
        });
    }
    if let Some(optional) = defs.get_mut("GpuOptionalValue") {
        let words: Vec<&str> = GpuOptionalValue::TRUE_WORDS
            .into_iter()
            .chain(GpuOptionalValue::FALSE_WORDS)
            .collect();
        *optional = json!({
            "description": optional.get("description").cloned().unwrap_or(Value::Null),
            "anyOf": [
                {"type": "boolean"},
                {"type": "string", "pattern": words_pattern(&words)}
            ]
        });
    }
}

/// `caps`: names of [`ALLOWED_CAPS`] in any case, `CAP_` optional.
fn caps_rules() -> Value {
    let names: Vec<String> = ALLOWED_CAPS.iter().map(|c| any_case(c)).collect();
    json!({"maxItems": MAX_HOST_ACCESS_ENTRIES, "items": {"type": "string", "pattern": format!(
        "^\\s*({})?({})\\s*$", any_case("cap_"), names.join("|"))}})
}

/// `sysctls`: the namespaced keys of `crate::host_access::sysctl_allowed`.
fn sysctls_rules() -> Value {
    let part = "[A-Za-z0-9_-]";
    let rest = format!("([./]{part}+)*");
    let keys = format!(
        "^(net\\.{part}+{rest}|kernel\\.msg{part}*{rest}|kernel\\.sem|kernel\\.shm{part}*{rest}|fs\\.mqueue\\.{part}+{rest})$"
    );
    json!({"maxProperties": MAX_HOST_ACCESS_ENTRIES, "propertyNames": {"pattern": keys}})
}

/// `devices`: plain paths under `/dev/`, each once, never a GPU device.
fn devices_rules() -> Value {
    json!({"maxItems": MAX_HOST_ACCESS_ENTRIES, "uniqueItems": true, "items": {
        "type": "string",
        "pattern": "^/dev(/[^/:,\\s\\u0000-\\u001f\\u007f-\\u009f]+)+$",
        "not": {"anyOf": [
            {"pattern": "/\\.\\.?(/|$)"},
            {"pattern": "^/dev/(nvidia[^/]*|dri|kfd)(/|$)"}
        ]}
    }})
}

/// The schema of property `field` of an object schema (created empty if missing).
fn prop<'a>(object: &'a mut Map<String, Value>, field: &str) -> Option<&'a mut Map<String, Value>> {
    object
        .get_mut("properties")?
        .as_object_mut()?
        .get_mut(field)?
        .as_object_mut()
}

fn extend(target: Option<&mut Map<String, Value>>, rules: Value) {
    let (Some(target), Value::Object(rules)) = (target, rules) else {
        return;
    };
    // a `minimum: 0` derived from an unsigned type gives way to the real rule
    for (k, v) in rules {
        target.insert(k, v);
    }
}

/// `words` in any case, with surrounding whitespace (as the decoder trims).
fn words_pattern(words: &[&str]) -> String {
    let alts: Vec<String> = words.iter().map(|w| any_case(w)).collect();
    format!("^\\s*({})\\s*$", alts.join("|"))
}

fn any_case(word: &str) -> String {
    word.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `"all"` in any case, or a number 1..=64 in digits (leading zeros allowed, as the decoder
/// parses it), with surrounding whitespace.
fn count_pattern() -> String {
    format!(
        "^\\s*({}|0*([1-9]|[1-5][0-9]|6[0-4]))\\s*$",
        any_case("all")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_pattern_follows_the_limit() {
        assert_eq!(MAX_GPU_COUNT, 64, "count_pattern spells out 1..=64");
        assert_eq!(any_case("on"), "[oO][nN]");
    }
}
