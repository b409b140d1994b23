//! Spend caps through the binary: a run killed at its cap resumes at it,
//! `ctl status` says what was spent and `ctl budget` raises the cap, the
//! runs list says each run's spend, a token-only CLI is priced by the
//! play's prices. The caps in the kernel are the fast tier's `budget`.

use crate::common;

use std::time::Duration;

use serde_json::{Value, json};

const CAPPED_PLAY: &str = include_str!("../plays/spend_cap_5_usd.toml");

fn log_types(dir: &std::path::Path) -> Vec<String> {
    playdeck::store::whole_text(&dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["type"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Where [`run_to_the_cap`] keeps the run's stderr, in `dir`.
fn capped_stderr(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("capped.stderr")
}

/// Starts the capped play headless, with its stdin open for control
/// lines, and waits until the log says the cap was reached. Its stderr
/// goes to [`capped_stderr`].
fn run_to_the_cap(dir: &std::path::Path) -> std::process::Child {
    use std::process::Stdio;
    let play = dir.join("play.toml");
    std::fs::write(&play, CAPPED_PLAY).unwrap();
    let mut child = common::playdeck()
        .args(["run", "--headless", "--run-dir"])
        .arg(dir.join("run"))
        .arg(&play)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(capped_stderr(dir)).unwrap())
        .spawn()
        .unwrap();
    common::wait_for("the cap to be reached", Duration::from_secs(60), || {
        let log = log_types(&dir.join("run"));
        if log.contains(&"spend_cap_reached".to_string()) {
            return Ok(());
        }
        let said = format!(
            "the log: {log:?}\nstderr:\n{}",
            common::tail_of(&capped_stderr(dir), 30)
        );
        match child.try_wait().unwrap() {
            Some(st) => panic!("the run ended ({st}) before its cap was reached; {said}"),
            None => Err(said),
        }
    });
    child
}

#[test]
fn a_run_killed_at_its_cap_resumes_at_its_cap_and_keeps_the_raise_in_its_checkpoint() {
    use std::io::Write;
    use std::process::Stdio;
    let base = tempfile::tempdir().unwrap();
    let run = base.path().join("run");
    // Killed while held at the cap.
    let mut first = run_to_the_cap(base.path());
    std::thread::sleep(Duration::from_millis(300));
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(!log_types(&run).contains(&"run_finished".to_string()));
    // Resumed: what was spent is still spent, so c is held again until a
    // raise on stdin lets it go.
    let mut second = common::playdeck()
        .args(["resume", "--headless"])
        .arg(&run)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for(
        "the run held again after the resume",
        Duration::from_secs(20),
        || {
            let t = log_types(&run);
            let resumed = t.iter().position(|x| x == "resumed").unwrap_or(usize::MAX);
            match t.iter().skip(resumed).any(|x| x == "spend_cap_reached") {
                true => Ok(()),
                false => Err(format!("the log: {t:?}")),
            }
        },
    );
    let t = log_types(&run);
    let resumed = t.iter().position(|x| x == "resumed").unwrap();
    assert!(
        !t[resumed..].iter().any(|x| x == "started"),
        "nothing starts past the cap after a resume: {t:?}"
    );
    let mut stdin = second.stdin.take().unwrap();
    writeln!(stdin, "budget --raise usd=+5").unwrap();
    drop(stdin);
    let out = second.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["outcome"], "succeeded");
    // The checkpoint keeps what was spent and the raised cap.
    let cp: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("checkpoint.json")).unwrap())
            .unwrap();
    let spend = &cp["state"]["spend"];
    assert_eq!(
        (spend["usd"].as_f64(), spend["budget"]["usd"].as_f64()),
        (Some(7.5), Some(10.0)),
        "{spend}"
    );
}

#[test]
fn ctl_status_says_what_was_spent_and_ctl_budget_raises_the_cap() {
    let base = tempfile::tempdir().unwrap();
    let run = base.path().join("run");
    let mut child = run_to_the_cap(base.path());
    common::wait_run_listening(
        &run.join("ctl/control.sock"),
        &mut child,
        Some(&capped_stderr(base.path())),
    );
    let ctl = |args: &[&str]| {
        let out = common::playdeck()
            .arg("ctl")
            .arg(&run)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let status = common::wait_for(
        "ctl status to say the cap holds",
        Duration::from_secs(10),
        || {
            let (_, out, _) = ctl(&["status"]);
            match out.contains("a spend cap holds") {
                true => Ok(out),
                false => Err(format!("it says: {out}")),
            }
        },
    );
    assert!(
        status.contains("paused — a spend cap holds 1 operation"),
        "{status}"
    );
    assert!(
        status.contains("spend: 5.00/5.00 USD (100%) · 2 200 tok"),
        "{status}"
    );
    // Two of three done, but nothing runs: no pace to count the third
    // by, what it waits for instead (issue 38: it said `eta: ~0.1s`).
    assert!(
        status.contains("eta: none — nothing runs; it waits for a raise of the spend cap"),
        "{status}"
    );
    assert!(!status.contains("eta: ~"), "{status}");
    // The runs list says it in its narrow state column.
    let out = common::playdeck()
        .args(["runs", "--dir"])
        .arg(base.path())
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(list.contains(" paused — budget 100% "), "{list}");
    let (code, _, err) = ctl(&["budget", "--raise", "usd=abc"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("\"usd=abc\": the amount is not a number"),
        "{err}"
    );
    // Two caps in one --raise, as docs/budgets.md writes it; the answer says
    // each cap before and after and what is left (issue 38: it said
    // `ok: ok: budget`, and a second value was refused).
    let (code, out, err) = ctl(&["budget", "--raise", "usd=+5", "tokens=+500000"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out.trim(),
        "ok: usd cap 5.00 → 10.00 (5.00 left); tokens cap none → 500000 (497800 left)"
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        common::tail_of(&capped_stderr(base.path()), 30)
    );
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["outcome"], "succeeded");
    let raised = log_types(&run)
        .iter()
        .filter(|t| *t == "spend_cap_raised")
        .count();
    assert_eq!(raised, 2);
    // The report lists the cap reached and the raises, with who.
    let report = common::playdeck().arg("report").arg(&run).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("**Spend caps:**"), "{text}");
    assert!(text.contains("reached: budget 5.00/5.00 USD"), "{text}");
    assert!(
        text.contains("raised: usd cap → 10.00 USD by ctl (")
            && text.contains("raised: tokens cap → 500000 tokens by ctl ("),
        "{text}"
    );
}

#[test]
fn resume_with_budget_sets_the_cap_over_the_one_the_run_had() {
    use std::process::Stdio;
    let base = tempfile::tempdir().unwrap();
    let run = base.path().join("run");
    let mut first = run_to_the_cap(base.path());
    first.kill().unwrap();
    first.wait().unwrap();
    let out = common::playdeck()
        .args(["resume", "--headless", "--budget", "usd=20"])
        .arg(&run)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raised: Vec<Value> = playdeck::store::whole_text(&run.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "spend_cap_raised")
        .collect();
    assert_eq!(raised.len(), 1);
    assert_eq!(
        (&raised[0]["cap"], &raised[0]["by"]),
        (&json!(20.0), &json!("--budget"))
    );
}

#[test]
fn the_runs_list_says_what_each_run_spent() {
    use std::process::Stdio;
    let base = tempfile::tempdir().unwrap();
    let runs = base.path().join("runs");
    let play = base.path().join("play.toml");
    std::fs::write(&play, CAPPED_PLAY.replace("usd = 5", "usd = 50")).unwrap();
    let out = common::playdeck()
        .args(["run", "--headless", "--run-dir"])
        .arg(runs.join("20261202-101500-ab12"))
        .arg(&play)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = common::playdeck()
        .args(["runs", "--dir"])
        .arg(&runs)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert!(lines.next().unwrap().ends_with("SPEND"), "{text}");
    let row = lines.next().unwrap();
    assert!(
        row.starts_with("20261202-101500-ab12") && row.ends_with("7.50 USD"),
        "{text}"
    );
    let out = common::playdeck()
        .args(["runs", "--json", "--dir"])
        .arg(&runs)
        .output()
        .unwrap();
    // One JSON object a line.
    let text = String::from_utf8_lossy(&out.stdout);
    let row: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(row["spent"], json!([7.5, 2200.0]));
}

/// A CLI that reports tokens only (codex, replayed from its real capture)
/// is priced by `[prices]` for the model it runs: each attempt's usage
/// carries the derived USD, the warning and the cap are crossed on it, and
/// the run's spend is said in USD.
#[test]
fn a_token_only_cli_is_priced_by_the_plays_prices() {
    let dir = tempfile::tempdir().unwrap();
    let capture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/realcli/captures/codex/0.171.0/answer.jsonl");
    let op = |id: &str| {
        format!(
            "[[operations]]\nid = \"{id}\"\nrole = \"implementer\"\nagent = \"cx\"\n\
             instruction = \"answer\\n@sleep 0\\n@replay {}\"\n",
            capture.display()
        )
    };
    let play = format!(
        "[play]\nname = \"priced\"\nmax_concurrent = 1\n\
         [palette]\nroles = [{{ role = \"implementer\" }}]\n\
         [agents.cx]\nbinary = \"{agent}\"\nstream_format = \"codex\"\nmodel = \"gpt-x\"\n\
         flags.big = [\"--model\", \"gpt-y\"]\n\
         [prices.\"gpt-x\"]\ninput = 2\ncached_input = 0.5\noutput = 8\n\
         [prices.\"gpt-y\"]\ninput = 4\ncached_input = 1\noutput = 16\n\
         [budget]\nusd = 0.002\nwarn_at = [0.5]\n{a}{b}",
        agent = common::AGENT,
        a = op("first"),
        b = op("second") + "depends_on = [\"first\"]\nflag_profile = \"big\"\n",
    );
    std::fs::write(dir.path().join("play.toml"), play).unwrap();
    // The play run headless into `run`: what it printed.
    let run = |run: &str| {
        let out = common::playdeck()
            .env("PLAYDECK_CONFIG_DIR", dir.path())
            .args(["run", "--headless", "--run-dir"])
            .arg(dir.path().join(run))
            .arg(dir.path().join("play.toml"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let stdout = run("run");
    let signals: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of = |t: &str| -> Vec<&Value> { signals.iter().filter(|s| s["type"] == t).collect() };
    // (1200 − 1000) × 2 + 1000 × 0.5 + 40 × 8 per million = 0.00122 USD;
    // the second runs the model its flag profile names, at twice that.
    let costs: Vec<f64> = of("agent_usage")
        .iter()
        .map(|s| {
            s["cost_usd"]
                .as_f64()
                .unwrap_or_else(|| panic!("not priced: {s}"))
        })
        .collect();
    assert_eq!(costs.len(), 2, "{signals:#?}");
    assert!((costs[0] - 0.001_22).abs() < 1e-9, "{costs:?}");
    assert!((costs[1] - 0.002_44).abs() < 1e-9, "{costs:?}");
    let warned = of("spend_warning");
    assert_eq!(warned.len(), 1, "{signals:#?}");
    assert_eq!(warned[0]["measure"], "usd");
    let reached = of("spend_cap_reached");
    assert_eq!(reached.len(), 1, "{signals:#?}");
    assert!((reached[0]["spent"].as_f64().unwrap() - 0.003_66).abs() < 1e-9);
    assert!(of("warning").is_empty(), "{signals:#?}");

    // A model the flag profile chose without a price is said, not hidden.
    let text = std::fs::read_to_string(dir.path().join("play.toml"))
        .unwrap()
        .replace("[prices.\"gpt-y\"]", "[prices.\"gpt-other\"]");
    std::fs::write(dir.path().join("play.toml"), text).unwrap();
    let stdout = run("run2");
    assert!(
        stdout.contains("its model \\\"gpt-y\\\" has no [prices] entry"),
        "{stdout}"
    );
}

/// Issue 39: a raise is checked where every surface goes through, the
/// kernel: a raw socket request's negative cap, a tokens cap of 0, or
/// raises that add up past any number are refused, nothing changes, and
/// the log never holds a cap it cannot read back (`"cap":null` made
/// resume and report refuse it as damaged).
#[test]
fn a_raise_that_makes_no_cap_is_refused_wherever_it_comes_from() {
    use std::io::{BufRead, Write};
    let base = tempfile::tempdir().unwrap();
    let run = base.path().join("run");
    let mut child = run_to_the_cap(base.path());
    common::wait_listening(&run.join("ctl/control.sock"));
    let ask = |req: &str| -> Value {
        let mut s = std::os::unix::net::UnixStream::connect(run.join("ctl/control.sock")).unwrap();
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(&s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    for bad in [
        r#"{"cmd":"budget","raise":[{"measure":"usd","amount":-29.0,"relative":false}]}"#,
        r#"{"cmd":"budget","raise":[{"measure":"tokens","amount":0.0,"relative":false}]}"#,
        r#"{"cmd":"budget","raise":[{"measure":"usd","amount":1e308,"relative":true},{"measure":"usd","amount":1e308,"relative":true}]}"#,
        r#"{"cmd":"budget","raise":[{"measure":"usd","amount":9e14,"relative":true},{"measure":"usd","amount":9e14,"relative":true}]}"#,
    ] {
        let a = ask(bad);
        assert_eq!(a["error"]["code"], "bad_request", "{bad}: {a}");
    }
    // The command line says so too, before anything is sent.
    let out = common::playdeck()
        .arg("ctl")
        .arg(&run)
        .args(["budget", "--raise", "usd=1e308", "usd=+1e308"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let log = playdeck::store::whole_text(&run.join("events.jsonl")).unwrap();
    assert!(!log.contains("spend_cap_raised"), "nothing was raised");
    assert!(!log.contains("\"cap\":null"), "the log reads back");
    let a = ask(r#"{"cmd":"budget","raise":[{"measure":"usd","amount":5.0,"relative":true}]}"#);
    assert_eq!(a["ok"], true, "{a}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}
