//! A ToolSet in each format's own words: what a format can express (checked
//! at load and before each invocation, refused when it cannot) and its
//! translation into the CLI's flags, appended last.

use super::*;

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
    #[error(
        "ask cannot be expressed for the {format} format: its non-interactive mode has no hook for asking permission (only claude's --permission-prompt-tool); remove ask, or list the tools it may use outright"
    )]
    Ask { format: &'static str },
}

impl ToolSetError {
    /// The format that cannot express it.
    pub fn format(&self) -> &'static str {
        match self {
            ToolSetError::Writer { format, .. }
            | ToolSetError::MaxTurns { format }
            | ToolSetError::ToolList { format, .. }
            | ToolSetError::McpUnvouched { format, .. }
            | ToolSetError::Widened { format, .. }
            | ToolSetError::Ask { format } => format,
        }
    }
}

/// Tools each format's read-only translation denies (they write files).
pub(super) fn write_tools(format: StreamFormat) -> &'static [&'static str] {
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
pub(super) fn shell_tools(format: StreamFormat) -> &'static [&'static str] {
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
    if !tools.ask.is_empty() && format != StreamFormat::Claude {
        return Err(ToolSetError::Ask { format: name });
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

/// The ToolSet translation, appended last.
pub(super) fn translate(out: &mut BuiltCommand, format: StreamFormat, tools: &ToolSet) {
    let mut argv = std::mem::take(&mut out.argv);
    translate_into(&mut argv, out, format, tools);
    out.argv = argv;
}

/// opencode takes permissions from its config; `OPENCODE_CONFIG_CONTENT`
/// is applied over the user's files. Rules are matched last-wins, so the
/// catch-all comes first.
pub(super) fn opencode_permission(tools: &ToolSet) -> serde_json::Value {
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

pub(super) fn translate_into(
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
                    // A writer the operator may be asked about is not
                    // refused outright: it asks.
                    let refused: Vec<&str> = write_tools(format)
                        .iter()
                        .copied()
                        .filter(|t| !tools.may_ask(t))
                        .collect();
                    if !refused.is_empty() {
                        push("--disallowedTools");
                        push(&refused.join(","));
                    }
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
