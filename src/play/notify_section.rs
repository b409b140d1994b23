//! `[notify]`: a command run when the run needs its operator.

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
