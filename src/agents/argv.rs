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
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    #[error(
        "flag profile {0:?} is not a valid name: names match ^[A-Za-z0-9][A-Za-z0-9._-]*$ (a letter or digit first, so a name cannot be mistaken for a flag)"
    )]
    InvalidProfile(String),
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
    match agent.prompt_via {
        // A prompt that starts with '-' would be read as a flag; a leading
        // space keeps it a positional argument and means nothing to a model.
        PromptVia::Argv if req.prompt.starts_with('-') => out.argv.push(format!(" {}", req.prompt)),
        PromptVia::Argv => out.argv.push(req.prompt.to_string()),
        PromptVia::Stdin => {
            out.argv.push(STDIN_SENTINEL.to_string());
            out.stdin = Some(req.prompt.to_string());
        }
    }
    if let Some(m) = req.model.or(agent.model.as_deref()) {
        out.argv.push("--model".into());
        out.argv.push(m.to_string());
    }

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

    let format = agent.stream_format;
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
        StreamFormat::Opencode | StreamFormat::Antigravity | StreamFormat::Copilot => None,
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
        StreamFormat::Opencode | StreamFormat::Antigravity | StreamFormat::Copilot => {}
    }
}

/// The ToolSet translation, appended last.
fn translate(out: &mut BuiltCommand, format: StreamFormat, tools: &ToolSet) {
    let argv = &mut out.argv;
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
            push(&tools.max_turns.to_string());
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
            for tool in tools.internal.iter().chain(&tools.mcp) {
                push("--allow-tool");
                push(&tool.to_lowercase());
            }
        }
        StreamFormat::Opencode => {
            push("--format");
            push("json");
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
                .push(("PLAYDECK_MAX_TURNS".into(), tools.max_turns.to_string()));
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
            ("--yolo", Zero),
        ],
        StreamFormat::Opencode => &[("--format", One)],
        StreamFormat::Jsonl => &[],
    }
}

/// Splits `args` into what stays and the groups (a flag with its values)
/// the ToolSet manages. Recognises `--flag value`, `--flag=value` and
/// attached short forms (`-sread-only`).
pub fn drop_managed(format: StreamFormat, args: &[String]) -> (Vec<String>, Vec<Vec<String>>) {
    let table = managed_flags(format);
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
                "--json"
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
    fn translation_per_format() {
        let tools = ToolSet {
            internal: s(&["Read", "Bash"]),
            mcp: s(&["mcp__gh__issues"]),
            permission: Permission::FullAccess,
            max_turns: 7,
        };
        let tail = |f: StreamFormat| {
            let a = AgentDef::new("a", "a", f);
            let b = argv_of(&a, None, Some(&tools));
            (b.argv[2..].to_vec(), b.env)
        };
        assert_eq!(
            tail(StreamFormat::Claude).0,
            s(&[
                "--allowedTools",
                "Read,Bash,mcp__gh__issues",
                "--max-turns",
                "7",
                "--verbose",
                "--output-format",
                "stream-json",
                "--include-partial-messages"
            ])
        );
        assert_eq!(
            tail(StreamFormat::Codex).0,
            s(&["-s", "danger-full-access", "--json"])
        );
        assert_eq!(
            tail(StreamFormat::Antigravity).0,
            s(&[
                "--dangerously-skip-permissions",
                "--output-format",
                "stream-json"
            ])
        );
        assert_eq!(
            tail(StreamFormat::Copilot).0,
            s(&[
                "--allow-tool",
                "read",
                "--allow-tool",
                "bash",
                "--allow-tool",
                "mcp__gh__issues"
            ])
        );
        assert_eq!(tail(StreamFormat::Opencode).0, s(&["--format", "json"]));
        let (argv, env) = tail(StreamFormat::Jsonl);
        assert!(argv.is_empty());
        assert!(env.contains(&("PLAYDECK_PERMISSION".into(), "full-access".into())));
        assert!(env.contains(&("PLAYDECK_TOOLS".into(), "Read,Bash,mcp__gh__issues".into())));

        let read_only = ToolSet::default();
        let ag = AgentDef::new("a", "a", StreamFormat::Antigravity);
        assert_eq!(
            argv_of(&ag, None, Some(&read_only)).argv[2..],
            s(&["--output-format", "stream-json"])
        );
        let ww = ToolSet {
            permission: Permission::WorkspaceWrite,
            ..ToolSet::default()
        };
        assert_eq!(
            argv_of(&ag, None, Some(&ww)).argv[2..],
            s(&["--mode", "accept-edits", "--output-format", "stream-json"])
        );
        let cx = AgentDef::new("a", "a", StreamFormat::Codex);
        assert_eq!(
            argv_of(&cx, None, Some(&read_only)).argv[2..],
            s(&["-s", "read-only", "--json"])
        );
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
                "--json"
            ])
        );
        let cl = AgentDef::new("cl", "claude", StreamFormat::Claude);
        let mut req = ArgvRequest::new(&cl, "p");
        req.thinking = Some(Thinking::Low);
        let b = build(&req).unwrap();
        assert_eq!(b.env, vec![("MAX_THINKING_TOKENS".into(), "4000".into())]);
    }
}
