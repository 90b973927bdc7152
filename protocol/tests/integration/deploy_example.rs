//! `deploy/desired.json`, the README's example for `odac-agent apply -f`, stays a valid
//! desired state that runs on a small host: at most one CPU (engines refuse a limit above the
//! host's CPU count), no named volume (which would outlive the app) and an optional GPU (so a
//! host without one runs it on the CPU with the reason).

use odac_protocol::DesiredState;

#[test]
fn the_apply_example_is_valid_and_fits_a_two_core_host() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/desired.json");
    let text = std::fs::read_to_string(path).unwrap();
    let state: DesiredState = serde_json::from_str(&text).unwrap();
    state.validate().unwrap();
    assert!(!state.apps.is_empty());
    for app in &state.apps {
        let cpus = app.resources.cpus.unwrap_or(0.0);
        assert!(
            cpus <= 1.0,
            "{}: cpus {cpus} would fail on a 1-2 core host",
            app.name
        );
        assert!(
            app.volumes.iter().all(|v| v.source.starts_with('/')),
            "{}: a named volume outlives the app",
            app.name
        );
        assert!(
            app.gpu.as_ref().is_none_or(|g| g.is_optional()),
            "{}: a required GPU fails on a host without one",
            app.name
        );
    }
}
