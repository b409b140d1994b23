//! `[agents.<name>]` (in a play or the user's agents file) and ToolSet
//! tables (`tools = { ... }` on operations and role profiles). Every bad
//! entry is reported with its position and none is registered.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use toml::de::DeValue;

use super::diag::{Diagnostic, did_you_mean};
use super::is_valid_name;
use super::reader::{Reader, Table, Val};
use crate::agents::def::DEFAULT_STALL_TIMEOUT;
use crate::agents::{
    AgentDef, BUILTIN_AGENTS, Continue, EnvPolicy, Permission, PromptVia, StreamFormat, ToolSet,
};

const AGENT_KEYS: &[&str] = &[
    "binary",
    "subcommand",
    "model",
    "stream_format",
    "flags",
    "env_vars",
    "env_policy",
    "env_passlist",
    "prompt_via",
    "stall_timeout",
    "max_runtime",
    "kill_on_stall",
    "retry",
    "continue",
];
const TOOLS_KEYS: &[&str] = &[
    "internal",
    "mcp",
    "mcp_read_only",
    "permission",
    "max_turns",
    "ask",
    "ask_timeout",
];
/// A week: longer limits are mistakes.
const MAX_SECONDS: f64 = 7.0 * 86_400.0;

const NAME_HELP: &str = "names match ^[A-Za-z0-9][A-Za-z0-9._-]*$ (a letter or digit first, then letters, digits, '.', '_' or '-')";

/// Reads the `agents` table of `root`; relative binary paths resolve
/// against `dir` (the directory of the file being read).
pub(super) fn read(
    r: &mut Reader,
    root: &Table<'_, '_>,
    dir: &Path,
    origin: &Path,
) -> BTreeMap<String, AgentDef> {
    let mut out = BTreeMap::new();
    let Some(t) = root.table(r, "agents") else {
        return out;
    };
    for (name, span, v) in t.entries() {
        if BUILTIN_AGENTS.contains(&name) {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!("agent {name:?} is built in"),
                    "reserved name",
                )
                .help(format!(
                    "{} are built in; give your agent another name",
                    BUILTIN_AGENTS.join(" and ")
                )),
            );
            continue;
        }
        if !is_valid_name(name) {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!("agent name {name:?} is not a valid name"),
                    "invalid name",
                )
                .help(NAME_HELP),
            );
            r.broken.agents.insert(name.to_string());
            continue;
        }
        let def = r
            .table(v, &format!("[agents.{name}]"))
            .and_then(|a| read_agent(r, &a, name, dir, origin));
        match def {
            Some(def) => {
                out.insert(name.to_string(), def);
            }
            // Reported above: what names it is not reported again.
            None => {
                r.broken.agents.insert(name.to_string());
            }
        }
    }
    out
}

fn read_agent(
    r: &mut Reader,
    t: &Table<'_, '_>,
    name: &str,
    dir: &Path,
    origin: &Path,
) -> Option<AgentDef> {
    t.deny_unknown(r, AGENT_KEYS);
    let before = r.diags.len();
    let binary = t
        .require(r, "binary", "\"claude\"")
        .and_then(|_| t.string(r, "binary"));
    if let Some((b, span)) = &binary
        && b.trim().is_empty()
    {
        r.error(
            span.clone(),
            format!("`binary` of {} is empty", t.name),
            "empty",
        );
    }
    let format = t
        .require(r, "stream_format", "\"claude\"")
        .and_then(|_| t.choice(r, "stream_format", StreamFormat::ALLOWED));
    let mut def = AgentDef::new(name, "", StreamFormat::Jsonl);
    def.origin = origin.to_path_buf();
    def.subcommand = t
        .string(r, "subcommand")
        .map(|(s, _)| s)
        .unwrap_or_default();
    def.model = t.string(r, "model").map(|(s, _)| s);
    if let Some(flags) = t.table(r, "flags") {
        for (profile, span, v) in flags.entries() {
            if !is_valid_name(profile) {
                r.push(
                    Diagnostic::new(
                        span.clone(),
                        format!("flag profile {profile:?} of agent {name:?} is not a valid name"),
                        "invalid profile name",
                    )
                    .help(format!(
                        "{NAME_HELP}, so a profile cannot be mistaken for a flag"
                    )),
                );
                continue;
            }
            if let Some(args) =
                strings_of(r, v, &format!("flag profile {profile:?} of agent {name:?}"))
            {
                def.flags.insert(profile.to_string(), args);
            }
        }
    }
    if let Some(vars) = t.table(r, "env_vars") {
        for (k, span, v) in vars.entries() {
            if !is_env_name(k) {
                r.push(
                    Diagnostic::new(
                        span.clone(),
                        format!("{k:?} in env_vars of agent {name:?} is not a variable name"),
                        "invalid name",
                    )
                    .help("variable names match ^[A-Za-z_][A-Za-z0-9_]*$"),
                );
                continue;
            }
            match v.get_ref() {
                DeValue::String(s) => {
                    def.env_vars.insert(k.to_string(), s.to_string());
                }
                other => r.error(
                    v.span(),
                    format!(
                        "env_vars.{k} of agent {name:?} must be a string, found {}",
                        super::reader::type_name(other)
                    ),
                    "expected a string",
                ),
            }
        }
    }
    if let Some((p, _)) = t.choice(r, "env_policy", EnvPolicy::ALLOWED) {
        def.env_policy = EnvPolicy::parse(&p).expect("checked");
    }
    for (entry, span) in t.strings(r, "env_passlist").unwrap_or_default() {
        let stem = entry.strip_suffix('*').unwrap_or(&entry);
        if stem.is_empty() || !is_env_name(stem) {
            r.push(
                Diagnostic::new(span, format!("{entry:?} in env_passlist of agent {name:?} is not a variable name or PREFIX*"), "invalid entry")
                    .help("write a name (ANTHROPIC_API_KEY) or a prefix pattern (ANTHROPIC_*)"),
            );
        } else {
            def.env_passlist.push(entry);
        }
    }
    if let Some((p, _)) = t.choice(r, "prompt_via", PromptVia::ALLOWED) {
        def.prompt_via = PromptVia::parse(&p).expect("checked");
    }
    let seconds = |r: &mut Reader, key: &str| {
        t.number(
            r,
            key,
            |x| x > 0.0 && x <= MAX_SECONDS,
            "seconds, greater than 0 and at most 604800 (a week)",
        )
        .map(|(x, _)| Duration::from_secs_f64(x))
    };
    def.stall_timeout = seconds(r, "stall_timeout").unwrap_or(DEFAULT_STALL_TIMEOUT);
    def.max_runtime = seconds(r, "max_runtime");
    if let Some((b, _)) = t.bool(r, "kill_on_stall") {
        def.kill_on_stall = b;
    }
    def.retry = super::retry_section::read(r, t, "retry");
    if let Some((c, _)) = t.choice(r, "continue", Continue::ALLOWED) {
        def.continue_with = Continue::parse(&c).expect("checked");
    }
    if r.diags.len() > before {
        return None;
    }
    let (binary, _) = binary?;
    // A relative path means "next to this file", wherever playdeck runs.
    def.binary = if binary.contains('/') && Path::new(&binary).is_relative() {
        dir.join(&binary).display().to_string()
    } else {
        binary
    };
    def.stream_format = StreamFormat::parse(&format?.0).expect("checked");
    Some(def)
}

fn is_env_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

fn strings_of(r: &mut Reader, v: &Val<'_>, what: &str) -> Option<Vec<String>> {
    let DeValue::Array(items) = v.get_ref() else {
        r.error(
            v.span(),
            format!("{what} must be an array of strings"),
            "expected an array",
        );
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item.get_ref() {
            DeValue::String(s) => out.push(s.to_string()),
            other => {
                r.error(
                    item.span(),
                    format!(
                        "{what} must hold strings, found {}",
                        super::reader::type_name(other)
                    ),
                    "expected a string",
                );
                return None;
            }
        }
    }
    Some(out)
}

/// `tools = { internal, mcp, permission, max_turns }` under `key` of `t`.
pub(super) fn read_tools(r: &mut Reader, t: &Table<'_, '_>, key: &str) -> Option<ToolSet> {
    let tt = t.table(r, key)?;
    let tt = Table {
        t: tt.t,
        span: tt.span.clone(),
        name: format!("`{key}` of {}", t.name),
    };
    tt.deny_unknown(r, TOOLS_KEYS);
    let before = r.diags.len();
    let list = |r: &mut Reader, k: &str| -> Vec<String> {
        tt.strings(r, k)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(s, span)| {
                if s.trim().is_empty() || s.contains(',') || s.chars().any(char::is_whitespace) {
                    r.push(
                        Diagnostic::new(span, format!("tool name {s:?} in {} is not a tool name", tt.name), "invalid tool")
                            .help("one tool per entry, without spaces or commas (\"Read\", \"Bash\", \"mcp__github__issues\")"),
                    );
                    None
                } else {
                    Some(s)
                }
            })
            .collect()
    };
    let internal = list(r, "internal");
    let mcp = list(r, "mcp");
    let mcp_read_only = list(r, "mcp_read_only");
    for t in &mcp_read_only {
        if !mcp.contains(t) {
            let span = tt.key_span("mcp_read_only");
            r.push(
                Diagnostic::new(
                    span,
                    format!("mcp_read_only of {} names {t:?}, which its mcp list does not", tt.name),
                    "not an MCP tool of this list",
                )
                .help("mcp_read_only vouches for tools listed in mcp; add it there, or remove it here"),
            );
        }
    }
    let permission = tt
        .choice(r, "permission", Permission::ALLOWED)
        .and_then(|(p, _)| Permission::parse(&p))
        .unwrap_or_default();
    let max_turns = tt.int(r, "max_turns", 1, 10_000).map(|(n, _)| n as u32);
    let ask: Vec<String> = tt
        .strings(r, "ask")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(s, span)| {
            let name = s.split_once('(').map_or(s.as_str(), |(n, _)| n);
            let shaped = s == "*"
                || (!name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                    && (!s.contains('(') || s.ends_with(')')));
            if shaped {
                Some(s)
            } else {
                r.push(
                    Diagnostic::new(span, format!("{s:?} in the ask list of {} is not a tool to ask about", tt.name), "not an ask pattern")
                        .help("a tool's name (\"Bash\"), a name with what the call does (\"Bash(rm *)\", where * is any run of characters), or \"*\" for every tool"),
                );
                None
            }
        })
        .collect();
    let ask_timeout = tt.int(r, "ask_timeout", 1, 86_400).map(|(n, _)| n as u64);
    (r.diags.len() == before).then_some(ToolSet {
        internal,
        mcp,
        mcp_read_only,
        permission,
        max_turns,
        ask,
        ask_timeout,
    })
}

/// A ToolSet its agent's format cannot express, where it is written.
pub(super) fn toolset_refused(
    span: super::Span,
    e: &crate::agents::argv::ToolSetError,
) -> Diagnostic {
    Diagnostic::new(span, e.to_string(), "cannot be expressed").help(format!(
        "the ToolSet table for {} is in docs/agents.md (Real agents)",
        e.format()
    ))
}

/// A flag profile selection (`flag_profile = "plan"`) under `key`.
pub(super) fn read_flag_profile(r: &mut Reader, t: &Table<'_, '_>, key: &str) -> Option<String> {
    let (p, span) = t.string(r, key)?;
    if is_valid_name(&p) {
        return Some(p);
    }
    r.push(
        Diagnostic::new(
            span,
            format!("{key} {p:?} of {} is not a valid name", t.name),
            "invalid flag profile",
        )
        .help(format!(
            "{NAME_HELP}, so a profile cannot be mistaken for a flag"
        )),
    );
    None
}

/// The agents an operation may name: the built-ins and the defined ones.
pub(super) fn agent_names(agents: &BTreeMap<String, AgentDef>) -> Vec<&str> {
    BUILTIN_AGENTS
        .iter()
        .copied()
        .chain(agents.keys().map(String::as_str))
        .collect()
}

/// An agent name from `key` of `t`, which must be built in or defined.
pub(super) fn read_agent_ref(
    r: &mut Reader,
    t: &Table<'_, '_>,
    key: &str,
    agents: &BTreeMap<String, AgentDef>,
) -> Option<String> {
    let (name, span) = t.string(r, key)?;
    let known = agent_names(agents);
    if known.contains(&name.as_str()) {
        return Some(name);
    }
    // A definition with errors has been reported where it is written;
    // "unknown agent" here would advise defining what is defined.
    if r.broken.agents.contains(&name) {
        return None;
    }
    let message = format!("{key} of {} names unknown agent {name:?}", t.name);
    r.push(unknown_agent(span, message, &name, &known));
    None
}

/// An agent reference that names none of `known`, with the names there
/// are (and the nearest one).
pub(super) fn unknown_agent(
    span: super::Span,
    message: String,
    name: &str,
    known: &[&str],
) -> Diagnostic {
    let mut help = format!(
        "available agents: {} (define others under [agents.<name>])",
        known.join(", ")
    );
    if let Some(m) = did_you_mean(name, known.iter().copied()) {
        help = format!("did you mean {m:?}? {help}");
    }
    Diagnostic::new(span, message, "unknown agent").help(help)
}

/// What the user's agents file gives every play: agent CLIs and the
/// prices of their models.
#[derive(Debug, Clone, Default)]
pub struct UserFile {
    pub agents: BTreeMap<String, AgentDef>,
    pub prices: crate::agents::prices::Prices,
}

/// The user's agents file, `<config dir>/agents.toml`: `[agents.*]` and
/// `[prices.*]`. Absent is empty; any bad entry rejects the whole file.
pub(super) fn load_user_file() -> Result<UserFile, super::LoadError> {
    let Some(path) = crate::paths::config_dir().map(|d| d.join("agents.toml")) else {
        return Ok(UserFile::default());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(UserFile::default()),
        Err(source) => {
            return Err(super::LoadError::Io {
                path: path.display().to_string(),
                source,
            });
        }
    };
    let file = path.display().to_string();
    let fail = |items| {
        super::LoadError::Invalid(super::Diagnostics {
            file: std::sync::Arc::from(file.as_str()),
            source: std::sync::Arc::from(text.as_str()),
            items,
        })
    };
    let doc = super::reader::parse_document(&text).map_err(fail)?;
    let mut r = Reader::default();
    let root = Table {
        t: doc.get_ref(),
        span: 0..0,
        name: "the agents file".into(),
    };
    root.deny_unknown(&mut r, &["agents", "prices"]);
    let dir = path.parent().unwrap_or(Path::new("."));
    let agents = read(&mut r, &root, dir, &path);
    let prices = super::prices_section::read(&mut r, &root);
    if r.has_errors() {
        r.diags.sort_by_key(|d| d.span.start);
        return Err(fail(r.diags));
    }
    Ok(UserFile { agents, prices })
}
