//! The subprocess runner: an agent CLI run from argv (never a shell), in
//! its own process group, with the environment policy applied and the
//! instance's workspace as working directory. Output streams to log files
//! and through the stream parser; stalls and `max_runtime` kill the group,
//! and so does dropping the future (cancel, quit).

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
pub fn command_for(
    def: &AgentDef,
    ctx: &RunContext,
    params: &AgentParams,
    profile: Option<&str>,
    prompt: &str,
    prompt_file: Option<&Path>,
) -> Result<BuiltCommand, argv::ArgvError> {
    let overlay = profile.and_then(|p| ctx.profiles.get(p));
    let flag_profile = params
        .flag_profile
        .as_deref()
        .or(overlay.and_then(|o| o.flag_profile.as_deref()))
        .or(ctx.flag_profile.as_deref());
    let tools = params
        .agent_tools
        .get(&def.name)
        .or(params.tools.as_ref())
        .or(overlay.and_then(|o| o.tools.as_ref()));
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
    })
}

/// An agent CLI from the registry.
pub struct CommandAgent {
    def: Arc<AgentDef>,
    ctx: Arc<RunContext>,
    /// Whether the CLI takes a spend limit of its own (claude 2.1 on:
    /// `--max-budget-usd`), asked of it once, the first time a budgeted
    /// attempt starts.
    spend_flag: Arc<tokio::sync::OnceCell<bool>>,
}

impl CommandAgent {
    pub fn new(def: Arc<AgentDef>, ctx: Arc<RunContext>) -> Self {
        CommandAgent {
            def,
            ctx,
            spend_flag: Arc::default(),
        }
    }
}

impl Agent for CommandAgent {
    fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome> {
        let def = self.def.clone();
        let ctx = self.ctx.clone();
        let spend_flag = self.spend_flag.clone();
        Box::pin(async move { run(&def, &ctx, inv, &spend_flag).await })
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

/// How long `--version` may take. A node CLI on a loaded machine takes
/// seconds to start; 10 s was seen to pass on a two-core runner.
const VERSION_WITHIN: Duration = Duration::from_secs(30);

/// Whether `program` (a claude) knows `--max-budget-usd`: 2.1 and later.
/// `Err` when it did not answer in time: no answer, so nothing is cached
/// and the next attempt asks again.
async fn takes_spend_flag(
    program: &Path,
    env: &std::collections::BTreeMap<OsString, OsString>,
) -> Result<bool, ()> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("--version")
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(VERSION_WITHIN, cmd.output()).await {
        Err(_) => Err(()),
        // A CLI that cannot say its version is one that cannot take it.
        Ok(Err(_)) => Ok(false),
        Ok(Ok(out)) => {
            Ok(version_of(&String::from_utf8_lossy(&out.stdout)).is_some_and(|v| v >= (2, 1)))
        }
    }
}

async fn run(
    def: &AgentDef,
    ctx: &RunContext,
    inv: Invocation,
    spend_flag: &tokio::sync::OnceCell<bool>,
) -> AgentOutcome {
    let params = AgentParams::from_value(&inv.params);
    let prompt = prompt_text(&inv.instruction, &inv.context);
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
    let built = command_for(
        def,
        ctx,
        &params,
        inv.profile.as_deref(),
        &prompt,
        prompt_file.as_deref(),
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
        tracing::warn!(op = %inv.name, "{w}");
        inv.events.emit(AgentEvent::Warning(Arc::from(w.as_str())));
    }
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
    let env = environment(def, ctx, &inv, &built, &cwd);
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
        match spend_flag
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
                tracing::warn!(op = %inv.name, "{w}");
                inv.events.emit(AgentEvent::Warning(Arc::from(w.as_str())));
            }
        }
    }
    let logs = Logs::open(
        ctx.log_dir.as_deref(),
        &inv.name,
        inv.attempt,
        &built,
        &cwd,
        def,
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
        .current_dir(&cwd)
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
    inv.events.emit(AgentEvent::Activity {
        state: ActivityState::Waiting,
        tool: None,
    });
    if let (Some(text), Some(mut stdin)) = (built.stdin.clone(), group.child.stdin.take()) {
        // A child that never reads must not block us; errors (it exited,
        // it closed stdin) are its business.
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
    }
    if let Some(pgid) = group.pgid() {
        inv.events.emit(AgentEvent::Process { pgid });
    }
    let ended = supervise(def, ctx, &inv, built.model.as_deref(), &mut group, logs).await;
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
    outcome(def, ended)
}

/// Writes a prompt too long for argv where the command line says it is
/// (owner-only: it may hold context the operator would not publish).
fn write_prompt_file(built: &BuiltCommand, prompt: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let Some(path) = &built.prompt_file else {
        return Ok(());
    };
    if let Some(dir) = path.parent() {
        crate::files::private_dir(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
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

/// Why the runner killed the group.
#[derive(Debug, Clone, PartialEq)]
enum Killed {
    Stall,
    Runtime,
    /// A stdout line grew past `LINE_LIMIT`.
    OutputTooLarge,
    /// Its stream would add too much to the run's record (see `outflow`).
    OutputFlood(super::outflow::Flood),
}

/// How a supervised process ended.
struct Ended {
    status: std::io::Result<std::process::ExitStatus>,
    killed: Option<Killed>,
    parsed: Parsed,
    last_stderr: Option<String>,
}

/// After the child exits, how long output may still drain: a process that
/// left the group (setsid, a daemon) may hold the pipes open forever.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Streams the child's output through the logs, the tail and the parser
/// until it exits (killing it on a stall or at `max_runtime`).
async fn supervise(
    def: &AgentDef,
    ctx: &RunContext,
    inv: &Invocation,
    model: Option<&str>,
    group: &mut Group,
    mut logs: Logs,
) -> Ended {
    let mut stdout = Chunks::new(
        group.child.stdout.take().expect("stdout is piped"),
        Overflow::Fail,
    );
    let mut stderr = Chunks::new(
        group.child.stderr.take().expect("stderr is piped"),
        Overflow::Cut,
    );
    let mut parser = StreamParser::new(def.stream_format);
    let mut updates = Vec::new();
    let mut outflow = super::outflow::Outflow::default();
    let sink = super::outflow::Sink {
        events: &inv.events,
        name: &inv.name,
        price: model.and_then(|m| ctx.prices.get(m)),
    };
    let mut last_stderr: Option<String> = None;
    let started = Instant::now();
    let deadline = def.max_runtime.map(|d| started + d);
    let mut last_output = started;
    let mut stall_warned = false;
    let mut killed: Option<Killed> = None;
    let mut status = None;
    let mut drain_until: Option<Instant> = None;

    while status.is_none() || !stdout.done || !stderr.done {
        // Back-pressure: while the kernel has not taken what was sent, the
        // agent's output waits in its pipe, not in memory. The wait is not
        // the agent's silence.
        if inv.events.backed_up() {
            inv.events.ready().await;
            last_output = Instant::now();
        }
        let stall_at = last_output + def.stall_timeout;
        let live = status.is_none() && killed.is_none();
        tokio::select! {
            chunk = stdout.next(), if !stdout.done => {
                last_output = Instant::now();
                stall_warned = false;
                if let Some(Chunk::Line(line)) = chunk {
                    logs.stdout(&line);
                    ctx.tails.push(inv.op_id, false, &line);
                    parser.feed(&line, &mut updates);
                    outflow.take(&sink, &mut updates, Instant::now());
                }
                if stdout.overflowed && killed.is_none() {
                    // Cutting the line would rewrite the answer; reading
                    // on would hold it all in memory.
                    killed = Some(Killed::OutputTooLarge);
                    group.kill();
                }
                if let Some(flood) = outflow.flood()
                    && killed.is_none()
                {
                    killed = Some(Killed::OutputFlood(flood.clone()));
                    group.kill();
                }
            }
            chunk = stderr.next(), if !stderr.done => {
                last_output = Instant::now();
                stall_warned = false;
                if let Some(Chunk::Line(line)) = chunk {
                    logs.stderr(&line);
                    ctx.tails.push(inv.op_id, true, &line);
                    if !line.trim().is_empty() {
                        last_stderr = Some(line);
                    }
                }
            }
            st = group.child.wait(), if status.is_none() => {
                status = Some(st);
                // Whatever it left running in its group dies with it; that
                // also closes the pipes those processes held.
                group.kill_after_exit();
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
            _ = tokio::time::sleep_until(stall_at), if live && !stall_warned => {
                if def.kill_on_stall {
                    killed = Some(Killed::Stall);
                    group.kill();
                } else {
                    stall_warned = true;
                    let w = format!(
                        "{}: no output for {}; still waiting (kill_on_stall = false)",
                        inv.name,
                        secs(def.stall_timeout)
                    );
                    inv.events.emit(AgentEvent::Warning(Arc::from(w.as_str())));
                }
            }
            _ = sleep_until_opt(outflow.next_due()) => {
                outflow.send_due(&sink, Instant::now());
            }
            _ = sleep_until_opt(deadline), if live => {
                killed = Some(Killed::Runtime);
                group.kill();
            }
            _ = sleep_until_opt(drain_until) => {
                let w = format!(
                    "{}: a process outside its group still holds its output; stopped reading after {}",
                    inv.name,
                    secs(DRAIN_GRACE)
                );
                inv.events.emit(AgentEvent::Warning(Arc::from(w.as_str())));
                stdout.done = true;
                stderr.done = true;
            }
        }
    }
    // A last line without a newline still counts.
    for line in stderr.rest() {
        logs.stderr(&line);
        last_stderr = Some(line);
    }
    // A last line without a newline is a line like any other.
    for line in stdout.rest() {
        logs.stdout(&line);
        ctx.tails.push(inv.op_id, false, &line);
        parser.feed(&line, &mut updates);
        outflow.take(&sink, &mut updates, Instant::now());
    }
    // What was held back goes out before the attempt's result.
    outflow.finish(&sink);
    if let Some(flood) = outflow.flood()
        && killed.is_none()
    {
        killed = Some(Killed::OutputFlood(flood.clone()));
    }
    logs.flush();
    Ended {
        status: status.expect("the loop ends after the child exits"),
        killed,
        parsed: parser.finish(),
        last_stderr,
    }
}

/// The operation's outcome from how its process ended.
fn outcome(def: &AgentDef, ended: Ended) -> AgentOutcome {
    use std::os::unix::process::ExitStatusExt;
    match ended.killed {
        Some(Killed::Stall) => {
            return Err(AgentFailure::new(
                "stall_timeout",
                format!(
                    "no output for {}; killed its process group",
                    secs(def.stall_timeout)
                ),
            ));
        }
        Some(Killed::Runtime) => {
            return Err(AgentFailure::new(
                "timeout",
                format!(
                    "ran longer than max_runtime {}; killed its process group",
                    secs(def.max_runtime.unwrap_or_default())
                ),
            ));
        }
        Some(Killed::OutputFlood(super::outflow::Flood(why))) => {
            return Err(AgentFailure::new(
                "output_flood",
                format!(
                    "{why}; killed its process group (its log has what it printed, up to its limit)"
                ),
            ));
        }
        Some(Killed::OutputTooLarge) => {
            return Err(AgentFailure::new(
                "output_too_large",
                format!(
                    "a line of its output is longer than the {} MiB limit; killed its process group (the log has what was read)",
                    LINE_LIMIT >> 20
                ),
            ));
        }
        None => {}
    }
    let status = ended
        .status
        .map_err(|e| AgentFailure::new("os_error", format!("waiting for the agent: {e}")))?;
    let parsed = ended.parsed;
    if !status.success() {
        // What the stream said fails first: it names the cause; the last
        // stderr line is what a CLI without a JSON error prints.
        let said = parsed.error.clone().or(ended.last_stderr.clone());
        let why = said
            .as_deref()
            .map(|l| format!(": {}", l.trim()))
            .unwrap_or_default();
        use rustix::process::Signal;
        let stopped = [Signal::TERM, Signal::INT, Signal::HUP].map(Signal::as_raw);
        return Err(match (status.code(), status.signal()) {
            (Some(code), _) => {
                let message = format!("exited with code {code}{why}");
                let stderr = ended.last_stderr.as_deref().and_then(cause::classify);
                caused(&parsed, &message, stderr, cause::AGENT_CRASH)
            }
            // An operator or a supervisor stopped it.
            (None, Some(sig)) if stopped.contains(&sig) => AgentFailure::new(
                "cancelled",
                format!("stopped by signal {sig} from outside playdeck"),
            ),
            (None, Some(sig)) if sig == Signal::KILL.as_raw() => AgentFailure::new(
                cause::AGENT_CRASH,
                format!("killed by signal 9 from outside playdeck (out of memory?){why}"),
            ),
            (_, sig) => AgentFailure::new(
                cause::AGENT_CRASH,
                format!("killed by signal {}{why}", sig.unwrap_or(0)),
            ),
        });
    }
    if let Some(e) = parsed.error.clone() {
        return Err(caused(&parsed, &e, None, "stream_error"));
    }
    if let Some(r) = parsed.result {
        return Ok(r);
    }
    if let Some(t) = parsed.text {
        return Ok(result_from_text(&t));
    }
    if parsed.any_output {
        // Events, but no answer: not a result to pass on as one.
        return Err(AgentFailure::new(
            "stream_error",
            format!(
                "the {} stream ended without a result or a message",
                def.stream_format.as_str()
            ),
        ));
    }
    Err(AgentFailure::new(
        "empty_output",
        "exited 0 without printing anything",
    ))
}

/// The failure an error the agent reported makes: its cause as the CLI
/// stated it (a field), else as its text tells, else as stderr tells, else
/// `otherwise`.
fn caused(
    parsed: &Parsed,
    message: &str,
    stderr: Option<cause::Cause>,
    otherwise: &'static str,
) -> AgentFailure {
    let read = parsed.error.as_deref().and_then(cause::classify);
    let stated = parsed
        .cause
        .or_else(|| parsed.status.and_then(cause::from_status));
    let category = stated
        .or(read.map(|c| c.category))
        .or(stderr.map(|c| c.category))
        .unwrap_or(otherwise);
    // A reset time is taken from whichever said it.
    let wait = read.and_then(|c| c.wait).or(stderr.and_then(|c| c.wait));
    let mut f = AgentFailure::new(category, message);
    if category == cause::RATE_LIMIT {
        f.wait = wait;
    }
    f
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// What a pipe gave: a whole line, or bytes of one still being written
/// (progress, for stall detection).
enum Chunk {
    Line(String),
    Partial,
}

/// The longest line read whole. A result is one line; cutting it would
/// rewrite the answer, so a longer stdout line fails the attempt
/// (`output_too_large`) instead, and memory stays bounded.
pub const LINE_LIMIT: usize = 64 << 20;

/// stderr is only logged and shown: its lines are cut at this length.
const STDERR_LINE_LIMIT: usize = 64 << 10;

/// What happens to a line longer than the limit.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Overflow {
    /// Read it in pieces (stderr).
    Cut,
    /// Drop it and say so (stdout).
    Fail,
}

/// Lines of a pipe, lossily decoded; `done` after EOF or an error.
struct Chunks<R> {
    reader: R,
    pending: Vec<u8>,
    lines: std::collections::VecDeque<String>,
    done: bool,
    overflow: Overflow,
    /// A line went past the limit (`Overflow::Fail`).
    overflowed: bool,
}

impl<R: AsyncRead + Unpin> Chunks<R> {
    fn new(r: R, overflow: Overflow) -> Self {
        Chunks {
            reader: r,
            pending: Vec::new(),
            lines: std::collections::VecDeque::new(),
            done: false,
            overflow,
            overflowed: false,
        }
    }

    /// Cancel-safe: `read` loses nothing when cancelled, and what was read
    /// is kept in `pending`/`lines` between calls. `None` at the end.
    async fn next(&mut self) -> Option<Chunk> {
        if let Some(l) = self.lines.pop_front() {
            return Some(Chunk::Line(l));
        }
        let mut buf = [0u8; 64 * 1024];
        let n = match self.reader.read(&mut buf).await {
            Ok(0) | Err(_) => {
                self.done = true;
                return None;
            }
            Ok(n) => n,
        };
        // Only the bytes just read can hold a newline: a long line is not
        // scanned again with every read.
        let mut from = self.pending.len();
        self.pending.extend_from_slice(&buf[..n]);
        let limit = match self.overflow {
            Overflow::Cut => STDERR_LINE_LIMIT,
            Overflow::Fail => LINE_LIMIT,
        };
        while let Some(i) = self.pending[from..].iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=from + i).collect();
            from = 0;
            // The newline may come in the same read as the byte that made
            // the line too long.
            if self.overflow == Overflow::Fail && line.len() - 1 > limit {
                self.overflowed = true;
                continue;
            }
            self.lines.push_back(decode(&line));
        }
        if self.pending.len() > limit {
            match self.overflow {
                Overflow::Cut => {
                    let line: Vec<u8> = std::mem::take(&mut self.pending);
                    self.lines.push_back(decode(&line));
                }
                Overflow::Fail => {
                    self.pending = Vec::new();
                    self.overflowed = true;
                }
            }
        }
        Some(match self.lines.pop_front() {
            Some(l) => Chunk::Line(l),
            None => Chunk::Partial,
        })
    }

    /// What is left once reading stopped: queued lines and a last line
    /// without a newline.
    fn rest(&mut self) -> Vec<String> {
        let mut parts: Vec<String> = self.lines.drain(..).collect();
        if !self.pending.is_empty() {
            parts.push(decode(&std::mem::take(&mut self.pending)));
        }
        parts
    }
}

fn decode(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches(['\n', '\r'])
        .to_string()
}

/// The per-operation log files.
struct Logs {
    stdout_path: Option<PathBuf>,
    out: Option<std::io::LineWriter<std::fs::File>>,
    err: Option<std::io::LineWriter<std::fs::File>>,
    /// Bytes written to each (stdout, stderr).
    written: [u64; 2],
}

/// What one attempt's stdout or stderr log keeps: an agent printing in a
/// loop must not fill the disk. What comes after is still read (and
/// parsed), not kept.
pub const LOG_LIMIT: u64 = 32 << 20;
/// A line longer than this is kept in the log only by its start.
const LONG_LINE: usize = 1 << 20;
const LONG_LINE_KEPT: usize = 4096;

impl Logs {
    fn open(
        dir: Option<&Path>,
        name: &str,
        attempt: u32,
        built: &BuiltCommand,
        cwd: &Path,
        def: &AgentDef,
    ) -> std::io::Result<Logs> {
        let Some(dir) = dir else {
            return Ok(Logs {
                stdout_path: None,
                out: None,
                err: None,
                written: [0; 2],
            });
        };
        crate::files::private_dir(dir)?;
        let base = format!("{name}.{attempt}");
        // What ran, for whoever reads the logs later (no variable values:
        // they may be secrets).
        let mut command = serde_json::json!({
            "agent": def.name,
            "argv": built.argv,
            "cwd": cwd,
            "prompt_via": def.prompt_via.as_str(),
            "prompt_passed": built.prompt_passed,
            "env_policy": def.env_policy.as_str(),
        });
        if let Some(note) = &built.prompt_note {
            command["prompt_note"] = serde_json::Value::String(note.clone());
        }
        // Owner-only, like everything in a run directory: agent output
        // holds code, prompts and whatever the agent printed.
        let private = |path: &Path| {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
        };
        private(&dir.join(format!("{base}.command.json")))?
            .write_all(format!("{command:#}\n").as_bytes())?;
        let stdout_path = dir.join(format!("{base}.stdout.log"));
        let out = private(&stdout_path)?;
        let err = private(&dir.join(format!("{base}.stderr.log")))?;
        Ok(Logs {
            stdout_path: Some(stdout_path),
            out: Some(std::io::LineWriter::new(out)),
            err: Some(std::io::LineWriter::new(err)),
            written: [0; 2],
        })
    }

    // A full disk must not fail the operation; the tail still shows it.
    fn stdout(&mut self, line: &str) {
        Logs::write(&mut self.out, &mut self.written[0], line);
    }

    fn stderr(&mut self, line: &str) {
        Logs::write(&mut self.err, &mut self.written[1], line);
    }

    fn write(w: &mut Option<std::io::LineWriter<std::fs::File>>, written: &mut u64, line: &str) {
        let Some(w) = w else {
            return;
        };
        if *written >= LOG_LIMIT {
            return;
        }
        // A huge line (a 50 MB answer) is the attempt's result, which the
        // run's events hold whole: its start here, not a second copy.
        let line = if line.len() > LONG_LINE {
            let mut cut = LONG_LINE_KEPT;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            std::borrow::Cow::Owned(format!(
                "{}… [playdeck: a line of {} bytes, cut here; what the agent said in it is in the run's events]",
                &line[..cut],
                line.len()
            ))
        } else {
            std::borrow::Cow::Borrowed(line)
        };
        *written += line.len() as u64 + 1;
        let _ = writeln!(w, "{line}");
        if *written >= LOG_LIMIT {
            let _ = writeln!(
                w,
                "[playdeck: this log stops at {} MiB; the rest was read, not kept]",
                LOG_LIMIT >> 20
            );
        }
    }

    fn flush(&mut self) {
        for w in [&mut self.out, &mut self.err].into_iter().flatten() {
            let _ = w.flush();
        }
    }
}
