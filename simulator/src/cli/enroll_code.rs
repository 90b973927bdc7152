//! `odac host enroll-code [--config-dir DIR]`: asks the control plane for a one-time
//! enrollment code (`POST /api/enroll/codes`) and prints the `odac-agent enroll` line that
//! uses it against this same control plane (its URL, and the CA file the CLI trusts, made
//! absolute), then the `odac-agent run` line: a copy-paste path from a control plane to a
//! connected agent, e.g. for the GPU lab's agent (`--config-dir` the lab's DIR, whose
//! `agent.toml` the lab wrote).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::args::EnrollCodeArgs;
use super::client::{Client, ClientError};
use super::term;

/// `path` made absolute against the current directory (left as is when that is unknown).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// The lines printed for `code`.
pub fn lines(code: &str, base: &str, ca_file: Option<&Path>, config_dir: Option<&Path>) -> String {
    let mut enroll = format!("odac-agent enroll --code {code} --cp {base}");
    if let Some(ca) = ca_file {
        enroll.push_str(&format!(" --ca-file {}", absolute(ca).display()));
    }
    let config = match config_dir {
        Some(dir) => {
            let dir = absolute(dir);
            enroll.push_str(&format!(" --config-dir {}", dir.display()));
            dir.join("agent.toml")
        }
        None => PathBuf::from("/etc/odac/agent.toml"),
    };
    format!(
        "enrollment code: {code} (one use)\n\
         on the host, as the user that runs the agent:\n  {enroll}\n  \
         odac-agent run --config {}\n",
        config.display()
    )
}

/// Runs `odac host enroll-code`.
pub fn run(
    client: &Client,
    ca_file: Option<&Path>,
    args: &EnrollCodeArgs,
) -> Result<(), ClientError> {
    let v = client.post("/api/enroll/codes", &json!({}))?;
    let code = v
        .get("code")
        .and_then(Value::as_str)
        .ok_or_else(|| ClientError::new(format!("unexpected answer: no code in {v}")))?;
    term::print(&lines(
        code,
        client.base(),
        ca_file,
        args.config_dir.as_deref(),
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_name_this_control_plane_and_the_lab_dir() {
        let out = lines(
            "enr_1",
            "https://127.0.0.1:7443",
            Some(Path::new("/s/ca.pem")),
            Some(Path::new("/tmp/gpu-lab")),
        );
        assert!(
            out.contains(
                "odac-agent enroll --code enr_1 --cp https://127.0.0.1:7443 --ca-file /s/ca.pem --config-dir /tmp/gpu-lab\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("odac-agent run --config /tmp/gpu-lab/agent.toml"),
            "{out}"
        );
        let plain = lines("enr_2", "https://cp.example", None, None);
        assert!(
            plain.contains("enroll --code enr_2 --cp https://cp.example\n"),
            "{plain}"
        );
        assert!(plain.contains("--config /etc/odac/agent.toml"), "{plain}");
    }
}
