//! ADR-0036 through the binary, on real agent subprocesses: spawned work
//! runs with its role's agent and tools, spawned authority and the pack's
//! modes hold across a resume. The palette in-process is the fast tier's
//! `palette`.

use crate::common;

// ----- through the binary, on real subprocesses ---------------------------------

/// A play whose agent `w` is playdeck-agent (the example agent CLI, JSON
/// lines): `@` lines of an instruction script it, spawned work included.
fn agent_play(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    let agent = common::AGENT;
    let src = format!(
        "[play]\nname = \"agents\"\n[agents.w]\nbinary = \"{agent}\"\nstream_format = \"jsonl\"\n{body}"
    );
    let p = dir.join("play.toml");
    std::fs::write(&p, src).unwrap();
    p
}

fn playdeck(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    common::playdeck()
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Runs `play` headless into `run` until `count` events of type `kind`
/// have come, then cancels it (the stdin `cancel`) and waits for it to
/// end cancelled.
fn run_then_cancel(
    dir: &std::path::Path,
    play: &std::path::Path,
    run: &std::path::Path,
    kind: &str,
    count: usize,
) {
    use std::io::{BufRead, Write};
    let mut child = common::playdeck()
        .args(["run", "--headless", "--run-dir"])
        .arg(run)
        .arg(play)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = 0;
    while seen < count {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the run ended before {count} {kind}"))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        seen += usize::from(v["type"] == kind);
    }
    writeln!(child.stdin.as_mut().unwrap(), "cancel").unwrap();
    for _ in lines.by_ref() {}
    assert_eq!(child.wait().unwrap().code(), Some(1), "cancelled");
}

/// `playdeck resume --headless RUN --play PLAY`.
fn resume(
    dir: &std::path::Path,
    run: &std::path::Path,
    play: &std::path::Path,
) -> std::process::Output {
    playdeck(
        &[
            "resume",
            "--headless",
            run.to_str().unwrap(),
            "--play",
            play.to_str().unwrap(),
        ],
        dir,
    )
}

fn result_json(run: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("result.json")).unwrap()).unwrap()
}

/// Each spawned operation's result, by the role it was spawned onto.
fn results_by_role(
    result: &serde_json::Value,
    events: &[serde_json::Value],
) -> Vec<(String, serde_json::Value)> {
    let mut out: Vec<(String, serde_json::Value)> = events
        .iter()
        .filter(|e| e["type"] == "spawned")
        .map(|e| {
            let id = e["op_id"].as_str().unwrap();
            (
                e["assignee"].as_str().unwrap_or("").to_string(),
                result["operation_results"][id].clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn events_of(run: &std::path::Path) -> Vec<serde_json::Value> {
    playdeck::store::whole_text(&run.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// ADR-0036 D3: spawned work runs on its role's agent with its role's
/// ToolSet (here, as the jsonl protocol exports it: PLAYDECK_PERMISSION,
/// PLAYDECK_TOOLS), and a role with no agent in a play of agent CLIs gets
/// no work at all: a recruited one fails to provision (a declared palette
/// role with none refuses the play, see
/// `rule_a36_41_a_declared_role_with_no_agent_refuses_the_play`).
#[test]
fn rule_a36_40_spawned_work_runs_with_its_roles_agent_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    let env = "@sleep 0\\\\n@env PLAYDECK_PERMISSION\\\\n@env PLAYDECK_TOOLS";
    let play = agent_play(
        dir.path(),
        &format!(
            r#"[palette]
roles = [
  {{ role = "orchestrator", disposition = "emission_capable" }},
  {{ role = "reviewer", agent = "w", tools = {{ permission = "read-only", internal = ["Read"] }} }},
]
[palette.expansion]
max_new_roles = 1
[[operations]]
id = "kickoff"
role = "orchestrator"
agent = "w"
tools = {{ permission = "workspace-write", internal = ["Read", "Edit"] }}
instruction = """
kickoff
@sleep 0
@result {{"spawn_request": [{{"instruction": "review\\n{env}", "assignee": "reviewer"}}, {{"instruction": "again\\n{env}"}}, {{"instruction": "test", "assignee": "tester"}}, {{"instruction": "critique", "assignee": "critic"}}]}}
"""
"#
        ),
    );
    let run = dir.path().join("run");
    let out = playdeck(
        &[
            "run",
            "--headless",
            "--run-dir",
            run.to_str().unwrap(),
            play.to_str().unwrap(),
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("roles the orchestrator recruits have no agent"),
        "{stderr}"
    );
    let result = result_json(&run);
    let spawned = results_by_role(&result, &events_of(&run));
    assert_eq!(spawned.len(), 2, "{spawned:#?}\n{stderr}");
    assert_eq!(spawned[0].0, "orchestrator");
    assert_eq!(
        spawned[0].1["env"],
        serde_json::json!({"PLAYDECK_PERMISSION": "workspace-write", "PLAYDECK_TOOLS": "Read,Edit"}),
        "its own role: as the role's operation was written"
    );
    assert_eq!(spawned[1].0, "reviewer");
    assert_eq!(
        spawned[1].1["env"],
        serde_json::json!({"PLAYDECK_PERMISSION": "read-only", "PLAYDECK_TOOLS": "Read"}),
        "the reviewer's entry"
    );
    let dropped: Vec<(&str, &str, &str)> = result["dropped_spawns"]
        .as_array()
        .unwrap()
        .iter()
        // The agent prints its result on its stream too: those repeats are
        // duplicates.
        .filter(|d| d["reason"] != "duplicate")
        .map(|d| {
            (
                d["assignee"].as_str().unwrap(),
                d["reason"].as_str().unwrap(),
                d["detail"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(dropped.len(), 2, "{dropped:#?}");
    for (i, role) in ["tester", "critic"].into_iter().enumerate() {
        assert_eq!(
            (dropped[i].0, dropped[i].1),
            (role, "role_provision_failed")
        );
        assert!(
            dropped[i].2.contains(&format!("no agent for role {role}")),
            "{}",
            dropped[i].2
        );
    }
    let budget = events_of(&run)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "budget")
        .unwrap();
    assert_eq!(
        budget["consumed_new_roles"], 0,
        "a failed recruitment costs nothing"
    );
}

/// A36-46 across a stop: spawned work keeps the trusted identity it was
/// given (the spawn record carries it), so after a cancel and a resume the
/// orchestrator's orchestrator child still recruits, and a worker's child
/// still may not assign work to the orchestrator.
#[test]
fn rule_a36_46_spawned_authority_survives_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let play = agent_play(
        dir.path(),
        r#"[palette]
roles = [
  { role = "orchestrator", disposition = "emission_capable" },
  { role = "implementer", disposition = "emission_capable" },
]
[palette.expansion]
max_new_roles = 1
[palette.defaults]
agent = "w"
[[operations]]
id = "lead"
role = "orchestrator"
agent = "w"
instruction = """
lead
@sleep 0
@result {"spawn_request": {"instruction": "recruit\\n@sleep 4\\n@spawn critic: critique", "assignee": "orchestrator"}}
"""
[[operations]]
id = "work"
role = "implementer"
agent = "w"
independent_root = true
instruction = """
work
@sleep 0
@spawn orchestrator: recruit for me
@result {"spawn_request": {"instruction": "check\\n@sleep 4\\n@spawn orchestrator: recruit", "assignee": "implementer"}}
"""
"#,
    );
    let run = dir.path().join("run");
    // Both children are on their way: stop the run there.
    run_then_cancel(dir.path(), &play, &run, "spawned", 2);
    assert_eq!(result_json(&run)["outcome"], "cancelled");

    let out = resume(dir.path(), &run, &play);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result = result_json(&run);
    assert_eq!(result["outcome"], "succeeded", "{stderr}");
    let events = events_of(&run);
    let budget = events.iter().rev().find(|e| e["type"] == "budget").unwrap();
    assert_eq!(
        budget["expanded_roles"],
        serde_json::json!(["critic"]),
        "{stderr}"
    );
    assert_eq!(budget["consumed_new_roles"], 1);
    let at = |pred: &dyn Fn(&serde_json::Value) -> bool| events.iter().position(pred);
    let resumed = at(&|e| e["type"] == "resumed").expect("a resumed run");
    let recruited = at(&|e| e["type"] == "role_provisioned" && e["role"] == "critic")
        .expect("the orchestrator child recruited");
    assert!(
        recruited > resumed,
        "recruited after the resume, as an orchestrator"
    );
    let critic = events
        .iter()
        .find(|e| e["type"] == "spawned" && e["assignee"] == "critic")
        .unwrap();
    let names = result["operation_names"].as_object().unwrap();
    let parent = critic["parent_id"].as_str().unwrap();
    let orchestrator_child = events
        .iter()
        .find(|e| e["type"] == "spawned" && e["assignee"] == "orchestrator")
        .unwrap();
    assert_eq!(parent, orchestrator_child["op_id"].as_str().unwrap());
    assert!(names[parent].as_str().unwrap().starts_with("spawn-"));
    // The worker and the worker's child were refused, before and after.
    let refused: Vec<&str> = result["dropped_spawns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["reason"] == "requester_not_authorized")
        .map(|d| names[d["emitter_id"].as_str().unwrap()].as_str().unwrap())
        .collect();
    assert_eq!(refused.len(), 2, "{:#}", result["dropped_spawns"]);
    assert_eq!(refused[0], "work");
    assert!(refused[1].starts_with("spawn-"), "{refused:?}");
}

/// ADR-0036 D6 (A36-65): the modes a run recorded for its roles are held
/// to the pack as it is now. A pack edited between a crash and the resume
/// refuses the resume, naming the mode it had and what is allowed now,
/// and nothing is appended to the run's record.
#[test]
fn rule_a36_65_a_pack_edited_since_the_run_refuses_the_resume_naming_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let pack = |mode: &str| {
        format!(
            "[pack.roles.orchestrator]\nmodes_allow = [\"{mode}\"]\ndefault_modes = [\"{mode}\"]\n[palette]\nroles = [{{ role = \"orchestrator\" }}]\n[[operations]]\nid = \"lead\"\nrole = \"orchestrator\"\nagent = \"w\"\ninstruction = \"lead\\n@sleep 2\"\n"
        )
    };
    let play = agent_play(dir.path(), &pack("socratic"));
    let run = dir.path().join("run");
    run_then_cancel(dir.path(), &play, &run, "started", 1);
    let saved = events_of(&run);
    assert!(
        saved
            .iter()
            .any(|e| e["type"] == "role_provisioned"
                && e["modes"] == serde_json::json!(["socratic"])),
        "the run recorded its mode"
    );
    let log_before = std::fs::read(run.join("events.jsonl")).unwrap();

    // The pack now allows another mode only.
    agent_play(dir.path(), &pack("adversarial"));
    let out = resume(dir.path(), &run, &play);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("\"orchestrator\"")
            && stderr.contains("\"socratic\"")
            && stderr.contains("allowed: adversarial"),
        "names the role, the saved mode and what is allowed now: {stderr}"
    );
    assert_eq!(
        std::fs::read(run.join("events.jsonl")).unwrap(),
        log_before,
        "nothing is appended to a refused resume's record"
    );

    // Allowed still, but no longer what the role gets: refused as well.
    agent_play(
        dir.path(),
        &pack("socratic").replace(
            "modes_allow = [\"socratic\"]\ndefault_modes = [\"socratic\"]",
            "modes_allow = [\"socratic\", \"adversarial\"]\ndefault_modes = [\"adversarial\"]",
        ),
    );
    let out = resume(dir.path(), &run, &play);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("modes [socratic], but the current pack and play give it [adversarial]"),
        "{stderr}"
    );
    // Put back as it was, the run goes on.
    agent_play(dir.path(), &pack("socratic"));
    let out = resume(dir.path(), &run, &play);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(result_json(&run)["outcome"], "succeeded", "{stderr}");
}
