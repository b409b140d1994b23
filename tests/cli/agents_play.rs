//! Agent CLIs in play files through the binary: warnings `validate`
//! prints, the user's agents file, `playdeck argv`, the environment policy
//! end to end. Their validation in-process is the fast tier's
//! `agents_play`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use playdeck::play::Play;
use serde_json::Value;

const HEAD: &str = "[play]\nname = \"t\"\n";
const OP: &str = "[[operations]]\nid = \"a\"\nrole = \"tester\"\ninstruction = \"write tests\"\n";

fn errors(src: &str) -> Vec<(String, String)> {
    common::play_errors(src)
}

#[test]
fn settings_without_effect_are_warned_with_positions() {
    let src = format!(
        "{HEAD}[capacity]\n[agents.cx]\nbinary = \"codex\"\nstream_format = \"codex\"\nflags.deep = [\"-c\", \"model_reasoning_effort=high\"]\n\
         [role_profiles.t]\nrole = \"tester\"\nprovider = \"sim\"\nmodel = \"sonnet\"\nthinking = \"high\"\nmax_instances = 1\n\
         [role_profiles.u]\nrole = \"reviewer\"\nprovider = \"cx\"\nthinking = \"low\"\nmax_instances = 1\n{OP}"
    );
    let p = Play::from_str("p.toml", &src).unwrap();
    let warnings: Vec<&String> = p
        .warnings
        .iter()
        .filter(|w| !w.contains("[palette]"))
        .collect();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert!(
        warnings[0].starts_with("p.toml:11:1: model of role profile t has no effect")
            && warnings[0].contains("built-in agent"),
        "{warnings:?}"
    );
    assert!(warnings[1].starts_with("p.toml:12:1: thinking of role profile t has no effect"));
    assert!(
        warnings[2].starts_with("p.toml:17:1: flag profile \"deep\" of agent \"cx\" sets the thinking (-c model_reasoning_effort=high)")
            && warnings[2].contains("thinking = \"low\" wins"),
        "{warnings:?}"
    );
    // `validate` prints them and still accepts the play.
    let dir = tempfile::tempdir().unwrap();
    let play = write(dir.path(), "p.toml", &src);
    let out = bin(dir.path()).arg("validate").arg(&play).output().unwrap();
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: ") && err.contains("p.toml:17:1: flag profile"),
        "{err}"
    );
}

// ----- the binary ---------------------------------------------------------

fn bin(config: &Path) -> Command {
    let mut c = common::playdeck();
    c.env("PLAYDECK_CONFIG_DIR", config);
    c
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

const ECHO_PLAY: &str = include_str!("../plays/argv_echo_agents.toml");

fn argv(config: &Path, play: &Path, args: &[&str]) -> (Vec<String>, String, Output) {
    let out = bin(config)
        .arg("argv")
        .arg(play)
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let v: Vec<String> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (v, text(&out.stderr), out)
}

#[test]
fn argv_prints_the_command_line_and_warns_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let play = write(dir.path(), "p.toml", ECHO_PLAY);
    let cfg = dir.path();

    let (v, err, _) = argv(cfg, &play, &["--op", "a", "--flag-profile", "plan"]);
    assert_eq!(v[..2], ["echo", "-p"]);
    assert!(v[2].starts_with("write tests"), "the prompt: {}", v[2]);
    assert_eq!(v[3..], ["--model", "test-model", "--verbose"]);
    assert!(err.is_empty(), "{err}");

    let (v, _, _) = argv(cfg, &play, &["--op", "a"]);
    assert_eq!(v[3..], ["--model", "test-model"], "no profile, no flags");

    let (v, err, out) = argv(cfg, &play, &["--op", "a", "--flag-profile", "research"]);
    assert!(out.status.success());
    assert_eq!(v[3..], ["--model", "test-model"]);
    assert!(err.contains("no flags for profile 'research'"), "{err}");

    let (v, err, _) = argv(cfg, &play, &["--op", "b"]);
    assert_eq!(
        v[3..],
        [
            "--model",
            "test-model",
            "--think",
            "-s",
            "workspace-write",
            "--json",
            "--skip-git-repo-check"
        ]
    );
    assert!(
        err.contains("dropped -s read-only") && err.contains("dropped --json"),
        "{err}"
    );

    // The shell-quoted form.
    let out = bin(cfg)
        .args(["argv"])
        .arg(&play)
        .args(["--op", "a", "--flag-profile", "plan"])
        .output()
        .unwrap();
    let line = text(&out.stdout);
    assert!(line.starts_with("echo -p 'write tests"), "{line}");
    assert!(
        line.trim_end().ends_with("--model test-model --verbose"),
        "{line}"
    );

    let (_, err, out) = argv(cfg, &play, &["--op", "a", "--flag-profile=-x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("flag profile \"-x\" is not a valid name"),
        "{err}"
    );

    let sim = write(dir.path(), "s.toml", &format!("{HEAD}{OP}"));
    let (_, err, out) = argv(cfg, &sim, &["--op", "a"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("built-in agent \"sim\""), "{err}");
}

#[test]
fn the_user_agents_file_is_merged_under_the_play() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    write(
        &cfg,
        "agents.toml",
        "[agents.mine]\nbinary = \"mine-cli\"\nstream_format = \"jsonl\"\n\
         [agents.echo]\nbinary = \"from-user-file\"\nstream_format = \"jsonl\"\n",
    );
    let play = write(
        dir.path(),
        "p.toml",
        &format!(
            "{ECHO_PLAY}[[operations]]\nid = \"c\"\nrole = \"tester\"\ninstruction = \"x\"\nagent = \"mine\"\n"
        ),
    );
    let (v, _, _) = argv(&cfg, &play, &["--op", "c"]);
    assert_eq!(v[0], "mine-cli", "defined only in the user file");
    let (v, _, _) = argv(&cfg, &play, &["--op", "a"]);
    assert_eq!(v[0], "echo", "the play wins");

    // A bad user file rejects the whole file, with its own positions.
    write(
        &cfg,
        "agents.toml",
        "[agents.mine]\nbinary = \"mine-cli\"\nstream_format = \"jsonl\"\n[agents.bad]\nbinary = \"b\"\nstream_format = \"nope\"\n",
    );
    let out = bin(&cfg).arg("validate").arg(&play).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("agents.toml:6:17"), "{err}");
    // And a bad flag profile name there, with its position.
    write(
        &cfg,
        "agents.toml",
        "[agents.mine]\nbinary = \"mine-cli\"\nstream_format = \"jsonl\"\nflags.\"-v\" = [\"-v\"]\n",
    );
    let out = bin(&cfg).arg("validate").arg(&play).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("agents.toml:4:7")
            && err.contains("flag profile \"-v\" of agent \"mine\" is not a valid name"),
        "{err}"
    );
}

/// Variables a developer's or CI's environment holds that no agent should
/// see unless told to.
const SECRETS: [&str; 7] = [
    "PGPASSWORD",
    "DATABASE_URL",
    "AWS_SECRET_ACCESS_KEY",
    "LD_PRELOAD",
    "KUBECONFIG",
    "SLACK_WEBHOOK_URL",
    "CI_JOB_JWT",
];

#[test]
fn the_environment_policy_reaches_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let agent = common::AGENT;
    let secrets: String = SECRETS.iter().map(|s| format!("\\n@env {s}")).collect();
    let src = format!(
        "[play]\nname = \"env\"\n\
         [agents.f]\nbinary = \"{agent}\"\nstream_format = \"jsonl\"\nenv_passlist = [\"ANTHROPIC_*\"]\nenv_vars = {{ FROM_PLAY = \"yes\" }}\n\
         [agents.p]\nbinary = \"{agent}\"\nstream_format = \"jsonl\"\nenv_passlist = [{}]\n\
         [agents.c]\nbinary = \"{agent}\"\nstream_format = \"jsonl\"\nenv_policy = \"clean\"\n\
         [agents.i]\nbinary = \"{agent}\"\nstream_format = \"jsonl\"\nenv_policy = \"inherit\"\n\
         [[operations]]\nid = \"filtered\"\nrole = \"tester\"\nagent = \"f\"\nindependent_root = true\ninstruction = \"x\\n@sleep 0\\n@env OPENAI_API_KEY\\n@env ANTHROPIC_API_KEY\\n@env KEEP_ME\\n@env FROM_PLAY\\n@env LC_TIME{secrets}\"\n\
         [[operations]]\nid = \"passlisted\"\nrole = \"tester\"\nagent = \"p\"\nindependent_root = true\ninstruction = \"x\\n@sleep 0{secrets}\"\n\
         [[operations]]\nid = \"clean\"\nrole = \"tester\"\nagent = \"c\"\nindependent_root = true\ninstruction = \"x\\n@sleep 0\\n@env KEEP_ME\\n@env PLAYDECK_OP\\n@env LC_TIME\"\n\
         [[operations]]\nid = \"inherit\"\nrole = \"tester\"\nagent = \"i\"\nindependent_root = true\ninstruction = \"x\\n@sleep 0\\n@env OPENAI_API_KEY{secrets}\"\n",
        SECRETS.map(|s| format!("\"{s}\"")).join(", ")
    );
    let play = write(dir.path(), "env.toml", &src);
    let mut cmd = bin(dir.path());
    cmd.args(["run", "--headless", "--run-dir"])
        .arg(dir.path().join("run"))
        .arg(&play)
        .env("OPENAI_API_KEY", "sk-secret")
        .env("ANTHROPIC_API_KEY", "ak-passed")
        .env("KEEP_ME", "kept")
        .env("LC_TIME", "C");
    for s in SECRETS {
        // LD_PRELOAD must name nothing real for the child programs.
        cmd.env(s, if s == "LD_PRELOAD" { "" } else { "secret" });
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run/result.json")).unwrap())
            .unwrap();
    let results = &result["operation_results"];
    let env_of = |name: &str| {
        let id = result["operation_names"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, n)| *n == name)
            .unwrap()
            .0
            .clone();
        results[&id]["env"].clone()
    };
    let mut filtered = serde_json::json!({"OPENAI_API_KEY": null, "ANTHROPIC_API_KEY": "ak-passed", "KEEP_ME": null, "FROM_PLAY": "yes", "LC_TIME": "C"});
    let mut passed = serde_json::json!({});
    let mut inherited = serde_json::json!({"OPENAI_API_KEY": "sk-secret"});
    for s in SECRETS {
        filtered[s] = Value::Null;
        let v = if s == "LD_PRELOAD" { "" } else { "secret" };
        passed[s] = v.into();
        inherited[s] = v.into();
    }
    assert_eq!(env_of("filtered"), filtered);
    assert_eq!(env_of("passlisted"), passed);
    assert_eq!(env_of("inherit"), inherited);
    assert_eq!(
        env_of("clean"),
        serde_json::json!({"KEEP_ME": null, "PLAYDECK_OP": "clean", "LC_TIME": null})
    );
}

#[test]
fn the_example_agents_play_runs_real_subprocesses() {
    let dir = tempfile::tempdir().unwrap();
    let play = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plays/agents.toml");
    let out = bin(dir.path())
        .args(["run", "--headless", "--speed", "20", "--run-dir"])
        .arg(dir.path().join("run"))
        .arg(&play)
        .output()
        .unwrap();
    // `lint` fails on purpose (exit 1), so the run fails.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of = |ty: &str| -> Vec<&Value> { lines.iter().filter(|v| v["type"] == ty).collect() };
    let failed = of("failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["name"], "lint");
    assert_eq!(failed[0]["category"], "agent_crash");
    assert_eq!(
        of("completed").len(),
        7,
        "six operations and the spawned test"
    );
    assert_eq!(of("spawned").len(), 1);
    assert!(of("agent_activity").iter().any(|v| v["tool"] == "Read"));
    assert!(!of("agent_usage").is_empty());
    let logs = dir.path().join("run/logs");
    assert!(
        std::fs::read_to_string(logs.join("lint.1.stderr.log"))
            .unwrap()
            .contains("unused variable")
    );
    // The tester profile moved `test` onto the worker agent, with its model.
    let cmd: Value =
        serde_json::from_str(&std::fs::read_to_string(logs.join("test.1.command.json")).unwrap())
            .unwrap();
    let argv: Vec<&str> = cmd["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], "playdeck-agent");
    assert!(
        argv.windows(2).any(|w| w == ["--model", "example-tester"]),
        "{argv:?}"
    );
}

#[test]
fn the_human_format_prints_no_escape_sequence_an_agent_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let agent = common::AGENT;
    let play = write(
        dir.path(),
        "p.toml",
        &format!(
            "[play]\nname = \"esc\"\n[agents.a]\nbinary = \"{agent}\"\nstream_format = \"jsonl\"\n\
             [[operations]]\nid = \"lint\"\nrole = \"tester\"\nagent = \"a\"\n\
             instruction = \"x\\n@sleep 0\\n@stderr \\u001b[31mred\\u001b[0m \\u001b]0;owned\\u0007title\\u001b[2J\\n@exit 3\"\n"
        ),
    );
    let out = bin(dir.path())
        .args(["run", "--headless", "--format", "human", "--run-dir"])
        .arg(dir.path().join("run"))
        .arg(&play)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let printed = text(&out.stdout);
    assert!(printed.contains("✗ failed"), "{printed}");
    assert!(printed.contains("red title"), "{printed}");
    for bytes in [&out.stdout, &out.stderr] {
        assert!(
            !bytes.iter().any(|b| *b == 0x1b || *b == 0x07),
            "a control byte reached the terminal: {:?}",
            text(bytes)
        );
    }
    // The log keeps what the agent wrote.
    let log = std::fs::read_to_string(dir.path().join("run/logs/lint.1.stderr.log")).unwrap();
    assert!(log.contains("\u{1b}[31mred"));
    // So does the report: issue 28 — its Markdown reaches a terminal
    // without a control byte; its JSON keeps the text, escaped.
    let report = |format: &str| {
        bin(dir.path())
            .arg("report")
            .arg(dir.path().join("run"))
            .args(["--format", format])
            .output()
            .unwrap()
    };
    let md = report("md");
    assert!(md.status.success(), "{md:?}");
    assert!(
        text(&md.stdout).contains("red title"),
        "{}",
        text(&md.stdout)
    );
    assert!(
        !md.stdout.iter().any(|b| *b == 0x1b || *b == 0x07),
        "a control byte in the report: {:?}",
        text(&md.stdout)
    );
    let json = report("json");
    assert!(!json.stdout.iter().any(|b| *b == 0x1b || *b == 0x07));
    assert!(
        text(&json.stdout).contains("\\u001b[31mred"),
        "{}",
        text(&json.stdout)
    );
}

/// ADR-011's first tier: `agent_tools` gives the ToolSet for the agent
/// that runs the operation, over its own `tools` (then its role
/// profile's). Each entry is checked against its agent's format at load,
/// with its position; an agent that is not defined is refused.
#[test]
fn rule_f11_14_an_operations_toolset_for_its_agent_wins_over_its_own() {
    let agents = "[agents.cl]\nbinary = \"claude\"\nstream_format = \"claude\"\n[agents.cx]\nbinary = \"codex\"\nstream_format = \"codex\"\n";
    let src = format!(
        "{HEAD}{agents}{OP}agent = \"cl\"\ntools = {{ internal = [\"Read\"], permission = \"read-only\" }}\nagent_tools = {{ cl = {{ internal = [\"Read\", \"Edit\"], permission = \"workspace-write\", max_turns = 9 }}, cx = {{ permission = \"read-only\" }} }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("p.toml");
    std::fs::write(&play, &src).unwrap();
    let out = common::playdeck()
        .args(["argv", "--op", "a", "--json"])
        .arg(&play)
        .output()
        .unwrap();
    let argv: Vec<String> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let after = |flag: &str| {
        let i = argv
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("{flag} in {argv:?}"));
        argv[i + 1].as_str()
    };
    assert_eq!(after("--allowedTools"), "Read,Edit", "{argv:?}");
    assert_eq!(after("--max-turns"), "9");
    assert_eq!(after("--permission-mode"), "acceptEdits");

    // Checked per agent, where it is written.
    let bad = format!(
        "{HEAD}{agents}{OP}agent = \"cl\"\nagent_tools = {{ cx = {{ internal = [\"Read\"] }}, nobody = {{ permission = \"read-only\" }} }}\n"
    );
    let e = errors(&bad);
    assert_eq!(e.len(), 2, "{e:#?}");
    assert!(
        e[0].1
            .contains("a tool list cannot be expressed for the codex format"),
        "{e:#?}"
    );
    assert!(
        e[1].1
            .contains("names agent \"nobody\", which is not defined under [agents]"),
        "{e:#?}"
    );
    assert_eq!(e[0].0, "14:17", "at cx: {e:#?}");
}
