//! The user's console config: `<config dir>/config.toml` (the config dir is
//! `$PLAYDECK_CONFIG_DIR`, else `$XDG_CONFIG_HOME/playdeck`, else
//! `~/.config/playdeck`) and themes in `<config dir>/themes/`.

use std::collections::HashMap;

use serde::Deserialize;

use super::keymap::{KeyError, Keymap};
use super::theme::{self, FileError, Theme, ThemeError};

/// Why the console's config could not be used: the file, key or theme at
/// fault and what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Theme(#[from] ThemeError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Keys(#[from] KeyError),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("no theme {name:?}; themes: {}", .themes.join(", "))]
    NoTheme { name: String, themes: Vec<String> },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    theme: Option<String>,
    bell: Option<bool>,
    #[serde(default)]
    keys: HashMap<String, KeyList>,
    /// Read by runs (see [`user_notify`]), not by the console.
    #[serde(default)]
    notify: Option<UserNotify>,
}

/// `[notify]` in the user's config: used by runs whose play has none.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserNotify {
    command: Vec<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// The user's `[notify]` (in `config.toml` of the config directory), if
/// any; an unreadable file or an empty command is an error naming it.
pub fn user_notify() -> Result<Option<crate::play::notify_section::NotifyConfig>, ConfigError> {
    let Some(path) = config_dir().map(|d| d.join("config.toml")) else {
        return Ok(None);
    };
    if !path.is_file() {
        return Ok(None);
    }
    let text = FileError::read(&path)?;
    let file = FileError::toml::<ConfigFile>(&path.display().to_string(), &text)?;
    let Some(n) = file.notify else {
        return Ok(None);
    };
    if n.command.is_empty() {
        return Err(ConfigError::Invalid {
            path: path.display().to_string(),
            message: "[notify] command is empty; give the program and its arguments".into(),
        });
    }
    Ok(Some(crate::play::notify_section::NotifyConfig {
        command: n.command,
        timeout_ms: n
            .timeout_ms
            .unwrap_or(crate::play::notify_section::DEFAULT_TIMEOUT_MS)
            .clamp(100, 600_000),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum KeyList {
    One(String),
    Many(Vec<String>),
}

pub struct ConsoleConfig {
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub keymap: Keymap,
    /// Ring the terminal bell when an operation starts waiting for approval.
    pub bell: bool,
}

pub use crate::paths::config_dir;

/// `NO_COLOR` (set and not empty) asks for no colour.
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

impl ConsoleConfig {
    /// Loads themes and config; `theme` (from `--theme`) wins over the file,
    /// and `NO_COLOR` over both unless a theme was asked for explicitly.
    pub fn load(theme_flag: Option<&str>) -> Result<ConsoleConfig, ConfigError> {
        let dir = config_dir();
        let themes = theme::load_all(dir.as_ref().map(|d| d.join("themes")).as_deref())?;
        let file = match dir.as_ref().map(|d| d.join("config.toml")) {
            Some(path) if path.is_file() => {
                let text = FileError::read(&path)?;
                FileError::toml::<ConfigFile>(&path.display().to_string(), &text)?
            }
            _ => ConfigFile::default(),
        };
        let overrides: HashMap<String, Vec<String>> = file
            .keys
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    match v {
                        KeyList::One(s) => vec![s],
                        KeyList::Many(v) => v,
                    },
                )
            })
            .collect();
        let keymap = Keymap::with(&overrides)?;
        let wanted = match theme_flag {
            Some(t) => Some(t.to_string()),
            None if no_color() => Some("mono".to_string()),
            None => file.theme,
        };
        let theme = match wanted {
            None => 0,
            Some(name) => match themes.iter().position(|t| t.name == name) {
                Some(i) => i,
                None => {
                    let themes = themes.iter().map(|t| t.name.clone()).collect();
                    return Err(ConfigError::NoTheme { name, themes });
                }
            },
        };
        Ok(ConsoleConfig {
            themes,
            theme,
            keymap,
            bell: file.bell.unwrap_or(true),
        })
    }
}
