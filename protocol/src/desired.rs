//! `DesiredState`: the full declarative snapshot of the apps a host should run, with a
//! generation number. It travels inside `desired_state` messages and stands alone as the
//! file format of `odac-agent apply -f`.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::AppSpec;
use crate::limits::MAX_APPS;
use crate::validation::ValidationError;

/// Every app a host should run. Apps not listed are removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct DesiredState {
    /// Monotonic generation; a snapshot with a lower generation than the one applied is stale.
    pub generation: u64,
    /// The apps.
    #[serde(default)]
    pub apps: Vec<AppSpec>,
}

impl DesiredState {
    /// Checks the app count, every app (errors prefixed `apps[i].`) and name uniqueness.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_apps(&self.apps)
    }

    /// The app called `name`.
    pub fn app(&self, name: &str) -> Option<&AppSpec> {
        self.apps.iter().find(|a| a.name == name)
    }
}

/// Validates a list of apps as a snapshot: count, each app, unique names.
pub(crate) fn validate_apps(apps: &[AppSpec]) -> Result<(), ValidationError> {
    if apps.len() > MAX_APPS {
        return Err(ValidationError::new(
            "apps",
            format!("has {} apps, the limit is {MAX_APPS}", apps.len()),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, app) in apps.iter().enumerate() {
        let prefix = format!("apps[{i}]");
        app.validate().map_err(|e| e.under(&prefix))?;
        if !seen.insert(app.name.as_str()) {
            return Err(ValidationError::new(
                format!("{prefix}.name"),
                format!("duplicate app name {:?}", app.name),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn errors_are_prefixed_with_the_app_index() {
        let json = r#"{"generation":3,"apps":[
            {"name":"a","image":"x"},
            {"name":"b","image":"x"},
            {"name":"c","image":"x","gpu":{"runtime":"nvidia","count":0}}]}"#;
        let ds: DesiredState = serde_json::from_str(json).unwrap();
        assert_eq!(
            ds.validate().unwrap_err().to_string(),
            "apps[2].gpu.count: 0 is out of range 1..=64"
        );
    }

    #[test]
    fn duplicate_names_are_refused() {
        let ds = DesiredState {
            generation: 1,
            apps: vec![AppSpec::new("a", "x"), AppSpec::new("a", "y")],
        };
        assert_eq!(
            ds.validate().unwrap_err().to_string(),
            "apps[1].name: duplicate app name \"a\""
        );
    }

    #[test]
    fn too_many_apps() {
        let ds = DesiredState {
            generation: 1,
            apps: (0..=MAX_APPS)
                .map(|i| AppSpec::new(format!("a{i}"), "x"))
                .collect(),
        };
        assert_eq!(ds.validate().unwrap_err().field, "apps");
    }
}
