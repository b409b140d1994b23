//! ADR-011's argv: binary, subcommand, the prompt (or the stdin sentinel),
//! `--model M`, the selected flag profile, the ToolSet translation. When a
//! ToolSet is in effect, profile flags in the domain it manages are
//! dropped with a warning: clap-based CLIs reject repeated singleton flags,
//! and bypass flags cannot be neutralised by later ones.

mod flags;
mod toolset;
pub use flags::*;
pub use toolset::*;

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
    /// The CLI's session to continue (the runner decided it can).
    pub resume: Option<&'a str>,
    /// Where a ToolSet's `ask` questions go: the program that answers
    /// claude's permission prompts (playdeck itself, `ask-mcp`) and the
    /// attempt's socket it hands them to. `None` shows placeholders.
    pub ask: Option<(&'a std::path::Path, &'a std::path::Path)>,
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
            resume: None,
            ask: None,
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
    /// The CLI session it continues, when it does.
    pub continues: Option<String>,
    /// It reads its prompt, and what the operator says while it runs, as
    /// JSON user messages on stdin (claude's stream-json input): stdin
    /// stays open until every message has had its turn.
    pub live_input: bool,
    /// claude asks the operator about the calls of the ToolSet's `ask`.
    pub asks: bool,
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
    let prompt_at = out.argv.len();
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
    let pushed_prompt = out.argv.len() > prompt_at;
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
        if format == StreamFormat::Claude {
            live_input(&mut out, prompt_at, pushed_prompt, req.prompt);
            if !tools.ask.is_empty() {
                permission_prompts(&mut out, req.ask);
            }
        }
    } else {
        out.argv.extend(behavioural);
        push_thinking(&mut out, format, req.thinking);
    }
    if let Some(session) = req.resume {
        push_resume(&mut out, format, prompt_at, session);
    }
    Ok(out)
}

/// claude under a ToolSet (its output already stream-json) reads its input
/// as stream-json too: the prompt is the first user message on stdin, and
/// what the operator says while it runs follows as more (each has its turn
/// in the same process and conversation); `--replay-user-messages` echoes
/// them on stdout, so the follow view shows what it was told. Checked on
/// 2.0.28 and 2.1.332: a message written mid-turn is taken when the turn
/// ends, and closing stdin after the last `result` ends the process.
fn live_input(out: &mut BuiltCommand, prompt_at: usize, pushed: bool, prompt: &str) {
    if pushed {
        // The prompt (or the stdin sentinel) goes: stdin carries it.
        out.argv.remove(prompt_at);
    }
    out.stdin = Some(user_message(prompt));
    out.prompt_passed = "stdin";
    out.live_input = true;
    out.argv
        .extend(["--input-format", "stream-json", "--replay-user-messages"].map(String::from));
}

/// The MCP tool that answers claude's permission prompts (`mcp__<server>__<tool>`).
pub const ASK_TOOL: &str = "mcp__playdeck__ask";

/// claude asks playdeck, through an MCP server of one tool, for each call
/// a ToolSet's `ask` covers: `--permission-prompt-tool` names it and
/// `--mcp-config` starts it (`playdeck ask-mcp SOCKET`), beside the user's
/// own MCP servers.
fn permission_prompts(out: &mut BuiltCommand, ask: Option<(&std::path::Path, &std::path::Path)>) {
    let (program, socket) = match ask {
        Some((p, s)) => (p.display().to_string(), s.display().to_string()),
        None => (
            "<playdeck>".to_string(),
            "<the attempt's ask socket>".to_string(),
        ),
    };
    let config = serde_json::json!({
        "mcpServers": {"playdeck": {"command": program, "args": ["ask-mcp", socket]}}
    });
    out.argv.extend([
        "--mcp-config".to_string(),
        config.to_string(),
        "--permission-prompt-tool".to_string(),
        ASK_TOOL.to_string(),
    ]);
    out.asks = true;
}

/// One user message of claude's stream-json input, a line.
pub fn user_message(text: &str) -> String {
    let v = serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": text},
    });
    format!("{v}\n")
}

/// How each format continues a session, on the pinned versions: claude,
/// gemini (0.20 on) and copilot `--resume ID`, opencode `--session ID`,
/// codex `exec [its flags] resume ID PROMPT` (the flags before `resume`:
/// 0.47 takes them nowhere else), a jsonl program `PLAYDECK_SESSION`.
fn push_resume(out: &mut BuiltCommand, format: StreamFormat, prompt_at: usize, session: &str) {
    out.continues = Some(session.to_string());
    let pair = |flag: &str| [flag.to_string(), session.to_string()];
    match format {
        StreamFormat::Claude | StreamFormat::Gemini | StreamFormat::Copilot => {
            out.argv.extend(pair("--resume"));
        }
        StreamFormat::Opencode => out.argv.extend(pair("--session")),
        StreamFormat::Codex => {
            let prompt = out.argv.remove(prompt_at);
            out.argv
                .extend(["resume".to_string(), session.to_string(), prompt]);
        }
        StreamFormat::Jsonl => out
            .env
            .push(("PLAYDECK_SESSION".into(), session.to_string())),
        // `can_resume` says no: the runner never asks.
        StreamFormat::Antigravity => {}
    }
}

/// Whether a format can continue a session at all (gemini also needs a
/// version that knows `--resume`, which the runner asks the CLI).
pub fn can_resume(format: StreamFormat) -> bool {
    format != StreamFormat::Antigravity
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

#[cfg(test)]
mod tests;
