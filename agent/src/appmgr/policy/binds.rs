//! Host bind mounts that cannot leave the allowed prefixes. The engine mounts a bind by its
//! path, following symbolic links, when the container starts (and again at every restart); a
//! text check of the path is not enough. So, before every pass lets an app's container be
//! created or started:
//!
//! - [`resolve`]: the path is absolute with plain components only (no `..`), lies under an
//!   allowed prefix (the prefix itself is the administrator's and is resolved as configured),
//!   and every component below the prefix exists and is not a symbolic link
//!   (`symlink_metadata`, component by component). The engine is given that resolved path.
//! - [`conflicts`]: no container can change the path between this check and the mount. A
//!   container can only replace a component with a link if it can write the directory that
//!   holds it, so a bind is refused when it lies under a host directory that any container of
//!   the engine (whoever made it, read from [`list_all`](odac_host::engine::ContainerEngine::list_all))
//!   or another desired app mounts writable, or when it is writable itself and holds another
//!   one's bind. Equal paths are fine: a mount point cannot be replaced from inside.
//!
//! What stays outside: writers that are not containers (host users who can write under a
//! prefix). The prefixes must be directories only root and these apps can write.

use std::path::{Component, Path, PathBuf};

use odac_protocol::AppSpec;

use crate::appmgr::error::PolicyViolation;
use odac_host::engine::ContainerSummary;

/// A host bind of an app, checked and resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostBind {
    /// Index in the app's `volumes`.
    pub index: usize,
    /// The resolved host path the engine is given.
    pub source: PathBuf,
    /// Path inside the container.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A host path some container (or desired app) mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostUse {
    /// Who, in words (`container "x"`, `app "y"`).
    pub owner: String,
    /// The host path (resolved when it can be).
    pub path: PathBuf,
    /// Mounted writable.
    pub writable: bool,
}

/// Resolve `source` (an absolute host path) under one of `prefixes`; the error says why not.
pub fn resolve(source: &str, prefixes: &[PathBuf]) -> Result<PathBuf, String> {
    if source.contains([':', ',']) || source.chars().any(char::is_control) {
        return Err("':', ',' and control characters are not allowed in a host path".into());
    }
    let path = Path::new(source);
    if !path.is_absolute()
        || path
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err("the path must be absolute, without '.' or '..' components".into());
    }
    let Some(prefix) = prefixes
        .iter()
        .find(|p| p.is_absolute() && path.starts_with(p))
    else {
        return Err("it is not under an allowed prefix".into());
    };
    let mut current = std::fs::canonicalize(prefix).map_err(|e| {
        format!(
            "the allowed prefix {} cannot be resolved: {e}",
            prefix.display()
        )
    })?;
    let rest = path.strip_prefix(prefix).unwrap_or(Path::new(""));
    let count = rest.components().count();
    for (i, component) in rest.components().enumerate() {
        current.push(component);
        let meta = std::fs::symlink_metadata(&current).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "{} does not exist on this host: create it before binding it",
                    current.display()
                )
            } else {
                format!("{}: {e}", current.display())
            }
        })?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "{} is a symbolic link: binds never follow links below the prefix",
                current.display()
            ));
        }
        if i + 1 < count && !meta.is_dir() {
            return Err(format!("{} is not a directory", current.display()));
        }
    }
    Ok(current)
}

/// The host paths a listed container mounts (`source:target[:ro]` binds).
pub fn uses_of(container: &ContainerSummary) -> Vec<HostUse> {
    container
        .binds
        .iter()
        .filter_map(|b| {
            let mut parts = b.split(':');
            let source = parts.next().filter(|s| s.starts_with('/'))?;
            let writable = !parts.skip(1).any(|mode| mode.split(',').any(|m| m == "ro"));
            Some(HostUse {
                owner: format!("container {:?}", container.name),
                path: std::fs::canonicalize(source).unwrap_or_else(|_| PathBuf::from(source)),
                writable,
            })
        })
        .collect()
}

/// `inner` lies strictly below `outer`.
fn strictly_under(inner: &Path, outer: &Path) -> bool {
    inner != outer && inner.starts_with(outer)
}

/// Why `bind` is unsafe next to `other`, if it is.
fn conflict(bind: &HostBind, other: &HostUse) -> Option<String> {
    if other.writable && strictly_under(&bind.source, &other.path) {
        return Some(format!(
            "{} lies inside {}, which {} can write: it could replace a directory on the way with a symbolic link before the mount",
            bind.source.display(),
            other.path.display(),
            other.owner
        ));
    }
    if !bind.read_only && strictly_under(&other.path, &bind.source) {
        return Some(format!(
            "{} holds {}, which {} mounts: this app could replace a directory on its way with a symbolic link",
            bind.source.display(),
            other.path.display(),
            other.owner
        ));
    }
    None
}

/// Whether the binds of one app are safe from `others` and from each other.
pub fn conflicts(binds: &[HostBind], others: &[HostUse]) -> Result<(), PolicyViolation> {
    for (i, bind) in binds.iter().enumerate() {
        let own = binds
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, b)| HostUse {
                owner: format!("volumes[{}] of this app", b.index),
                path: b.source.clone(),
                writable: !b.read_only,
            });
        for other in own.chain(others.iter().cloned()) {
            if let Some(message) = conflict(bind, &other) {
                return Err(PolicyViolation {
                    field: format!("volumes[{}].source", bind.index),
                    message: format!("host bind mount not allowed by the local policy: {message}"),
                });
            }
        }
    }
    Ok(())
}

/// The host paths the desired apps bind, by app (resolved where they can be).
pub fn desired_uses(apps: &[&AppSpec], prefixes: &[PathBuf]) -> Vec<(String, HostUse)> {
    let mut out = Vec::new();
    for spec in apps {
        for v in spec.volumes.iter().filter(|v| v.is_bind()) {
            let path = resolve(&v.source, prefixes).unwrap_or_else(|_| PathBuf::from(&v.source));
            out.push((
                spec.name.clone(),
                HostUse {
                    owner: format!("app {:?}", spec.name),
                    path,
                    writable: !v.read_only,
                },
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn bind(index: usize, source: &Path, read_only: bool) -> HostBind {
        HostBind {
            index,
            source: source.to_owned(),
            target: "/x".into(),
            read_only,
        }
    }

    #[test]
    fn links_and_parent_components_are_refused_below_the_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().canonicalize().unwrap().join("P");
        std::fs::create_dir_all(p.join("d/sub")).unwrap();
        std::os::unix::fs::symlink("/", p.join("d/esc")).unwrap();
        std::os::unix::fs::symlink(p.join("d"), p.join("link")).unwrap();
        let prefixes = vec![p.clone()];
        let s = |rel: &str| format!("{}/{rel}", p.display());
        assert_eq!(resolve(&s("d/sub"), &prefixes), Ok(p.join("d/sub")));
        for bad in ["d/esc", "d/esc/etc", "link/sub", "link"] {
            let e = resolve(&s(bad), &prefixes).unwrap_err();
            assert!(e.contains("symbolic link"), "{bad}: {e}");
        }
        assert!(resolve(&s("d/../d/sub"), &prefixes).is_err());
        assert!(resolve(&s("d/sub:/etc"), &prefixes).is_err());
        assert!(resolve("/etc", &prefixes).is_err());
        // the prefix itself may be a link the administrator made
        let via = tmp.path().canonicalize().unwrap().join("via");
        std::os::unix::fs::symlink(&p, &via).unwrap();
        let got = resolve(
            &format!("{}/d/sub", via.display()),
            std::slice::from_ref(&via),
        );
        assert_eq!(got, Ok(p.join("d/sub")));
    }

    #[test]
    fn a_bind_under_a_writable_bind_is_refused_both_ways() {
        let outer = HostUse {
            owner: "container \"a\"".into(),
            path: "/P/d".into(),
            writable: true,
        };
        let inner = bind(0, Path::new("/P/d/esc"), true);
        let e = conflicts(std::slice::from_ref(&inner), std::slice::from_ref(&outer)).unwrap_err();
        assert!(e.message.contains("can write"), "{e}");
        let ro_outer = HostUse {
            writable: false,
            ..outer.clone()
        };
        assert!(conflicts(std::slice::from_ref(&inner), &[ro_outer]).is_ok());
        // the same path is fine: a mount point cannot be replaced from inside
        assert!(
            conflicts(
                &[bind(0, Path::new("/P/d"), false)],
                std::slice::from_ref(&outer)
            )
            .is_ok()
        );
        // a writable bind holding another one's path is refused
        let held = HostUse {
            owner: "app \"b\"".into(),
            path: "/P/d/esc".into(),
            writable: false,
        };
        assert!(
            conflicts(
                &[bind(2, Path::new("/P/d"), false)],
                std::slice::from_ref(&held)
            )
            .is_err()
        );
        assert!(conflicts(&[bind(2, Path::new("/P/d"), true)], &[held]).is_ok());
        // and within one app
        let e = conflicts(
            &[
                bind(0, Path::new("/P/d"), false),
                bind(1, Path::new("/P/d/esc"), true),
            ],
            &[],
        )
        .unwrap_err();
        assert!(
            e.field == "volumes[0].source" || e.field == "volumes[1].source",
            "{e}"
        );
        assert!(conflicts(&[bind(0, Path::new("/P/dd"), false)], &[outer]).is_ok());
    }

    #[test]
    fn listed_binds_become_uses() {
        let c = ContainerSummary {
            name: "x".into(),
            binds: vec![
                "/nonexistent/odac/a:/a".into(),
                "/nonexistent/odac/b:/b:ro".into(),
                "/nonexistent/odac/c:/c:ro,rslave".into(),
            ],
            ..ContainerSummary::default()
        };
        let uses = uses_of(&c);
        let w: Vec<bool> = uses.iter().map(|u| u.writable).collect();
        assert_eq!(w, vec![true, false, false]);
    }
}
