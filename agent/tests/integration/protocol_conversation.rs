//! The example conversation of PROTOCOL.md section 8, replayed against the real agent side:
//! the uplink with the real app manager on the fake engine. `C:` lines are sent to the agent
//! as written (`C: close <code>` closes the session); `A:` lines are what the agent must send
//! next on that connection, matched as a subset (every field written must be there with that
//! value; fields left out, like most of the inventory, are not compared). So the document
//! cannot drift from what the agent does. `RECORD=1` prints what the agent sent.

use crate::uplink_support;

use std::sync::Arc;
use std::time::Duration;

use odac_agent::run::ManagerControl;
use odac_agent::uplink::Uplink;
use odac_protocol::encode;
use serde_json::Value;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_util::sync::CancellationToken;
use uplink_support::*;

enum Step {
    Agent(Value),
    Control(String),
    Close(u16),
}

fn script() -> Vec<Step> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../protocol/PROTOCOL.md"
    ))
    .unwrap();
    let start = doc
        .find("## 8. Example conversation")
        .expect("PROTOCOL.md has section 8");
    let block = doc[start..]
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap();
    block
        .lines()
        .filter_map(|line| {
            if let Some(rest) = line.strip_prefix("C: close ") {
                return Some(Step::Close(rest.trim().parse().unwrap()));
            }
            if let Some(rest) = line.strip_prefix("C: ") {
                return Some(Step::Control(rest.to_owned()));
            }
            line.strip_prefix("A: ").map(|rest| {
                Step::Agent(serde_json::from_str(rest).unwrap_or_else(|e| panic!("{rest}: {e}")))
            })
        })
        .collect()
}

/// Whether `actual` has everything `expected` says.
fn subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| subset(v, av))),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| subset(x, y))
        }
        _ => expected == actual,
    }
}

#[tokio::test(start_paused = true)]
async fn the_example_conversation_is_what_the_agent_does() {
    let record = std::env::var_os("RECORD").is_some();
    let dir = tempfile::tempdir().unwrap();
    let fake = crate::appmgr_support::fake_with_images(&["busybox:1.36"]);
    let manager = manager_on(&fake, dir.path(), "conv");
    let pki = Pki::new();
    let server = TestServer::start(
        &pki,
        Behaviour {
            welcome: false,
            auto_ack: false,
            ..Behaviour::default()
        },
    )
    .await;
    let (_inv_tx, inv_rx) = watch::channel(Some(Arc::new(inventory(8))));
    let mut config = uplink_config(&pki, &server.url(), TOKEN);
    config.agent_id = "agt_7f3c2a9e".into();
    config.hostname = "gpu-box-01".into();
    config.state_dir = Some(dir.path().to_path_buf());
    let uplink = Uplink::new(config, Arc::new(ManagerControl(manager.clone())), inv_rx);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(uplink.run(shutdown.clone()));

    let mut conn = 1;
    let mut seen = 0;
    for (i, step) in script().into_iter().enumerate() {
        match step {
            Step::Control(text) => server.send_text(text),
            Step::Close(code) => {
                server.send(Message::Close(Some(CloseFrame {
                    code: code.into(),
                    reason: "restart".into(),
                })));
                conn += 1;
                seen = 0;
            }
            Step::Agent(expected) => {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
                let got = loop {
                    let msgs = server.snapshot().of_conn(conn);
                    if let Some(m) = msgs.get(seen) {
                        break m.clone();
                    }
                    if tokio::time::Instant::now() > deadline {
                        panic!("step {i}: the agent sent nothing; expected {expected}");
                    }
                    // the app manager's loop, one pass at a time: a pass that changes
                    // nothing reports nothing
                    manager.reconcile_once().await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                };
                seen += 1;
                let actual: Value = serde_json::from_str(&encode(&got)).unwrap();
                if record {
                    println!("A: {actual}");
                } else {
                    assert!(
                        subset(&expected, &actual),
                        "step {i}: expected {expected}\n got {actual}"
                    );
                }
            }
        }
    }
    shutdown.cancel();
    task.await.unwrap();
}
