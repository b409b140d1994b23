//! Play validation through the binary: what the environment and the
//! user's agents file add to a play. The rest is the fast tier's
//! `play_validation`.

use crate::common;

/// ADR-0033 D1 (A33-04): a run with no limit falls back to the
/// environment's, else 10 000 — `max_concurrent = "unbounded"`; the
/// environment's value is checked and named when wrong.
#[test]
fn rule_a33_04_an_unbounded_limit_falls_back_to_the_environment_or_ten_thousand() {
    use playdeck::play::parse::unbounded_limit;
    assert_eq!(unbounded_limit(None), Ok(10_000));
    assert_eq!(unbounded_limit(Some("250")), Ok(250));
    let why = unbounded_limit(Some("lots")).unwrap_err();
    assert!(
        why.contains("PLAYDECK_MAX_CONCURRENCY") && why.contains("\"lots\""),
        "{why}"
    );
    let text = |limit: &str| {
        format!(
            "[play]\nname = \"u\"\nmax_concurrent = {limit}\n[palette]\nroles = [{{ role = \"tester\" }}]\n\
             [[operations]]\nid = \"a\"\nrole = \"tester\"\ninstruction = \"x\"\nsim = {{ duration_ms = 1 }}\n"
        )
    };
    let errs = common::play_errors(&text("\"lots\""));
    assert!(
        errs.iter()
            .any(|(at, m)| at.starts_with("3:") && m.contains("or \"unbounded\"")),
        "{errs:?}"
    );
    // Through the binary: the environment sets the limit the run starts with.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("u.toml"), text("\"unbounded\"")).unwrap();
    let run = |env: Option<&str>| {
        let mut c = common::playdeck();
        c.args(["run", "u.toml", "--headless"])
            .current_dir(dir.path());
        match env {
            Some(v) => c.env("PLAYDECK_MAX_CONCURRENCY", v),
            None => c.env_remove("PLAYDECK_MAX_CONCURRENCY"),
        };
        c.output().unwrap()
    };
    for (env, want) in [
        (None, "\"max_concurrent\":10000"),
        (Some("3"), "\"max_concurrent\":3"),
    ] {
        let out = run(env);
        assert!(out.status.success(), "{out:?}");
        let first = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        assert!(first.contains(want), "{env:?}: {first}");
    }
    let bad = run(Some("0"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("PLAYDECK_MAX_CONCURRENCY, which is \"0\"")
    );
}

/// The user's agents file may hold `[prices]` for every play; the play's
/// entry for the same model wins.
#[test]
fn prices_in_the_users_agents_file_serve_every_play() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agents.toml"),
        "[prices.\"gpt-x\"]\ninput = 1\noutput = 4\n[prices.\"gpt-y\"]\ninput = 3\noutput = 6\n",
    )
    .unwrap();
    let play = dir.path().join("p.toml");
    std::fs::write(&play, include_str!("../plays/priced_codex_agent.toml")).unwrap();
    // `playdeck validate` with `config` as the config directory: whether it
    // passed, and what it said.
    let validate = |config: &std::path::Path| {
        let out = common::playdeck()
            .env("PLAYDECK_CONFIG_DIR", config)
            .args(["validate"])
            .arg(&play)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, err) = validate(dir.path());
    assert!(ok, "{err}");
    // Without the user's file the same play is refused.
    let (ok, err) = validate(&dir.path().join("none"));
    assert!(!ok, "{err}");
    assert!(err.contains("model \"gpt-x\" has no price"), "{err}");
    // A bad entry in the user's file names that file and its line.
    std::fs::write(
        dir.path().join("agents.toml"),
        "[prices.m]\ninput = \"cheap\"\noutput = 1\n",
    )
    .unwrap();
    let (ok, err) = validate(dir.path());
    assert!(!ok && err.contains("agents.toml:2:"), "{err}");
}
