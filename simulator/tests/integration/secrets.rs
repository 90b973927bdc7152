//! Git secrets: the agent of the app's host receives the secret in its desired state, but no
//! REST answer ever contains it and the state files hold it only sealed (under `secrets.key`), so
//! it survives a restart without ever being written in clear.

use crate::common;

use std::time::Duration;

use common::{Sim, TOKEN};
use odac_protocol::ControlMessage;
use odac_simulator::fake_agent::agent_conn::{AgentConn, Incoming};
use odac_simulator::fake_agent::inventories::profile;

const SECRET: &str = "ghp_SealedNeverShown0123456789";

#[test]
fn git_secrets_reach_the_agent_but_no_api_answer_and_no_file_in_clear() {
    let mut sim = Sim::start();
    let mut agent = sim.agent("agt_a", profile(3, "a"));
    let body = format!(
        r#"{{"name":"private","source":{{"url":"https://git.example/o/r.git","secret":"{SECRET}"}}}}"#
    );
    let (s, created) = sim.call("POST", "/api/apps", Some(&body));
    assert_eq!(s, 201, "{created}");
    // the agent gets it
    let upsert = sim
        .rt
        .block_on(agent.recv_timeout(Duration::from_secs(5)))
        .unwrap();
    match upsert {
        Incoming::Message(ControlMessage::AppUpsert(u)) => {
            let secret = u.app.source.unwrap().secret.unwrap();
            assert_eq!(secret.expose(), SECRET);
        }
        other => panic!("upsert expected, got {other:?}"),
    }
    // a restart keeps it working, and nothing shows it
    let (s, _) = sim.call("POST", "/api/apps/private/restart", None);
    assert_eq!(s, 200);
    let (s, _) = sim.call("PUT", "/api/apps/private/gpu", Some("true"));
    assert_eq!(s, 200);
    std::thread::sleep(Duration::from_millis(400)); // the debounced writer
    let check = |sim: &Sim| {
        let mut answers = vec![created.to_string()];
        for path in [
            "/api/apps",
            "/api/apps/private",
            "/api/hosts",
            "/api/hosts/agt_a",
            "/api/events/log",
        ] {
            let (s, v) = sim.call("GET", path, None);
            assert_eq!(s, 200, "{path}");
            answers.push(v.to_string());
        }
        for a in &answers {
            assert!(!a.contains(SECRET), "an API answer holds the secret: {a}");
        }
        let state = sim.dir.path().join("state");
        let mut sealed = 0;
        for dir in [state.clone(), state.join("hosts"), state.join("apps")] {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let text =
                    String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
                assert!(
                    !text.contains(SECRET),
                    "{} holds the secret in clear",
                    path.display()
                );
                sealed += usize::from(text.contains("\"sealed_secret\": \"v1:"));
            }
        }
        assert_eq!(sealed, 1, "the app's file holds its sealed secret");
    };
    check(&sim);

    // after a restart of the simulator the agent still gets the secret, from the sealed copy
    drop(agent);
    sim.restart();
    check(&sim);
    let url = sim.server().agents_url();
    let ca = sim.server().ca_pem.clone();
    let secret = sim.rt.block_on(async {
        let (mut c, _) =
            AgentConn::connect_hello(&url, ca.as_bytes(), TOKEN, AgentConn::hello("agt_a", "a"))
                .await
                .unwrap();
        match c.recv_timeout(Duration::from_secs(5)).await.unwrap() {
            Incoming::Message(ControlMessage::DesiredState(ds)) => ds.apps[0]
                .source
                .clone()
                .unwrap()
                .secret
                .unwrap()
                .expose()
                .to_owned(),
            other => panic!("desired_state expected, got {other:?}"),
        }
    });
    assert_eq!(secret, SECRET);
}
