//! JSON Schema of the protocol, generated from the types with schemars. The generated files
//! are checked in under `protocol/schema/`; a test fails when they drift from the types.
//! [`crate::schema_rules`] adds the validation rules JSON Schema can express.

use schemars::{JsonSchema, Schema, schema_for};

use crate::{AgentMessage, ControlMessage, DesiredState, ExecFrame};

/// Every schema file: `(file name, schema)`.
pub fn all() -> Vec<(&'static str, Schema)> {
    vec![
        ("agent-message.schema.json", titled::<AgentMessage>()),
        ("control-message.schema.json", titled::<ControlMessage>()),
        ("desired-state.schema.json", titled::<DesiredState>()),
        ("exec-frame.schema.json", titled::<ExecFrame>()),
    ]
}

/// Pretty JSON text of a schema, newline-terminated (the checked-in form).
pub fn to_text(schema: &Schema) -> String {
    let mut s = serde_json::to_string_pretty(schema).unwrap_or_default();
    s.push('\n');
    s
}

fn titled<T: JsonSchema>() -> Schema {
    let mut schema = schema_for!(T);
    crate::schema_rules::tighten(&mut schema);
    schema.insert(
        "$id".to_owned(),
        format!("https://odac.run/schema/agent/v1/{}.json", T::schema_name()).into(),
    );
    schema
}
