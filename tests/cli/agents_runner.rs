//! The subprocess runner with the example agent (`playdeck-agent`), through
//! the kernel: outcomes and their categories, stalls, runtime limits,
//! cancel, stdin prompts, and requests on the stream reaching admission.
//! Real processes need the real clock; limits here are seconds (the clock
//! starts at spawn, and on a loaded machine the agent is slow to start).

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{AGENT, Collect};
use playdeck::agents::{AgentDef, AgentRegistry, PromptVia, RunContext, StreamFormat, Tails};
use playdeck::kernel::{
    ActivityState, Envelope, GraphBuilder, Operation, Request, RoleRoute, Run, RunConfig,
    SignalKind, StaticRoleBuilder,
};
use serde_json::{Value, json};

fn agent() -> AgentDef {
    let mut d = AgentDef::new("ex", AGENT, StreamFormat::Jsonl);
    d.model = Some("test-model".into());
    d
}

struct Outcome {
    env: Envelope,
    signals: Collect,
    tails: Arc<Tails>,
}

impl Outcome {
    fn result(&self, name: &str) -> Value {
        let id = common::ids_by_name(&self.env)[name];
        self.env.result_of(&id).cloned().unwrap_or(Value::Null)
    }

    /// (category, error) of a failed operation.
    fn failure(&self, name: &str) -> (String, String) {
        failure(&self.signals, name)
    }
}

fn failure(signals: &Collect, name: &str) -> (String, String) {
    signals
        .all()
        .iter()
        .find_map(|s| match &s.kind {
            SignalKind::Failed {
                node,
                error,
                category,
            } if &*node.name == name => Some((category.to_string(), error.to_string())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{name} did not fail"))
}

fn run_setup(
    def: AgentDef,
    instruction: &str,
    params: Value,
    dir: &Path,
) -> (Run, playdeck::kernel::RunHandle, Collect, Arc<Tails>) {
    let tails = Tails::new();
    let ctx = Arc::new(RunContext {
        run_id: "r1".into(),
        log_dir: Some(dir.join("logs")),
        workspace: dir.to_path_buf(),
        tails: tails.clone(),
        ..RunContext::default()
    });
    let agents = Arc::new(AgentRegistry::with_commands(1.0, [&def], ctx));
    let mut b = GraphBuilder::new();
    b.add_root(
        Operation::new("work", instruction)
            .with_role("implementer")
            .with_agent("ex", params),
    );
    let routes = StaticRoleBuilder::new([
        RoleRoute {
            role: Arc::from("implementer"),
            agent: Arc::from("ex"),
            params: Arc::new(Value::Null),
        },
        RoleRoute {
            role: Arc::from("tester"),
            agent: Arc::from("noop"),
            params: Arc::new(Value::Null),
        },
    ]);
    let (mut run, handle) = Run::new(
        b.build().unwrap(),
        RunConfig::default(),
        agents,
        Arc::new(routes),
    )
    .unwrap();
    let signals = Collect::default();
    run.add_sink(Box::new(signals.clone()));
    (run, handle, signals, tails)
}

async fn run_one(def: AgentDef, instruction: &str, dir: &Path) -> Outcome {
    let (run, _h, signals, tails) = run_setup(def, instruction, Value::Null, dir);
    let env = run.run().await;
    Outcome {
        env,
        signals,
        tails,
    }
}

#[tokio::test]
async fn success_parses_state_usage_and_result() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_one(agent(), "fix the parser\n@sleep 0.2", dir.path()).await;
    let r = out.result("work");
    assert_eq!(r["summary"], "done: fix the parser");
    assert_eq!(r["model"], "test-model");
    assert_eq!(r["prompt_via"], "argv");
    assert_eq!(
        Path::new(r["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        dir.path().canonicalize().unwrap()
    );
    let states: Vec<(ActivityState, Option<String>)> = out
        .signals
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::AgentActivity { state, tool, .. } => {
                Some((*state, tool.as_deref().map(str::to_string)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        states,
        vec![
            (ActivityState::Waiting, None),
            (ActivityState::Thinking, None),
            (ActivityState::Tool, Some("Read".into())),
            (ActivityState::Tool, Some("Edit".into())),
            (ActivityState::Writing, None),
        ]
    );
    assert_eq!(out.signals.count("agent_usage"), 1);
    let logs = dir.path().join("logs");
    let stdout = std::fs::read_to_string(logs.join("work.1.stdout.log")).unwrap();
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .contains("\"type\":\"result\"")
    );
    let cmd: Value =
        serde_json::from_str(&std::fs::read_to_string(logs.join("work.1.command.json")).unwrap())
            .unwrap();
    assert_eq!(cmd["argv"][0], AGENT);
    let tail = out
        .tails
        .get(&common::ids_by_name(&out.env)["work"])
        .unwrap();
    assert!(tail.lines.back().unwrap().text.contains("result"));
}

#[tokio::test]
async fn a_crash_fails_with_its_code_and_last_stderr_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_one(
        agent(),
        "x\n@sleep 0\n@stderr compiler exploded\n@exit 3",
        dir.path(),
    )
    .await;
    let (cat, err) = out.failure("work");
    assert_eq!(cat, "agent_crash");
    assert!(
        err.contains("code 3") && err.contains("compiler exploded"),
        "{err}"
    );
    let stderr = std::fs::read_to_string(dir.path().join("logs/work.1.stderr.log")).unwrap();
    assert_eq!(stderr, "compiler exploded\n");
}

#[tokio::test]
async fn a_crash_that_says_why_on_stderr_is_failed_by_that_cause() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_one(
        agent(),
        "x\n@sleep 0\n@stderr Error: invalid x-api-key\n@exit 1",
        dir.path(),
    )
    .await;
    let (cat, err) = out.failure("work");
    assert_eq!(cat, "auth", "{err}");
    assert!(
        err.contains("code 1") && err.contains("invalid x-api-key"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stream_error_is_failed_by_its_cause_and_a_rate_limit_waits_its_reset() {
    let dir = tempfile::tempdir().unwrap();
    let (run, handle, signals, _) = run_setup(
        agent(),
        "x\n@sleep 0\n@error 429 Too Many Requests: retry after 40s",
        Value::Null,
        dir.path(),
    );
    let task = tokio::spawn(run.run());
    let scheduled = loop {
        let found = signals.all().iter().find_map(|s| match &s.kind {
            SignalKind::RetryScheduled {
                category, wait_ms, ..
            } => Some((category.to_string(), *wait_ms)),
            _ => None,
        });
        if let Some(f) = found {
            break f;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(scheduled, ("rate_limit".to_string(), 40_000));
    handle
        .request(playdeck::kernel::Request::Cancel)
        .await
        .unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_missing_binary_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    d.binary = "playdeck-no-such-agent".into();
    let out = run_one(d, "x", dir.path()).await;
    let (cat, err) = out.failure("work");
    assert_eq!(cat, "binary_not_found");
    assert!(
        err.contains("\"playdeck-no-such-agent\" not found on PATH"),
        "{err}"
    );
    let mut d = agent();
    d.binary = "/nonexistent/agent".into();
    let (cat, _) = run_one(d, "x", dir.path()).await.failure("work");
    assert_eq!(cat, "binary_not_found");
}

#[tokio::test]
async fn a_stall_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    // The clock starts at spawn: room for the agent to start and speak.
    d.stall_timeout = Duration::from_secs(2);
    let t0 = Instant::now();
    let out = run_one(d, "x\n@fork 60\n@silent 60", dir.path()).await;
    assert_eq!(out.failure("work").0, "stall_timeout");
    // Long before its silence (or its grandchild) would have ended.
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_all_gone(&reported_pids(&out, "grandchild")).await;
}

#[tokio::test]
async fn output_without_newlines_is_not_a_stall() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    d.stall_timeout = Duration::from_secs(2);
    // Dots, no newline, for twice and a half the stall timeout.
    let out = run_one(d, "spin\n@spinner 5\n@sleep 0", dir.path()).await;
    assert_eq!(out.result("work")["summary"], "done: spin");
}

#[tokio::test]
async fn a_process_that_left_the_group_does_not_hold_the_operation() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = run_one(agent(), "x\n@escape 30\n@sleep 0", dir.path()).await;
    let escaped = reported_pids(&out, "escaped");
    // It still holds the pipe: reading stops after the grace period.
    assert_eq!(out.result("work")["summary"], "done: x");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(
        out.signals
            .warnings()
            .iter()
            .any(|w| w.contains("outside its group")),
        "{:?}",
        out.signals.warnings()
    );
    // Outside a session nothing tags it for playdeck; the test cleans up.
    for pid in escaped {
        if let Some(p) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
}

/// Pids the example agent reported in a text line containing `what`.
fn reported_pids(out: &Outcome, what: &str) -> Vec<i32> {
    let tail = out
        .tails
        .get(&common::ids_by_name(&out.env)["work"])
        .unwrap();
    let line = tail
        .lines
        .iter()
        .find(|l| l.text.contains(what))
        .unwrap_or_else(|| panic!("no {what} line in {:?}", tail.lines));
    let v: Value = serde_json::from_str(&line.text).unwrap();
    v["text"]
        .as_str()
        .unwrap()
        .split(' ')
        .filter_map(|w| w.parse().ok())
        .collect()
}

async fn assert_all_gone(pids: &[i32]) {
    assert!(!pids.is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids.iter().all(|p| pid_gone(*p)) {
        assert!(
            Instant::now() < deadline,
            "processes {pids:?} outlived their operation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_stall_without_kill_warns_once_and_waits() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    d.stall_timeout = Duration::from_secs(2);
    d.kill_on_stall = false;
    // Silent for three stall timeouts: one warning, not three.
    let out = run_one(d, "x\n@silent 6\n@sleep 0", dir.path()).await;
    assert_eq!(out.result("work")["summary"], "done: x");
    let warnings = out.signals.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("no output for 2s"), "{warnings:?}");
}

#[tokio::test]
async fn max_runtime_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    d.max_runtime = Some(Duration::from_secs(3));
    let t0 = Instant::now();
    let out = run_one(d, "x\n@fork 60\n@sleep 60", dir.path()).await;
    let (cat, err) = out.failure("work");
    assert_eq!(cat, "timeout");
    assert!(err.contains("max_runtime 3s"), "{err}");
    // Long before its work (or its grandchild) would have ended.
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_all_gone(&reported_pids(&out, "grandchild")).await;
}

fn pid_gone(pid: i32) -> bool {
    // Gone, or a zombie nobody has reaped yet (it runs nothing).
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn cancel_mid_run_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (run, handle, signals, tails) =
        run_setup(agent(), "x\n@fork 60\n@sleep 60", Value::Null, dir.path());
    let task = run.spawn();
    // Wait for the agent to report its pid and its grandchild's.
    let deadline = Instant::now() + Duration::from_secs(20);
    let pids = loop {
        let line = signals.all().iter().find_map(|s| match &s.kind {
            SignalKind::Started { node, .. } => Some(node.op_id),
            _ => None,
        });
        if let Some(op) = line
            && let Some(t) = tails.get(&op)
            && let Some(l) = t.lines.iter().find(|l| l.text.contains("grandchild"))
        {
            let v: Value = serde_json::from_str(&l.text).unwrap();
            let words: Vec<i32> = v["text"]
                .as_str()
                .unwrap()
                .split(' ')
                .filter_map(|w| w.parse().ok())
                .collect();
            break words;
        }
        assert!(Instant::now() < deadline, "the agent never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(pids.len(), 2);
    assert!(!pid_gone(pids[0]) && !pid_gone(pids[1]));
    handle.request(Request::Cancel).await.unwrap();
    let env = task.await.unwrap();
    assert_eq!(env.outcome.as_str(), "cancelled");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(pid_gone(pids[0]) && pid_gone(pids[1])) {
        assert!(
            Instant::now() < deadline,
            "processes {pids:?} outlived the cancel"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_prompt_can_go_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    d.prompt_via = PromptVia::Stdin;
    let out = run_one(d, "read me from stdin\n@sleep 0", dir.path()).await;
    let r = out.result("work");
    assert_eq!(r["prompt_via"], "stdin");
    assert_eq!(r["summary"], "done: read me from stdin");
}

#[tokio::test]
async fn empty_output_and_stream_errors_have_their_categories() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_one(agent(), "x\n@empty", dir.path()).await;
    assert_eq!(out.failure("work").0, "empty_output");
    let out = run_one(agent(), "x\n@sleep 0\n@error the model refused", dir.path()).await;
    let (cat, err) = out.failure("work");
    assert_eq!(
        (cat.as_str(), err.as_str()),
        ("stream_error", "the model refused")
    );
}

#[tokio::test]
async fn spawn_requests_on_the_stream_reach_admission() {
    let dir = tempfile::tempdir().unwrap();
    for format in [StreamFormat::Jsonl, StreamFormat::Claude] {
        let mut d = agent();
        d.stream_format = format;
        d.flags
            .insert("claude".into(), vec!["--format".into(), "claude".into()]);
        // The operation selects the flag profile that makes playdeck-agent
        // speak Claude's stream-json.
        let params = match format {
            StreamFormat::Claude => json!({"flag_profile": "claude"}),
            _ => Value::Null,
        };
        let instruction = "x\n@sleep 0.1\n@spawn tester: write the edge-case tests";
        let (run, _h, signals, _t) = run_setup(d, instruction, params, dir.path());
        let env = run.run().await;
        let spawned: Vec<(Option<String>, String)> = signals
            .all()
            .iter()
            .filter_map(|s| match &s.kind {
                SignalKind::Spawned {
                    assignee,
                    instruction,
                    ..
                } => Some((
                    assignee.as_deref().map(str::to_string),
                    instruction.to_string(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            spawned,
            vec![(Some("tester".into()), "write the edge-case tests".into())],
            "{format:?}"
        );
        assert_eq!(env.completed_operations.len(), 2, "{format:?}");
    }
}

#[tokio::test]
async fn the_claude_stream_format_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    d.stream_format = StreamFormat::Claude;
    // playdeck-agent prints Claude's stream-json when told to.
    d.subcommand = String::new();
    d.flags
        .insert("stream".into(), vec!["--format".into(), "claude".into()]);
    let tails = Tails::new();
    let ctx = Arc::new(RunContext {
        run_id: "r1".into(),
        workspace: dir.path().to_path_buf(),
        flag_profile: Some("stream".into()),
        tails,
        ..RunContext::default()
    });
    let agents = Arc::new(AgentRegistry::with_commands(1.0, [&d], ctx));
    let mut b = GraphBuilder::new();
    b.add_root(
        Operation::new(
            "work",
            "review it\n@sleep 0.1\n@result {\"verdict\": \"ship\"}",
        )
        .with_role("reviewer")
        .with_agent("ex", Value::Null),
    );
    let (mut run, _h) = Run::new(
        b.build().unwrap(),
        RunConfig::default(),
        agents,
        Arc::new(StaticRoleBuilder::new([])),
    )
    .unwrap();
    let signals = Collect::default();
    run.add_sink(Box::new(signals.clone()));
    let env = run.run().await;
    let id = common::ids_by_name(&env)["work"];
    let r = env.result_of(&id).unwrap();
    assert_eq!(r["verdict"], "ship");
    assert_eq!(r["flags"], json!([]), "--format was consumed by the agent");
    let tools: Vec<String> = signals
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::AgentActivity {
                state: ActivityState::Tool,
                tool,
                ..
            } => tool.as_deref().map(str::to_string),
            _ => None,
        })
        .collect();
    assert_eq!(tools, vec!["Read".to_string()]);
    let usage = signals
        .all()
        .iter()
        .find_map(|s| match &s.kind {
            SignalKind::AgentUsage { usage, .. } => Some(*usage),
            _ => None,
        })
        .unwrap();
    assert!(usage.cost_usd.unwrap() > 0.0 && usage.output_tokens.unwrap() > 0);
}

#[tokio::test]
async fn an_unknown_flag_profile_warns_through_the_run_and_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = agent();
    d.flags.insert("plan".into(), vec!["--think".into()]);
    let (run, _h, signals, _t) = run_setup(
        d,
        "x\n@sleep 0",
        json!({"flag_profile": "research"}),
        dir.path(),
    );
    let env = run.run().await;
    let id = common::ids_by_name(&env)["work"];
    assert_eq!(env.result_of(&id).unwrap()["flags"], json!([]));
    let warnings: Vec<String> = signals
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::Warning { message, op_id } if *op_id == Some(id) => {
                Some(message.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .contains("agent \"ex\": no flags for profile 'research' (profiles it defines: plan)"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn a_malformed_flag_profile_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _h, signals, _t) =
        run_setup(agent(), "x", json!({"flag_profile": "--yolo"}), dir.path());
    run.run().await;
    let (cat, err) = failure(&signals, "work");
    assert_eq!(cat, "invalid_flag_profile");
    assert!(err.contains("\"--yolo\" is not a valid name"), "{err}");
    assert!(!dir.path().join("logs").exists(), "nothing was started");
}

#[tokio::test]
async fn events_without_an_answer_are_not_a_result() {
    let dir = tempfile::tempdir().unwrap();
    // echo prints its prompt: one state event and nothing else.
    let d = AgentDef::new("ex", "echo", StreamFormat::Jsonl);
    let out = run_one(d, r#"{"type":"state","state":"thinking"}"#, dir.path()).await;
    let (cat, err) = out.failure("work");
    assert_eq!(cat, "stream_error");
    assert!(err.contains("without a result"), "{err}");
}

#[tokio::test]
async fn a_missing_workspace_is_an_os_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    let out = run_one(agent(), "x", &gone).await;
    let (cat, err) = out.failure("work");
    assert_eq!(cat, "os_error");
    assert!(
        err.contains("gone") && err.contains("does not exist"),
        "{err}"
    );
}

/// An agent that is a shell script: `sh -c SCRIPT`.
fn shell(script_format: StreamFormat) -> AgentDef {
    let mut d = AgentDef::new("ex", "sh", script_format);
    d.subcommand = "-c".into();
    d
}

#[tokio::test]
async fn a_result_line_over_a_mebibyte_stays_whole() {
    let dir = tempfile::tempdir().unwrap();
    // A 3 MiB answer on one line, as a predecessor's large result would be.
    let script = r#"printf '{"type":"result","result":{"blob":"'; head -c 3145728 /dev/zero | tr '\0' a; printf '"}}\n'"#;
    let out = run_one(shell(StreamFormat::Jsonl), script, dir.path()).await;
    let r = out.result("work");
    assert_eq!(
        r["blob"].as_str().map(str::len),
        Some(3 << 20),
        "not rewritten"
    );
    assert!(r.get("summary").is_none());
}

#[tokio::test]
async fn a_line_over_the_limit_fails_as_output_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let script = "head -c 67108865 /dev/zero | tr '\\0' a; echo";
    let out = run_one(shell(StreamFormat::Jsonl), script, dir.path()).await;
    let (cat, err) = out.failure("work");
    assert_eq!(cat, "output_too_large");
    assert!(err.contains("64 MiB"), "{err}");
}

#[tokio::test]
async fn a_last_line_without_a_newline_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    // A claude result with usage as the very last bytes, no newline.
    let script = r#"printf '%s\n' '{"type":"stream_event","event":{"type":"content_block_start","content_block":{"type":"tool_use","name":"Read"}}}'; printf '%s' '{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.5,"usage":{"input_tokens":4,"cache_read_input_tokens":6,"output_tokens":2}}'"#;
    let out = run_one(shell(StreamFormat::Claude), script, dir.path()).await;
    assert_eq!(out.result("work")["summary"], "done");
    let usage = out
        .signals
        .all()
        .iter()
        .find_map(|s| match &s.kind {
            SignalKind::AgentUsage { usage, .. } => Some(*usage),
            _ => None,
        })
        .expect("the last line's usage");
    assert_eq!(
        (
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens,
            usage.cost_usd
        ),
        (Some(10), Some(6), Some(2), Some(0.5))
    );
}

#[tokio::test]
async fn a_prompt_over_the_argument_limit_goes_on_stdin_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // Over 128 KiB in one argument is "Argument list too long" for exec.
    let instruction = format!("read me from stdin\n@sleep 0\n{}", "x".repeat(200 * 1024));
    let out = run_one(agent(), &instruction, dir.path()).await;
    let r = out.result("work");
    assert_eq!(r["prompt_via"], "stdin");
    assert_eq!(r["summary"], "done: read me from stdin");
    let cmd: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("logs/work.1.command.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cmd["prompt_passed"], "stdin");
    assert!(
        cmd["prompt_note"]
            .as_str()
            .unwrap()
            .contains("over the 128 KiB limit"),
        "{cmd}"
    );
}

#[tokio::test]
async fn codex_notices_are_warnings_and_the_answer_stands() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"printf '%s\n' '{"type":"turn.started"}' '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Skill descriptions were shortened"}}' '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"ok"}}' '{"type":"turn.completed","usage":{"input_tokens":7,"cached_input_tokens":5,"output_tokens":1}}'"#;
    let out = run_one(shell(StreamFormat::Codex), script, dir.path()).await;
    assert_eq!(out.result("work")["summary"], "ok");
    let warnings = out.signals.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("work: codex: Skill descriptions were shortened")),
        "{warnings:?}"
    );
}
