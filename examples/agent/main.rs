//! playdeck-agent: a small agent CLI for tests and demos. It needs nothing
//! installed and speaks playdeck's JSON-lines protocol (or Claude Code's
//! stream-json with `--format claude`).
//!
//! Called as `playdeck-agent PROMPT [--model M] [--format jsonl|claude] ...`
//! (PROMPT `-` reads the prompt from stdin). Lines of the prompt that start
//! with `@` direct it:
//!
//! ```text
//! @sleep 1.5             how long to work, in seconds (default 1.2)
//! @silent 10             print nothing for 10 s first
//! @exit 3                exit with this code
//! @spawn tester: write the edge-case tests   put a spawn request on the stream
//! @escalate needs a product decision          ask for a human in the result
//! @result {"verdict": "ship"}                 the result object
//! @error the model refused                    report a stream error
//! @stderr some text      print a line on stderr
//! @env NAME              report NAME's value (or null) in the result
//! @fork 30               start a `sleep 30` grandchild first
//! @escape 30             start a `sleep 30` grandchild in a process group of
//!                        its own, holding stdout open
//! @setsid 30             start a `sleep 30` grandchild in a session of its
//!                        own (setsid), not holding stdout
//! @spinner 2             print dots without a newline for 2 s
//! @empty                 print nothing at all
//! @replay PATH           print the file at PATH line by line, nothing else (then @exit's code)
//! @no-final-newline      with @replay: leave the last line unterminated
//! @session               keep a conversation: name it on the stream and
//!                        store each turn under $HOME/.playdeck-agent/
//! @fail-first MESSAGE    (with @session) fail with MESSAGE unless this
//!                        turn continues a conversation
//! @strict-session        asked to continue a conversation it does not
//!                        have, exit 42 before naming one (as gemini does)
//! ```
//!
//! With `PLAYDECK_SESSION=ID` (playdeck continuing a conversation) it takes
//! up that stored conversation: the directives are the first turn's, the
//! prompt is the next turn, and the result says how many turns it holds.
//! A conversation that is not stored begins anew under a new id.
//!
//! Everything else in the prompt is the instruction; the first line names
//! the work in the result's summary. Pauses are divided by
//! `PLAYDECK_SPEED` (playdeck exports its `--speed`).

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{Map, Value, json};

#[derive(Default)]
struct Plan {
    instruction: String,
    sleep: f64,
    silent: f64,
    exit: i32,
    spawns: Vec<(String, String)>,
    escalate: Option<String>,
    result: Option<Value>,
    error: Option<String>,
    stderr: Vec<String>,
    env: Vec<String>,
    fork: Option<f64>,
    escape: Option<f64>,
    setsid: Option<f64>,
    spinner: f64,
    empty: bool,
    replay: Option<String>,
    no_final_newline: bool,
    session: bool,
    fail_first: Option<String>,
    strict_session: bool,
}

/// A conversation kept across processes: its id and every prompt so far.
struct Conversation {
    id: String,
    turns: Vec<String>,
    continued: bool,
}

impl Conversation {
    fn dir() -> std::path::PathBuf {
        let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
        std::path::Path::new(&home).join(".playdeck-agent/sessions")
    }

    /// The stored conversation `PLAYDECK_SESSION` names, else a new one;
    /// `prompt` is its next turn.
    fn take_up(prompt: &str) -> Conversation {
        let dir = Self::dir();
        let stored = std::env::var("PLAYDECK_SESSION").ok().and_then(|id| {
            let text = std::fs::read_to_string(dir.join(&id)).ok()?;
            let turns = text
                .lines()
                .filter_map(|l| serde_json::from_str::<String>(l).ok())
                .collect::<Vec<_>>();
            Some((id, turns))
        });
        let mut c = match stored {
            Some((id, turns)) => Conversation {
                id,
                turns,
                continued: true,
            },
            None => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                Conversation {
                    id: format!("pa-{}-{nanos}", std::process::id()),
                    turns: Vec::new(),
                    continued: false,
                }
            }
        };
        c.turns.push(prompt.to_string());
        let lines: String = c.turns.iter().map(|t| format!("{}\n", json!(t))).collect();
        if let Err(e) =
            std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join(&c.id), lines))
        {
            eprintln!("playdeck-agent: cannot store the conversation: {e}");
        }
        c
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(first) = args.get(1) else {
        eprintln!("usage: playdeck-agent PROMPT|- [--model M] [--format jsonl|claude]");
        std::process::exit(2);
    };
    let prompt = if first == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            eprintln!("playdeck-agent: cannot read the prompt from stdin: {e}");
            std::process::exit(2);
        }
        s
    } else {
        first.clone()
    };
    let mut model = None;
    let mut claude = false;
    let mut flags = Vec::new();
    let mut i = 2;
    while i < args.len() {
        match args[i].as_str() {
            "--model" if i + 1 < args.len() => {
                model = Some(args[i + 1].clone());
                i += 1;
            }
            "--format" if i + 1 < args.len() => {
                claude = args[i + 1] == "claude";
                i += 1;
            }
            other => flags.push(other.to_string()),
        }
        i += 1;
    }
    let parse = |text: &str| match read_plan(text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("playdeck-agent: {e}");
            std::process::exit(2);
        }
    };
    let mut plan = parse(&prompt);
    // A continued conversation runs as its first turn directed.
    let conversation =
        (plan.session || std::env::var_os("PLAYDECK_SESSION").is_some()).then(|| {
            let c = Conversation::take_up(&prompt);
            if c.continued {
                plan = parse(&c.turns[0]);
            } else if plan.strict_session && std::env::var_os("PLAYDECK_SESSION").is_some() {
                eprintln!("Error resuming session: No previous sessions found for this project.");
                std::process::exit(42);
            }
            c
        });
    std::process::exit(run(
        &plan,
        conversation.as_ref(),
        model,
        claude,
        flags,
        first == "-",
    ));
}

fn read_plan(prompt: &str) -> Result<Plan, String> {
    let mut p = Plan {
        sleep: 1.2,
        ..Plan::default()
    };
    let mut text = Vec::new();
    for line in prompt.lines() {
        let Some(d) = line.trim().strip_prefix('@') else {
            text.push(line);
            continue;
        };
        let (word, rest) = d.split_once(' ').unwrap_or((d, ""));
        let rest = rest.trim();
        let secs = |what: &str| {
            rest.parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| format!("@{what} wants seconds, got {rest:?}"))
        };
        match word {
            "sleep" => p.sleep = secs("sleep")?,
            "silent" => p.silent = secs("silent")?,
            "fork" => p.fork = Some(secs("fork")?),
            "escape" => p.escape = Some(secs("escape")?),
            "setsid" => p.setsid = Some(secs("setsid")?),
            "spinner" => p.spinner = secs("spinner")?,
            "exit" => {
                p.exit = rest
                    .parse()
                    .map_err(|_| format!("@exit wants a code, got {rest:?}"))?;
            }
            "spawn" => {
                let (role, what) = rest
                    .split_once(':')
                    .ok_or_else(|| format!("@spawn wants `role: instruction`, got {rest:?}"))?;
                p.spawns.push((role.trim().into(), what.trim().into()));
            }
            "escalate" => p.escalate = Some(rest.into()),
            "result" => {
                p.result = Some(
                    serde_json::from_str(rest).map_err(|e| format!("@result is not JSON: {e}"))?,
                );
            }
            "error" => p.error = Some(rest.into()),
            "stderr" => p.stderr.push(rest.into()),
            "env" => p.env.push(rest.into()),
            "empty" => p.empty = true,
            "replay" => p.replay = Some(rest.into()),
            "no-final-newline" => p.no_final_newline = true,
            "session" => p.session = true,
            "strict-session" => p.strict_session = true,
            "fail-first" => {
                p.session = true;
                p.fail_first = Some(rest.into());
            }
            // Not ours: part of the text (a delegation clause may quote @).
            _ => text.push(line),
        }
    }
    p.instruction = text.join("\n").trim().to_string();
    Ok(p)
}

fn say(v: Value) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means nobody listens any more; stop quietly.
    if writeln!(out, "{v}").and_then(|_| out.flush()).is_err() {
        std::process::exit(141);
    }
}

/// Pauses scaled by the run's speed (`playdeck run --speed 4` exports
/// PLAYDECK_SPEED=4), so demos and tests can run fast.
fn pause(secs: f64) {
    let speed = std::env::var("PLAYDECK_SPEED")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(1.0);
    std::thread::sleep(Duration::from_secs_f64(secs / speed));
}

/// Prints a recorded transcript as the agent that recorded it did: one line
/// at a time, flushed, so playdeck reads it as a stream.
fn replay(path: &str, no_final_newline: bool) -> i32 {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("playdeck-agent: cannot read {path}: {e}");
            return 2;
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut out = std::io::stdout().lock();
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        let end = if last && no_final_newline { "" } else { "\n" };
        if write!(out, "{line}{end}")
            .and_then(|_| out.flush())
            .is_err()
        {
            return 141;
        }
    }
    0
}

fn run(
    plan: &Plan,
    conversation: Option<&Conversation>,
    model: Option<String>,
    claude: bool,
    flags: Vec<String>,
    stdin: bool,
) -> i32 {
    if let Some(path) = &plan.replay {
        // Then exits as the recorded CLI did (`@exit`).
        return match replay(path, plan.no_final_newline) {
            0 => plan.exit,
            failed => failed,
        };
    }
    let _grandchild = plan.fork.map(|s| {
        std::process::Command::new("sleep")
            .arg(format!("{s}"))
            .spawn()
            .inspect(|c| {
                let text = format!("pid {} started grandchild {}", std::process::id(), c.id());
                say(json!({"type": "text", "text": text}));
            })
    });
    let _escaped = plan.escape.map(|s| {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("sleep")
            .arg(format!("{s}"))
            .process_group(0)
            .spawn()
            .inspect(|c| {
                let text = format!("escaped grandchild {}", c.id());
                say(json!({"type": "text", "text": text}));
            })
    });
    let _left = plan.setsid.map(|s| {
        std::process::Command::new("setsid")
            .args(["sleep", &format!("{s}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .inspect(|c| {
                let text = format!("setsid grandchild {}", c.id());
                say(json!({"type": "text", "text": text}));
            })
    });
    if plan.silent > 0.0 {
        pause(plan.silent);
    }
    if plan.spinner > 0.0 {
        let mut out = std::io::stdout();
        let mut left = plan.spinner;
        while left > 0.0 {
            let _ = out.write_all(b".").and_then(|_| out.flush());
            pause(0.05);
            left -= 0.05;
        }
        let _ = out.write_all(b"\n");
    }
    if plan.empty {
        return plan.exit;
    }
    for line in &plan.stderr {
        eprintln!("{line}");
    }
    let summary = format!(
        "done: {}",
        plan.instruction
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(80)
            .collect::<String>()
    );
    let mut result = match &plan.result {
        Some(Value::Object(m)) => m.clone(),
        Some(other) => Map::from_iter([("value".to_string(), other.clone())]),
        None => Map::from_iter([("summary".to_string(), Value::String(summary))]),
    };
    result.insert("model".into(), json!(model));
    result.insert(
        "prompt_via".into(),
        json!(if stdin { "stdin" } else { "argv" }),
    );
    result.insert("flags".into(), json!(flags));
    if let Ok(cwd) = std::env::current_dir() {
        result.insert("cwd".into(), json!(cwd));
    }
    if !plan.env.is_empty() {
        let env: Map<String, Value> = plan
            .env
            .iter()
            .map(|k| (k.clone(), json!(std::env::var(k).ok())))
            .collect();
        result.insert("env".into(), Value::Object(env));
    }
    if let Some(reason) = &plan.escalate {
        result.insert("escalation".into(), json!({ "reason": reason }));
    }
    if let Some(c) = conversation.filter(|c| c.continued) {
        result.insert("turns".into(), json!(c.turns.len()));
        result.insert("last_turn".into(), json!(c.turns.last()));
    }
    let step = plan.sleep / 3.0;
    let tokens = 200 + plan.instruction.len() as u64;
    if claude {
        say(json!({"type": "system", "subtype": "init", "model": model}));
        say(
            json!({"type": "stream_event", "event": {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}}}),
        );
        pause(step);
        say(
            json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Read", "input": {}}]}}),
        );
        pause(step);
        say(json!({"type": "user", "message": {"content": [{"type": "tool_result"}]}}));
        for (role, what) in &plan.spawns {
            let req = json!({"spawn_request": {"instruction": what, "assignee": role}});
            say(
                json!({"type": "assistant", "message": {"content": [{"type": "text", "text": req.to_string()}]}}),
            );
        }
        say(
            json!({"type": "stream_event", "event": {"type": "content_block_start", "index": 1, "content_block": {"type": "text"}}}),
        );
        pause(step);
        let is_error = plan.error.is_some();
        let text = plan
            .error
            .clone()
            .unwrap_or_else(|| Value::Object(result).to_string());
        say(json!({
            "type": "result",
            "subtype": if is_error { "error_during_execution" } else { "success" },
            "is_error": is_error,
            "result": text,
            "total_cost_usd": tokens as f64 * 0.000_003,
            "usage": {"input_tokens": tokens, "output_tokens": tokens / 4},
        }));
        return plan.exit;
    }
    if let Some(c) = conversation {
        say(json!({"type": "session", "id": c.id}));
    }
    say(json!({"type": "state", "state": "thinking"}));
    pause(step);
    if let Some(message) = plan
        .fail_first
        .as_ref()
        .filter(|_| !conversation.is_some_and(|c| c.continued))
    {
        say(json!({"type": "error", "message": message}));
        return 1;
    }
    say(json!({"type": "state", "state": "tool", "tool": "Read"}));
    pause(step / 2.0);
    for (role, what) in &plan.spawns {
        say(json!({"type": "request", "spawn_request": {"instruction": what, "assignee": role}}));
    }
    say(json!({"type": "state", "state": "tool", "tool": "Edit"}));
    pause(step / 2.0);
    say(json!({"type": "state", "state": "writing"}));
    say(
        json!({"type": "usage", "cost_usd": tokens as f64 * 0.000_003, "input_tokens": tokens, "output_tokens": tokens / 4}),
    );
    pause(step);
    if let Some(e) = &plan.error {
        say(json!({"type": "error", "message": e}));
    } else {
        say(json!({"type": "result", "result": result}));
    }
    plan.exit
}
