//! API refusals in the CLI's words: the API names request fields (`gpu.count: 0 is out of
//! range 1..=64`), the user typed flags (`--count`). A refusal of a body the user wrote
//! (`odac app create -f`) keeps the field names, which are then the user's own.

use super::client::ClientError;

/// The flags that set each request field.
const FIELDS: [(&str, &str); 11] = [
    ("gpu.runtime", "--nvidia/--amd/--intel/--auto"),
    ("gpu.vendor", "--nvidia/--amd/--intel/--auto"),
    ("gpu.count", "--count"),
    ("gpu.optional", "--optional"),
    ("gpu", "--nvidia/--amd/--intel/--auto"),
    ("name", "-n/--name"),
    ("image", "--image"),
    ("app", "--app"),
    ("source.url", "-u/--url"),
    ("source.branch", "--branch"),
    ("host", "--host"),
];

/// The flag(s) for an API field, if the CLI has one.
pub fn flag_for(field: &str) -> Option<&'static str> {
    FIELDS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, flag)| *flag)
}

/// Rewrites a refusal of a request the CLI built from flags: a leading `field: ` becomes the
/// flag, and the API's `"host" (odac: --host)` style hints become the flag alone.
pub fn in_flags(e: ClientError) -> ClientError {
    let mut message = e.message;
    if let Some(field) = e.field.as_deref()
        && let Some(flag) = flag_for(field)
        && let Some(rest) = message.strip_prefix(&format!("{field}: "))
    {
        message = format!("{flag}: {rest}");
    }
    for (api, flag) in [
        ("\"host\" (odac: --host)", "--host"),
        (" (\"runtime\" in the API)", ""),
        ("; \"runtime\" in the API", ""),
        (" (\"optional\": true)", ""),
    ] {
        message = message.replace(api, flag);
    }
    ClientError {
        message,
        field: e.field,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(field: &str, message: &str) -> String {
        in_flags(ClientError {
            message: message.to_owned(),
            field: Some(field.to_owned()),
        })
        .message
    }

    #[test]
    fn fields_become_flags() {
        assert_eq!(
            refusal("gpu.count", "gpu.count: 0 is out of range 1..=64"),
            "--count: 0 is out of range 1..=64"
        );
        assert_eq!(
            refusal("name", "name: \"A\" is not a lowercase DNS label"),
            "-n/--name: \"A\" is not a lowercase DNS label"
        );
        assert_eq!(
            refusal(
                "host",
                "2 hosts are connected: choose one with \"host\" (odac: --host), a host id or host name: a, b"
            ),
            "2 hosts are connected: choose one with --host, a host id or host name: a, b"
        );
        // no field prefix: left as is
        assert_eq!(
            refusal("gpu.runtime", "unknown host \"x\""),
            "unknown host \"x\""
        );
        assert_eq!(in_flags(ClientError::new("boom")).message, "boom");
    }
}
