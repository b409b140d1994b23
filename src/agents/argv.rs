//! ADR-011's argv: binary, subcommand, the prompt (or the stdin sentinel),
//! `--model M`, the selected flag profile, the ToolSet translation. When a
//! ToolSet is in effect, profile flags in the domain it manages are
//! dropped with a warning: clap-based CLIs reject repeated singleton flags,
//! and bypass flags cannot be neutralised by later ones.

use super::def::{AgentDef, Permission, PromptVia, STDIN_SENTINEL, StreamFormat, ToolSet};
use crate::vocab::Thinking;
use crate::vocab::is_valid_name;

/// Everything that shapes one invocation's command line.
#[derive(Debug, Clone, Copy)]
pub struct ArgvRequest<'a> {
    pub agent: &'a AgentDef,
    pub prompt: &'a str,
    /// Overrides the agent's model (a role profile's `model`).
    pub model: Option<&'a str>,
    pub flag_profile: Option<&'a str>,
    /// A role profile's `startup_args`: behavioural flags like a profile's.
    pub extra_args: &'a [String],
    pub thinking: Option<Thinking>,
    pub tools: Option<&'a ToolSet>,
    /// Where a prompt too long for argv is written for formats that cannot
    /// read it on stdin (the runner writes it there).
    pub prompt_file: Option<&'a std::path::Path>,
}

impl<'a> ArgvRequest<'a> {
    pub fn new(agent: &'a AgentDef, prompt: &'a str) -> Self {
        ArgvRequest {
            agent,
            prompt,
            model: None,
            flag_profile: None,
            extra_args: &[],
            thinking: None,
            tools: None,
            prompt_file: None,
        }
    }
}

/// A command ready to spawn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BuiltCommand {
    pub argv: Vec<String>,
    /// The prompt, when it goes on stdin.
    pub stdin: Option<String>,
    /// Variables the translation sets (thinking budgets, the ToolSet for
    /// JSON-lines agents).
    pub env: Vec<(String, String)>,
    pub warnings: Vec<String>,
    /// How the prompt travels: `argv`, `stdin` or `file`.
    pub prompt_passed: &'static str,
    /// Why it does not travel as configured (a prompt over the argument
    /// limit), for `command.json`.
    pub prompt_note: Option<String>,
    /// The file the prompt must be written to before the agent starts.
    pub prompt_file: Option<std::path::PathBuf>,
    /// The model the invocation runs, as far as argv names it (a role
    /// profile's, a flag profile's flag, else the agent's): what `[prices]`
    /// is looked up by.
    pub model: Option<String>,
}

/// Linux refuses one argument of 128 KiB or more (`MAX_ARG_STRLEN`, "Argument
/// list too long"); a predecessor's large result in the context is enough.
pub const ARG_LIMIT: usize = 128 * 1024;

/// How a format takes a prompt that cannot go in argv.
fn large_prompt(out: &mut BuiltCommand, format: StreamFormat, req: &ArgvRequest<'_>) {
    let size = req.prompt.len();
    let why = format!(
        "the prompt ({size} bytes) is over the {} KiB limit of one argument",
        ARG_LIMIT / 1024
    );
    match format {
        // They read the prompt from stdin when none is given.
        StreamFormat::Claude | StreamFormat::Gemini => {
            out.stdin = Some(req.prompt.to_string());
            out.prompt_passed = "stdin";
            out.prompt_note = Some(format!("{why}: it goes on stdin"));
        }
        // `-` means stdin to them.
        StreamFormat::Codex | StreamFormat::Jsonl => {
            out.argv.push(STDIN_SENTINEL.to_string());
            out.stdin = Some(req.prompt.to_string());
            out.prompt_passed = "stdin";
            out.prompt_note = Some(format!("{why}: it goes on stdin, with - in its place"));
        }
        // No documented way to read a prompt from stdin: a file they read.
        StreamFormat::Copilot | StreamFormat::Opencode | StreamFormat::Antigravity => {
            let path = req.prompt_file.map_or_else(
                || std::path::PathBuf::from("<run directory>/logs/<op>.<attempt>.prompt.md"),
                std::path::Path::to_path_buf,
            );
            out.argv.push(format!(
                "Your instructions are too long for the command line. Read the file {} and follow the instructions in it.",
                path.display()
            ));
            out.prompt_passed = "file";
            out.prompt_note = Some(format!("{why}: it was written to {}", path.display()));
            out.prompt_file = Some(path);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    #[error(
        "flag profile {0:?} is not a valid name: names match ^[A-Za-z0-9][A-Za-z0-9._-]*$ (a letter or digit first, so a name cannot be mistaken for a flag)"
    )]
    InvalidProfile(String),
    #[error("{0}")]
    ToolSet(#[from] ToolSetError),
}

/// A ToolSet a format's translation cannot express: refused, never
/// dropped silently (at load, with the play's position, and before each
/// invocation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolSetError {
    #[error(
        "permission \"read-only\" cannot be expressed for the {format} format with {tool:?} among its tools: that tool can change the workspace (read-only allows none of {denied}); remove it or use permission = \"workspace-write\""
    )]
    Writer {
        format: &'static str,
        tool: String,
        denied: String,
    },
    #[error(
        "max_turns cannot be expressed for the {format} format: only claude takes a turn limit; remove it (the {format} run ends when the model stops)"
    )]
    MaxTurns { format: &'static str },
    #[error(
        "a tool list cannot be expressed for the {format} format: it has no flag that limits tools ({limit}); remove internal and mcp"
    )]
    ToolList {
        format: &'static str,
        limit: &'static str,
    },
    #[error(
        "permission \"read-only\" cannot vouch for the MCP tool {tool:?}: nothing in its name says whether it writes; list it in mcp_read_only if it only reads, or use permission = \"workspace-write\""
    )]
    McpUnvouched { format: &'static str, tool: String },
    #[error(
        "permission \"full-access\" lets the {format} format use every tool, so the tool list ({tools}) would not limit it; remove the list, or use permission = \"workspace-write\" to keep to it"
    )]
    Widened { format: &'static str, tools: String },
}

impl ToolSetError {
    /// The format that cannot express it.
    pub fn format(&self) -> &'static str {
        match self {
            ToolSetError::Writer { format, .. }
            | ToolSetError::MaxTurns { format }
            | ToolSetError::ToolList { format, .. }
            | ToolSetError::McpUnvouched { format, .. }
            | ToolSetError::Widened { format, .. } => format,
        }
    }
}

/// Tools each format's read-only translation denies (they write files).
fn write_tools(format: StreamFormat) -> &'static [&'static str] {
    match format {
        StreamFormat::Claude => &["Edit", "MultiEdit", "Write", "NotebookEdit"],
        StreamFormat::Copilot => &["write"],
        StreamFormat::Gemini => &["write_file", "replace"],
        StreamFormat::Opencode => &["edit", "write", "patch"],
        StreamFormat::Codex | StreamFormat::Antigravity | StreamFormat::Jsonl => &[],
    }
}

/// Tools that run commands: through them any file can be written, so a
/// read-only ToolSet may not list them either (codex and antigravity keep
/// read-only in their sandbox, whatever runs inside it).
fn shell_tools(format: StreamFormat) -> &'static [&'static str] {
    match format {
        StreamFormat::Claude => &["Bash"],
        StreamFormat::Copilot => &["shell"],
        StreamFormat::Gemini => &["run_shell_command"],
        StreamFormat::Opencode => &["bash"],
        StreamFormat::Codex | StreamFormat::Antigravity | StreamFormat::Jsonl => &[],
    }
}

/// Whether `format` can express `tools` (checked at load and before each
/// invocation): every field is carried by the translation or refused.
pub fn check_toolset(format: StreamFormat, tools: &ToolSet) -> Result<(), ToolSetError> {
    let name = format.as_str();
    let listed: Vec<&String> = tools.internal.iter().chain(&tools.mcp).collect();
    // claude gets --max-turns; a JSON-lines program PLAYDECK_MAX_TURNS.
    if tools.max_turns.is_some() && !matches!(format, StreamFormat::Claude | StreamFormat::Jsonl) {
        return Err(ToolSetError::MaxTurns { format: name });
    }
    if !listed.is_empty() {
        match format {
            StreamFormat::Codex => {
                return Err(ToolSetError::ToolList {
                    format: name,
                    limit: "its sandbox, set by permission, is what limits it",
                });
            }
            StreamFormat::Antigravity => {
                return Err(ToolSetError::ToolList {
                    format: name,
                    limit: "permission is all it is given",
                });
            }
            // Full access is every tool: claude's bypassPermissions,
            // gemini's yolo, copilot's allow-all, opencode's allow.
            StreamFormat::Copilot
            | StreamFormat::Opencode
            | StreamFormat::Claude
            | StreamFormat::Gemini
                if tools.permission == Permission::FullAccess =>
            {
                let tools = listed
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(ToolSetError::Widened {
                    format: name,
                    tools,
                });
            }
            _ => {}
        }
    }
    if tools.permission != Permission::ReadOnly {
        return Ok(());
    }
    if let Some(t) = tools.mcp.iter().find(|t| !tools.mcp_read_only.contains(t)) {
        return Err(ToolSetError::McpUnvouched {
            format: name,
            tool: t.clone(),
        });
    }
    let denied: Vec<&str> = write_tools(format)
        .iter()
        .chain(shell_tools(format))
        .copied()
        .collect();
    for t in listed {
        // copilot lowercases tool names in its translation.
        let bare = t.split('(').next().unwrap_or(t);
        if denied.iter().any(|d| {
            *d == bare || (format == StreamFormat::Copilot && d.eq_ignore_ascii_case(bare))
        }) {
            return Err(ToolSetError::Writer {
                format: name,
                tool: t.clone(),
                denied: denied.join(", "),
            });
        }
    }
    Ok(())
}

/// Checks a flag profile selection at an API boundary.
pub fn check_profile_name(name: &str) -> Result<(), ArgvError> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(ArgvError::InvalidProfile(name.to_string()))
    }
}

pub fn build(req: &ArgvRequest<'_>) -> Result<BuiltCommand, ArgvError> {
    let agent = req.agent;
    let mut out = BuiltCommand {
        argv: vec![agent.binary.clone()],
        ..BuiltCommand::default()
    };
    if !agent.subcommand.is_empty() {
        out.argv.push(agent.subcommand.clone());
    }
    out.prompt_passed = "argv";
    match agent.prompt_via {
        PromptVia::Argv if req.prompt.len() >= ARG_LIMIT => {
            large_prompt(&mut out, agent.stream_format, req);
        }
        // A prompt that starts with '-' would be read as a flag; a leading
        // space keeps it a positional argument and means nothing to a model.
        PromptVia::Argv if req.prompt.starts_with('-') => out.argv.push(format!(" {}", req.prompt)),
        PromptVia::Argv => out.argv.push(req.prompt.to_string()),
        PromptVia::Stdin => {
            out.argv.push(STDIN_SENTINEL.to_string());
            out.stdin = Some(req.prompt.to_string());
            out.prompt_passed = "stdin";
        }
    }
    let format = agent.stream_format;
    if let Some(tools) = req.tools {
        check_toolset(format, tools)?;
    }
    let model_at = out.argv.len();

    let mut behavioural: Vec<String> = Vec::new();
    if let Some(p) = req.flag_profile {
        check_profile_name(p)?;
        match agent.flags.get(p) {
            Some(flags) => behavioural.extend(flags.iter().cloned()),
            None => out.warnings.push(format!(
                "agent {:?}: no flags for profile '{p}' (profiles it defines: {})",
                agent.name,
                names_or_none(&agent.profile_names())
            )),
        }
    }
    behavioural.extend(req.extra_args.iter().cloned());

    // One model and one thinking level: a role profile's typed setting
    // wins over a flag profile's flag, which wins over the agent's model.
    let (kept, model_flags) = split_flags(&model_flags(format), &behavioural);
    let model = match (req.model, model_flags.is_empty()) {
        (Some(m), _) => {
            for group in &model_flags {
                out.warnings.push(format!(
                    "agent {:?}: dropped {} from its flags: the role profile's model {m:?} wins",
                    agent.name,
                    group.join(" ")
                ));
            }
            behavioural = kept;
            Some(m)
        }
        // The flag profile chose the model; the agent's is only a default.
        (None, false) => {
            out.model = model_flags.last().and_then(|g| flag_value(g));
            None
        }
        (None, true) => agent.model.as_deref(),
    };
    if let Some(m) = model {
        out.model = Some(m.to_string());
        out.argv
            .splice(model_at..model_at, ["--model".to_string(), m.to_string()]);
    }
    if let Some(level) = req.thinking {
        let (kept, dropped) = split_flags(&thinking_flags(format), &behavioural);
        for group in dropped {
            out.warnings.push(format!(
                "agent {:?}: dropped {} from its flags: the role profile's thinking {:?} wins",
                agent.name,
                group.join(" "),
                level.as_str()
            ));
        }
        behavioural = kept;
    }

    if let Some(tools) = req.tools {
        let (kept, dropped) = drop_managed(format, &behavioural);
        for group in dropped {
            out.warnings.push(format!(
                "agent {:?}: dropped {} from its flags: the ToolSet manages it for the {} format",
                agent.name,
                group.join(" "),
                format.as_str()
            ));
        }
        behavioural = kept;
        out.argv.extend(behavioural);
        push_thinking(&mut out, format, req.thinking);
        translate(&mut out, format, tools);
    } else {
        out.argv.extend(behavioural);
        push_thinking(&mut out, format, req.thinking);
    }
    Ok(out)
}

fn names_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// How each format takes a provider-neutral thinking level; `None` for
/// formats without a control (validation refuses those pairings).
pub fn thinking_control(format: StreamFormat) -> Option<&'static str> {
    match format {
        StreamFormat::Claude => Some("MAX_THINKING_TOKENS in the environment"),
        StreamFormat::Codex => Some("-c model_reasoning_effort=<level>"),
        StreamFormat::Jsonl => Some("PLAYDECK_THINKING in the environment"),
        StreamFormat::Opencode
        | StreamFormat::Gemini
        | StreamFormat::Antigravity
        | StreamFormat::Copilot => None,
    }
}

fn push_thinking(out: &mut BuiltCommand, format: StreamFormat, thinking: Option<Thinking>) {
    let Some(level) = thinking else {
        return;
    };
    match format {
        StreamFormat::Claude => {
            let budget = match level {
                Thinking::Low => "4000",
                Thinking::Medium => "10000",
                Thinking::High => "31999",
            };
            out.env.push(("MAX_THINKING_TOKENS".into(), budget.into()));
        }
        StreamFormat::Codex => {
            out.argv.push("-c".into());
            out.argv
                .push(format!("model_reasoning_effort={}", level.as_str()));
        }
        StreamFormat::Jsonl => out
            .env
            .push(("PLAYDECK_THINKING".into(), level.as_str().into())),
        // Refused at load; nothing to translate.
        StreamFormat::Opencode
        | StreamFormat::Gemini
        | StreamFormat::Antigravity
        | StreamFormat::Copilot => {}
    }
}

/// The ToolSet translation, appended last.
fn translate(out: &mut BuiltCommand, format: StreamFormat, tools: &ToolSet) {
    let mut argv = std::mem::take(&mut out.argv);
    translate_into(&mut argv, out, format, tools);
    out.argv = argv;
}

/// opencode takes permissions from its config; `OPENCODE_CONFIG_CONTENT`
/// is applied over the user's files. Rules are matched last-wins, so the
/// catch-all comes first.
fn opencode_permission(tools: &ToolSet) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    if tools.permission == Permission::FullAccess {
        return json!({ "permission": "allow" });
    }
    let mut rules = Map::new();
    let listed: Vec<&String> = tools.internal.iter().chain(&tools.mcp).collect();
    if !listed.is_empty() {
        rules.insert("*".into(), json!("deny"));
    }
    // A list limits the shell too: `bash` runs only when it is listed.
    let shell = listed.is_empty() || listed.iter().any(|t| t.eq_ignore_ascii_case("bash"));
    let (edit, bash) = match tools.permission {
        Permission::ReadOnly => ("deny", "deny"),
        _ if !shell => ("allow", "deny"),
        _ => ("allow", "allow"),
    };
    rules.insert("edit".into(), json!(edit));
    rules.insert("bash".into(), json!(bash));
    rules.insert("external_directory".into(), json!("deny"));
    for t in listed {
        rules.insert(t.clone(), json!("allow"));
    }
    json!({ "permission": Value::Object(rules) })
}

fn translate_into(
    argv: &mut Vec<String>,
    out: &mut BuiltCommand,
    format: StreamFormat,
    tools: &ToolSet,
) {
    let mut push = |s: &str| argv.push(s.to_string());
    match format {
        StreamFormat::Claude => {
            let allowed: Vec<&str> = tools
                .internal
                .iter()
                .chain(&tools.mcp)
                .map(String::as_str)
                .collect();
            push("--allowedTools");
            push(&allowed.join(","));
            push("--max-turns");
            push(&tools.turns().to_string());
            match tools.permission {
                // In print mode nothing can be approved: tools outside
                // --allowedTools are refused, and the writers explicitly.
                Permission::ReadOnly => {
                    push("--permission-mode");
                    push("default");
                    push("--disallowedTools");
                    push(&write_tools(format).join(","));
                }
                Permission::WorkspaceWrite => {
                    push("--permission-mode");
                    push("acceptEdits");
                }
                Permission::FullAccess => {
                    push("--permission-mode");
                    push("bypassPermissions");
                }
            }
            push("--verbose");
            push("--output-format");
            push("stream-json");
            push("--include-partial-messages");
        }
        StreamFormat::Codex => {
            push("-s");
            // codex spells full access `danger-full-access`; anything else
            // is an argument error.
            push(match tools.permission {
                Permission::ReadOnly => "read-only",
                Permission::WorkspaceWrite => "workspace-write",
                Permission::FullAccess => "danger-full-access",
            });
            push("--json");
            // `codex exec` refuses a directory that is not a git checkout
            // (the play's own directory often is not); the sandbox above is
            // what keeps it in bounds.
            push("--skip-git-repo-check");
        }
        StreamFormat::Antigravity => {
            match tools.permission {
                Permission::ReadOnly => {}
                Permission::WorkspaceWrite => {
                    push("--mode");
                    push("accept-edits");
                }
                Permission::FullAccess => push("--dangerously-skip-permissions"),
            }
            push("--output-format");
            push("stream-json");
        }
        StreamFormat::Copilot => {
            if tools.permission == Permission::FullAccess {
                push("--allow-all-tools");
                push("--allow-all-paths");
            } else {
                for tool in tools.internal.iter().chain(&tools.mcp) {
                    push("--allow-tool");
                    push(&tool.to_lowercase());
                }
                // A deny wins over any allow in copilot.
                push(match tools.permission {
                    Permission::ReadOnly => "--deny-tool",
                    _ => "--allow-tool",
                });
                push("write");
            }
            push("--output-format");
            push("json");
        }
        StreamFormat::Gemini => {
            push("--approval-mode");
            push(match tools.permission {
                Permission::ReadOnly => "default",
                Permission::WorkspaceWrite => "auto_edit",
                Permission::FullAccess => "yolo",
            });
            for tool in tools.internal.iter().chain(&tools.mcp) {
                push("--allowed-tools");
                push(tool);
            }
            push("--output-format");
            push("stream-json");
            // Headless gemini (0.61 on) exits 55 in a folder it was never
            // told to trust; the operator chose this workspace, and the
            // approval mode above is what bounds the agent in it.
            out.env
                .push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
        }
        StreamFormat::Opencode => {
            push("--format");
            push("json");
            out.env.push((
                "OPENCODE_CONFIG_CONTENT".into(),
                opencode_permission(tools).to_string(),
            ));
        }
        StreamFormat::Jsonl => {
            // A generic JSON-lines program has no known flags; the ToolSet
            // travels in the environment, where it can do no harm.
            let all: Vec<&str> = tools
                .internal
                .iter()
                .chain(&tools.mcp)
                .map(String::as_str)
                .collect();
            out.env.push((
                "PLAYDECK_PERMISSION".into(),
                tools.permission.as_str().into(),
            ));
            out.env
                .push(("PLAYDECK_MAX_TURNS".into(), tools.turns().to_string()));
            out.env.push(("PLAYDECK_TOOLS".into(), all.join(",")));
        }
    }
}

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

const CODEX_CONFIG_KEYS: &[&str] = &["sandbox_mode", "approval_policy", "sandbox_workspace_write"];

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

const CODEX_MODEL_KEYS: &[&str] = &["model"];
const CODEX_THINKING_KEYS: &[&str] = &["model_reasoning_effort"];

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
fn flag_value(group: &[String]) -> Option<String> {
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
fn is_managed_key(keys: &[&str], kv: &str) -> bool {
    let key = kv.split_once('=').map_or(kv, |(k, _)| k).trim();
    keys.iter().any(|k| {
        key == *k
            || key
                .strip_prefix(k)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// The arity of a managed flag `arg` names, and its value when attached.
fn match_flag<'a>(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn echo_claude() -> AgentDef {
        let mut a = AgentDef::new("echo", "echo", StreamFormat::Claude);
        a.subcommand = "-p".into();
        a.model = Some("test-model".into());
        a.flags.insert("plan".into(), s(&["--verbose"]));
        a
    }

    fn argv_of(a: &AgentDef, profile: Option<&str>, tools: Option<&ToolSet>) -> BuiltCommand {
        let mut req = ArgvRequest::new(a, "write tests");
        req.flag_profile = profile;
        req.tools = tools;
        build(&req).unwrap()
    }

    #[test]
    fn issue_examples() {
        let a = echo_claude();
        let b = argv_of(&a, Some("plan"), None);
        assert_eq!(
            b.argv,
            s(&[
                "echo",
                "-p",
                "write tests",
                "--model",
                "test-model",
                "--verbose"
            ])
        );
        assert!(b.warnings.is_empty());

        let b = argv_of(&a, None, None);
        assert_eq!(
            b.argv,
            s(&["echo", "-p", "write tests", "--model", "test-model"])
        );

        let b = argv_of(&a, Some("research"), None);
        assert_eq!(
            b.argv,
            s(&["echo", "-p", "write tests", "--model", "test-model"])
        );
        assert_eq!(b.warnings.len(), 1);
        assert!(b.warnings[0].contains("no flags for profile 'research'"));
        assert!(b.warnings[0].contains("\"echo\""), "names the agent");
        assert!(b.warnings[0].contains("plan"), "lists what exists");

        let mut codex = echo_claude();
        codex.stream_format = StreamFormat::Codex;
        codex
            .flags
            .insert("plan".into(), s(&["-s", "read-only", "--json", "--think"]));
        let tools = ToolSet {
            permission: Permission::WorkspaceWrite,
            ..ToolSet::default()
        };
        let b = argv_of(&codex, Some("plan"), Some(&tools));
        assert_eq!(
            b.argv,
            s(&[
                "echo",
                "-p",
                "write tests",
                "--model",
                "test-model",
                "--think",
                "-s",
                "workspace-write",
                "--json",
                "--skip-git-repo-check"
            ])
        );
        assert_eq!(b.warnings.len(), 2, "{:?}", b.warnings);
        assert!(b.warnings[0].contains("-s read-only"));
        assert!(b.warnings[1].contains("--json"));
    }

    #[test]
    fn order_subcommand_and_stdin() {
        let mut a = AgentDef::new("x", "bin", StreamFormat::Jsonl);
        a.flags.insert("p".into(), s(&["--fast"]));
        let mut req = ArgvRequest::new(&a, "do it");
        req.flag_profile = Some("p");
        req.model = Some("m2");
        let b = build(&req).unwrap();
        assert_eq!(b.argv, s(&["bin", "do it", "--model", "m2", "--fast"]));
        assert_eq!(b.stdin, None);

        a.prompt_via = PromptVia::Stdin;
        a.subcommand = "run".into();
        a.model = Some("m1".into());
        let mut req = ArgvRequest::new(&a, "do it");
        req.flag_profile = Some("p");
        let b = build(&req).unwrap();
        assert_eq!(b.argv, s(&["bin", "run", "-", "--model", "m1", "--fast"]));
        assert_eq!(b.stdin.as_deref(), Some("do it"));
    }

    #[test]
    fn malformed_profile_names_are_rejected() {
        let a = echo_claude();
        for bad in ["", "--verbose", "-p", ".x", "a b", "pl/an"] {
            let mut req = ArgvRequest::new(&a, "p");
            req.flag_profile = Some(bad);
            assert_eq!(
                build(&req).unwrap_err(),
                ArgvError::InvalidProfile(bad.into())
            );
        }
    }

    #[test]
    fn every_toolset_field_is_carried_or_refused() {
        use Permission::*;
        let set = |internal: &[&str], permission, max_turns| ToolSet {
            internal: s(internal),
            mcp: vec![],
            mcp_read_only: vec![],
            permission,
            max_turns,
        };
        let refused = |f: StreamFormat, t: &ToolSet| {
            let a = AgentDef::new("a", "a", f);
            let mut req = ArgvRequest::new(&a, "go");
            req.tools = Some(t);
            match build(&req) {
                Err(ArgvError::ToolSet(e)) => Some(e.to_string()),
                Err(e) => panic!("{e}"),
                Ok(_) => None,
            }
        };
        // max_turns: claude takes it (a JSON-lines program in its env).
        for f in [StreamFormat::Claude, StreamFormat::Jsonl] {
            assert_eq!(refused(f, &set(&[], WorkspaceWrite, Some(5))), None);
        }
        for f in [
            StreamFormat::Codex,
            StreamFormat::Copilot,
            StreamFormat::Gemini,
            StreamFormat::Opencode,
            StreamFormat::Antigravity,
        ] {
            let e = refused(f, &set(&[], WorkspaceWrite, Some(5))).expect("refused");
            assert!(e.contains("max_turns cannot be expressed"), "{e}");
            assert_eq!(refused(f, &set(&[], WorkspaceWrite, None)), None);
        }
        // A tool list where there is no flag to carry it.
        for f in [StreamFormat::Codex, StreamFormat::Antigravity] {
            let e = refused(f, &set(&["Read"], ReadOnly, None)).expect("refused");
            assert!(e.contains("a tool list cannot be expressed"), "{e}");
        }
        // Full access that would widen the list to every tool.
        for f in [
            StreamFormat::Copilot,
            StreamFormat::Opencode,
            StreamFormat::Claude,
            StreamFormat::Gemini,
        ] {
            let e = refused(f, &set(&["read"], FullAccess, None)).expect("refused");
            assert!(e.contains("would not limit it"), "{e}");
            assert_eq!(refused(f, &set(&[], FullAccess, None)), None);
        }
        // Read-only holds for every tool listed: a shell writes too.
        for (f, shell) in [
            (StreamFormat::Claude, "Bash"),
            (StreamFormat::Copilot, "shell"),
            (StreamFormat::Gemini, "run_shell_command"),
            (StreamFormat::Opencode, "bash"),
        ] {
            let e = refused(f, &set(&["Read", shell], ReadOnly, None)).expect("refused");
            assert!(e.contains(&format!("{shell:?} among its tools")), "{e}");
            assert_eq!(
                refused(f, &set(&["Read", shell], WorkspaceWrite, None)),
                None
            );
        }
    }

    #[test]
    fn translation_per_format_and_permission() {
        use Permission::*;
        let tools = |permission| ToolSet {
            internal: s(&["Read", "Bash"]),
            mcp: s(&["mcp__gh__issues"]),
            mcp_read_only: s(&["mcp__gh__issues"]),
            permission,
            max_turns: Some(7),
        };
        // The translation itself, for every field (which of these a
        // format refuses is `every_toolset_field_is_carried_or_refused`).
        let tail = |f: StreamFormat, p: Permission| {
            let mut out = BuiltCommand::default();
            translate(&mut out, f, &tools(p));
            (out.argv, out.env)
        };
        let claude = |mode: &[&str]| {
            let mut v = s(&[
                "--allowedTools",
                "Read,Bash,mcp__gh__issues",
                "--max-turns",
                "7",
            ]);
            v.extend(s(mode));
            v.extend(s(&[
                "--verbose",
                "--output-format",
                "stream-json",
                "--include-partial-messages",
            ]));
            v
        };
        assert_eq!(
            tail(StreamFormat::Claude, ReadOnly).0,
            claude(&[
                "--permission-mode",
                "default",
                "--disallowedTools",
                "Edit,MultiEdit,Write,NotebookEdit"
            ])
        );
        assert_eq!(
            tail(StreamFormat::Claude, WorkspaceWrite).0,
            claude(&["--permission-mode", "acceptEdits"])
        );
        assert_eq!(
            tail(StreamFormat::Claude, FullAccess).0,
            claude(&["--permission-mode", "bypassPermissions"])
        );
        for (p, sandbox) in [
            (ReadOnly, "read-only"),
            (WorkspaceWrite, "workspace-write"),
            (FullAccess, "danger-full-access"),
        ] {
            assert_eq!(
                tail(StreamFormat::Codex, p).0,
                s(&["-s", sandbox, "--json", "--skip-git-repo-check"])
            );
        }
        let allow = s(&[
            "--allow-tool",
            "read",
            "--allow-tool",
            "bash",
            "--allow-tool",
            "mcp__gh__issues",
        ]);
        let copilot = |last: &[&str]| {
            let mut v = allow.clone();
            v.extend(s(last));
            v.extend(s(&["--output-format", "json"]));
            v
        };
        assert_eq!(
            tail(StreamFormat::Copilot, ReadOnly).0,
            copilot(&["--deny-tool", "write"])
        );
        assert_eq!(
            tail(StreamFormat::Copilot, WorkspaceWrite).0,
            copilot(&["--allow-tool", "write"])
        );
        assert_eq!(
            tail(StreamFormat::Copilot, FullAccess).0,
            s(&[
                "--allow-all-tools",
                "--allow-all-paths",
                "--output-format",
                "json"
            ])
        );
        for (p, mode) in [
            (ReadOnly, "default"),
            (WorkspaceWrite, "auto_edit"),
            (FullAccess, "yolo"),
        ] {
            assert_eq!(
                tail(StreamFormat::Gemini, p).0,
                s(&[
                    "--approval-mode",
                    mode,
                    "--allowed-tools",
                    "Read",
                    "--allowed-tools",
                    "Bash",
                    "--allowed-tools",
                    "mcp__gh__issues",
                    "--output-format",
                    "stream-json"
                ])
            );
        }
        let opencode = |p| {
            let (argv, env) = tail(StreamFormat::Opencode, p);
            assert_eq!(argv, s(&["--format", "json"]));
            assert_eq!(env.len(), 1);
            assert_eq!(env[0].0, "OPENCODE_CONFIG_CONTENT");
            serde_json::from_str::<serde_json::Value>(&env[0].1).unwrap()
        };
        assert_eq!(
            opencode(ReadOnly).to_string(),
            r#"{"permission":{"*":"deny","edit":"deny","bash":"deny","external_directory":"deny","Read":"allow","Bash":"allow","mcp__gh__issues":"allow"}}"#
        );
        assert_eq!(opencode(WorkspaceWrite)["permission"]["edit"], "allow");
        // A list that leaves the shell out keeps it out (issue 43).
        let no_shell = ToolSet {
            internal: vec!["read".into(), "edit".into()],
            mcp: vec![],
            mcp_read_only: vec![],
            permission: WorkspaceWrite,
            max_turns: None,
        };
        let p = opencode_permission(&no_shell);
        assert_eq!(
            (&p["permission"]["bash"], &p["permission"]["edit"]),
            (&serde_json::json!("deny"), &serde_json::json!("allow")),
            "{p}"
        );
        assert_eq!(
            opencode(FullAccess).to_string(),
            r#"{"permission":"allow"}"#
        );
        assert_eq!(
            tail(StreamFormat::Antigravity, FullAccess).0,
            s(&[
                "--dangerously-skip-permissions",
                "--output-format",
                "stream-json"
            ])
        );
        assert_eq!(
            tail(StreamFormat::Antigravity, ReadOnly).0,
            s(&["--output-format", "stream-json"])
        );
        assert_eq!(
            tail(StreamFormat::Antigravity, WorkspaceWrite).0,
            s(&["--mode", "accept-edits", "--output-format", "stream-json"])
        );
        let (argv, env) = tail(StreamFormat::Jsonl, FullAccess);
        assert!(argv.is_empty());
        assert!(env.contains(&("PLAYDECK_PERMISSION".into(), "full-access".into())));
        assert!(env.contains(&("PLAYDECK_TOOLS".into(), "Read,Bash,mcp__gh__issues".into())));
        // Every permission gives a different command line where the format
        // has a flag for it.
        for f in [
            StreamFormat::Claude,
            StreamFormat::Codex,
            StreamFormat::Copilot,
            StreamFormat::Gemini,
            StreamFormat::Opencode,
            StreamFormat::Antigravity,
        ] {
            let all: std::collections::HashSet<_> = [ReadOnly, WorkspaceWrite, FullAccess]
                .into_iter()
                .map(|p| tail(f, p))
                .collect::<Vec<_>>()
                .into_iter()
                .map(|(a, e)| format!("{a:?}{e:?}"))
                .collect();
            assert_eq!(all.len(), 3, "{f:?}");
        }
    }

    #[test]
    fn a_read_only_toolset_with_a_writing_tool_is_refused() {
        for (f, tool) in [
            (StreamFormat::Claude, "Edit"),
            (StreamFormat::Copilot, "Write"),
            (StreamFormat::Gemini, "write_file"),
            (StreamFormat::Opencode, "edit"),
        ] {
            let a = AgentDef::new("a", "a", f);
            let t = ToolSet {
                internal: s(&["Read", tool]),
                ..ToolSet::default()
            };
            let mut req = ArgvRequest::new(&a, "p");
            req.tools = Some(&t);
            let e = build(&req).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{tool:?} among its tools")) && e.contains("workspace-write"),
                "{e}"
            );
            let ww = ToolSet {
                permission: Permission::WorkspaceWrite,
                ..t.clone()
            };
            req.tools = Some(&ww);
            assert!(build(&req).is_ok());
        }
    }

    #[test]
    fn the_model_a_flag_sets_is_read_in_every_form() {
        for (args, want) in [
            (&["--model", "m1"][..], "m1"),
            (&["--model=m2"], "m2"),
            (&["-mm3"], "m3"),
            (&["-m", "m4"], "m4"),
            (&["-c", "model=\"m5\""], "m5"),
            (&["--config=model=m6"], "m6"),
        ] {
            let mut cx = AgentDef::new("cx", "codex", StreamFormat::Codex);
            cx.model = Some("agent-model".into());
            cx.flags.insert("p".into(), s(args));
            let mut req = ArgvRequest::new(&cx, "p");
            req.flag_profile = Some("p");
            assert_eq!(
                build(&req).unwrap().model.as_deref(),
                Some(want),
                "{args:?}"
            );
            req.flag_profile = None;
            assert_eq!(build(&req).unwrap().model.as_deref(), Some("agent-model"));
        }
    }

    #[test]
    fn one_model_and_one_thinking_level_win() {
        let mut cx = AgentDef::new("cx", "codex", StreamFormat::Codex);
        cx.model = Some("agent-model".into());
        cx.flags.insert(
            "deep".into(),
            s(&[
                "-c",
                "model_reasoning_effort=high",
                "--model",
                "flag-model",
                "--search",
            ]),
        );
        // The flag profile's model replaces the agent's default.
        let mut req = ArgvRequest::new(&cx, "p");
        req.flag_profile = Some("deep");
        let b = build(&req).unwrap();
        assert_eq!(
            b.argv[2..],
            s(&[
                "-c",
                "model_reasoning_effort=high",
                "--model",
                "flag-model",
                "--search"
            ])
        );
        assert!(b.warnings.is_empty());
        assert_eq!(
            b.model.as_deref(),
            Some("flag-model"),
            "what [prices] is read by"
        );
        // A role profile's model and thinking win over the flag profile's.
        req.model = Some("profile-model");
        req.thinking = Some(Thinking::Low);
        let b = build(&req).unwrap();
        assert_eq!(b.model.as_deref(), Some("profile-model"));
        assert_eq!(
            b.argv[2..],
            s(&[
                "--model",
                "profile-model",
                "--search",
                "-c",
                "model_reasoning_effort=low"
            ])
        );
        assert_eq!(b.warnings.len(), 2, "{:?}", b.warnings);
        assert!(b.warnings[0].contains("dropped --model flag-model"));
        assert!(b.warnings[1].contains("dropped -c model_reasoning_effort=high"));
    }

    #[test]
    fn a_prompt_over_the_argument_limit_goes_on_stdin_or_in_a_file() {
        let big = "x".repeat(ARG_LIMIT);
        let file = std::path::Path::new("/run/logs/op.1.prompt.md");
        let mut cl = AgentDef::new("a", "claude", StreamFormat::Claude);
        cl.subcommand = "-p".into();
        let mut req = ArgvRequest::new(&cl, &big);
        req.prompt_file = Some(file);
        let b = build(&req).unwrap();
        assert_eq!(b.argv, s(&["claude", "-p"]));
        assert_eq!(b.stdin.as_deref(), Some(big.as_str()));
        assert_eq!(b.prompt_passed, "stdin");
        assert!(b.prompt_note.unwrap().contains("131072 bytes"));
        let cx = AgentDef::new("a", "codex", StreamFormat::Codex);
        let b = build(&ArgvRequest::new(&cx, &big)).unwrap();
        assert_eq!((b.argv[1].as_str(), b.prompt_passed), ("-", "stdin"));
        let cp = AgentDef::new("a", "copilot", StreamFormat::Copilot);
        let mut req = ArgvRequest::new(&cp, &big);
        req.prompt_file = Some(file);
        let b = build(&req).unwrap();
        assert!(
            b.argv[1].contains("/run/logs/op.1.prompt.md"),
            "{:?}",
            b.argv
        );
        assert_eq!(b.stdin, None);
        assert_eq!(b.prompt_file.as_deref(), Some(file));
        // Just under the limit it stays an argument.
        let b = build(&ArgvRequest::new(&cx, &big[1..])).unwrap();
        assert_eq!((b.argv[1].len(), b.prompt_passed), (ARG_LIMIT - 1, "argv"));
    }

    /// (kept, dropped groups) for `args` under `format`'s ToolSet domain.
    fn split(f: StreamFormat, args: &[&str]) -> (Vec<String>, Vec<Vec<String>>) {
        drop_managed(f, &s(args))
    }

    fn groups(g: &[&[&str]]) -> Vec<Vec<String>> {
        g.iter().map(|x| s(x)).collect()
    }

    #[test]
    fn claude_managed_flags_every_form_and_arity() {
        // Rest: every value up to the next flag; `=` forms take their own.
        let (kept, dropped) = split(
            StreamFormat::Claude,
            &[
                "--tools",
                "Read",
                "Bash",
                "--think",
                "--allowedTools=Read",
                "--allowed-tools",
                "Edit",
                "--disallowedTools",
                "Bash",
                "WebFetch",
                "--disallowed-tools=Write",
                "x",
            ],
        );
        assert_eq!(kept, s(&["--think", "x"]));
        assert_eq!(
            dropped,
            groups(&[
                &["--tools", "Read", "Bash"],
                &["--allowedTools=Read"],
                &["--allowed-tools", "Edit"],
                &["--disallowedTools", "Bash", "WebFetch"],
                &["--disallowed-tools=Write"],
            ])
        );
        // One value, separated or attached with `=`.
        let (kept, dropped) = split(
            StreamFormat::Claude,
            &[
                "--max-turns",
                "3",
                "--output-format=json",
                "--permission-mode",
                "plan",
                "--permission-prompt-tool=mcp__x",
                "--effort=high",
            ],
        );
        assert_eq!(kept, s(&["--effort=high"]));
        assert_eq!(
            dropped,
            groups(&[
                &["--max-turns", "3"],
                &["--output-format=json"],
                &["--permission-mode", "plan"],
                &["--permission-prompt-tool=mcp__x"],
            ])
        );
        // No value: what follows stays.
        let (kept, dropped) = split(
            StreamFormat::Claude,
            &[
                "--verbose",
                "keep",
                "--include-partial-messages",
                "--dangerously-skip-permissions",
                "--allow-dangerously-skip-permissions",
                "--json=x",
            ],
        );
        assert_eq!(kept, s(&["keep", "--json=x"]));
        assert_eq!(
            dropped,
            groups(&[
                &["--verbose"],
                &["--include-partial-messages"],
                &["--dangerously-skip-permissions"],
                &["--allow-dangerously-skip-permissions"],
            ])
        );
    }

    #[test]
    fn codex_managed_flags_every_form_and_arity() {
        let (kept, dropped) = split(
            StreamFormat::Codex,
            &[
                "-sread-only",
                "--sandbox",
                "workspace-write",
                "-anever",
                "--ask-for-approval=never",
                "-a",
                "on-request",
                "--think",
                "--json",
                "--full-auto",
                "--yolo",
                "--dangerously-bypass-approvals-and-sandbox",
            ],
        );
        assert_eq!(kept, s(&["--think"]));
        assert_eq!(
            dropped,
            groups(&[
                &["-sread-only"],
                &["--sandbox", "workspace-write"],
                &["-anever"],
                &["--ask-for-approval=never"],
                &["-a", "on-request"],
                &["--json"],
                &["--full-auto"],
                &["--yolo"],
                &["--dangerously-bypass-approvals-and-sandbox"],
            ])
        );
        // Config overrides: only the sandbox and approval keys, in every
        // spelling, dotted fields included.
        let (kept, dropped) = split(
            StreamFormat::Codex,
            &[
                "-c",
                "sandbox_mode=danger-full-access",
                "-c",
                "model_reasoning_effort=high",
                "--config=approval_policy=never",
                "-c=sandbox_mode=danger-full-access",
                "-csandbox_mode=x",
                "--config",
                "sandbox_workspace_write.network_access=true",
                "-c",
                "sandbox_modes_extra=1",
            ],
        );
        assert_eq!(
            kept,
            s(&[
                "-c",
                "model_reasoning_effort=high",
                "-c",
                "sandbox_modes_extra=1"
            ])
        );
        assert_eq!(
            dropped,
            groups(&[
                &["-c", "sandbox_mode=danger-full-access"],
                &["--config=approval_policy=never"],
                &["-c=sandbox_mode=danger-full-access"],
                &["-csandbox_mode=x"],
                &["--config", "sandbox_workspace_write.network_access=true"],
            ])
        );
    }

    #[test]
    fn other_formats_managed_flags() {
        let (kept, dropped) = split(
            StreamFormat::Opencode,
            &["-s", "x", "--format=json", "--format", "text"],
        );
        assert_eq!(kept, s(&["-s", "x"]));
        assert_eq!(
            dropped,
            groups(&[&["--format=json"], &["--format", "text"]])
        );
        let (kept, dropped) = split(
            StreamFormat::Copilot,
            &[
                "--allow-all-tools",
                "--deny-tool",
                "shell",
                "--allow-tool=read",
                "--allow-all-paths",
                "--yolo",
                "--x",
            ],
        );
        assert_eq!(kept, s(&["--x"]));
        assert_eq!(
            dropped,
            groups(&[
                &["--allow-all-tools"],
                &["--deny-tool", "shell"],
                &["--allow-tool=read"],
                &["--allow-all-paths"],
                &["--yolo"],
            ])
        );
        let (kept, dropped) = split(
            StreamFormat::Antigravity,
            &[
                "--mode",
                "plan",
                "--yolo",
                "--approval-mode=auto",
                "--output-format",
                "text",
                "--dangerously-skip-permissions",
                "--keep",
            ],
        );
        assert_eq!(kept, s(&["--keep"]));
        assert_eq!(
            dropped,
            groups(&[
                &["--mode", "plan"],
                &["--yolo"],
                &["--approval-mode=auto"],
                &["--output-format", "text"],
                &["--dangerously-skip-permissions"],
            ])
        );
        let (kept, dropped) = split(StreamFormat::Jsonl, &["--yolo", "-s", "x"]);
        assert_eq!((kept, dropped.len()), (s(&["--yolo", "-s", "x"]), 0));
    }

    #[test]
    fn a_prompt_that_looks_like_a_flag_stays_positional() {
        let a = AgentDef::new("a", "cli", StreamFormat::Jsonl);
        let b = build(&ArgvRequest::new(&a, "--help me")).unwrap();
        assert_eq!(b.argv, s(&["cli", " --help me"]));
    }

    #[test]
    fn without_a_toolset_profile_flags_pass_verbatim() {
        let mut a = AgentDef::new("a", "claude", StreamFormat::Claude);
        a.flags.insert(
            "yolo".into(),
            s(&["--dangerously-skip-permissions", "--max-turns", "3"]),
        );
        let b = argv_of(&a, Some("yolo"), None);
        assert_eq!(
            b.argv[2..],
            s(&["--dangerously-skip-permissions", "--max-turns", "3"])
        );
        assert!(b.warnings.is_empty());
    }

    #[test]
    fn startup_args_and_thinking() {
        let a = AgentDef::new("cx", "codex", StreamFormat::Codex);
        let extra = s(&["--search", "-s", "read-only"]);
        let tools = ToolSet::default();
        let mut req = ArgvRequest::new(&a, "p");
        req.extra_args = &extra;
        req.thinking = Some(Thinking::High);
        req.tools = Some(&tools);
        let b = build(&req).unwrap();
        assert_eq!(
            b.argv[2..],
            s(&[
                "--search",
                "-c",
                "model_reasoning_effort=high",
                "-s",
                "read-only",
                "--json",
                "--skip-git-repo-check"
            ])
        );
        let cl = AgentDef::new("cl", "claude", StreamFormat::Claude);
        let mut req = ArgvRequest::new(&cl, "p");
        req.thinking = Some(Thinking::Low);
        let b = build(&req).unwrap();
        assert_eq!(b.env, vec![("MAX_THINKING_TOKENS".into(), "4000".into())]);
    }
}
