//! Changing an app: `PUT /api/apps/{name}` (a whole spec validated like a create, the
//! generation moving on, the restart token kept, 404 for an unknown app) seen by a
//! protocol-level fake agent, and `odac app update` (reads the spec, changes the flags'
//! fields, PUTs it; `-f` sends a whole spec; unknown apps named with the known ones).
//! `update.order = start_first` is refused (400 naming `update.order`) with a host port or a GPU
//! count the host cannot give twice, at create and at update.

use crate::common;

use std::time::Duration;

use common::{Sim, stderr, stdout};
use odac_protocol::ControlMessage;
use odac_simulator::fake_agent::agent_conn::{AgentConn, Incoming};
use odac_simulator::fake_agent::inventories::profile;
use serde_json::json;

fn next(sim: &Sim, agent: &mut AgentConn) -> ControlMessage {
    sim.rt.block_on(async {
        match agent.recv_timeout(Duration::from_secs(5)).await.unwrap() {
            Incoming::Message(m) => m,
            other => panic!("{other:?}"),
        }
    })
}

fn upsert(sim: &Sim, agent: &mut AgentConn) -> odac_protocol::AppUpsert {
    match next(sim, agent) {
        ControlMessage::AppUpsert(up) => up,
        other => panic!("upsert expected, got {other:?}"),
    }
}

#[test]
fn put_replaces_the_whole_spec_and_moves_the_generation_on() {
    let sim = Sim::start();
    let mut agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox:1","env":{"A":"1"}}"#);
    let g1 = upsert(&sim, &mut agent).generation;
    let (s, _) = sim.call("POST", "/api/apps/web/restart", None);
    assert_eq!(s, 200);
    let token = upsert(&sim, &mut agent).app.restart_token.unwrap();

    // no name in the body: the path names the app; no restart token: the current one stays
    let (s, v) = sim.call(
        "PUT",
        "/api/apps/web",
        Some(r#"{"image":"busybox:2","env":{"B":"2"}}"#),
    );
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["spec"]["image"], "busybox:2");
    assert_eq!(
        v["spec"]["env"],
        json!({"B": "2"}),
        "a whole spec, not a merge"
    );
    let up = upsert(&sim, &mut agent);
    assert!(up.generation > g1 + 1, "{} after {g1}", up.generation);
    assert_eq!(up.app.image.as_deref(), Some("busybox:2"));
    assert_eq!(up.app.restart_token.as_deref(), Some(token.as_str()));
    assert_eq!(up.app.env.get("A"), None);

    // the same spec again changes nothing: no upsert, no new generation
    let (s, _) = sim.call(
        "PUT",
        "/api/apps/web",
        Some(r#"{"name":"web","image":"busybox:2","env":{"B":"2"}}"#),
    );
    assert_eq!(s, 200);
    let quiet = sim
        .rt
        .block_on(agent.recv_timeout(Duration::from_millis(500)));
    assert!(
        quiet.is_err(),
        "nothing sent for an unchanged spec: {quiet:?}"
    );
}

#[test]
fn put_refuses_what_create_refuses_and_loses_nothing() {
    let sim = Sim::start();
    let _agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(r#"{"name":"web","image":"busybox:1"}"#);
    for (body, field) in [
        (
            r#"{"image":"busybox:2","ports":[{"container":0}]}"#,
            "ports[0].container",
        ),
        (r#"{"image":"Busy Box"}"#, "image"),
        (r#"{"name":"other","image":"busybox:2"}"#, "name"),
        (r#"{"image":"busybox:2","host":"elsewhere"}"#, "host"),
        (
            r#"{"image":"busybox:2","gpu":{"runtime":"cuda"}}"#,
            "gpu.runtime",
        ),
        (r#"{"#, "body"),
    ] {
        let (s, e) = sim.call("PUT", "/api/apps/web", Some(body));
        assert_eq!((s, e["field"].as_str()), (400, Some(field)), "{body}: {e}");
    }
    let (_, v) = sim.call("GET", "/api/apps/web", None);
    assert_eq!(
        v["spec"]["image"], "busybox:1",
        "a refused change loses nothing"
    );
    let (s, e) = sim.call("PUT", "/api/apps/nope", Some(r#"{"image":"busybox"}"#));
    assert_eq!(s, 404, "{e}");
    assert_eq!(e["error"], "unknown app \"nope\"");
}

#[test]
fn odac_app_update_changes_only_the_flags_fields() {
    let sim = Sim::start();
    let mut agent = sim.agent("agt_a", profile(3, "a"));
    sim.create_app_text(
        r#"{"name":"web","image":"busybox:1","env":{"A":"1","B":"2"},"ports":[{"container":80}]}"#,
    );
    upsert(&sim, &mut agent);

    let o = sim.odac(&[
        "app",
        "update",
        "web",
        "--image",
        "busybox:2",
        "--env",
        "B=3",
        "--unset-env",
        "A",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("updated app web (busybox:2)"),
        "{}",
        stdout(&o)
    );
    let up = upsert(&sim, &mut agent);
    assert_eq!(up.app.image.as_deref(), Some("busybox:2"));
    assert_eq!(
        up.app.env.iter().collect::<Vec<_>>(),
        vec![(&"B".to_owned(), &"3".to_owned())]
    );
    assert_eq!(
        up.app.ports.len(),
        1,
        "fields the flags do not name are kept"
    );

    let o = sim.odac(&["app", "update", "web", "--image", "busybox:2"]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (Some(0), "app web: nothing to change\n".to_owned())
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spec.json");
    std::fs::write(&file, r#"{"image":"busybox:3"}"#).unwrap();
    let o = sim.odac(&["app", "update", "web", "-f", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let up = upsert(&sim, &mut agent);
    assert_eq!(up.app.image.as_deref(), Some("busybox:3"));
    assert!(
        up.app.env.is_empty() && up.app.ports.is_empty(),
        "-f is the whole spec"
    );

    // a refusal of a flag's value names the flag; an unknown app names the known ones
    let o = sim.odac(&["app", "update", "web", "--image", "Bad Image"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: --image: "), "{}", stderr(&o));
    let o = sim.odac(&["app", "update", "wbe", "--image", "busybox"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "error: unknown app \"wbe\"; known apps: web\n",);
    let o = sim.odac(&["app", "update", "web"]);
    assert_eq!(o.status.code(), Some(2), "no change named is a usage error");
    let o = sim.odac(&["app", "update", "web", "--env", "NOEQUALS"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("KEY=VALUE"), "{}", stderr(&o));
}

#[test]
fn start_first_is_refused_with_a_host_port_or_more_gpus_than_the_host_has_twice() {
    let sim = Sim::start();
    // host 0 of the profiles: one NVIDIA GPU
    let _agent = sim.agent("agt_a", profile(0, "a"));
    let start_first = r#""update":{"order":"start_first"}"#;
    let (s, e) = sim.call(
        "POST",
        "/api/apps",
        Some(&format!(
            r#"{{"name":"web","image":"busybox:1",{start_first},"ports":[{{"container":80,"host":8080}}]}}"#
        )),
    );
    assert_eq!((s, e["field"].as_str()), (400, Some("update.order")), "{e}");
    let error = e["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("start_first cannot be used with host port 8080: the old and new container would both bind it"),
        "{error}"
    );
    let (s, e) = sim.call(
        "POST",
        "/api/apps",
        Some(&format!(
            r#"{{"name":"llm","image":"busybox:1",{start_first},"gpu":{{"runtime":"nvidia","count":1}}}}"#
        )),
    );
    assert_eq!((s, e["field"].as_str()), (400, Some("update.order")), "{e}");
    assert!(
        e["error"]
            .as_str()
            .unwrap_or_default()
            .contains("gpu.count 1: the host has 1 gpus"),
        "{e}"
    );
    // without a host port it is fine, and so is an update to it
    let (s, e) = sim.call(
        "POST",
        "/api/apps",
        Some(&format!(
            r#"{{"name":"web","image":"busybox:1",{start_first},"ports":[{{"container":80}}]}}"#
        )),
    );
    assert_eq!(s, 201, "{e}");
    let (s, e) = sim.call(
        "PUT",
        "/api/apps/web",
        Some(&format!(
            r#"{{"image":"busybox:2",{start_first},"ports":[{{"container":80,"host":9090}}]}}"#
        )),
    );
    assert_eq!((s, e["field"].as_str()), (400, Some("update.order")), "{e}");
}
