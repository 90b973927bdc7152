//! The JSON Schema checked in under `protocol/schema/` must equal the one generated from the
//! types. Run with `UPDATE_SCHEMA=1` to regenerate after changing a type.

use std::path::PathBuf;

use odac_protocol::schema;

#[test]
fn checked_in_schema_matches_the_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema");
    let update = std::env::var_os("UPDATE_SCHEMA").is_some_and(|v| v == "1");
    let mut drifted = Vec::new();
    for (file, s) in schema::all() {
        let want = schema::to_text(&s);
        let path = dir.join(file);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            drifted.push(file);
        }
    }
    assert!(
        drifted.is_empty(),
        "schema drift in {drifted:?}: run `UPDATE_SCHEMA=1 cargo test -p odac-protocol --test integration schema_drift` and commit protocol/schema/"
    );
}

#[test]
fn schema_names_every_message_type() {
    let text: String = schema::all()
        .iter()
        .map(|(_, s)| schema::to_text(s))
        .collect();
    for t in odac_protocol::AGENT_TYPES
        .iter()
        .chain(odac_protocol::CONTROL_TYPES.iter())
    {
        assert!(text.contains(&format!("\"{t}\"")), "schema lacks type {t}");
    }
    for r in odac_protocol::Reason::ALL {
        assert!(
            text.contains(&format!("\"{}\"", r.as_str())),
            "schema lacks reason {r}"
        );
    }
}
