//! Image references checked with the Docker registry reference grammar
//! (`distribution/reference`): `[host[:port]/]path[:tag][@digest]`, where the registry host
//! is a first component holding a `.` or a `:`, or `localhost`; every path component is
//! lowercase `[a-z0-9]` joined by `.`, `_`, `__` or dashes; a tag is `[\w][\w.-]{0,127}`; a
//! digest is `algorithm:hex` (at least 32 hex digits, exactly the length of a known
//! algorithm: 64 for `sha256`, 96 for `sha384`, 128 for `sha512`). A reference the engine
//! would refuse (`BusyBox:1.36`: "invalid reference format") is refused here, at the control
//! plane's API and at the agent's decode, so it never reaches an engine. [`IMAGE_PATTERN`] is
//! the same grammar as a JSON Schema pattern (without the length rules).

use crate::validation::ValidationError;

/// The longest repository name (registry host and path) the engine accepts.
pub const MAX_IMAGE_NAME: usize = 255;

/// One domain component of a registry host.
macro_rules! host_part {
    () => {
        "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
    };
}
/// One lowercase path component.
macro_rules! path_part {
    () => {
        "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    };
}

/// The grammar as a JSON Schema (ECMA 262) pattern: the schema's rule for `AppSpec.image`.
pub const IMAGE_PATTERN: &str = concat!(
    "^(?:(?:localhost(?::[0-9]+)?|",
    host_part!(),
    "(?:\\.",
    host_part!(),
    ")+(?::[0-9]+)?|",
    host_part!(),
    ":[0-9]+|\\[[0-9a-fA-F:.]+\\](?::[0-9]+)?)/)?",
    path_part!(),
    "(?:/",
    path_part!(),
    ")*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?",
    "(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
);

/// Checks `image` against the registry reference grammar; the error names `field` and says
/// which part is wrong.
pub(crate) fn check_image_ref(field: &str, image: &str) -> Result<(), ValidationError> {
    let bad = |why: String| {
        ValidationError::new(
            field,
            format!("{image:?} is not a valid image reference: {why}"),
        )
    };
    if image.is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if let Some(c) = image.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad(format!(
            "it contains {c:?} (no whitespace or control characters)"
        )));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    if let Some(d) = digest {
        check_digest(d).map_err(bad)?;
    }
    let (name, tag) = split_tag(rest);
    if let Some(t) = tag {
        check_tag(t).map_err(bad)?;
    }
    if name.len() > MAX_IMAGE_NAME {
        return Err(bad(format!(
            "the repository name is {} bytes long, the limit is {MAX_IMAGE_NAME}",
            name.len()
        )));
    }
    let (host, path) = split_host(name);
    if let Some(h) = host {
        check_host(h).map_err(bad)?;
    }
    if path.is_empty() {
        return Err(bad("the repository name is missing".into()));
    }
    for component in path.split('/') {
        check_path_component(component).map_err(bad)?;
    }
    Ok(())
}

/// `(name, tag)`: the tag is what follows the last `:` after the last `/`.
fn split_tag(reference: &str) -> (&str, Option<&str>) {
    let after_slash = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[after_slash..].rfind(':') {
        Some(i) => (
            &reference[..after_slash + i],
            Some(&reference[after_slash + i + 1..]),
        ),
        None => (reference, None),
    }
}

/// `(registry host, path)`: the first component is a host when it holds a `.` or a `:`, or
/// is `localhost`, and more components follow.
fn split_host(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, path)) if first.contains(['.', ':']) || first == "localhost" => {
            (Some(first), path)
        }
        _ => (None, name),
    }
}

fn check_host(host: &str) -> Result<(), String> {
    let bad = || {
        format!("the registry host {host:?} is not a host name or address with an optional :port")
    };
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or_else(bad)?;
        if addr.is_empty()
            || !addr
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(bad());
        }
        match after {
            "" => return Ok(()),
            p => ("", Some(p.strip_prefix(':').ok_or_else(bad)?)),
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if let Some(p) = port
        && (p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad());
    }
    if host.starts_with('[') {
        return Ok(());
    }
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !c.starts_with('-')
            && !c.ends_with('-')
    };
    if !name.split('.').all(component_ok) {
        return Err(bad());
    }
    Ok(())
}

fn check_path_component(component: &str) -> Result<(), String> {
    if component.is_empty() {
        return Err("the repository path has an empty component (`//` or a trailing `/`)".into());
    }
    if component.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(format!("the repository {component:?} must be lowercase"));
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = component.as_bytes();
    let ends_ok =
        bytes.first().is_some_and(|b| alnum(*b)) && bytes.last().is_some_and(|b| alnum(*b));
    let mut ok = ends_ok;
    let mut i = 0;
    while ok && i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        // a separator: `.`, `_`, `__` or one or more `-`, between alphanumerics
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &component[start..i];
        ok = matches!(sep, "." | "_" | "__") || sep.bytes().all(|b| b == b'-');
    }
    if !ok {
        return Err(format!(
            "the repository component {component:?} may hold only a-z, 0-9 and single separators (`.`, `_`, `__`, `-`) between them"
        ));
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<(), String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    let ok = bytes.first().is_some_and(|b| word(*b))
        && bytes.len() <= 128
        && bytes.iter().all(|b| word(*b) || *b == b'.' || *b == b'-');
    if !ok {
        return Err(format!(
            "the tag {tag:?} must be 1 to 128 of A-Z, a-z, 0-9, `_`, `.`, `-`, not starting with `.` or `-`"
        ));
    }
    Ok(())
}

fn check_digest(digest: &str) -> Result<(), String> {
    let bad =
        || format!("the digest {digest:?} is not algorithm:hex (e.g. sha256: and 64 hex digits)");
    let (algorithm, hex) = digest.split_once(':').ok_or_else(bad)?;
    let algorithm_ok = algorithm.split(['-', '_', '+', '.']).all(|c| {
        c.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && c.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    if !algorithm_ok || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let known = match algorithm {
        "sha256" => Some(64),
        "sha384" => Some(96),
        "sha512" => Some(128),
        _ => None,
    };
    if let Some(len) = known
        && (hex.len() != len || hex.bytes().any(|b| b.is_ascii_uppercase()))
    {
        return Err(format!(
            "a {algorithm} digest is {len} lowercase hex digits, {digest:?} is not"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_the_engine_accepts_pass() {
        let sha = "a".repeat(64);
        for good in [
            "busybox",
            "busybox:1.36",
            "library/busybox:1.36.1-musl",
            "ollama/ollama:0.6.2",
            "localhost:5000/team/app:v1",
            "localhost/app",
            "registry.example.com/a/b/c:latest",
            "registry.example.com:443/app_x/y__z/w--v.1:Tag_1",
            "10.0.0.1:5000/app",
            "[::1]:5000/app",
            "MyRegistry.Example.com/app",
            &format!("busybox@sha256:{sha}"),
            &format!("busybox:1.36@sha256:{sha}"),
            &format!("busybox@blake3:{}", "0".repeat(64)),
        ] {
            assert_eq!(check_image_ref("image", good), Ok(()), "{good}");
        }
    }

    #[test]
    fn references_the_engine_refuses_fail_with_the_part_named() {
        for (bad, says) in [
            ("BusyBox:1.36", "\"BusyBox\" must be lowercase"),
            ("team/App", "\"App\" must be lowercase"),
            ("busybox:", "the tag \"\""),
            ("busybox:.x", "the tag"),
            ("busybox@sha256:abc", "not algorithm:hex"),
            (
                "busy\u{1b}]0;x\u{7}box",
                "no whitespace or control characters",
            ),
            ("busy box", "no whitespace"),
            ("a//b", "empty component"),
            ("a/", "empty component"),
            ("-a", "only a-z"),
            ("a..b", "only a-z"),
            ("a_-b", "only a-z"),
            ("bad_host.:5000/a", "registry host"),
            ("host:port/a", "registry host"),
            ("", "must not be empty"),
        ] {
            let e = check_image_ref("image", bad).err().map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.starts_with("image: ") && e.contains(says)),
                "{bad:?}: {e:?}"
            );
        }
        let upper = format!("busybox@sha256:{}", "A".repeat(64));
        assert!(check_image_ref("image", &upper).is_err());
        let short = format!("busybox@sha256:{}", "a".repeat(40));
        assert!(check_image_ref("image", &short).is_err());
        let long = format!("{}/app", "a".repeat(MAX_IMAGE_NAME));
        assert!(check_image_ref("image", &long).is_err());
    }
}
