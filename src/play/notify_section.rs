//! `[notify]`: a command run when the run needs its operator.

use serde::Deserialize;
use serde::de::IntoDeserializer;
use toml::de::DeValue;

use super::reader::{Reader, Table};

const NOTIFY_KEYS: &[&str] = &["command", "timeout_ms"];

/// What to run, and for how long at most.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyConfig {
    /// The program and its arguments; the event goes to its stdin as JSON.
    pub command: Vec<String>,
    pub timeout_ms: u64,
}

pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

pub(super) fn read(r: &mut Reader, root: &Table<'_, '_>) -> Option<NotifyConfig> {
    let t = root.table(r, "notify")?;
    t.deny_unknown(r, NOTIFY_KEYS);
    let command = t.strings(r, "command");
    let timeout_ms = t
        .int(r, "timeout_ms", 100, 600_000)
        .map_or(DEFAULT_TIMEOUT_MS, |(n, _)| n as u64);
    match command {
        Some(c) if !c.is_empty() => Some(NotifyConfig {
            command: c.into_iter().map(|(s, _)| s).collect(),
            timeout_ms,
        }),
        Some(_) => {
            r.error(
                t.key_span("command"),
                "[notify] command is empty; give the program and its arguments, for example [\"notify-send\", \"playdeck\"]",
                "empty",
            );
            None
        }
        None => {
            r.error(
                root.key_span("notify"),
                "[notify] needs command = [\"program\", \"arg\", …] (the event goes to its stdin as JSON)",
                "no command",
            );
            None
        }
    }
}

/// `[notify]` in the user's config (`config.toml`), as written there.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserNotify {
    command: Vec<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Why the user's `[notify]` cannot be used: an empty command (at the
/// span of the empty list), or a value that is not a `[notify]` table.
#[derive(Debug)]
pub enum UserNotifyError {
    Empty { at: std::ops::Range<usize> },
    Toml(toml::de::Error),
}

impl UserNotifyError {
    pub const EMPTY: &'static str = "[notify] command is empty; give the program and its arguments";
}

/// The user's `[notify]` table, checked: used by runs whose play has none
/// (the session reads it) and checked by the console with the rest of its
/// config, so both judge it alike.
pub fn from_user_config(
    value: &toml::Spanned<DeValue<'_>>,
) -> Result<NotifyConfig, UserNotifyError> {
    match UserNotify::deserialize(value.clone().into_deserializer()) {
        Ok(n) if n.command.is_empty() => Err(UserNotifyError::Empty {
            // At the empty list itself, not the table's header.
            at: match value.get_ref() {
                DeValue::Table(t) => t
                    .iter()
                    .find(|(k, _)| k.get_ref() == "command")
                    .map_or(value.span(), |(_, v)| v.span()),
                _ => value.span(),
            },
        }),
        Ok(n) => Ok(NotifyConfig {
            command: n.command,
            timeout_ms: n
                .timeout_ms
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .clamp(100, 600_000),
        }),
        Err(e) => Err(UserNotifyError::Toml(e)),
    }
}
