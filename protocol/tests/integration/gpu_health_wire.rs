//! A GPU's `health` on the wire: optional (an inventory without it, from an older agent,
//! decodes with every GPU healthy), round-trips, and a decoder refuses a state it does not
//! know, naming the field.

use odac_protocol::{AgentMessage, GpuHealthState, decode_agent, encode};

const GOLDEN: &str = include_str!("../../examples/inventory.json");

fn with_health(health: &str) -> String {
    GOLDEN.replacen(
        "\"passable\": true",
        &format!("\"passable\": false, \"health\": {health}"),
        1,
    )
}

#[test]
fn an_inventory_without_health_still_decodes() {
    let AgentMessage::Inventory(report) = decode_agent(GOLDEN.as_bytes()).unwrap() else {
        panic!("not an inventory");
    };
    assert!(report.inventory.gpus.iter().all(|g| g.health.is_none()));
    assert!(!encode(&decode_agent(GOLDEN.as_bytes()).unwrap()).contains("health"));
}

#[test]
fn an_unhealthy_gpu_round_trips_with_its_error() {
    let text = with_health(
        r#"{"state":"unhealthy","since_ms":1764946800000,"last_error":{"at_ms":1764946800000,"xid":79,"summary":"xid 79: GPU has fallen off the bus","fix":"reboot the host","count":1}}"#,
    );
    assert_ne!(
        text, GOLDEN,
        "the golden example has a passable gpu to replace"
    );
    let message = decode_agent(text.as_bytes()).unwrap();
    let AgentMessage::Inventory(report) = &message else {
        panic!("not an inventory");
    };
    let health = report.inventory.gpus[0].health.as_ref().unwrap();
    assert_eq!(health.state, GpuHealthState::Unhealthy);
    assert!(!health.is_healthy());
    let error = health.last_error.as_ref().unwrap();
    assert_eq!((error.xid, error.count), (Some(79), 1));
    let again = decode_agent(encode(&message).as_bytes()).unwrap();
    assert_eq!(again, message);
}

#[test]
fn an_unknown_state_is_refused_naming_the_field() {
    let text = with_health(r#"{"state":"sickly"}"#);
    let err = decode_agent(text.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("health") || err.contains("state"), "{err}");
}
