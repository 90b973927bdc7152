//! `odac app update NAME`: change an app's spec. With `--image`, `--env K=V` or `--unset-env K`
//! the CLI reads the current spec (`GET /api/apps/{name}`), changes only those fields and
//! sends the whole spec back (`PUT /api/apps/{name}`); with `-f FILE` the file is the new
//! spec. A change that leaves the spec as it is sends nothing. The agent rolls the change out
//! (and back, when the new version does not stay up): `odac app show` tells how it went.

use clap::Args;
use serde_json::{Map, Value, json};

use super::client::{Client, ClientError, segment};
use super::{flags, read_payload, term, unexpected};
use crate::state::views::AppView;

/// `odac app update`.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("change")
        .required(true)
        .multiple(true)
        .args(["image", "env", "unset_env", "file"])
))]
pub struct UpdateArgs {
    /// App name.
    pub name: String,
    /// New container image (e.g. ollama/ollama:0.6.3).
    #[arg(long)]
    pub image: Option<String>,
    /// Set an environment variable (repeatable).
    #[arg(long, value_name = "K=V", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Remove an environment variable (repeatable).
    #[arg(long, value_name = "K")]
    pub unset_env: Vec<String>,
    /// The whole new spec, as JSON (a file, or - for standard input); `name` may be left out.
    #[arg(short = 'f', long = "file", value_name = "FILE|-", conflicts_with_all = ["image", "env", "unset_env"])]
    pub file: Option<String>,
}

/// Parses `--env K=V` (the value may be empty and may hold `=`).
pub fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

impl UpdateArgs {
    /// The current spec (`spec` of the app's view) with the flags' changes applied.
    pub fn changed(&self, current: &Value) -> Result<Value, ClientError> {
        let mut spec = current.clone();
        let Value::Object(m) = &mut spec else {
            return Err(ClientError::new(
                "unexpected answer: the app has no spec object",
            ));
        };
        if let Some(image) = &self.image {
            m.insert("image".into(), json!(image));
        }
        if !self.env.is_empty() || !self.unset_env.is_empty() {
            let mut env = match m.remove("env") {
                Some(Value::Object(e)) => e,
                _ => Map::new(),
            };
            for k in &self.unset_env {
                env.remove(k);
            }
            for (k, v) in &self.env {
                env.insert(k.clone(), json!(v));
            }
            if !env.is_empty() {
                m.insert("env".into(), Value::Object(env));
            }
        }
        Ok(spec)
    }
}

/// `odac app update`.
pub fn update(client: &Client, args: &UpdateArgs) -> Result<(), ClientError> {
    let path = format!("/api/apps/{}", segment(&args.name));
    let (body, from_flags) = match &args.file {
        Some(file) => (read_payload(file, None)?, false),
        None => {
            let view = client.get(&path)?;
            let current = view.get("spec").cloned().unwrap_or_default();
            let body = args.changed(&current)?;
            if body == current {
                term::println(&format!("app {}: nothing to change", args.name));
                return Ok(());
            }
            (body, true)
        }
    };
    let answer = client
        .put(&path, &body)
        .map_err(|e| if from_flags { flags::in_flags(e) } else { e })?;
    let v: AppView = serde_json::from_value(answer).map_err(unexpected)?;
    term::println(&format!(
        "updated app {} ({}); `odac app show {}` tells how the rollout goes",
        v.name,
        v.spec.image.as_deref().unwrap_or("image from source"),
        v.name
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(image: Option<&str>, env: &[&str], unset: &[&str]) -> UpdateArgs {
        UpdateArgs {
            name: "web".into(),
            image: image.map(str::to_owned),
            env: env.iter().map(|e| parse_env(e).unwrap()).collect(),
            unset_env: unset.iter().map(|s| (*s).to_owned()).collect(),
            file: None,
        }
    }

    #[test]
    fn only_the_flags_fields_change() {
        let current = json!({"name":"web","image":"busybox:1","env":{"A":"1","B":"2"},"ports":[{"container":80}]});
        let out = args(Some("busybox:2"), &["B=3", "C=x=y"], &["A"])
            .changed(&current)
            .unwrap();
        assert_eq!(
            out,
            json!({"name":"web","image":"busybox:2","env":{"B":"3","C":"x=y"},"ports":[{"container":80}]})
        );
        let out = args(None, &[], &["A", "B"]).changed(&current).unwrap();
        assert!(out.get("env").is_none(), "{out}");
        assert_eq!(args(None, &[], &[]).changed(&current).unwrap(), current);
    }

    #[test]
    fn env_flags_need_a_key_and_an_equals_sign() {
        assert_eq!(parse_env("K=").unwrap(), ("K".into(), String::new()));
        assert!(parse_env("K").unwrap_err().contains("KEY=VALUE"));
        assert!(parse_env("=v").is_err());
    }
}
