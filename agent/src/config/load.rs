//! Loading the configuration: the TOML file (required when named, optional at the default
//! path) overlaid by `ODAC_AGENT__*` environment variables, then checked; a deserialisation
//! error is turned into one naming the full dotted key.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError, DEFAULT_CONFIG_FILE, ENV_PREFIX};

impl Config {
    /// Loads `path` (or the default file, which may be absent) and the process environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Config::load_with_env(path, env)
    }

    /// Loads `path` (or the default file, which may be absent) overlaid by `env`.
    pub fn load_with_env(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        use config::{Environment, File, FileFormat};
        let (file, required) = match path {
            Some(p) => (p.to_owned(), true),
            None => (PathBuf::from(DEFAULT_CONFIG_FILE), false),
        };
        if required && !file.is_file() {
            return Err(ConfigError::File {
                path: file,
                message: "no such file".into(),
            });
        }
        let env_map: config::Map<String, String> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with(&format!("{ENV_PREFIX}__")))
            .collect();
        let raw = config::Config::builder()
            .add_source(
                File::from(file.as_path())
                    .format(FileFormat::Toml)
                    .required(required),
            )
            .add_source(
                Environment::with_prefix(ENV_PREFIX)
                    .prefix_separator("__")
                    .separator("__")
                    .source(Some(env_map)),
            )
            .build()
            .map_err(|e| ConfigError::File {
                path: file.clone(),
                message: e.to_string(),
            })?;
        super::check::no_fractions("", &raw.cache)?;
        let apps_state_dir = raw.get::<String>("apps.state_dir").ok();
        let state_dir_set = raw.get::<String>("state_dir").is_ok();
        let mut config: Config = serde_path_to_error::deserialize(raw).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            named(&path, &inner)
        })?;
        one_state_dir(&mut config, apps_state_dir.as_deref(), state_dir_set)?;
        config.control_plane.normalise();
        config.validate()?;
        Ok(config)
    }
}

/// The agent keeps all its state under the top-level `state_dir`, its one key. The old
/// `[apps] state_dir` is read only as another name for it (older configurations keep working);
/// naming two different directories is refused, naming the key.
fn one_state_dir(
    config: &mut Config,
    apps_state_dir: Option<&str>,
    state_dir_set: bool,
) -> Result<(), ConfigError> {
    if let Some(old) = apps_state_dir {
        let old = PathBuf::from(old);
        super::check::absolute("apps.state_dir", &old)?;
        if state_dir_set && old != config.state_dir {
            return Err(ConfigError::key(
                "apps.state_dir",
                format!(
                    "{} differs from state_dir {}: the agent keeps all its state in state_dir; \
                     remove apps.state_dir",
                    old.display(),
                    config.state_dir.display()
                ),
            ));
        }
        config.state_dir = old;
    }
    config.apps.state_dir.clone_from(&config.state_dir);
    Ok(())
}

/// Turns a deserialisation error at `path` into one naming the full key.
fn named(path: &str, message: &str) -> ConfigError {
    let path = if path == "." { "" } else { path };
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
        .or_else(|| {
            message
                .strip_prefix("missing configuration field \"")
                .and_then(|r| r.split('"').next())
        });
    if let Some(field) = missing {
        // config names nested fields with their full dotted key already
        if field.contains('.') {
            return ConfigError::key(field, "is required");
        }
        let key = if path.is_empty() {
            field.to_owned()
        } else {
            format!("{path}.{field}")
        };
        return ConfigError::key(key, "is required");
    }
    // config appends " for key `...`" (and the source); the key is named in front already
    let message = message.split(" for key `").next().unwrap_or(message);
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let field = rest.split('`').next().unwrap_or(rest);
        let key = if path.is_empty() {
            field.to_owned()
        } else if path == field || path.ends_with(&format!(".{field}")) {
            path.to_owned()
        } else {
            format!("{path}.{field}")
        };
        let expected = rest
            .split_once(", expected ")
            .map(|(_, e)| format!(" (expected {e})"))
            .unwrap_or_default();
        return ConfigError::key(key, format!("is not a known key{expected}"));
    }
    let key = if path.is_empty() { "(top level)" } else { path };
    ConfigError::key(key, message.to_owned())
}
