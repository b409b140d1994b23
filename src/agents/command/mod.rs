//! The subprocess runner: an agent CLI run from argv (never a shell), in
//! its own process group, with the environment policy applied and the
//! instance's workspace as working directory. Output streams to log files
//! and through the stream parser; stalls and `max_runtime` kill the group,
//! and so does dropping the future (cancel, quit).

mod ask;
pub mod call;
mod carry;
mod live;
mod output;
mod supervise;
pub use output::*;
use supervise::*;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::argv::{self, ArgvRequest, BuiltCommand};
use super::cause;
use super::def::{AgentDef, ToolSet};
use super::env::child_env;
use super::process::{Group, resolve_binary};
use super::stream::{Parsed, StreamParser, result_from_text};
use super::tails::Tails;
use crate::kernel::{
    ActivityState, Agent, AgentEvent, AgentFailure, AgentOutcome, BoxFuture, Invocation,
};
use crate::vocab::Thinking;

/// What a role profile adds to invocations on its instances.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileOverlay {
    pub model: Option<String>,
    pub thinking: Option<Thinking>,
    pub startup_args: Vec<String>,
    /// The flag profile for its operations (below an operation's own).
    pub flag_profile: Option<String>,
    pub tools: Option<ToolSet>,
}

/// What every command agent of a run shares.
#[derive(Debug)]
pub struct RunContext {
    pub run_id: String,
    /// The run directory, absolute: every agent process is tagged with it
    /// (`PLAYDECK_RUN_DIR`), so what agents leave behind can be found.
    pub run_dir: Option<PathBuf>,
    /// Per-operation logs go here; none for previews.
    pub log_dir: Option<PathBuf>,
    /// The working directory when no instance gives one (the play's).
    pub workspace: PathBuf,
    /// `[play] flag_profile`.
    pub flag_profile: Option<String>,
    /// Role profiles by name.
    pub profiles: HashMap<String, ProfileOverlay>,
    pub tails: Arc<Tails>,
    /// The run's speed, exported as `PLAYDECK_SPEED`: real agents ignore
    /// it, the example agent scales its pauses by it.
    pub speed: f64,
    /// `[prices]`: USD for the agents that report tokens only.
    pub prices: super::prices::Prices,
}

impl Default for RunContext {
    fn default() -> Self {
        RunContext {
            run_id: String::new(),
            run_dir: None,
            log_dir: None,
            workspace: PathBuf::from("."),
            flag_profile: None,
            profiles: HashMap::new(),
            tails: Tails::new(),
            speed: 1.0,
            prices: Default::default(),
        }
    }
}

/// An operation's own choices, carried in its params.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct AgentParams {
    #[serde(default)]
    pub flag_profile: Option<String>,
    #[serde(default)]
    pub tools: Option<ToolSet>,
    /// ADR-011's first tier: the ToolSet for the agent that runs it.
    #[serde(default)]
    pub agent_tools: std::collections::BTreeMap<String, ToolSet>,
    /// Its work waits for the operator's review before it lands.
    #[serde(default)]
    pub review: bool,
}

impl AgentParams {
    pub fn from_value(v: &Value) -> Self {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(p) = &self.flag_profile {
            m.insert("flag_profile".into(), Value::String(p.clone()));
        }
        if let Some(t) = &self.tools {
            m.insert(
                "tools".into(),
                serde_json::to_value(t).expect("a toolset serialises"),
            );
        }
        if !self.agent_tools.is_empty() {
            m.insert(
                "agent_tools".into(),
                serde_json::to_value(&self.agent_tools).expect("toolsets serialise"),
            );
        }
        if self.review {
            m.insert("review".into(), Value::Bool(true));
        }
        if m.is_empty() {
            Value::Null
        } else {
            Value::Object(m)
        }
    }
}

/// The prompt an agent gets: the instruction, then the context (the
/// predecessors' results and the flow context) when there is any.
pub fn prompt_text(instruction: &str, context: &Map<String, Value>) -> String {
    if context.is_empty() {
        return instruction.to_string();
    }
    let ctx = serde_json::to_string_pretty(context).unwrap_or_default();
    format!("{instruction}\n\n## Context\n\n```json\n{ctx}\n```\n")
}

/// Resolves what an invocation runs with: the operation's params win over
/// the role profile's overlay, which wins over the play's defaults. The
/// ToolSet (ADR-011): the operation's for this agent, then its own, then
/// the role profile's, then none.
#[allow(clippy::too_many_arguments)]
pub fn command_for(
    def: &AgentDef,
    ctx: &RunContext,
    params: &AgentParams,
    profile: Option<&str>,
    prompt: &str,
    prompt_file: Option<&Path>,
    resume: Option<&str>,
    ask: Option<(&Path, &Path)>,
) -> Result<BuiltCommand, argv::ArgvError> {
    let overlay = profile.and_then(|p| ctx.profiles.get(p));
    let flag_profile = params
        .flag_profile
        .as_deref()
        .or(overlay.and_then(|o| o.flag_profile.as_deref()))
        .or(ctx.flag_profile.as_deref());
    let tools = tools_for(def, ctx, params, profile);
    let empty = Vec::new();
    argv::build(&ArgvRequest {
        agent: def,
        prompt,
        model: overlay.and_then(|o| o.model.as_deref()),
        flag_profile,
        extra_args: overlay.map_or(&empty, |o| &o.startup_args),
        thinking: overlay.and_then(|o| o.thinking),
        tools,
        prompt_file,
        resume,
        ask,
    })
}

/// The ToolSet an invocation runs under (see [`command_for`]).
pub fn tools_for<'a>(
    def: &AgentDef,
    ctx: &'a RunContext,
    params: &'a AgentParams,
    profile: Option<&str>,
) -> Option<&'a ToolSet> {
    let overlay = profile.and_then(|p| ctx.profiles.get(p));
    params
        .agent_tools
        .get(&def.name)
        .or(params.tools.as_ref())
        .or(overlay.and_then(|o| o.tools.as_ref()))
}

/// An agent CLI from the registry.
pub struct CommandAgent {
    def: Arc<AgentDef>,
    ctx: Arc<RunContext>,
    /// Whether the CLI takes a spend limit of its own (claude 2.1 on:
    /// `--max-budget-usd`), asked of it once, the first time a budgeted
    /// attempt starts.
    spend_flag: Arc<tokio::sync::OnceCell<bool>>,
    /// Whether a gemini knows `--resume` (0.20 on), asked of its `--help`
    /// once, the first time an attempt would continue a session.
    knows_resume: Arc<tokio::sync::OnceCell<bool>>,
}

impl CommandAgent {
    pub fn new(def: Arc<AgentDef>, ctx: Arc<RunContext>) -> Self {
        CommandAgent {
            def,
            ctx,
            spend_flag: Arc::default(),
            knows_resume: Arc::default(),
        }
    }
}

impl Agent for CommandAgent {
    fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome> {
        let def = self.def.clone();
        let ctx = self.ctx.clone();
        let probes = Probes {
            spend_flag: self.spend_flag.clone(),
            knows_resume: self.knows_resume.clone(),
        };
        Box::pin(async move { run(&def, &ctx, inv, &probes).await })
    }
}

/// The version a CLI prints for `--version` (`2.1.332 (Claude Code)`):
/// its first `MAJOR.MINOR`.
fn version_of(text: &str) -> Option<(u32, u32)> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find_map(|w| {
            let mut parts = w.split('.');
            let major = parts.next()?.parse().ok()?;
            let minor = parts.next()?.parse().ok()?;
            Some((major, minor))
        })
}

/// How long `--version` may take. A node CLI on a loaded machine takes
/// seconds to start; 10 s was seen to pass on a two-core runner.
const VERSION_WITHIN: Duration = Duration::from_secs(30);

/// Runs `program ARG` in the agent's environment, for what it prints;
/// `Err(Elapsed)` when it did not answer within [`VERSION_WITHIN`].
async fn ask(
    program: &Path,
    env: &std::collections::BTreeMap<OsString, OsString>,
    arg: &str,
) -> Result<std::io::Result<std::process::Output>, tokio::time::error::Elapsed> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg(arg)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    tokio::time::timeout(VERSION_WITHIN, cmd.output()).await
}

/// Whether `program` (a claude) knows `--max-budget-usd`: 2.1 and later.
/// `Err` when it did not answer in time: no answer, so nothing is cached
/// and the next attempt asks again.
async fn takes_spend_flag(
    program: &Path,
    env: &std::collections::BTreeMap<OsString, OsString>,
) -> Result<bool, ()> {
    match ask(program, env, "--version").await {
        Err(_) => Err(()),
        // A CLI that cannot say its version is one that cannot take it.
        Ok(Err(_)) => Ok(false),
        Ok(Ok(out)) => {
            Ok(version_of(&String::from_utf8_lossy(&out.stdout)).is_some_and(|v| v >= (2, 1)))
        }
    }
}

/// What is asked of a CLI once per agent and kept.
struct Probes {
    spend_flag: Arc<tokio::sync::OnceCell<bool>>,
    knows_resume: Arc<tokio::sync::OnceCell<bool>>,
}

/// Whether `program` (a gemini) lists `--resume` in its `--help`. One that
/// does not answer in time is taken not to: its attempt starts afresh.
async fn lists_resume(
    program: &Path,
    env: &std::collections::BTreeMap<OsString, OsString>,
) -> bool {
    match ask(program, env, "--help").await {
        Ok(Ok(out)) => [&out.stdout, &out.stderr]
            .iter()
            .any(|t| String::from_utf8_lossy(t).contains("--resume")),
        _ => false,
    }
}

/// Whether the attempt continues a conversation, with the CLI's own
/// capability asked where it depends on the version.
async fn carry_for(
    def: &AgentDef,
    ctx: &RunContext,
    inv: &Invocation,
    cwd: &Path,
    probes: &Probes,
) -> carry::Carry {
    if inv.carry_on.is_none() {
        return carry::Carry::None;
    }
    let env = environment(def, ctx, inv, &BuiltCommand::default(), cwd);
    let knows = if def.stream_format == super::def::StreamFormat::Gemini {
        match resolve_binary(
            &def.binary,
            env.get(OsStr::new("PATH")).map(|p| p.as_os_str()),
        ) {
            Ok(program) => {
                *probes
                    .knows_resume
                    .get_or_init(|| lists_resume(&program, &env))
                    .await
            }
            Err(_) => false,
        }
    } else {
        true
    };
    carry::decide(def, inv, knows, &env, cwd)
}

async fn run(def: &AgentDef, ctx: &RunContext, inv: Invocation, probes: &Probes) -> AgentOutcome {
    let cwd = inv
        .workspace
        .clone()
        .unwrap_or_else(|| ctx.workspace.clone());
    if !cwd.is_dir() {
        return Err(AgentFailure::new(
            "os_error",
            format!("the working directory {} does not exist", cwd.display()),
        ));
    }
    let carry = carry_for(def, ctx, &inv, &cwd, probes).await;
    if let carry::Carry::Fresh { why } = &carry {
        warn(&inv, why);
    }
    let mut named = None;
    let outcome = run_once(def, ctx, &inv, &cwd, probes, &carry, &mut named).await;
    // A CLI that exits before it names a conversation refused to take the
    // old one up (gemini keeps none of a first turn that failed: "No
    // previous sessions found"): the attempt begins anew, said. A failure
    // of the continued conversation itself names it first.
    if let (carry::Carry::Session { session, .. }, Err(f), None) = (&carry, &outcome, &named)
        && matches!(&*f.category, cause::AGENT_CRASH | "stream_error")
    {
        warn(
            &inv,
            &format!(
                "agent {:?} could not continue session {session} ({}): attempt {} begins anew",
                def.name, f.message, inv.attempt
            ),
        );
        return run_once(def, ctx, &inv, &cwd, probes, &carry::Carry::None, &mut None).await;
    }
    outcome
}

/// A warning of the attempt's: in playdeck's log and the run's record.
fn warn(inv: &Invocation, w: &str) {
    tracing::warn!(op = %inv.name, "{w}");
    inv.events.emit(AgentEvent::Warning(Arc::from(w)));
}

/// One run of the CLI for the attempt; `named` gets the session its
/// stream named.
async fn run_once(
    def: &AgentDef,
    ctx: &RunContext,
    inv: &Invocation,
    cwd: &Path,
    probes: &Probes,
    carry: &carry::Carry,
    named: &mut Option<Arc<str>>,
) -> AgentOutcome {
    let params = AgentParams::from_value(&inv.params);
    let (prompt, resume) = match carry {
        carry::Carry::Session { session, prompt } => (prompt.clone(), Some(session.as_str())),
        _ => {
            let mut p = prompt_text(&inv.instruction, &inv.context);
            // Begun anew, what the operator said is still said.
            if let Some(note) = inv.carry_on.as_ref().and_then(|c| c.note.as_deref()) {
                p.push_str("\n\nThe operator says: ");
                p.push_str(note);
            }
            (p, None)
        }
    };
    // Where a prompt too long for argv goes for agents that read it from a
    // file: beside the attempt's logs, or a temporary file without a run
    // directory (removed when the attempt ends).
    let (prompt_file, _temp_prompt) = match &ctx.log_dir {
        _ if prompt.len() < argv::ARG_LIMIT => (None, None),
        Some(d) => (
            Some(d.join(format!("{}.{}.prompt.md", inv.name, inv.attempt))),
            None,
        ),
        None => {
            let t = tempfile::Builder::new()
                .prefix("playdeck-prompt-")
                .suffix(".md")
                .tempfile()
                .map_err(|e| {
                    AgentFailure::new("os_error", format!("cannot create a prompt file: {e}"))
                })?
                .into_temp_path();
            (Some(t.to_path_buf()), Some(t))
        }
    };
    // A ToolSet that asks the operator: claude's questions come to this
    // attempt's socket (see `ask`).
    let asking = tools_for(def, ctx, &params, inv.profile.as_deref())
        .filter(|t| !t.ask.is_empty() && def.stream_format == super::def::StreamFormat::Claude)
        .cloned();
    let rows = crate::agents::outflow::Rows::default();
    let ask_server = match &asking {
        Some(t) => Some(
            ask::AskServer::start(
                t.clone(),
                inv.events.clone(),
                cwd.to_path_buf(),
                rows.clone(),
            )
            .map_err(|e| {
                AgentFailure::new(
                    "os_error",
                    format!("cannot open the socket for permission questions: {e}"),
                )
            })?,
        ),
        None => None,
    };
    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("playdeck"));
    let built = command_for(
        def,
        ctx,
        &params,
        inv.profile.as_deref(),
        &prompt,
        prompt_file.as_deref(),
        resume,
        ask_server.as_ref().map(|s| (me.as_path(), s.socket())),
    )
    .map_err(|e| match e {
        argv::ArgvError::InvalidProfile(_) => {
            AgentFailure::new("invalid_flag_profile", e.to_string())
        }
        argv::ArgvError::ToolSet(_) => AgentFailure::new("invalid_toolset", e.to_string()),
    })?;
    let mut built = built;
    if inv.usd_headroom.is_some()
        && !def.stream_format.reports_cost()
        && built
            .model
            .as_ref()
            .is_none_or(|m| !ctx.prices.contains_key(m))
    {
        // The load check saw the typed models; a flag profile's may differ.
        built.warnings.push(format!(
            "agent {:?} reports no cost and its model {} has no [prices] entry: this attempt's spend counts in tokens only, not against the USD cap",
            def.name,
            built.model.as_deref().map_or("(not named)".to_string(), |m| format!("{m:?}")),
        ));
    }
    for w in &built.warnings {
        warn(inv, w);
    }
    let env = environment(def, ctx, inv, &built, cwd);
    let program = resolve_binary(
        &built.argv[0],
        env.get(OsStr::new("PATH")).map(|p| p.as_os_str()),
    )
    .map_err(|e| AgentFailure::new("binary_not_found", e.to_string()))?;
    // The run's spend cap, told to a CLI that can keep one itself: a
    // backstop, should one attempt spend past what is left.
    if def.stream_format == super::def::StreamFormat::Claude
        && let Some(left) = inv.usd_headroom
    {
        match probes
            .spend_flag
            .get_or_try_init(|| takes_spend_flag(&program, &env))
            .await
        {
            Ok(true) => {
                built.argv.push("--max-budget-usd".into());
                built.argv.push(format!("{left:.2}"));
            }
            Ok(false) => {}
            Err(()) => {
                let w = format!(
                    "{} --version did not answer in {} s: this attempt runs without --max-budget-usd; the run's own USD cap still holds",
                    program.display(),
                    VERSION_WITHIN.as_secs()
                );
                warn(inv, &w);
            }
        }
    }
    let logs = Logs::open(
        ctx.log_dir.as_deref(),
        &inv.name,
        inv.attempt,
        &built,
        cwd,
        def,
        inv.carry_on.as_ref(),
    )
    .map_err(|e| {
        AgentFailure::new(
            "os_error",
            format!("cannot write the operation's logs: {e}"),
        )
    })?;
    write_prompt_file(&built, &prompt)
        .map_err(|e| AgentFailure::new("os_error", format!("cannot write the prompt file: {e}")))?;
    ctx.tails.start(
        inv.op_id,
        inv.attempt,
        built.argv.clone(),
        logs.stdout_path.clone(),
    );

    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&built.argv[1..])
        .env_clear()
        .envs(&env)
        .current_dir(cwd)
        .stdin(if built.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    super::process::supervised(&mut cmd);
    // The binary and the directory were checked: what is left is the OS.
    let child = cmd.spawn().map_err(|e| {
        AgentFailure::new(
            "os_error",
            format!(
                "cannot start {} in {}: {e}",
                program.display(),
                cwd.display()
            ),
        )
    })?;
    let mut group = Group::new(child);
    if let (Some(server), Some(pid)) = (&ask_server, group.child.id()) {
        // Questions come from this attempt's processes, and no others.
        server.asked_by(pid as i32);
    }
    inv.events.emit(AgentEvent::Activity {
        state: ActivityState::Waiting,
        tool: None,
    });
    let mut turns = None;
    if let (Some(text), Some(stdin)) = (built.stdin.clone(), group.child.stdin.take()) {
        if built.live_input {
            let (said_tx, said_rx) = tokio::sync::mpsc::unbounded_channel();
            let (turn_tx, turn_rx) = tokio::sync::mpsc::unbounded_channel();
            inv.events
                .emit(AgentEvent::Listening(crate::kernel::agent::Inbox(said_tx)));
            turns = Some(turn_tx);
            tokio::spawn(live::input(stdin, text, said_rx, turn_rx));
        } else {
            let mut stdin = stdin;
            // A child that never reads must not block us; errors (it
            // exited, it closed stdin) are its business.
            tokio::spawn(async move {
                let _ = stdin.write_all(text.as_bytes()).await;
                let _ = stdin.shutdown().await;
            });
        }
    }
    if let Some(pgid) = group.pgid() {
        inv.events.emit(AgentEvent::Process { pgid });
    }
    let ended = supervise(
        def,
        ctx,
        inv,
        built.model.as_deref(),
        &mut group,
        logs,
        supervise::Side { turns, rows },
    )
    .await;
    // What it left behind (a tool that left its group and outlived it) is
    // tagged with the run and this attempt: it ends with the attempt.
    if let Some(tag) = &ctx.run_dir {
        let (tag, op) = (tag.display().to_string(), inv.op_id.to_string());
        let attempt = inv.attempt;
        let _ = tokio::task::spawn_blocking(move || {
            super::process::end_tagged(&tag, Some((&op, attempt)))
        })
        .await;
    }
    // An answer taken from the stream's text restates what the stream
    // carried: the kernel must not count its requests twice.
    if ended.parsed.result.is_none() && ended.parsed.text.is_some() {
        inv.events.emit(AgentEvent::ResultRestatesStream);
    }
    if let (Some(asked), Some(said)) = (resume, ended.parsed.session.as_deref())
        && let Some(w) = carry::not_continued(def, asked, said)
    {
        warn(inv, &w);
    }
    named.clone_from(&ended.parsed.session);
    outcome(def, ended)
}

/// Writes a prompt too long for argv where the command line says it is
/// (owner-only: it may hold context the operator would not publish).
fn write_prompt_file(built: &BuiltCommand, prompt: &str) -> std::io::Result<()> {
    let Some(path) = &built.prompt_file else {
        return Ok(());
    };
    if let Some(dir) = path.parent() {
        crate::files::private_dir(dir)?;
    }
    let mut f = crate::files::create_private(path)?;
    f.write_all(prompt.as_bytes())
}

/// The child's environment: the policy, the agent's variables, what the
/// translation sets, and what playdeck tells every agent.
fn environment(
    def: &AgentDef,
    ctx: &RunContext,
    inv: &Invocation,
    built: &BuiltCommand,
    cwd: &Path,
) -> std::collections::BTreeMap<OsString, OsString> {
    let mut extra = built.env.clone();
    if let Some(dir) = &ctx.run_dir {
        extra.push((
            super::process::RUN_TAG.to_string(),
            dir.display().to_string(),
        ));
    }
    extra.extend([
        ("PLAYDECK_RUN_ID".to_string(), ctx.run_id.clone()),
        ("PLAYDECK_OP".to_string(), inv.name.to_string()),
        ("PLAYDECK_OP_ID".to_string(), inv.op_id.to_string()),
        ("PLAYDECK_ATTEMPT".to_string(), inv.attempt.to_string()),
        ("PLAYDECK_WORKSPACE".to_string(), cwd.display().to_string()),
        ("PLAYDECK_SPEED".to_string(), ctx.speed.to_string()),
    ]);
    if let Some(r) = &inv.role {
        extra.push(("PLAYDECK_ROLE".to_string(), r.to_string()));
    }
    if let Some(i) = &inv.instance {
        extra.push(("PLAYDECK_INSTANCE".to_string(), i.to_string()));
    }
    child_env(
        std::env::vars_os(),
        def.env_policy,
        def.stream_format,
        &def.env_passlist,
        &def.env_vars,
        &extra,
    )
}

#[cfg(test)]
mod version_tests {
    #[test]
    fn a_version_is_its_first_major_minor() {
        assert_eq!(super::version_of("2.1.332 (Claude Code)\n"), Some((2, 1)));
        assert_eq!(super::version_of("claude 2.0.28"), Some((2, 0)));
        assert_eq!(super::version_of("unknown"), None);
    }

    /// A script written by a child process: a file this (multithreaded) test
    /// process held open for writing could make exec fail "Text file busy".
    fn script(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        let ok = std::process::Command::new("sh")
            .arg("-c")
            .arg("printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"")
            .args(["sh", body])
            .arg(&path)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        path
    }

    #[tokio::test(start_paused = true)]
    async fn a_version_that_does_not_come_is_no_answer_and_is_asked_again() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("PATH".into(), std::env::var_os("PATH").unwrap())].into();
        let slow = script(dir.path(), "slow", "#!/bin/sh\nexec sleep 600\n");
        assert_eq!(super::takes_spend_flag(&slow, &env).await, Err(()));
        let cell = tokio::sync::OnceCell::new();
        let asked = cell
            .get_or_try_init(|| super::takes_spend_flag(&slow, &env))
            .await;
        assert_eq!(asked, Err(()));
        assert!(
            !cell.initialized(),
            "a timeout must not be kept as the answer"
        );
    }

    #[tokio::test]
    async fn a_version_says_whether_the_flag_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("PATH".into(), std::env::var_os("PATH").unwrap())].into();
        let new = script(
            dir.path(),
            "new",
            "#!/bin/sh\necho '2.1.332 (Claude Code)'\n",
        );
        let old = script(
            dir.path(),
            "old",
            "#!/bin/sh\necho '2.0.28 (Claude Code)'\n",
        );
        assert_eq!(super::takes_spend_flag(&new, &env).await, Ok(true));
        assert_eq!(super::takes_spend_flag(&old, &env).await, Ok(false));
        let gone = dir.path().join("gone");
        assert_eq!(super::takes_spend_flag(&gone, &env).await, Ok(false));
    }
}
