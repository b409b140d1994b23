//! Flag groups a profile's and a role's flags are read as: the flags whose
//! domain playdeck manages (the ToolSet's, the model's, thinking's), found
//! in every form a CLI accepts them (attached, `=`, repeated), so what is
//! managed is dropped and what is not passes through.

use super::*;

/// How many values a managed flag takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    Zero,
    One,
    /// Every following argument up to the next flag.
    Rest,
    /// One `key=value`, managed only for these keys (`codex -c`).
    Keys(&'static [&'static str]),
}

pub(super) const CODEX_CONFIG_KEYS: &[&str] =
    &["sandbox_mode", "approval_policy", "sandbox_workspace_write"];

/// Everything the translation of a format can emit plus its known
/// permission and approval bypasses.
pub fn managed_flags(format: StreamFormat) -> &'static [(&'static str, Arity)] {
    use Arity::*;
    match format {
        StreamFormat::Claude => &[
            ("--allowedTools", Rest),
            ("--allowed-tools", Rest),
            ("--disallowedTools", Rest),
            ("--disallowed-tools", Rest),
            ("--tools", Rest),
            ("--max-turns", One),
            ("--output-format", One),
            ("--permission-mode", One),
            ("--permission-prompt-tool", One),
            ("--verbose", Zero),
            ("--include-partial-messages", Zero),
            ("--input-format", One),
            ("--replay-user-messages", Zero),
            ("--dangerously-skip-permissions", Zero),
            ("--allow-dangerously-skip-permissions", Zero),
        ],
        StreamFormat::Codex => &[
            ("-s", One),
            ("--sandbox", One),
            ("-a", One),
            ("--ask-for-approval", One),
            ("--json", Zero),
            ("--skip-git-repo-check", Zero),
            ("--full-auto", Zero),
            ("--dangerously-bypass-approvals-and-sandbox", Zero),
            ("--yolo", Zero),
            ("-c", Keys(CODEX_CONFIG_KEYS)),
            ("--config", Keys(CODEX_CONFIG_KEYS)),
        ],
        StreamFormat::Antigravity => &[
            ("--mode", One),
            ("--output-format", One),
            ("--dangerously-skip-permissions", Zero),
            ("--yolo", Zero),
            ("--approval-mode", One),
        ],
        StreamFormat::Copilot => &[
            ("--allow-tool", One),
            ("--deny-tool", One),
            ("--allow-all-tools", Zero),
            ("--allow-all-paths", Zero),
            ("--allow-all", Zero),
            ("--yolo", Zero),
            ("--output-format", One),
        ],
        StreamFormat::Gemini => &[
            ("--approval-mode", One),
            ("--yolo", Zero),
            ("-y", Zero),
            ("--allowed-tools", Rest),
            ("--output-format", One),
            ("-o", One),
        ],
        StreamFormat::Opencode => &[("--format", One), ("--auto", Zero)],
        StreamFormat::Jsonl => &[],
    }
}

pub(super) const CODEX_MODEL_KEYS: &[&str] = &["model"];
pub(super) const CODEX_THINKING_KEYS: &[&str] = &["model_reasoning_effort"];

/// Flags that choose the model, per format.
pub fn model_flags(format: StreamFormat) -> Vec<(&'static str, Arity)> {
    use Arity::*;
    match format {
        // A generic program: only the flag playdeck itself emits.
        StreamFormat::Jsonl => vec![("--model", One)],
        StreamFormat::Codex => vec![
            ("--model", One),
            ("-m", One),
            ("-c", Keys(CODEX_MODEL_KEYS)),
            ("--config", Keys(CODEX_MODEL_KEYS)),
        ],
        _ => vec![("--model", One), ("-m", One)],
    }
}

/// Flags that set a thinking or reasoning level, per format.
pub fn thinking_flags(format: StreamFormat) -> Vec<(&'static str, Arity)> {
    use Arity::*;
    let mut t = vec![
        ("--thinking", One),
        ("--effort", One),
        ("--reasoning-effort", One),
        ("--reasoning", One),
        ("--think", Zero),
    ];
    if format == StreamFormat::Codex {
        t.push(("-c", Keys(CODEX_THINKING_KEYS)));
        t.push(("--config", Keys(CODEX_THINKING_KEYS)));
    }
    t
}

/// Splits `args` into what stays and the groups (a flag with its values)
/// the ToolSet manages.
pub fn drop_managed(format: StreamFormat, args: &[String]) -> (Vec<String>, Vec<Vec<String>>) {
    split_flags(managed_flags(format), args)
}

/// The value a flag group sets: `--model m`, `--model=m`, `-mm`, codex's
/// `-c model=m` (its TOML string quotes taken off).
pub(super) fn flag_value(group: &[String]) -> Option<String> {
    let last = group.last()?;
    let v = if group.len() > 1 {
        last.as_str()
    } else {
        let a = last.trim_start_matches('-');
        match a.split_once('=') {
            Some((_, v)) => v,
            None => a.get(1..).filter(|_| !last.starts_with("--"))?,
        }
    };
    let v = v
        .strip_prefix("model=")
        .unwrap_or(v)
        .trim_matches(['"', '\'']);
    (!v.is_empty()).then(|| v.to_string())
}

/// Splits `args` into what stays and the groups (a flag with its values)
/// that `table` names. Recognises `--flag value`, `--flag=value` and
/// attached short forms (`-sread-only`).
pub fn split_flags(
    table: &[(&'static str, Arity)],
    args: &[String],
) -> (Vec<String>, Vec<Vec<String>>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let Some((arity, inline)) = match_flag(table, a) else {
            kept.push(a.clone());
            i += 1;
            continue;
        };
        let mut group = vec![a.clone()];
        i += 1;
        match arity {
            _ if inline.is_some() => {
                if let (Arity::Keys(keys), Some(v)) = (arity, inline)
                    && !is_managed_key(keys, v)
                {
                    kept.push(a.clone());
                    continue;
                }
            }
            Arity::Zero => {}
            Arity::One => {
                if let Some(v) = args.get(i).filter(|v| !v.starts_with("--")) {
                    group.push(v.clone());
                    i += 1;
                }
            }
            Arity::Rest => {
                while let Some(v) = args.get(i).filter(|v| !v.starts_with('-')) {
                    group.push(v.clone());
                    i += 1;
                }
            }
            Arity::Keys(keys) => match args.get(i) {
                Some(v) if is_managed_key(keys, v) => {
                    group.push(v.clone());
                    i += 1;
                }
                other => {
                    // Another config key: not ours.
                    kept.push(a.clone());
                    if let Some(v) = other {
                        kept.push(v.clone());
                        i += 1;
                    }
                    continue;
                }
            },
        }
        dropped.push(group);
    }
    (kept, dropped)
}

/// Whether `key=value` sets one of `keys` or a field under one
/// (`sandbox_workspace_write.network_access`).
pub(super) fn is_managed_key(keys: &[&str], kv: &str) -> bool {
    let key = kv.split_once('=').map_or(kv, |(k, _)| k).trim();
    keys.iter().any(|k| {
        key == *k
            || key
                .strip_prefix(k)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// The arity of a managed flag `arg` names, and its value when attached.
pub(super) fn match_flag<'a>(
    table: &[(&'static str, Arity)],
    arg: &'a str,
) -> Option<(Arity, Option<&'a str>)> {
    if let Some(rest) = arg.strip_prefix("--") {
        if rest.is_empty() {
            return None;
        }
        let (name, value) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (arg, None),
        };
        let (_, arity) = table.iter().find(|(f, _)| *f == name)?;
        if value.is_some() && *arity == Arity::Zero {
            // `--json=x` is not a form a zero-value flag has; still ours.
            return Some((Arity::Zero, None));
        }
        return Some((*arity, value));
    }
    if arg.starts_with('-') && arg.len() >= 2 && arg.is_char_boundary(2) {
        let (name, attached) = arg.split_at(2);
        let (_, arity) = table.iter().find(|(f, _)| *f == name)?;
        // `-c=value` is `-c value` to clap.
        let attached = attached.strip_prefix('=').unwrap_or(attached);
        let attached = (!attached.is_empty()).then_some(attached);
        if attached.is_some() && *arity == Arity::Zero {
            return None;
        }
        return Some((*arity, attached));
    }
    None
}
