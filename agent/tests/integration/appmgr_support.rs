//! Shared by the app-manager tests: a fake engine holding the test image, a desired state of
//! one generation, and one app's status picked out of a pass.

use std::sync::Arc;

use odac_agent::engine::FakeEngine;
use odac_protocol::{AppSpec, AppStatus, DesiredState};

/// A fake engine that already holds `image`.
pub fn fake_with(image: &str) -> Arc<FakeEngine> {
    let fake = FakeEngine::new();
    fake.add_image(image);
    Arc::new(fake)
}

/// Generation `generation` of the desired state, holding `apps`.
pub fn desired(generation: u64, apps: Vec<AppSpec>) -> DesiredState {
    DesiredState { generation, apps }
}

/// `name`'s status among `statuses`; a test fails naming what it got when there is none.
pub fn status<'a>(statuses: &'a [AppStatus], name: &str) -> &'a AppStatus {
    statuses
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no status for {name}: {statuses:?}"))
}
