//! The captures of the real agent CLIs (`tests/realcli/captures/<cli>/
//! <version>/<scenario>.jsonl`: what each pinned version printed against
//! the scripted model server, with its exit code in `.meta.json`) replayed
//! through the real binary without npm: a one-operation play whose agent
//! (`playdeck-agent @replay`) prints the capture and exits as the CLI did.
//! The parsers are held to the real output of every pinned version: the
//! outcome, the failure's cause, usage counted once, tool activity, one
//! ledger row per spawn request — the same expectations as the live runs
//! (`tests/common/realcli.rs`).

use crate::common;

use std::path::{Path, PathBuf};

use common::realcli::{SCENARIOS, Want, usage_counted_once, want};
use serde_json::Value;

fn captures() -> Vec<(String, String, String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/realcli/captures");
    let mut out = Vec::new();
    for cli in std::fs::read_dir(&root).unwrap().flatten() {
        for ver in std::fs::read_dir(cli.path()).unwrap().flatten() {
            for f in std::fs::read_dir(ver.path()).unwrap().flatten() {
                let p = f.path();
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                let Some(scenario) = name.strip_suffix(".jsonl") else {
                    continue;
                };
                out.push((
                    cli.file_name().to_string_lossy().to_string(),
                    ver.file_name().to_string_lossy().to_string(),
                    scenario.to_string(),
                    p,
                ));
            }
        }
    }
    out.sort();
    out
}

/// The format each CLI's stream is read as.
fn format_of(cli: &str) -> &str {
    cli
}

/// The signals of a replay of `capture`, exiting with `exit`.
fn replay(cli: &str, capture: &Path, exit: i64) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let agent = common::AGENT;
    // A CLI killed by a signal (a capture cut at its timeout) is replayed
    // as a shell reports it: 128 + the signal.
    let code = if exit < 0 { 128 - exit } else { exit };
    let play = format!(
        "[play]\nname = \"replay\"\n[retry]\nattempts = 1\n\
         [palette]\nroles = [{{ role = \"orchestrator\", disposition = \"emission_capable\" }}, {{ role = \"technical_writer\", agent = \"noop\" }}]\n\
         [agents.cli]\nbinary = \"{agent}\"\nstream_format = \"{format}\"\n\
         [[operations]]\nid = \"work\"\nrole = \"orchestrator\"\nagent = \"cli\"\n\
         instruction = \"replay\\n@sleep 0\\n@replay {}\\n@exit {code}\"\n",
        capture.display(),
        format = format_of(cli),
    );
    let play_path = dir.path().join("play.toml");
    std::fs::write(&play_path, play).unwrap();
    let out = common::playdeck()
        .env("PLAYDECK_CONFIG_DIR", dir.path())
        .args(["run", "--headless", "--run-dir"])
        .arg(dir.path().join("run"))
        .arg(&play_path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn every_capture_of_every_pinned_version_is_read_as_the_cli_meant_it() {
    let all = captures();
    assert!(!all.is_empty(), "the captures are in the repository");
    let mut problems = Vec::new();
    let mut checked = 0;
    for (cli, version, scenario, path) in &all {
        assert!(
            SCENARIOS.contains(&scenario.as_str()) || scenario == "tool-partial",
            "{}: not a scenario",
            path.display()
        );
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(path.with_extension("meta.json")).unwrap(),
        )
        .unwrap();
        let signals = replay(cli, path, meta["exit_code"].as_i64().unwrap_or(0));
        let of = |ty: &'static str| signals.iter().filter(move |s| s["type"] == ty);
        let mine = |s: &&Value| s["name"] == "work";
        let failure = of("failed")
            .find(mine)
            .map(|f| f["category"].as_str().unwrap_or("").to_string());
        let usage = of("agent_usage").rfind(mine);
        let tools = of("agent_activity")
            .filter(mine)
            .filter(|s| s["state"] == "tool")
            .count();
        let rows = of("spawned").count() + of("spawn_dropped").count();
        // A tool the role may not use, refused by the CLI where the
        // capture shows it (issue 38): a warning of the operation's.
        let refused = of("warning")
            .filter(|s| {
                s["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("refused or failed"))
            })
            .count();
        let refusal_shown = match (cli.as_str(), version.as_str()) {
            ("claude" | "copilot", _) | ("codex", "0.47.0") => scenario == "tool-readonly",
            _ => false,
        };
        if refusal_shown && refused == 0 {
            problems.push(format!(
                "{cli} {version} {scenario}: the refused tool call is not a warning"
            ));
        }
        // The CLI's own conversation id is on the record (issue 40): once
        // an attempt, as the capture itself wrote it.
        let sessions: Vec<&str> = of("agent_session")
            .filter(mine)
            .filter_map(|s| s["session"].as_str())
            .collect();
        if scenario == "answer" {
            let text = std::fs::read_to_string(path).unwrap();
            match sessions.as_slice() {
                [id] if text.contains(&format!("\"{id}\"")) => {}
                other => problems.push(format!(
                    "{cli} {version} {scenario}: the session is not recorded once as the CLI named it: {other:?}"
                )),
            }
        }
        let timed_out = meta["timed_out"].as_bool() == Some(true);
        let what = format!("{cli} {version} {scenario}");
        let problem = match want(cli, version, scenario, false) {
            // Cut at the capture's timeout while the CLI retried or looped:
            // what it printed until then is read to the end of the run.
            _ if timed_out => {
                (!of("run_finished").any(|_| true)).then(|| "the replay did not finish".to_string())
            }
            Want::Succeeds {
                usage: u,
                tool,
                spawn,
            } => {
                if let Some(c) = &failure {
                    Some(format!("failed ({c})"))
                } else if u && let Err(e) = usage_counted_once(cli, version, usage) {
                    Some(e)
                } else if tool && tools == 0 {
                    Some("no tool activity".into())
                } else if spawn && rows != 1 {
                    Some(format!("{rows} ledger rows"))
                } else {
                    None
                }
            }
            Want::Fails(cat) => (failure.as_deref() != Some(cat))
                .then(|| format!("expected the cause {cat}, saw {failure:?}")),
            // A CLI that retries inside gave up before the capture's timeout
            // (opencode 1.18 after ~80 s): its error is a passing one.
            Want::LoopsInside => (!matches!(
                failure.as_deref(),
                Some("rate_limit" | "overloaded" | "server_error" | "network")
            ))
            .then(|| format!("expected a passing cause, saw {failure:?}")),
        };
        checked += 1;
        if let Some(p) = problem {
            problems.push(format!("{what}: {p}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!("{checked} captures replayed");
}
