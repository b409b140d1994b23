//! The user's console config: `<config dir>/config.toml` (the config dir is
//! `$PLAYDECK_CONFIG_DIR`, else `$XDG_CONFIG_HOME/playdeck`, else
//! `~/.config/playdeck`) and themes in `<config dir>/themes/`.

use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use serde::de::IntoDeserializer;
use toml::de::{DeTable, DeValue};

use super::keymap::{KeyError, KeyErrors, Keymap};
use super::theme::{self, FileError, Theme, ThemeError, located};

/// Why the console's config could not be used: the file, key or theme at
/// fault (with line and column where the TOML reader gives one) and what
/// is allowed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Theme(#[from] ThemeError),
    #[error(transparent)]
    File(#[from] FileError),
    /// A `[keys]` entry that cannot be used; `at` is the config file and,
    /// when the entry is in it, its line and column.
    #[error("{at}: {error}")]
    Keys { at: String, error: KeyError },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    /// `from` places the name when the config file gave it (not `--theme`).
    #[error("{}no theme {name:?}; themes: {}", prefix(.from), .themes.join(", "))]
    NoTheme {
        name: String,
        themes: Vec<String>,
        from: Option<String>,
    },
    /// The TOML reader stops at the first syntax error, so nothing after
    /// it (nor anything else of the config) is known.
    #[error("{0} (a TOML syntax error: nothing else of the console's config was checked)")]
    Syntax(FileError),
    /// Every error found in one pass, so an operator fixes them all at once
    /// instead of meeting them one start at a time; `label` names the
    /// config file (or the themes directory when only themes are at fault).
    #[error("{}", several(.label, .errors))]
    Several {
        label: String,
        errors: Vec<ConfigError>,
    },
}

fn prefix(from: &Option<String>) -> String {
    from.as_ref().map(|f| format!("{f}: ")).unwrap_or_default()
}

/// `config.toml: 3 errors:`, then one error a line.
fn several(label: &str, errors: &[ConfigError]) -> String {
    let mut s = format!("{label}: {} errors:", errors.len());
    for e in errors {
        for line in e.to_string().lines() {
            s.push_str("\n  ");
            s.push_str(line);
        }
    }
    s
}

/// The top-level fields of `config.toml`, as serde's own message names
/// them.
const FIELDS: &str = "`theme`, `bell`, `keys`, `notify`";

/// `config.toml` as read: each field with where it is written, so an
/// error found later (an unknown theme, a key bound twice) can say where.
#[derive(Debug, Default)]
struct ConfigFile {
    theme: Option<(String, Option<(usize, usize)>)>,
    bell: Option<bool>,
    keys: Vec<KeyEntry>,
    /// Read by runs (`session::notify::user_notify`) and checked by the
    /// console.
    notify: Option<Result<crate::play::notify_section::NotifyConfig, ConfigError>>,
}

/// One `[keys]` line: the action's name, its keys, and where each is.
#[derive(Debug)]
struct KeyEntry {
    name: String,
    keys: Vec<String>,
    name_at: Option<(usize, usize)>,
    value_at: Option<(usize, usize)>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum KeyList {
    One(String),
    Many(Vec<String>),
}

impl ConfigFile {
    /// Reads `text` (the file `file`) field by field, collecting every
    /// error instead of stopping at the first as serde would. A syntax
    /// error is the exception: the TOML reader stops there, so it is the
    /// only error.
    fn read(file: &str, text: &str) -> Result<(ConfigFile, Vec<ConfigError>), FileError> {
        let doc = DeTable::parse(text).map_err(|e| FileError::from_toml(file, text, &e))?;
        let place = |span: Range<usize>| Some(crate::play::diag::line_col(text, span.start));
        let toml_error =
            |e: toml::de::Error| ConfigError::File(FileError::from_toml(file, text, &e));
        let mut out = ConfigFile::default();
        let mut errors = Vec::new();
        for (key, value) in doc.get_ref() {
            let name: &str = key.get_ref().as_ref();
            let v = || value.clone().into_deserializer();
            match name {
                "theme" => match String::deserialize(v()) {
                    Ok(t) => out.theme = Some((t, place(value.span()))),
                    Err(e) => errors.push(toml_error(e)),
                },
                "bell" => match bool::deserialize(v()) {
                    Ok(b) => out.bell = Some(b),
                    Err(e) => errors.push(toml_error(e)),
                },
                "keys" => match value.get_ref() {
                    DeValue::Table(t) => {
                        for (action, keys) in t {
                            match KeyList::deserialize(keys.clone().into_deserializer()) {
                                Ok(list) => out.keys.push(KeyEntry {
                                    name: action.get_ref().to_string(),
                                    keys: match list {
                                        KeyList::One(k) => vec![k],
                                        KeyList::Many(k) => k,
                                    },
                                    name_at: place(action.span()),
                                    value_at: place(keys.span()),
                                }),
                                Err(e) => errors.push(toml_error(e)),
                            }
                        }
                    }
                    _ => errors.push(ConfigError::Invalid {
                        path: located(file, place(value.span())),
                        message: "[keys] must be a table: action = key or [keys]".into(),
                    }),
                },
                "notify" => {
                    use crate::play::notify_section::{UserNotifyError, from_user_config};
                    out.notify = Some(from_user_config(value).map_err(|e| match e {
                        UserNotifyError::Empty { at } => ConfigError::Invalid {
                            path: located(file, place(at)),
                            message: UserNotifyError::EMPTY.into(),
                        },
                        UserNotifyError::Toml(e) => toml_error(e),
                    }));
                }
                other => errors.push(ConfigError::Invalid {
                    path: located(file, place(key.span())),
                    message: format!("unknown field `{other}`, expected one of {FIELDS}"),
                }),
            }
        }
        Ok((out, errors))
    }

    /// `[keys]` as the key table takes it.
    fn overrides(&self) -> HashMap<String, Vec<String>> {
        self.keys
            .iter()
            .map(|k| (k.name.clone(), k.keys.clone()))
            .collect()
    }

    /// Where in `file` the `[keys]` entry behind `e` is written.
    fn key_error(&self, file: &str, e: KeyError) -> ConfigError {
        let entry = |name: &str| self.keys.iter().find(|k| k.name == name);
        let place = match &e {
            KeyError::UnknownAction { name } => entry(name).and_then(|k| k.name_at),
            KeyError::Override { action, .. } => entry(action).and_then(|k| k.value_at),
            // The later binding is the one that collides; a default one
            // has no place in the file.
            KeyError::Twice { first, second, .. } => entry(second)
                .or_else(|| entry(first))
                .and_then(|k| k.value_at),
            KeyError::NotAKey(_) => None,
        };
        ConfigError::Keys {
            at: located(file, place),
            error: e,
        }
    }
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
    /// Every error found is reported at once (see [`ConfigError::Several`]);
    /// nothing is written either way.
    pub fn load(theme_flag: Option<&str>) -> Result<ConsoleConfig, ConfigError> {
        ConsoleConfig::load_in(config_dir(), theme_flag, no_color())
    }

    /// [`ConsoleConfig::load`] from the config directory `dir`, with
    /// `NO_COLOR` as given (tests cannot share the process's environment).
    fn load_in(
        dir: Option<std::path::PathBuf>,
        theme_flag: Option<&str>,
        no_color: bool,
    ) -> Result<ConsoleConfig, ConfigError> {
        let path = dir
            .as_ref()
            .map(|d| d.join("config.toml"))
            .filter(|p| p.is_file());
        let name = path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let (mut file, mut errors) = match &path {
            Some(p) => {
                let text = FileError::read(p)?;
                ConfigFile::read(&name, &text).map_err(ConfigError::Syntax)?
            }
            None => (ConfigFile::default(), Vec::new()),
        };
        let keymap = match Keymap::with(&file.overrides()) {
            Ok(k) => Some(k),
            Err(KeyErrors(es)) => {
                errors.extend(es.into_iter().map(|e| file.key_error(&name, e)));
                None
            }
        };
        if let Some(Err(e)) = file.notify.take() {
            errors.push(e);
        }
        let theme_dir = dir.as_ref().map(|d| d.join("themes"));
        let (themes, theme_errors) = theme::load_each(theme_dir.as_deref());
        errors.extend(theme_errors.into_iter().map(ConfigError::Theme));
        let (wanted, from) = match theme_flag {
            Some(t) => (Some(t.to_string()), None),
            None if no_color => (Some("mono".to_string()), None),
            None => match file.theme.take() {
                Some((t, place)) => (Some(t), Some(located(&name, place))),
                None => (None, None),
            },
        };
        let theme = match wanted {
            None => Some(0),
            Some(name) => {
                let found = themes.iter().position(|t| t.name == name);
                if found.is_none() {
                    let themes = themes.iter().map(|t| t.name.clone()).collect();
                    errors.push(ConfigError::NoTheme { name, themes, from });
                }
                found
            }
        };
        match (keymap, theme) {
            (Some(keymap), Some(theme)) if errors.is_empty() => Ok(ConsoleConfig {
                themes,
                theme,
                keymap,
                bell: file.bell.unwrap_or(true),
            }),
            _ if errors.len() == 1 => Err(errors.remove(0)),
            _ => {
                // The title names where the errors are: the themes
                // directory when only themes are at fault, else the
                // config file (or the config directory, without one).
                let label = match (&theme_dir, &path, &dir) {
                    (Some(t), _, _)
                        if errors.iter().all(|e| matches!(e, ConfigError::Theme(_))) =>
                    {
                        t.display().to_string()
                    }
                    (_, Some(_), _) => name,
                    (_, None, Some(d)) => d.display().to_string(),
                    (_, None, None) => "the console's config".to_string(),
                };
                Err(ConfigError::Several { label, errors })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(config: &str, themes: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        if !themes.is_empty() {
            std::fs::create_dir(dir.path().join("themes")).unwrap();
        }
        for (name, text) in themes {
            std::fs::write(dir.path().join("themes").join(name), text).unwrap();
        }
        dir
    }

    fn load(dir: &tempfile::TempDir, flag: Option<&str>) -> Result<ConsoleConfig, ConfigError> {
        ConsoleConfig::load_in(Some(dir.path().to_path_buf()), flag, false)
    }

    /// Everything wrong in the config is said in one pass, each error
    /// placed, none of their wording lost.
    #[test]
    fn every_error_is_reported_at_once_with_its_place() {
        let good = include_str!("../../themes/default.toml");
        let bad_colour = good.replace("accent = \"#7aa2f7\"", "accent = \"teal-ish\"");
        let dir = dir_with(
            "theme = \"sparkly\"\n\
             colour = true\n\
             [keys]\n\
             explode = \"e\"\n\
             pause = \"hyper-p\"\n\
             resume = \"r\"\n\
             step = \"r\"\n\
             [notify]\n\
             command = []\n",
            &[
                ("ocean.toml", &bad_colour),
                ("dusk.toml", "[colors]\nbackground = \"red\"\n"),
                ("fine.toml", good),
            ],
        );
        let file = dir.path().join("config.toml").display().to_string();
        let e = load(&dir, None).err().unwrap();
        let ConfigError::Several { label, errors } = &e else {
            panic!("one error, not all: {e}");
        };
        assert_eq!(label, &file);
        let said: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let has = |needle: &str| {
            assert!(
                said.iter().any(|s| s.contains(needle)),
                "{needle:?} missing from {said:#?}"
            );
        };
        has(&format!(
            "{file}:2:1: unknown field `colour`, expected one of `theme`"
        ));
        has(&format!(
            "{file}:4:1: [keys] names unknown action \"explode\""
        ));
        has(&format!(
            "{file}:5:9: [keys] pause: \"hyper-p\" is not a key"
        ));
        has(&format!(
            "{file}:7:8: [keys]: r is bound to both resume and step"
        ));
        has(&format!(
            "{file}:9:11: [notify] command is empty; give the program and its arguments"
        ));
        has(&format!(
            "{file}:1:9: no theme \"sparkly\"; themes: default"
        ));
        has("ocean.toml: `colors.accent` = \"teal-ish\" is not a colour");
        has("dusk.toml:1:1: missing field `foreground`");
        assert_eq!(said.len(), 8, "{said:#?}");
        // The fine theme is not among the errors, and is offered.
        assert!(
            said.iter()
                .any(|s| s.contains("themes: default, light, high-contrast, mono, fine"))
        );
        // One error a line under a title that counts them.
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("{file}: 8 errors:\n  ")),
            "{text}"
        );
        assert_eq!(text.lines().count(), 9, "{text}");
    }

    /// The TOML reader stops at a syntax error: that one is said, placed,
    /// and says nothing else was checked.
    #[test]
    fn a_syntax_error_is_the_only_error_and_says_so() {
        let dir = dir_with(
            "theme = \"sparkly\"\n[keys]\nexplode = \n",
            &[("dusk.toml", "[colors]\n")],
        );
        let file = dir.path().join("config.toml").display().to_string();
        let e = load(&dir, None).err().unwrap().to_string();
        assert!(e.starts_with(&format!("{file}:3:")), "{e}");
        assert!(
            e.contains("nothing else of the console's config was checked"),
            "{e}"
        );
        assert!(!e.contains("sparkly") && !e.contains("dusk"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    /// One error is said as it was before there could be several.
    #[test]
    fn one_error_alone_and_a_good_config_loads() {
        let dir = dir_with("[keys]\npause = \"space\"\n", &[]);
        let cfg = load(&dir, Some("light")).unwrap();
        assert_eq!(cfg.themes[cfg.theme].name, "light");
        let e = load(&dir, Some("nope")).err().unwrap().to_string();
        assert!(e.starts_with("no theme \"nope\"; themes: default"), "{e}");
        // Only theme files at fault: the title names their directory.
        let dir = dir_with("", &[("a.toml", "[colors]\n"), ("b.toml", "[lanes]\n")]);
        let e = load(&dir, None).err().unwrap().to_string();
        let themes = dir.path().join("themes").display().to_string();
        assert!(e.starts_with(&format!("{themes}: 2 errors:")), "{e}");
    }
}
