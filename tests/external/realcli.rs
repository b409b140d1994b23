//! The real agent CLIs, run by playdeck: each CLI installed by
//! `tests/realcli/install.sh` (pinned versions from the npm registry, under
//! `target/realcli/`) runs one play per scenario — `playdeck run
//! --headless`, playdeck's own argv, environment policy and retry policy —
//! against the scripted model server (`tests/realcli/model_server.py`) on
//! 127.0.0.1, and what the operator gets is checked: the outcome, the
//! failure's cause and whether it was retried, usage (cached input counted
//! once), tool activity, the file a tool wrote (or, read-only, did not),
//! one ledger row per spawn request.
//!
//! Without npm (nothing installed) or python3 each test says so and
//! passes without running: `.ci/run` installs the CLIs first.
//! `PLAYDECK_REALCLI=claude:2.1.332` narrows the run to one CLI version.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::realcli::{SCENARIOS, Want, older, usage_counted_once, want};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Installed versions of `cli`, newest pin first as install.sh lists them.
fn installed(cli: &str) -> Vec<(String, PathBuf)> {
    let dir = root().join("target/realcli");
    let only = std::env::var("PLAYDECK_REALCLI").ok();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(version) = name.strip_prefix(&format!("{cli}-")) else {
            continue;
        };
        let exe = e.path().join("node_modules/.bin").join(cli);
        if !(exe.exists() && e.path().join(".installed").exists()) {
            continue;
        }
        if only
            .as_deref()
            .is_some_and(|o| o != cli && o != format!("{cli}:{version}"))
        {
            continue;
        }
        out.push((version.to_string(), exe));
    }
    out.sort();
    out
}

/// The scripted model server, stopped when dropped.
pub(crate) struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(stall_seconds: u32) -> Option<Server> {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let log = dir.path().join("server.log");
        let child = Command::new("python3")
            .arg(root().join("tests/realcli/model_server.py"))
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .args(["--stall-seconds", &stall_seconds.to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .ok()?;
        let mut s = Server {
            child,
            port: 0,
            _dir: dir,
        };
        // python3 starting on a loaded machine can take seconds.
        s.port = common::wait_for(
            "the model server to listen",
            Duration::from_secs(60),
            || {
                if let Ok(p) = std::fs::read_to_string(&port_file)
                    && let Ok(port) = p.trim().parse()
                {
                    return Ok(port);
                }
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                match s.child.try_wait() {
                    Ok(Some(status)) => {
                        panic!("the model server exited ({status}) before it listened: {said}")
                    }
                    _ => Err(format!("it said: {said}")),
                }
            },
        );
        Some(s)
    }

    /// Forgets which `flaky` requests already failed.
    fn reset(&self) {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        c.write_all(
            b"POST /_reset HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.") && out.contains(" 200 "), "{out}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one run through playdeck gave the operator.
#[derive(Debug, Default, Clone)]
pub(crate) struct Seen {
    pub(crate) outcome: String,
    /// The operation's failure: (category, error).
    failure: Option<(String, String)>,
    /// Retries the policy scheduled: their categories.
    retries: Vec<String>,
    /// Attempts started.
    attempts: usize,
    tools: Vec<String>,
    /// The last `agent_usage` of the last attempt.
    usage: Option<Value>,
    /// The conversation ids `agent_session` recorded, one per attempt.
    sessions: Vec<String>,
    ledger_rows: usize,
    warnings: Vec<String>,
    pub(crate) file: Option<String>,
    /// The last attempt's stdout log.
    pub(crate) stdout: String,
    /// The last attempt's argv, as `command.json` records it.
    argv: Vec<String>,
    /// The session the last attempt continued (`command.json`).
    continues: Option<String>,
    /// What `ctl say` answered: its exit code and what it printed.
    pub(crate) said: Option<(Option<i32>, String)>,
    /// The operation's result's `summary`.
    summary: Option<String>,
    /// The calls it asked permission for, and the answers: (allowed, by).
    pub(crate) asked: Vec<String>,
    pub(crate) answered: Vec<(bool, String)>,
    secs: f64,
}

/// Waits (up to 60 s) for a line of the run's log that `ready` takes,
/// then runs `playdeck ctl RUN ARGS`: its exit code and what it printed.
fn when_then_ctl(
    dir: &Path,
    ready: impl Fn(&str) -> bool,
    never: &str,
    args: &[&str],
) -> (Option<i32>, String) {
    let t0 = Instant::now();
    while !playdeck::store::whole_text(&dir.join("events.jsonl"))
        .is_ok_and(|t| t.lines().any(&ready))
    {
        if t0.elapsed() > std::time::Duration::from_secs(60) {
            return (None, never.into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = common::playdeck()
        .arg("ctl")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Once `op`'s agent asks permission, answers through `playdeck ctl
/// permit` / `deny`.
fn answer_the_question(dir: &Path, op: &str, permit: bool) -> (Option<i32>, String) {
    let asked = |l: &str| {
        l.contains(r#""type":"permission_asked""#) && l.contains(&format!(r#""name":"{op}""#))
    };
    let args: &[&str] = if permit {
        &["permit", op]
    } else {
        &["deny", op, "not", "in", "this", "repository"]
    };
    // What the operator reads before answering: the call whole (issue 55).
    let (_, status) = when_then_ctl(dir, asked, "the agent never asked", &["status"]);
    let (code, said) = when_then_ctl(dir, asked, "the agent never asked", args);
    (code, format!("{said}\n--- status before:\n{status}"))
}

/// Once `op`'s agent is in a tool call (with `named`, once it named its
/// session: opencode 1.0 says a tool call only once it ended), says
/// `text` to it through `playdeck ctl`.
fn say_in_a_tool_call(dir: &Path, op: &str, text: &str, named: bool) -> (Option<i32>, String) {
    let in_tool = |l: &str| {
        l.contains(&format!(r#""name":"{op}""#))
            && if named {
                l.contains(r#""type":"agent_session""#)
            } else {
                l.contains(r#""type":"agent_activity""#) && l.contains(r#""state":"tool""#)
            }
    };
    when_then_ctl(
        dir,
        in_tool,
        "the agent never called a tool",
        &["say", op, text],
    )
}

/// How a CLI is set up against the server: its agent table (TOML lines
/// after `[agents.cli]`), files it needs in HOME or the workspace.
pub(crate) struct Cli {
    name: &'static str,
    format: &'static str,
    subcommand: &'static str,
    /// The agent's `env_vars` (the port is substituted for `{port}`).
    env: &'static [(&'static str, &'static str)],
    model: Option<&'static str>,
    /// Tools listed in the ToolSet (write, read-only) — where the format
    /// takes a list.
    tools: (&'static [&'static str], &'static [&'static str]),
    setup: fn(home: &Path, work: &Path, exe: &Path, version: &str, port: u16),
}

fn no_setup(_: &Path, _: &Path, _: &Path, _: &str, _: u16) {}

fn codex_setup(home: &Path, _: &Path, _: &Path, version: &str, port: u16) {
    let dir = home.join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    // A model slug each version knows, else codex adds a notice.
    let model = if version.starts_with("0.4") {
        "gpt-5-codex"
    } else {
        "gpt-5.5"
    };
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "model = \"{model}\"\nmodel_provider = \"playdeck\"\ncheck_for_update_on_startup = false\n\
             [model_providers.playdeck]\nname = \"playdeck\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"PLAYDECK_API_KEY\"\n\
             request_max_retries = 0\nstream_max_retries = 0\nstream_idle_timeout_ms = 10000\n\
             [analytics]\nenabled = false\n"
        ),
    )
    .unwrap();
}

fn opencode_setup(home: &Path, work: &Path, exe: &Path, _: &str, port: u16) {
    let cfg = json!({
        "model": "playdeck/playdeck-model",
        "autoupdate": false,
        "share": "disabled",
        "provider": {"playdeck": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "playdeck scripted server",
            "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "fake", "includeUsage": true},
            "models": {"playdeck-model": {"name": "playdeck model", "limit": {"context": 200000, "output": 8192}}}
        }}
    });
    std::fs::write(work.join("opencode.json"), cfg.to_string()).unwrap();
    // 1.0 installs its provider SDK at run time; install.sh seeded it.
    let seed = exe.ancestors().nth(3).unwrap().join("opencode-cache");
    if seed.is_dir() {
        let cache = home.join(".cache/opencode");
        std::fs::create_dir_all(&cache).unwrap();
        let ok = Command::new("cp")
            .args(["-a", &format!("{}/.", seed.display())])
            .arg(&cache)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

fn gemini_setup(home: &Path, _: &Path, _: &Path, _: &str, _: u16) {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true, "maxAttempts": 1,
                    "checkpointing": {"enabled": false}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "ide": {"enabled": false},
        "model": {"name": "gemini-2.5-pro"},
        "selectedAuthType": "gemini-api-key",
        "usageStatisticsEnabled": false,
        "disableAutoUpdate": true,
        "disableUpdateNag": true
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
}

pub(crate) const CLAUDE: Cli = Cli {
    name: "claude",
    format: "claude",
    subcommand: "-p",
    env: &[
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:{port}"),
        ("ANTHROPIC_API_KEY", "fake"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        // Its own retries off: playdeck's policy retries.
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ("CLAUDE_STREAM_IDLE_TIMEOUT_MS", "60000"),
        ("API_TIMEOUT_MS", "60000"),
    ],
    model: None,
    tools: (
        &["Read", "Glob", "Grep", "Edit", "Write", "Bash"],
        &["Read", "Glob", "Grep"],
    ),
    setup: no_setup,
};

const CODEX: Cli = Cli {
    name: "codex",
    format: "codex",
    subcommand: "exec",
    env: &[
        ("PLAYDECK_API_KEY", "fake"),
        ("CODEX_HOME", "{home}/.codex"),
    ],
    model: None,
    tools: (&[], &[]),
    setup: codex_setup,
};

const OPENCODE: Cli = Cli {
    name: "opencode",
    format: "opencode",
    subcommand: "run",
    env: &[
        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
        ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
        ("OPENCODE_DISABLE_SHARE", "1"),
    ],
    model: None,
    tools: (&[], &[]),
    setup: opencode_setup,
};

const GEMINI: Cli = Cli {
    name: "gemini",
    format: "gemini",
    subcommand: "-p",
    env: &[
        ("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:{port}"),
        ("GEMINI_API_KEY", "fake"),
        ("GEMINI_CLI_NO_RELAUNCH", "true"),
        ("GEMINI_TELEMETRY_ENABLED", "false"),
    ],
    model: Some("gemini-2.5-pro"),
    tools: (&[], &[]),
    setup: gemini_setup,
};

const COPILOT: Cli = Cli {
    name: "copilot",
    format: "copilot",
    subcommand: "-p",
    env: &[
        ("COPILOT_OFFLINE", "true"),
        ("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:{port}/v1"),
        ("COPILOT_PROVIDER_TYPE", "openai"),
        ("COPILOT_PROVIDER_WIRE_API", "completions"),
        ("COPILOT_PROVIDER_API_KEY", "fake"),
        ("COPILOT_MODEL", "gpt-4.1"),
        ("COPILOT_AUTO_UPDATE", "false"),
        ("COPILOT_HOME", "{home}/.copilot"),
    ],
    model: None,
    tools: (&[], &[]),
    setup: no_setup,
};

fn instruction(scenario: &str) -> String {
    let server = if matches!(scenario, "tool-readonly" | "land") || scenario.starts_with("ask-") {
        "tool"
    } else {
        scenario
    };
    let what = match scenario {
        "tool" | "tool-readonly" | "limit-after-tool" | "ask-permit" | "ask-deny"
        | "ask-timeout" | "ask-web" | "land" | "review" => {
            "Create the file hello.txt containing hi in the current directory."
        }
        "listen" => "Wait for the build, then tell me what you hear.",
        "always-tool" => "List the files in the current directory, again and again.",
        "spawn" => "Look at the parser and ask for help if tests are missing.",
        _ => "Answer the question: what is six times seven?",
    };
    format!("PLAYDECK_SCENARIO={server} {what}")
}

/// Limits per scenario: (stall_timeout, max_runtime) in seconds. A CLI
/// that retries without end inside itself (opencode, copilot, gemini 0.11
/// on a 429) meets `max_runtime`; `slow` stalls the server past the stall
/// timeout. `max_runtime` counts from the spawn, node's start-up
/// included, with five CLIs' tests at once on a loaded machine: 45 s for
/// every CLI (copilot retries a 5xx five times inside, about 18 s, and
/// then says why); a loop inside still meets it, never ending by itself.
fn limits(scenario: &str) -> (u32, u32) {
    match scenario {
        "slow" => (4, 120),
        "always-tool" | "rate-limit" | "server-error" | "overloaded" | "cut"
        | "limit-after-tool" => (60, 45),
        "listen" => (60, 60),
        _ => (60, 120),
    }
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Runs `scenario` on `cli` (version `version` at `exe`) through playdeck.
fn run(cli: &Cli, version: &str, exe: &Path, scenario: &str, server: &Server) -> Seen {
    run_saying(cli, version, exe, scenario, server, None)
}

/// What the operator does during a run, through `playdeck ctl`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Act<'a> {
    /// `say OP TEXT` once the agent is in a tool call.
    Say(&'a str),
    /// `permit OP` / `deny OP` once it asks.
    Permit,
    Deny,
}

/// An operator beside the run: called with the run directory and the
/// operation once the run has started; what it did, as `Seen::said`.
pub(crate) type Answerer = Box<dyn FnOnce(PathBuf, String) -> (Option<i32>, String) + Send>;

/// [`run`], and with `say`, `playdeck ctl RUN say` to the operation once
/// its agent is in a tool call (what ctl answered is in `Seen::said`).
/// A play of `scenario` for `cli` in a directory of its own, as the tests
/// run it: HOME, the workspace (a repository for the landing scenarios),
/// the play.
struct Staged {
    base: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
    play_path: PathBuf,
    play: String,
    land: bool,
}

/// `playdeck run --headless` of a staged play, in its own HOME and XDG
/// directories, with no colour and no terminal.
fn staged_run(home: &Path, run_dir: &Path, play_path: &Path) -> Command {
    let mut c = common::playdeck();
    c.env("HOME", home)
        .env("TMPDIR", home.join("tmp"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("PLAYDECK_CONFIG_DIR", home.join(".config/playdeck"))
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .args(["run", "--headless", "--run-dir"])
        .arg(run_dir)
        .arg(play_path);
    c
}

fn stage(cli: &Cli, version: &str, exe: &Path, scenario: &str, server: &Server) -> Staged {
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    let work = base.path().join("work");
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    (cli.setup)(&home, &work, exe, version, server.port);
    let (stall, runtime) = limits(scenario);
    let env: Vec<String> = cli
        .env
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace("{port}", &server.port.to_string())
                .replace("{home}", &home.display().to_string());
            format!("{k} = {}", toml_str(&v))
        })
        .collect();
    let asks = scenario.starts_with("ask-");
    let read_only = scenario == "tool-readonly" || asks;
    let listed = if read_only { cli.tools.1 } else { cli.tools.0 };
    let listed: Vec<String> = listed.iter().map(|t| toml_str(t)).collect();
    let turns = if cli.name == "claude" {
        if scenario == "always-tool" {
            ", max_turns = 2"
        } else if scenario == "ask-web" {
            // The operator answers from a browser's page: a minute.
            ", max_turns = 8, ask = [\"Write\"], ask_timeout = 60"
        } else if asks {
            // The writer is left to the operator, who has 3 s to answer.
            ", max_turns = 8, ask = [\"Write\"], ask_timeout = 3"
        } else {
            ", max_turns = 8"
        }
    } else {
        ""
    };
    let permission = if read_only {
        "read-only"
    } else {
        "workspace-write"
    };
    let model = cli
        .model
        .map(|m| format!("model = {}\n", toml_str(m)))
        .unwrap_or_default();
    // A USD cap on claude's answer: playdeck tells the CLI what is left
    // (`--max-budget-usd`) where it knows the flag (2.1 on).
    let budget = if cli.name == "claude" && scenario == "answer" {
        "[budget]\nusd = 100\n"
    } else {
        ""
    };
    // A CLI that retries a 429 inside itself without end (opencode 1.0)
    // meets max_runtime: that attempt is retried too, continuing.
    let on = if scenario == "limit-after-tool" {
        "on = [\"rate_limit\", \"server_error\", \"overloaded\", \"agent_crash\", \"timeout\"]\n"
    } else {
        ""
    };
    let play = format!(
        "[play]\nname = \"{name} {version} {scenario}\"\nmax_spawn = 1\n{budget}\
         [retry]\nattempts = 2\nbackoff = 0.2\nmax_backoff = 0.5\n{on}\
         [palette]\nroles = [{{ role = \"implementer\", disposition = \"emission_capable\" }}, {{ role = \"tester\", agent = \"{name}\" }}]\n\
         [agents.{name}]\nbinary = {exe}\nsubcommand = \"{sub}\"\nstream_format = \"{format}\"\n{model}\
         stall_timeout = {stall}\nmax_runtime = {runtime}\nenv_vars = {{ {env} }}\n\
         [[operations]]\nid = \"{scenario}\"\nrole = \"implementer\"\nagent = \"{name}\"\n\
         instruction = {instruction}\n\
         tools = {{ internal = [{listed}], permission = \"{permission}\"{turns} }}\n",
        name = cli.name,
        exe = toml_str(&exe.display().to_string()),
        sub = cli.subcommand,
        format = cli.format,
        env = env.join(", "),
        instruction = toml_str(&instruction(scenario)),
        listed = listed.join(", "),
    );
    // `land`: the play in a repository, each operation in a worktree of
    // its own made from the run's branch (the CLI's project files too:
    // committed, so the worktree has them).
    let land = matches!(scenario, "land" | "review");
    // `review`: its work waits for the operator's review before it lands.
    let play = match scenario {
        "review" => format!("{play}review = true\n[workspace]\nisolation = \"worktree\"\n"),
        _ if land => format!("{play}[workspace]\nisolation = \"worktree\"\n"),
        _ => play,
    };
    let play_path = work.join("play.toml");
    std::fs::write(&play_path, &play).unwrap();
    if land {
        common::git(&work, &["init", "-q"]);
        common::git(&work, &["add", "-A"]);
        common::git(&work, &["commit", "-q", "-m", "the project"]);
    }
    Staged {
        base,
        home,
        work,
        play_path,
        play,
        land,
    }
}

pub(crate) fn run_saying(
    cli: &Cli,
    version: &str,
    exe: &Path,
    scenario: &str,
    server: &Server,
    act: Option<Act<'_>>,
) -> Seen {
    let named = cli.name == "opencode" && older(version, "1.1");
    let answer = act.map(|act| -> Answerer {
        let act = match act {
            Act::Say(t) => Some(t.to_string()),
            Act::Permit => None,
            Act::Deny => Some(String::new()),
        };
        Box::new(move |dir: PathBuf, op: String| match act {
            Some(t) if !t.is_empty() => say_in_a_tool_call(&dir, &op, &t, named),
            Some(_) => answer_the_question(&dir, &op, false),
            None => answer_the_question(&dir, &op, true),
        })
    });
    run_answered(cli, version, exe, scenario, server, answer)
}

/// [`run_saying`] with any operator beside the run.
pub(crate) fn run_answered(
    cli: &Cli,
    version: &str,
    exe: &Path,
    scenario: &str,
    server: &Server,
    answer: Option<Answerer>,
) -> Seen {
    let Staged {
        base,
        home,
        work,
        play_path,
        play,
        land,
    } = stage(cli, version, exe, scenario, server);
    server.reset();
    let run_dir = base.path().join("run");
    let t0 = Instant::now();
    // Run as a person does from the play's own directory (`playdeck run
    // play.toml`): the operation works in `.`, no directory of its own.
    let here = IN_PLACE.get();
    let play_arg = if here {
        Path::new("play.toml")
    } else {
        play_path.as_path()
    };
    let mut cmd = staged_run(&home, &run_dir, play_arg);
    if here {
        cmd.current_dir(&work);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = answer.map(|f| {
        let (dir, op) = (run_dir.clone(), scenario.to_string());
        std::thread::spawn(move || f(dir, op))
    });
    let out = out.wait_with_output().unwrap();
    let mut seen = Seen {
        secs: t0.elapsed().as_secs_f64(),
        said: said.map(|t| t.join().unwrap()),
        ..Seen::default()
    };
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{} {version} {scenario}: playdeck exited {:?}\n{stderr}\n{play}",
        cli.name,
        out.status
    );
    let mut last_attempt = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let mine = v["name"] == scenario;
        match v["type"].as_str().unwrap_or("") {
            "started" if mine => {
                seen.attempts += 1;
                last_attempt = v["attempt"].as_u64().unwrap_or(0);
                seen.usage = None;
            }
            "failed" if mine => {
                seen.failure = Some((
                    v["category"].as_str().unwrap_or("").into(),
                    v["error"].as_str().unwrap_or("").into(),
                ));
            }
            "retry_scheduled" if mine => {
                seen.retries
                    .push(v["category"].as_str().unwrap_or("").into());
            }
            "agent_activity" if mine && v["state"] == "tool" => {
                seen.tools.push(v["tool"].as_str().unwrap_or("").into());
            }
            "agent_usage" if mine => seen.usage = Some(v.clone()),
            "permission_asked" if mine => {
                seen.asked.push(v["tool"].as_str().unwrap_or("").into());
            }
            "permission_answered" if mine => seen.answered.push((
                v["allowed"].as_bool().unwrap_or(false),
                v["by"].as_str().unwrap_or("").into(),
            )),
            "completed" if mine => {
                seen.summary = v["result"]["summary"].as_str().map(String::from);
            }
            "agent_session" if mine => seen
                .sessions
                .push(v["session"].as_str().unwrap_or("").into()),
            "spawned" | "spawn_dropped" => seen.ledger_rows += 1,
            "warning" => seen
                .warnings
                .push(v["message"].as_str().unwrap_or("").into()),
            "run_finished" => seen.outcome = v["outcome"].as_str().unwrap_or("").into(),
            _ => {}
        }
    }
    seen.file = if land {
        // On the run's branch (the run is `run`, its directory's name),
        // and nowhere in the play's own directory.
        assert!(
            !work.join("hello.txt").exists(),
            "the play's directory untouched"
        );
        std::process::Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["show", "playdeck/run:hello.txt"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        std::fs::read_to_string(work.join("hello.txt")).ok()
    };
    seen.stdout =
        std::fs::read_to_string(run_dir.join(format!("logs/{scenario}.{last_attempt}.stdout.log")))
            .unwrap_or_default();
    if let Ok(c) = std::fs::read_to_string(
        run_dir.join(format!("logs/{scenario}.{last_attempt}.command.json")),
    ) && let Ok(v) = serde_json::from_str::<Value>(&c)
    {
        seen.continues = v["continues"].as_str().map(String::from);
        seen.argv = v["argv"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
    }
    seen
}

/// What the operator got against what `want` says they must, with the
/// retries playdeck's policy must have made.
fn check(cli: &str, version: &str, scenario: &str, s: &Seen) -> Result<(), String> {
    let fail = |why: String| {
        let tail: String = {
            let chars: Vec<char> = s.stdout.chars().collect();
            chars[chars.len().saturating_sub(1500)..].iter().collect()
        };
        let brief = Seen {
            stdout: String::new(),
            ..s.clone()
        };
        Err(format!("{why}\n  saw: {brief:#?}\n  stdout ends: {tail}"))
    };
    let failed_with = |cat: &str| match &s.failure {
        Some((c, _)) if c == cat && s.outcome == "failed" => Ok(()),
        _ => fail(format!("expected a failure of cause {cat}")),
    };
    match want(cli, version, scenario, true) {
        Want::Succeeds { usage, tool, spawn } => {
            if s.outcome != "succeeded" {
                return fail("expected success".into());
            }
            if usage && let Err(e) = usage_counted_once(cli, version, s.usage.as_ref()) {
                return fail(e);
            }
            // Every CLI names its conversation on a run that ends well
            // (copilot only on its last line), and it is on the record,
            // once an attempt, in the stream as the CLI wrote it (issue 40).
            if scenario == "answer"
                && (s.sessions.len() != s.attempts
                    || !s.sessions.iter().all(|id| s.stdout.contains(id.as_str())))
            {
                return fail(format!(
                    "expected one agent_session an attempt, named in the stream: {:?}",
                    s.sessions
                ));
            }
            if cli == "claude" && scenario == "answer" {
                let told = s
                    .argv
                    .windows(2)
                    .any(|w| w[0] == "--max-budget-usd" && w[1] == "100.00");
                if told == older(version, "2.1") {
                    return fail(format!(
                        "--max-budget-usd 100.00 is for claude 2.1 on (2.0 refuses it): {:?}",
                        s.argv
                    ));
                }
            }
            if tool && (s.file.as_deref().map(str::trim) != Some("hi") || s.tools.is_empty()) {
                return fail("expected tool activity and hello.txt with hi".into());
            }
            if spawn && s.ledger_rows != 1 {
                return fail("expected one ledger row".into());
            }
            if scenario == "tool-readonly" {
                if s.file.is_some() {
                    return fail("a read-only agent wrote hello.txt".into());
                }
                // Where the CLI prints its refusal, the operator sees it
                // (opencode and gemini do not offer the writers at all;
                // codex 0.171 keeps the failed command to the model).
                let denial = match cli {
                    "claude" => Some("permission_denials\":[{"),
                    "copilot" => Some("\"code\":\"denied\""),
                    "codex" if version.starts_with("0.4") => Some("failed in sandbox"),
                    _ => None,
                };
                if let Some(d) = denial
                    && !s.stdout.contains(d)
                {
                    return fail(format!("the refusal ({d}) is not in the agent's output"));
                }
            }
            // Where the CLI's own retries are off, playdeck's policy took
            // the first 500 back (claude 2.0 ignores CLAUDE_CODE_MAX_RETRIES
            // and recovers inside, as opencode and copilot do).
            let own_retries_off = cli == "codex"
                || (cli == "claude" && !older(version, "2.1"))
                || (cli == "gemini" && !version.starts_with("0.11"));
            if scenario == "flaky"
                && own_retries_off
                && !(s.attempts == 2
                    && s.retries.len() == 1
                    && matches!(s.retries[0].as_str(), "server_error" | "overloaded"))
            {
                return fail("expected one retry after a server error".into());
            }
            Ok(())
        }
        Want::Fails(cat) => {
            failed_with(cat)?;
            let passing = matches!(
                cat,
                "rate_limit" | "overloaded" | "server_error" | "network"
            );
            // [retry] attempts = 2: a passing cause once more, then the
            // failure; any other cause at once.
            let retried = s.retries == [cat] && s.attempts == 2;
            let at_once = s.retries.is_empty() && s.attempts == 1;
            match (passing, retried, at_once) {
                (true, true, _) | (false, _, true) => Ok(()),
                (true, ..) => fail(format!("expected one retry ({cat}) then the failure")),
                (false, ..) => fail(format!("{cat} is never retried")),
            }
        }
        Want::LoopsInside => failed_with("timeout"),
    }
}

/// The installed versions of `cli` and a model server for them; `None`
/// (said) when there is nothing to run or nothing to run it against.
pub(crate) fn versions_and_server(cli: &Cli) -> Option<(Vec<(String, PathBuf)>, Server)> {
    let versions = installed(cli.name);
    if versions.is_empty() {
        println!(
            "skipped: no {} installed under target/realcli (tests/realcli/install.sh installs it; it needs npm)",
            cli.name
        );
        return None;
    }
    let Some(server) = Server::start(30) else {
        println!("skipped: python3 is not there to run the model server");
        return None;
    };
    Some((versions, server))
}

/// Every installed version of `cli`, every scenario; all failures at once.
fn every_scenario(cli: &Cli) {
    let Some((versions, server)) = versions_and_server(cli) else {
        return;
    };
    let mut problems = Vec::new();
    for (version, exe) in &versions {
        for scenario in SCENARIOS {
            let seen = run(cli, version, exe, scenario, &server);
            println!(
                "{} {version} {scenario}: {} in {:.1}s",
                cli.name,
                seen.failure
                    .as_ref()
                    .map_or(seen.outcome.clone(), |(c, _)| format!(
                        "{} ({c})",
                        seen.outcome
                    )),
                seen.secs
            );
            if let Err(e) = check(cli.name, version, scenario, &seen) {
                problems.push(format!("{} {version} {scenario}: {e}", cli.name));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// An attempt that made a tool call and then met a 429 on the tool's
/// result (every time: the scripted model refuses it) is retried, and only
/// a retry that continues the conversation — the request carries the
/// earlier call back — ends well (issue 40).
fn continues_after_a_429(cli: &Cli) {
    let Some((versions, server)) = versions_and_server(cli) else {
        return;
    };
    let mut problems = Vec::new();
    for (version, exe) in &versions {
        let s = run(cli, version, exe, "limit-after-tool", &server);
        println!(
            "{} {version} limit-after-tool: {} after {} attempts in {:.1}s, continues {:?}",
            cli.name, s.outcome, s.attempts, s.secs, s.continues
        );
        // gemini 0.11 has no --resume (its --help does not list it): the
        // 429 ends its stream without a result, which is not retried.
        let cannot = cli.name == "gemini" && version.starts_with("0.11");
        let ok = if cannot {
            s.outcome == "failed" && s.continues.is_none()
        } else {
            s.outcome == "succeeded"
                && s.attempts >= 2
                && s.file.as_deref().map(str::trim) == Some("hi")
                && s.continues.is_some()
                && s.sessions.first() == s.continues.as_ref()
        };
        if !ok {
            let brief = Seen {
                stdout: s
                    .stdout
                    .chars()
                    .rev()
                    .take(1500)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect(),
                ..s.clone()
            };
            problems.push(format!("{} {version}: {brief:#?}", cli.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn claude_continues_its_conversation_after_a_429() {
    continues_after_a_429(&CLAUDE);
}

thread_local! {
    /// Whether [`run_saying`] runs the play from its own directory by a
    /// relative path.
    static IN_PLACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Issue 56: run from the play's directory (`playdeck run play.toml`, no
/// worktree), the operation's directory is `.`; claude keeps its sessions
/// under the absolute directory's name, and a retry must find it there
/// and continue, not start afresh.
#[test]
fn claude_continues_its_conversation_in_the_plays_own_directory() {
    IN_PLACE.set(true);
    continues_after_a_429(&CLAUDE);
}

#[test]
fn codex_continues_its_conversation_after_a_429() {
    continues_after_a_429(&CODEX);
}

#[test]
fn opencode_continues_its_conversation_after_a_429() {
    continues_after_a_429(&OPENCODE);
}

#[test]
fn gemini_continues_its_conversation_after_a_429() {
    continues_after_a_429(&GEMINI);
}

#[test]
fn copilot_continues_its_conversation_after_a_429() {
    continues_after_a_429(&COPILOT);
}

/// The operator speaks to the agent while it runs a command (`ctl say`):
/// claude takes the message on its live input, in the same process; the
/// others are stopped once out of their tool call and continue their
/// session told it. Either way the model's answer says what it heard
/// (the scripted model answers so only when a message carries it).
fn hears_the_operator(cli: &Cli) {
    let Some((versions, server)) = versions_and_server(cli) else {
        return;
    };
    let mut problems = Vec::new();
    for (version, exe) in &versions {
        let s = run_saying(
            cli,
            version,
            exe,
            "listen",
            &server,
            Some(Act::Say("OPERATOR_SAYS=blue")),
        );
        println!(
            "{} {version} listen: {} after {} attempts in {:.1}s, said {:?}, answered {:?}",
            cli.name, s.outcome, s.attempts, s.secs, s.said, s.summary
        );
        // claude reads it live: one attempt, one process; the others
        // continue the session in a second attempt.
        let attempts = if cli.name == "claude" { 1 } else { 2 };
        let ok = s.outcome == "succeeded"
            && s.said.as_ref().is_some_and(|(code, _)| *code == Some(0))
            && s.summary
                .as_deref()
                .is_some_and(|a| a.contains("I heard: blue"))
            && s.attempts == attempts
            && (attempts == 1
                || s.continues.is_some() && s.sessions.first() == s.continues.as_ref());
        if !ok {
            let tail: String = {
                let chars: Vec<char> = s.stdout.chars().collect();
                chars[chars.len().saturating_sub(2500)..].iter().collect()
            };
            problems.push(format!(
                "{} {version}: {:#?}\n  stdout ends: {tail}",
                cli.name,
                Seen {
                    stdout: String::new(),
                    ..s.clone()
                }
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A ToolSet that leaves the writer to the operator (`ask = ["Write"]`,
/// read-only otherwise): claude asks playdeck (its permission prompt tool,
/// `playdeck ask-mcp`), the operation waits in the approval lane, and the
/// operator's `ctl permit` lets the file be written, `ctl deny` keeps it
/// unwritten, and no answer within `ask_timeout` denies it.
#[test]
fn claude_asks_the_operator_for_permission() {
    let Some((versions, server)) = versions_and_server(&CLAUDE) else {
        return;
    };
    let mut problems = Vec::new();
    for (version, exe) in &versions {
        for (scenario, act) in [
            ("ask-permit", Some(Act::Permit)),
            ("ask-deny", Some(Act::Deny)),
            ("ask-timeout", None),
        ] {
            let s = run_saying(&CLAUDE, version, exe, scenario, &server, act);
            println!(
                "claude {version} {scenario}: {} in {:.1}s, asked {:?}, answered {:?}, ctl {:?}, file {:?}",
                s.outcome, s.secs, s.asked, s.answered, s.said, s.file
            );
            let (allowed, by) = match scenario {
                "ask-permit" => (true, "ctl ("),
                "ask-deny" => (false, "ctl ("),
                _ => (false, "timeout"),
            };
            let ok = s.outcome == "succeeded"
                && s.asked.len() == 1
                && s.asked[0].starts_with("Write(")
                && s.asked[0].ends_with("hello.txt)")
                && s.answered.len() == 1
                && s.answered[0].0 == allowed
                && s.answered[0].1.starts_with(by)
                && (s.file.as_deref().map(str::trim) == Some("hi")) == allowed
                && act.is_none_or(|_| s.said.as_ref().is_some_and(|(c, _)| *c == Some(0)))
                // ctl status showed the call whole, and its basis.
                && act.is_none_or(|_| {
                    s.said.as_ref().is_some_and(|(_, t)| {
                        t.contains("hello.txt (a new file, whole):")
                            && t.contains("    │ hi")
                            && t.contains("--on call@")
                    })
                });
            if !ok {
                let tail: String = {
                    let chars: Vec<char> = s.stdout.chars().collect();
                    chars[chars.len().saturating_sub(2000)..].iter().collect()
                };
                problems.push(format!(
                    "claude {version} {scenario}: {:#?}\n  stdout ends: {tail}",
                    Seen {
                        stdout: String::new(),
                        ..s.clone()
                    }
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// Landing the work (issue 41) with the real CLIs: the agent writes its
/// file in its operation's own worktree, and it is on the run's branch
/// once the operation succeeds.
fn lands_its_work(cli: &Cli) {
    let Some((versions, server)) = versions_and_server(cli) else {
        return;
    };
    let mut problems = Vec::new();
    for (version, exe) in &versions {
        // opencode 1.0 in a git repository lists files with ripgrep, and
        // downloads it when it is not on PATH (`.ci/run` installs it).
        if cli.name == "opencode"
            && older(version, "1.1")
            && Command::new("rg").arg("--version").output().is_err()
        {
            println!("opencode {version} land: skipped: ripgrep (rg) is not on PATH");
            continue;
        }
        let s = run_saying(cli, version, exe, "land", &server, None);
        println!(
            "{} {version} land: {} in {:.1}s, on the run's branch {:?}",
            cli.name, s.outcome, s.secs, s.file
        );
        if s.outcome != "succeeded" || s.file.as_deref().map(str::trim) != Some("hi") {
            problems.push(format!(
                "{} {version}: {:#?}",
                cli.name,
                Seen {
                    stdout: String::new(),
                    ..s.clone()
                }
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn claude_lands_its_work_on_the_runs_branch() {
    lands_its_work(&CLAUDE);
}

#[test]
fn codex_lands_its_work_on_the_runs_branch() {
    lands_its_work(&CODEX);
}

#[test]
fn opencode_lands_its_work_on_the_runs_branch() {
    lands_its_work(&OPENCODE);
}

/// Issue 55 with a real CLI: its work waits for review; sent back with a
/// line note (as the diff view's `T` words it), the agent continues its
/// conversation and writes what the note asks; nothing of it lands until
/// a second approval, made on exactly the commits that review showed — an
/// approval on the first review's commits is refused as stale.
fn review_sent_back(cli: &Cli) {
    let Some((versions, server)) = versions_and_server(cli) else {
        return;
    };
    let mut problems = Vec::new();
    for (version, exe) in &versions {
        match review_round(cli, version, exe, &server) {
            Ok(secs) => println!(
                "{} {version} review sent back and landed in {secs:.1}s",
                cli.name
            ),
            Err(why) => problems.push(format!("{} {version}: {why}", cli.name)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

fn review_round(cli: &Cli, version: &str, exe: &Path, server: &Server) -> Result<f64, String> {
    let Staged {
        base,
        home,
        work,
        play_path,
        ..
    } = stage(cli, version, exe, "review", server);
    server.reset();
    let run_dir = base.path().join("run");
    let t0 = Instant::now();
    let err_path = base.path().join("run.stderr");
    let mut child = staged_run(&home, &run_dir, &play_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let mut lines = common::JsonLines::read(&mut child, Some(err_path.clone()));
    let mut stdin = child.stdin.take().unwrap();
    let mut say = |line: &str| {
        use std::io::Write;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| e.to_string())
    };
    let within = Duration::from_secs(180);
    let review = |v: &Value| v["type"] == "permission_asked" && v["kind"] == "review";
    let on_branch = |file: &str| {
        Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["show", &format!("playdeck/run:{file}")])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let first = lines.until("its first review", within, review);
    if on_branch("hello.txt").is_some() {
        return Err("hello.txt landed before its review was decided".into());
    }
    // The diff view's T sends the notes on its lines as one message.
    say("say review Notes on your diff: hello.txt:1 (+hi): OPERATOR_SAYS=again")?;
    let second = lines.until("its second review", within, |v| {
        review(v) && v["seq"] != first["seq"]
    });
    if on_branch("again.txt").is_some() {
        return Err("again.txt landed before its second review was decided".into());
    }
    let detail = second["detail"].as_str().unwrap_or_default();
    if !detail.contains("again.txt") {
        return Err(format!(
            "the second review does not show again.txt: {second}"
        ));
    }
    let basis = |v: &Value| {
        format!(
            "review@{}:{}",
            v["seq"],
            v["on"].as_str().unwrap_or_default()
        )
    };
    // Approved on the first review's commits: refused, nothing lands.
    say(&format!("approve review --on {}", basis(&first)))?;
    common::wait_for(
        "the stale approval refused",
        Duration::from_secs(30),
        || {
            let e = std::fs::read_to_string(&err_path).unwrap_or_default();
            if e.contains("not decided") {
                Ok(())
            } else {
                Err(e)
            }
        },
    );
    say(&format!("approve review --on {}", basis(&second)))?;
    let landed = lines.until("its work lands", within, |v| v["type"] == "landed");
    drop(stdin);
    let _ = child.wait();
    // What landed is exactly what the second review showed: its commits.
    let on = second["on"].as_str().unwrap_or_default();
    let shown: Vec<String> = common::git(&work, &["log", "--format=%h", on])
        .lines()
        .map(str::to_string)
        .collect();
    let landed_commits: Vec<String> = landed["commits"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str()?.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut a = shown.clone();
    let mut b = landed_commits.clone();
    a.sort();
    b.sort();
    if a != b {
        return Err(format!(
            "landed {landed_commits:?}, the review showed {shown:?}"
        ));
    }
    match (
        on_branch("hello.txt").as_deref(),
        on_branch("again.txt").as_deref(),
    ) {
        (Some("hi"), Some("again")) => Ok(t0.elapsed().as_secs_f64()),
        other => Err(format!("on the run's branch: {other:?}; {landed}")),
    }
}

#[test]
fn claude_lands_only_a_second_review_after_a_send_back() {
    review_sent_back(&CLAUDE);
}

#[test]
fn codex_lands_only_a_second_review_after_a_send_back() {
    review_sent_back(&CODEX);
}

#[test]
fn claude_hears_the_operator_while_it_runs() {
    hears_the_operator(&CLAUDE);
}

#[test]
fn codex_hears_the_operator_while_it_runs() {
    hears_the_operator(&CODEX);
}

#[test]
fn opencode_hears_the_operator_while_it_runs() {
    hears_the_operator(&OPENCODE);
}

#[test]
fn claude_through_playdeck() {
    every_scenario(&CLAUDE);
}

#[test]
fn codex_through_playdeck() {
    every_scenario(&CODEX);
}

#[test]
fn opencode_through_playdeck() {
    every_scenario(&OPENCODE);
}

#[test]
fn gemini_through_playdeck() {
    every_scenario(&GEMINI);
}

#[test]
fn copilot_through_playdeck() {
    every_scenario(&COPILOT);
}
