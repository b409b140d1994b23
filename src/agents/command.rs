//! The subprocess runner: an agent CLI run from argv (never a shell), in
//! its own process group, with the environment policy applied and the
//! instance's workspace as working directory. Output streams to log files
//! and through the stream parser; stalls and `max_runtime` kill the group,
//! and so does dropping the future (cancel, quit).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use super::argv::{self, ArgvRequest, BuiltCommand};
use super::def::{AgentDef, ToolSet};
use super::env::child_env;
use super::process::{Group, resolve_binary};
use super::stream::{StreamParser, Update, result_from_text};
use super::tails::Tails;
use crate::capacity::Thinking;
use crate::kernel::{
    ActivityState, Agent, AgentEvent, AgentFailure, AgentOutcome, BoxFuture, Invocation,
};

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
}

impl Default for RunContext {
    fn default() -> Self {
        RunContext {
            run_id: String::new(),
            log_dir: None,
            workspace: PathBuf::from("."),
            flag_profile: None,
            profiles: HashMap::new(),
            tails: Tails::new(),
            speed: 1.0,
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
/// the role profile's overlay, which wins over the play's defaults.
pub fn command_for(
    def: &AgentDef,
    ctx: &RunContext,
    params: &AgentParams,
    profile: Option<&str>,
    prompt: &str,
) -> Result<BuiltCommand, argv::ArgvError> {
    let overlay = profile.and_then(|p| ctx.profiles.get(p));
    let flag_profile = params
        .flag_profile
        .as_deref()
        .or(overlay.and_then(|o| o.flag_profile.as_deref()))
        .or(ctx.flag_profile.as_deref());
    let tools = params
        .tools
        .as_ref()
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
    })
}

/// An agent CLI from the registry.
pub struct CommandAgent {
    def: Arc<AgentDef>,
    ctx: Arc<RunContext>,
}

impl CommandAgent {
    pub fn new(def: Arc<AgentDef>, ctx: Arc<RunContext>) -> Self {
        CommandAgent { def, ctx }
    }
}

impl Agent for CommandAgent {
    fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome> {
        let def = self.def.clone();
        let ctx = self.ctx.clone();
        Box::pin(async move { run(&def, &ctx, inv).await })
    }
}

/// Why the runner killed the group.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Killed {
    Stall,
    Runtime,
}

async fn run(def: &AgentDef, ctx: &RunContext, inv: Invocation) -> AgentOutcome {
    let params = AgentParams::from_value(&inv.params);
    let prompt = prompt_text(&inv.instruction, &inv.context);
    let built = command_for(def, ctx, &params, inv.profile.as_deref(), &prompt)
        .map_err(|e| AgentFailure::new("invalid_flag_profile", e.to_string()))?;
    for w in &built.warnings {
        tracing::warn!(op = %inv.name, "{w}");
        inv.events.emit(AgentEvent::Warning(Arc::from(w.as_str())));
    }

    let cwd = inv
        .workspace
        .clone()
        .unwrap_or_else(|| ctx.workspace.clone());
    let mut extra = built.env.clone();
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
    // Variables that are not UTF-8 cannot be filtered by name; they stay
    // behind.
    let parent = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let env = child_env(
        parent,
        def.env_policy,
        &def.env_passlist,
        &def.env_vars,
        &extra,
    );
    let program = resolve_binary(&built.argv[0], env.get("PATH").map(|p| p.as_ref()))
        .map_err(|e| AgentFailure::new("binary_not_found", e.to_string()))?;

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
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => AgentFailure::new(
            "binary_not_found",
            format!("cannot start {}: {e}", program.display()),
        ),
        _ => AgentFailure::new(
            "os_error",
            format!(
                "cannot start {} in {}: {e}",
                program.display(),
                cwd.display()
            ),
        ),
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
    let mut stdout = Lines::new(group.child.stdout.take().expect("stdout is piped"));
    let mut stderr = Lines::new(group.child.stderr.take().expect("stderr is piped"));

    let mut parser = StreamParser::new(def.stream_format);
    let mut updates = Vec::new();
    let mut logs = logs;
    let mut last_stdout: Option<String> = None;
    let mut last_stderr: Option<String> = None;
    let started = Instant::now();
    let deadline = def.max_runtime.map(|d| started + d);
    let mut last_output = started;
    let mut stall_warned = false;
    let mut killed: Option<Killed> = None;
    let mut status = None;

    while status.is_none() || !stdout.done || !stderr.done {
        let stall_at = last_output + def.stall_timeout;
        tokio::select! {
            line = stdout.next(), if !stdout.done => {
                if let Some(line) = line {
                    last_output = Instant::now();
                    stall_warned = false;
                    logs.stdout(&line);
                    ctx.tails.push(inv.op_id, false, &line);
                    parser.feed(&line, &mut updates);
                    for u in updates.drain(..) {
                        inv.events.emit(match u {
                            Update::Emit(v) => AgentEvent::Emitted(v),
                            Update::Activity(state, tool) => AgentEvent::Activity { state, tool },
                            Update::Usage(u) => AgentEvent::Usage(u),
                        });
                    }
                    if !line.trim().is_empty() {
                        last_stdout = Some(line);
                    }
                }
            }
            line = stderr.next(), if !stderr.done => {
                if let Some(line) = line {
                    last_output = Instant::now();
                    stall_warned = false;
                    logs.stderr(&line);
                    ctx.tails.push(inv.op_id, true, &line);
                    if !line.trim().is_empty() {
                        last_stderr = Some(line);
                    }
                }
            }
            st = group.child.wait(), if status.is_none() => {
                status = Some(st);
                // Whatever it left running dies with it; that also closes
                // pipes a straggler held, so the reads below end.
                group.kill();
            }
            _ = tokio::time::sleep_until(stall_at), if status.is_none() && killed.is_none() && !stall_warned => {
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
            _ = sleep_until_opt(deadline), if status.is_none() && killed.is_none() => {
                killed = Some(Killed::Runtime);
                group.kill();
            }
        }
    }
    logs.flush();
    let status = status.expect("the loop ends after the child exits");
    match killed {
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
        None => {}
    }
    let status =
        status.map_err(|e| AgentFailure::new("os_error", format!("waiting for the agent: {e}")))?;
    let parsed = parser.finish();
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        let why = last_stderr
            .or(parsed.error.clone())
            .map(|l| format!(": {}", l.trim()))
            .unwrap_or_default();
        return Err(match (status.code(), status.signal()) {
            (Some(code), _) => {
                AgentFailure::new("nonzero_exit", format!("exited with code {code}{why}"))
            }
            (None, Some(sig))
                if [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGKILL].contains(&sig) =>
            {
                AgentFailure::new(
                    "cancelled",
                    format!("killed by signal {sig} from outside playdeck"),
                )
            }
            (_, sig) => AgentFailure::new(
                "nonzero_exit",
                format!("killed by signal {}{why}", sig.unwrap_or(0)),
            ),
        });
    }
    if let Some(e) = parsed.error {
        return Err(AgentFailure::new("stream_error", e));
    }
    if let Some(r) = parsed.result {
        return Ok(r);
    }
    if let Some(t) = parsed.text {
        return Ok(result_from_text(&t));
    }
    match last_stdout {
        Some(l) if parsed.any_output => Ok(result_from_text(&l)),
        _ => Err(AgentFailure::new(
            "empty_output",
            "exited 0 without printing anything".to_string(),
        )),
    }
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

/// Lines of a pipe, lossily decoded; `done` after EOF or an error.
struct Lines<R> {
    reader: BufReader<R>,
    buf: Vec<u8>,
    done: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(r: R) -> Self {
        Lines {
            reader: BufReader::new(r),
            buf: Vec::new(),
            done: false,
        }
    }

    /// Cancel-safe: a partial line stays in `buf` for the next call.
    async fn next(&mut self) -> Option<String> {
        match self.reader.read_until(b'\n', &mut self.buf).await {
            Ok(0) | Err(_) => {
                self.done = true;
                if self.buf.is_empty() {
                    return None;
                }
            }
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&self.buf)
            .trim_end_matches(['\n', '\r'])
            .to_string();
        self.buf.clear();
        Some(line)
    }
}

/// The per-operation log files.
struct Logs {
    stdout_path: Option<PathBuf>,
    out: Option<std::io::LineWriter<std::fs::File>>,
    err: Option<std::io::LineWriter<std::fs::File>>,
}

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
            });
        };
        std::fs::create_dir_all(dir)?;
        let base = format!("{name}.{attempt}");
        // What ran, for whoever reads the logs later (no variable values:
        // they may be secrets).
        let command = serde_json::json!({
            "agent": def.name,
            "argv": built.argv,
            "cwd": cwd,
            "prompt_via": def.prompt_via.as_str(),
            "env_policy": def.env_policy.as_str(),
        });
        std::fs::write(
            dir.join(format!("{base}.command.json")),
            format!("{command:#}\n"),
        )?;
        let stdout_path = dir.join(format!("{base}.stdout.log"));
        let out = std::fs::File::create(&stdout_path)?;
        let err = std::fs::File::create(dir.join(format!("{base}.stderr.log")))?;
        Ok(Logs {
            stdout_path: Some(stdout_path),
            out: Some(std::io::LineWriter::new(out)),
            err: Some(std::io::LineWriter::new(err)),
        })
    }

    // A full disk must not fail the operation; the tail still shows it.
    fn stdout(&mut self, line: &str) {
        if let Some(w) = &mut self.out {
            let _ = writeln!(w, "{line}");
        }
    }

    fn stderr(&mut self, line: &str) {
        if let Some(w) = &mut self.err {
            let _ = writeln!(w, "{line}");
        }
    }

    fn flush(&mut self) {
        for w in [&mut self.out, &mut self.err].into_iter().flatten() {
            let _ = w.flush();
        }
    }
}
