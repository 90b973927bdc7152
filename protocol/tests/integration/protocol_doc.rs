//! PROTOCOL.md stays true: every ```json block in it is a message that decodes in one of the
//! two directions, every message type has an example, and the limits table matches the
//! constants.

use std::collections::BTreeSet;

use odac_protocol::{AGENT_TYPES, CONTROL_TYPES, decode_agent, decode_control};

fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL.md")).unwrap()
}

/// `(direction heading, block)`: the last `### ` heading before each ```json block.
fn json_blocks(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        if current.is_none() && line.starts_with("### ") {
            heading = line.to_owned();
        }
        match (&mut current, line.trim()) {
            (None, "```json") => current = Some(String::new()),
            (Some(block), "```") => {
                out.push((heading.clone(), std::mem::take(block)));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

#[test]
fn every_json_example_decodes() {
    let mut agent = BTreeSet::new();
    let mut control = BTreeSet::new();
    for (heading, block) in json_blocks(&doc()) {
        if heading.contains("Agent → control plane") {
            let m = decode_agent(block.as_bytes())
                .unwrap_or_else(|e| panic!("agent example does not decode: {e}\n{block}"));
            agent.insert(m.type_name());
        } else if heading.contains("Control plane → agent") {
            let m = decode_control(block.as_bytes())
                .unwrap_or_else(|e| panic!("control example does not decode: {e}\n{block}"));
            control.insert(m.type_name());
        } else {
            panic!("json block outside the message sections, under {heading:?}:\n{block}");
        }
    }
    assert_eq!(agent, AGENT_TYPES.into_iter().collect());
    assert_eq!(control, CONTROL_TYPES.into_iter().collect());
}

#[test]
fn limits_table_matches_the_constants() {
    let doc = doc();
    for row in [
        format!("`MAX_APPS` | {} apps", odac_protocol::MAX_APPS),
        format!("`MAX_ENV` | {} env", odac_protocol::MAX_ENV),
        format!("`MAX_STRING` | {} KiB", odac_protocol::MAX_STRING / 1024),
        format!("`MAX_NAME` | {} characters", odac_protocol::MAX_NAME),
        format!("`MAX_COMMAND_ARGS` | {}", odac_protocol::MAX_COMMAND_ARGS),
        format!("`MAX_GPU_COUNT` | {} GPUs", odac_protocol::MAX_GPU_COUNT),
        format!("`MAX_LIST` | {} entries", odac_protocol::MAX_LIST),
        format!("{} bytes", "1,048,576"),
    ] {
        assert!(doc.contains(&row), "PROTOCOL.md lacks {row:?}");
    }
    assert_eq!(odac_protocol::MAX_FRAME_BYTES, 1_048_576);
    assert!(doc.contains(odac_protocol::SUBPROTOCOL));
    for r in odac_protocol::Reason::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", r.as_str())),
            "reason {r} undocumented"
        );
    }
}
