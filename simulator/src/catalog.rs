//! The app catalog: ODAC's payload names an app (`"app": "ollama"`) that the control plane
//! resolves to an image. A small fixed catalog: `ollama` and the local `demo` image that
//! `odac-sim demo` builds.

use serde::Serialize;

/// Image tag of the demo app, built locally by `odac-sim demo`.
pub const DEMO_IMAGE: &str = "odac-demo:latest";

/// One catalog entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CatalogEntry {
    /// Name used in `"app"`.
    pub name: &'static str,
    /// Image it resolves to.
    pub image: &'static str,
    /// What it is.
    pub description: &'static str,
}

/// Every catalog entry.
pub const CATALOG: [CatalogEntry; 2] = [
    CatalogEntry {
        name: "ollama",
        image: "ollama/ollama",
        description: "Ollama LLM server",
    },
    CatalogEntry {
        name: "demo",
        image: DEMO_IMAGE,
        description: "lists the GPU devices and environment it received, then sleeps",
    },
];

/// The entry called `name`.
pub fn lookup(name: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.name == name)
}

/// Names of every entry, comma-separated (for error messages).
pub fn names() -> String {
    CATALOG
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_resolves_to_its_image() {
        assert_eq!(lookup("ollama").map(|e| e.image), Some("ollama/ollama"));
        assert_eq!(lookup("demo").map(|e| e.image), Some(DEMO_IMAGE));
        assert!(lookup("nope").is_none());
        assert_eq!(names(), "ollama, demo");
    }
}
