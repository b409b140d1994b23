//! Play validation: every problem reported at once, each with its position.
//! Two checks that need the binary (the environment's concurrency limit,
//! the user's prices) are the cli tier's `play_validation`.

use crate::common;

use playdeck::kernel::Condition;
use playdeck::play::{Placement, Play};

fn errors(src: &str) -> Vec<(String, String)> {
    common::play_errors(src)
}

fn helps(src: &str) -> Vec<String> {
    let d = Play::from_str("p.toml", src).unwrap_err();
    d.items
        .iter()
        .map(|i| i.help.clone().unwrap_or_default())
        .collect()
}

const HEAD: &str = "[play]\nname = \"t\"\n";

fn play(ops: &str) -> String {
    format!("{HEAD}{ops}")
}

#[test]
fn a_minimal_play_loads_with_defaults() {
    let p = Play::from_str("p.toml", include_str!("../plays/minimal.toml")).unwrap();
    assert_eq!(
        (p.max_concurrent, p.max_spawn, p.reactive, p.speed),
        (5, 50, true, 1.0)
    );
    assert_eq!(p.operations[0].placement, Placement::AfterHeads);
    assert_eq!(p.operations[0].agent, "sim");
}

#[test]
fn parallel_false_forces_one_at_a_time() {
    let src = include_str!("../plays/parallel_false.toml");
    assert_eq!(Play::from_str("p.toml", src).unwrap().max_concurrent, 1);
}

#[test]
fn duplicate_ids_point_at_the_second_and_name_the_first() {
    let src = include_str!("../plays/bad_duplicate_ids.toml");
    assert_eq!(
        errors(src),
        [("8:6".into(), "duplicate operation id \"a\"".into())]
    );
    assert!(helps(src)[0].contains("first defined on line 4"));
}

#[test]
fn unknown_and_self_dependencies() {
    let src = include_str!("../plays/bad_unknown_and_self_dependencies.toml");
    assert_eq!(
        errors(src),
        [
            (
                "11:15".into(),
                "operation \"b\" depends on unknown operation \"desgin\"".into()
            ),
            ("11:25".into(), "operation \"b\" depends on itself".into()),
        ]
    );
    assert!(helps(src)[0].starts_with("did you mean \"design\"?"));
}

#[test]
fn cycles_are_reported_with_their_path() {
    let src = include_str!("../plays/bad_cycles.toml");
    assert_eq!(
        errors(src),
        [("4:6".into(), "dependency cycle: a -> b -> c -> a".into())]
    );
}

#[test]
fn a_cycle_through_an_implicit_after_heads_edge_is_marked() {
    // a waits for c; b (no depends_on) runs after the heads above it (a);
    // c (no depends_on) runs after b: c -> a -> b -> c.
    let src = include_str!("../plays/bad_cycle_through_after_heads.toml");
    let e = errors(src);
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].1,
        "dependency cycle: a -> (after heads) b -> (after heads) c -> a"
    );
}

#[test]
fn bad_ids_and_reserved_names() {
    let src = include_str!("../plays/bad_ids_and_reserved_names.toml");
    assert_eq!(
        errors(src),
        [
            (
                "4:6".into(),
                "operation id \"-bad\" is not a valid name".into()
            ),
            ("8:6".into(), "operation id \"spawn-3\" is reserved".into()),
        ]
    );
    assert!(helps(src)[0].contains("^[A-Za-z0-9][A-Za-z0-9._-]*$"));
}

#[test]
fn numbers_out_of_range_and_type_errors() {
    let src = include_str!("../plays/bad_numbers_and_types.toml");
    assert_eq!(
        errors(src),
        [
            (
                "2:8".into(),
                "`name` in [play] must be a string, found an integer".into()
            ),
            (
                "3:18".into(),
                "`max_concurrent` in [play] is out of range".into()
            ),
            (
                "4:13".into(),
                "`max_spawn` in [play] is out of range".into()
            ),
            ("5:9".into(), "`speed` in [play] is out of range".into()),
            (
                "6:12".into(),
                "`reactive` in [play] must be a boolean (true or false), found a string".into()
            ),
            (
                "11:23".into(),
                "`duration_ms` in `sim` of operation \"a\" is out of range".into()
            ),
        ]
    );
    let h = helps(src);
    assert_eq!(h[1], "allowed: an integer from 1 to 100000");
    assert_eq!(h[3], "allowed: a number from 0.01 to 1000");
}

#[test]
fn unknown_keys_everywhere_with_suggestions() {
    let src = include_str!("../plays/bad_misspelled_keys.toml");
    let e = errors(src);
    assert_eq!(
        e,
        [
            ("1:1".into(), "unknown key `nmae` in the play file".into()),
            ("4:1".into(), "unknown key `max_concurent` in [play]".into()),
            (
                "9:1".into(),
                "unknown key `depend_on` in operations[0]".into()
            ),
            (
                "10:9".into(),
                "unknown key `duraton_ms` in `sim` of operation \"a\"".into()
            ),
        ]
    );
    let h = helps(src);
    assert!(
        h[1].starts_with("did you mean `max_concurrent`?"),
        "{}",
        h[1]
    );
    assert!(h[2].starts_with("did you mean `depends_on`?"), "{}", h[2]);
}

#[test]
fn missing_required_keys() {
    let src = include_str!("../plays/bad_missing_keys.toml");
    let e: Vec<String> = errors(src).into_iter().map(|(_, m)| m).collect();
    assert_eq!(
        e,
        [
            "[play] is missing `name`",
            "operations[0] is missing `id`",
            "operations[0] is missing `instruction`",
        ]
    );
    assert_eq!(
        errors(include_str!("../plays/bad_no_play_table.toml"))[0].1,
        "the play file is missing `play`"
    );
}

#[test]
fn when_conditions_are_checked() {
    let base = "[[operations]]\nid = \"a\"\nrole = \"tester\"\ninstruction = \"x\"\n";
    let dep = |when: &str| {
        play(&format!(
            "{base}[[operations]]\nid = \"b\"\nrole = \"tester\"\ninstruction = \"x\"\ndepends_on = [\"a\"]\nwhen = {when}\n"
        ))
    };
    let ok = Play::from_str(
        "p.toml",
        &dep("{ pointer = \"/verdict\", equals = \"ship\" }"),
    )
    .unwrap();
    assert_eq!(
        ok.operations[1].when,
        Condition::pointer("/verdict", serde_json::json!("ship"))
    );
    assert_eq!(
        Play::from_str("p.toml", &dep("\"failed\""))
            .unwrap()
            .operations[1]
            .when,
        Condition::Failed
    );
    assert_eq!(
        errors(&dep("\"sometimes\""))[0].1,
        "`when` in operation \"b\" has an unknown value \"sometimes\""
    );
    assert_eq!(
        errors(&dep("{ pointer = \"verdict\", equals = 1 }"))[0],
        (
            "12:20".into(),
            "invalid JSON pointer in `when` of operation \"b\"".into()
        )
    );
    assert_eq!(
        errors(&dep("3"))[0].1,
        "`when` of operation \"b\" must be a string or a table"
    );
    let no_deps = play(&format!("{base}when = \"failed\"\n"));
    assert_eq!(
        errors(&no_deps)[0].1,
        "`when` of operation \"a\" has no effect without depends_on"
    );
}

#[test]
fn placement_conflicts() {
    let src = include_str!("../plays/bad_placements.toml");
    let e: Vec<String> = errors(src).into_iter().map(|(_, m)| m).collect();
    assert_eq!(
        e,
        [
            "operation \"b\" is an independent root but has depends_on",
            "depends_on of operation \"c\" is empty"
        ]
    );
}

#[test]
fn agents_and_sim_behaviour_are_checked() {
    let src = include_str!("../plays/bad_agents_and_sim.toml");
    let e: Vec<String> = errors(src).into_iter().map(|(_, m)| m).collect();
    assert_eq!(
        e,
        [
            "agent of operation \"a\" names unknown agent \"claude\"",
            "`sim` of operation \"b\" applies only to agent = \"sim\"",
            "`outcome` in `sim` of operation \"c\" has an unknown value \"explode\"",
            "`sim` of operation \"c\" emits[0] must hold exactly one of spawn_request or escalation",
            "`spawn_request` in `sim` of operation \"c\" emits[1] is missing `instruction`",
        ]
    );
    assert!(helps(src)[2].contains("succeed, fail, escalate"));
}

#[test]
fn syntax_errors_have_positions_too() {
    let e = errors(include_str!("../plays/bad_unterminated_string.toml"));
    assert!(!e.is_empty());
    assert!(e[0].0.starts_with("2:"), "{e:?}");
    assert!(e[0].1.starts_with("TOML syntax error"));
}

#[test]
fn every_problem_is_reported_in_one_go() {
    let src = include_str!("../plays/bad_everything_at_once.toml");
    assert_eq!(errors(src).len(), 4);
}

#[test]
fn the_rendered_report_has_file_line_col_and_a_caret() {
    let d = Play::from_str(
        "plays/x.toml",
        include_str!("../plays/bad_unknown_dependency.toml"),
    )
    .unwrap_err();
    let out = d.render(false);
    assert!(out.contains("--> plays/x.toml:7:15"), "{out}");
    assert!(out.contains("^^^^ no operation has this id"), "{out}");
    assert!(
        out.contains("1 problem found; nothing was created"),
        "{out}"
    );
}

#[test]
fn a_syntax_error_is_reported_once() {
    let e = errors(include_str!("../plays/bad_table_after_inline_table.toml"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, "8:13");
}

/// Issue 11: plays that passed validation and could not run.
#[test]
fn an_id_too_long_for_a_file_name_is_refused() {
    let long = "a".repeat(300);
    let src = play(&format!(
        "[[operations]]\nid = \"{long}\"\nrole = \"tester\"\ninstruction = \"x\"\n"
    ));
    let e = errors(&src);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, "4:6");
    assert!(
        e[0].1.contains("(300 characters) is not a valid name"),
        "{e:?}"
    );
    assert!(helps(&src)[0].contains("at most 128 characters"));
}

#[test]
fn a_speed_that_never_finishes_is_refused() {
    let src = include_str!("../plays/bad_speed_never_finishes.toml").to_string();
    let e = errors(&src);
    assert_eq!(e[0].0, "3:9", "{e:?}");
    assert!(e[0].1.contains("speed"), "{e:?}");
    assert!(helps(&src)[0].contains("0.01 to 1000") || e[0].1.contains("0.01 to 1000"));
}

#[test]
fn a_when_pointer_at_the_operations_own_result_is_refused() {
    let src = include_str!("../plays/bad_when_own_result.toml");
    let e = errors(src);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, "13:1");
    assert!(e[0].1.contains("tests its own result"), "{e:?}");
    // Pointed at what the dependency returns, it is fine.
    let ok = src.replace(r#"summary = "looked""#, r#"verdict = "go""#);
    assert!(Play::from_str("p.toml", &ok).is_ok());
}

#[test]
fn a_play_file_that_is_not_utf8_is_refused_at_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    let mut bytes =
        play("[[operations]]\nid = \"a\"\nrole = \"tester\"\ninstruction = \"").into_bytes();
    bytes.extend_from_slice(b"caf\xe9\"\n");
    std::fs::write(&path, &bytes).unwrap();
    let Err(playdeck::play::LoadError::Invalid(d)) = Play::load(&path) else {
        panic!("refused as invalid");
    };
    assert_eq!(d.positions()[0], format!("{}:6:19", path.display()));
    assert!(d.items[0].message.contains("not UTF-8"));
}

#[test]
fn a_play_file_of_any_size_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.toml");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(playdeck::play::MAX_PLAY_BYTES + 1).unwrap();
    let e = Play::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("huge.toml is 268435457 bytes; allowed: at most 268435456"),
        "{e}"
    );
}

/// Issue 13 (A33-58): a cycle is reported with the other problems of the
/// file, not only once they are fixed.
#[test]
fn rule_a33_58_cycles_are_reported_with_every_other_problem() {
    let src = include_str!("../plays/bad_cycle_among_other_problems.toml");
    let e = errors(src);
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].1.contains("dependency cycle: a -> b -> a")
            || e[0].1.contains("dependency cycle: b -> a -> b"),
        "{e:?}"
    );
    assert!(e[1].1.contains("duration_ms"), "{e:?}");
}

/// Issue 27: the summary counts the palette's roles, and says how many the
/// operations use (it said `1 roles` for a palette of two).
#[test]
fn the_summary_counts_the_palettes_roles() {
    let p =
        playdeck::play::Play::from_str("p.toml", include_str!("../plays/two_roles_one_used.toml"))
            .unwrap();
    let s = p.summary();
    assert!(s.contains(", 2 roles (1 used by operations),"), "{s}");
}

/// A palette role with a bad mode or disposition is one error where it is
/// written: its operations are not also reported as outside the palette
/// ("needs a new-role unit"), which would follow from the first.
#[test]
fn a_bad_palette_mode_is_reported_once_not_again_for_the_roles_operations() {
    for bad in [
        "modes = [\"nosuch\"]",
        "disposition = \"sometimes\"",
        "modes = [\"concise\", \"concise\"]",
    ] {
        let src = format!(
            "[play]\nname = \"p\"\n[palette]\nroles = [{{ role = \"orchestrator\" }}, {{ role = \"implementer\", {bad} }}]\n[palette.expansion]\nmax_new_roles = 0\n[[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"x\"\n"
        );
        let e = common::play_errors(&src);
        assert_eq!(e.len(), 1, "{bad}: {e:#?}");
        assert!(e[0].0.starts_with("4:"), "{bad}: on its line: {e:#?}");
    }
}

#[test]
fn budget_sections_are_checked_with_their_position() {
    // The tester has an agent: below, the play's work runs on an agent CLI,
    // where a palette role with none is an error of its own (A36-41).
    let base = "[play]\nname = \"b\"\n[palette]\nroles = [{ role = \"implementer\" }, { role = \"tester\", agent = \"sim\" }]\n\
                [[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"x\"\n";
    let errs = errors(&format!(
        "{base}[budget]\nusd = 5\nroles = {{ tester = {{ usd = 9 }} }}\n"
    ));
    assert_eq!(
        errs,
        [(
            "11:11".to_string(),
            "role \"tester\" may spend 9 usd, more than the run's 5".to_string()
        )]
    );
    let errs = errors(&format!(
        "{base}[budget]\ntokens = 100\nwarn_at = [0.8, 1.5]\n"
    ));
    assert_eq!(errs[0].1, "[budget] warn_at holds fractions of the cap");
    let errs = errors(&format!("{base}[budget]\nwarn_at = [0.5]\n"));
    assert_eq!(errs[0].1, "[budget] sets no cap");
    let errs = errors(&format!(
        "{base}agent = \"cx\"\n[agents.cx]\nbinary = \"codex\"\nstream_format = \"codex\"\n[budget]\nusd = 5\n"
    ));
    assert_eq!(
        errs[0].1,
        "[budget] caps USD, but agent \"cx\" (codex) reports no cost and names no model, so its spend cannot be priced"
    );
    // Tokens can be capped on any agent.
    playdeck::play::Play::from_str(
        "p.toml",
        &format!(
            "{base}agent = \"cx\"\n[agents.cx]\nbinary = \"codex\"\nstream_format = \"codex\"\n[budget]\ntokens = 5000\n"
        ),
    )
    .unwrap();
}

/// A USD cap on an agent that reports tokens only is kept with `[prices]`
/// for the model it runs; each way of getting that wrong is named.
#[test]
fn prices_make_a_usd_cap_on_a_token_only_agent_possible() {
    let base = "[play]\nname = \"b\"\n[palette]\nroles = [{ role = \"implementer\" }]\n\
                [[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"x\"\n\
                agent = \"cx\"\n[agents.cx]\nbinary = \"codex\"\nstream_format = \"codex\"\nmodel = \"gpt-x\"\n\
                [budget]\nusd = 5\n";
    let errs = errors(base);
    assert_eq!(
        errs[0].1,
        "[budget] caps USD, but agent \"cx\" (codex) reports no cost and model \"gpt-x\" has no price"
    );
    let play = playdeck::play::Play::from_str(
        "p.toml",
        &format!("{base}[prices.\"gpt-x\"]\ninput = 2\noutput = 8\n"),
    )
    .unwrap();
    let p = play.prices["gpt-x"];
    assert_eq!((p.input, p.cached_input, p.output), (2.0, 2.0, 8.0));
    // A price of another model does not count.
    let errs = errors(&format!("{base}[prices.other]\ninput = 2\noutput = 8\n"));
    assert!(
        errs[0].1.contains("model \"gpt-x\" has no price"),
        "{errs:?}"
    );
    // Bad entries, each at its position.
    let errs = errors(&format!(
        "{base}[prices.\"gpt-x\"]\ninput = -1\noutput = 8\ncached = 1\n"
    ));
    let at: Vec<&str> = errs.iter().map(|(at, _)| at.as_str()).collect();
    assert_eq!(at, ["17:9", "19:1"], "{errs:#?}");
    assert!(
        errs[0].1.contains("input") && errs[0].1.contains("out of range"),
        "{errs:?}"
    );
    let errs = errors(&format!("{base}[prices.\"gpt-x\"]\ninput = 2\n"));
    assert!(
        errs.iter().any(|(_, m)| m.contains("missing `output`")),
        "{errs:?}"
    );
    // A role profile's model is the one priced.
    let profiled = include_str!("../plays/bad_unpriced_profile_model.toml");
    let errs = errors(profiled);
    assert!(
        errs.iter()
            .any(|(_, m)| m.contains("model \"mini\" has no price")),
        "{errs:?}"
    );
}

#[test]
fn a_cluster_section_is_checked_whole() {
    let op = "[[operations]]\nid = \"a\"\nrole = \"tester\"\ninstruction = \"x\"\n";
    let ok = Play::from_str(
        "p.toml",
        &play(&format!("[cluster]\nnats = \"nats://10.0.0.5:4222\"\n{op}")),
    )
    .unwrap();
    assert_eq!(ok.cluster.unwrap().nats, "nats://10.0.0.5:4222");
    let errs = errors(&play(&format!(
        "[cluster]\nnats = \"http://x:4222\"\nport = 4\n[cluster.worker_tags]\nnobody = [\"gpu\"]\n{op}"
    )));
    let text = format!("{errs:?}");
    assert!(text.contains("is not a NATS address"), "{text}");
    assert!(text.contains("port"), "{text}");
    assert!(text.contains("no role profile"), "{text}");
    let errs = errors(&play(&format!(
        "[cluster]\nnats = \"nats://pd:secret@x:4222\"\n{op}"
    )));
    assert!(
        format!("{errs:?}").contains("carries credentials"),
        "{errs:?}"
    );
    let errs = errors(&play(&format!("[cluster]\n{op}")));
    assert!(format!("{errs:?}").contains("needs nats ="), "{errs:?}");
}

/// The lines of `src` that `part` spans (1-based, inclusive).
fn lines_of(src: &str, part: &str) -> std::ops::RangeInclusive<usize> {
    let at = src.find(part).expect("the part is in the play");
    let first = src[..at].matches('\n').count() + 1;
    first..=first + part.trim_end().matches('\n').count()
}

/// What would follow from a broken definition, reported where it is named.
const FOLLOW_ONS: &[&str] = &[
    "unknown agent",
    "unknown profile",
    "no role profile",
    "has no effect",
    "has unknown role",
    "in the palette",
    "has no agent",
    "not an agent name",
];

/// A way to name a definition: the play text that names `N`.
type Reference = Box<dyn Fn(&str) -> String>;

/// Issue 43: a definition that fails to read — an agent, a role profile, a
/// user profile, whatever its error — is one error, inside the definition.
/// What names it (an operation, a profile's provider, `agent_tools`, a
/// palette entry, an operation's `profile`, `[cluster.worker_tags]`, an
/// operation that would run on it, a palette role or role profile of a user
/// profile) is not reported again as unknown, as having no effect, or as
/// having no agent. Each pair is also written with the definition fixed:
/// that play loads, so the one error is the only cause.
#[test]
fn a_broken_definition_is_reported_once_not_again_where_it_is_named() {
    // Each kind of definition: the ways to break it (name used, text),
    // one good definition, and the references to a name N.
    let agent_ok = "[agents.x]\nbinary = \"x\"\nstream_format = \"jsonl\"\n";
    let agent_breaks: &[(&str, &str)] = &[
        ("x", "[agents.x]\nstream_format = \"jsonl\"\n"),
        (
            "x",
            "[agents.x]\nbinary = \"x\"\nstream_format = \"yaml\"\n",
        ),
        ("x", "[agents]\nx = 3\n"),
        (
            "x y",
            "[agents.\"x y\"]\nbinary = \"x\"\nstream_format = \"jsonl\"\n",
        ),
    ];
    let op = |extra: &str| {
        format!("[[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"x\"\n{extra}")
    };
    let agent_refs: Vec<(&str, Reference)> = vec![
        (
            "an operation's agent",
            Box::new(move |n| op(&format!("agent = \"{n}\"\n"))),
        ),
        (
            "a role profile's provider, named by an operation",
            Box::new(move |n| {
                format!(
                    "[capacity]\n[role_profiles.p]\nrole = \"implementer\"\nprovider = \"{n}\"\nmax_instances = 1\n{}",
                    op("profile = \"p\"\n")
                )
            }),
        ),
        (
            "agent_tools",
            Box::new(move |n| {
                op(&format!(
                    "agent_tools = {{ \"{n}\" = {{ permission = \"read-only\" }} }}\n"
                ))
            }),
        ),
        (
            "a palette entry's agent",
            Box::new(move |n| {
                format!(
                    "[palette]\nroles = [{{ role = \"implementer\", agent = \"{n}\" }}]\n{}",
                    op("")
                )
            }),
        ),
    ];

    // A CLI for the profiles' operations to run on (and their `tools`).
    let cli = "[agents.c]\nbinary = \"c\"\nstream_format = \"claude\"\n[capacity]\n";
    let profile_ok =
        "[role_profiles.p]\nrole = \"implementer\"\nprovider = \"c\"\nmax_instances = 1\n";
    let profile_breaks: &[(&str, &str)] = &[
        (
            "p",
            "[role_profiles.p]\nprovider = \"c\"\nmax_instances = 1\n",
        ),
        (
            "p",
            "[role_profiles.p]\nrole = \"nosuch\"\nprovider = \"c\"\nmax_instances = 1\n",
        ),
        (
            "p",
            "[role_profiles.p]\nrole = \"implementer\"\nprovider = \"c\"\nmax_instances = 0\n",
        ),
        (
            "p",
            "[agents.b]\nbinary = \"b\"\nstream_format = \"yaml\"\n[role_profiles.p]\nrole = \"implementer\"\nprovider = \"b\"\nmax_instances = 1\n",
        ),
        ("p", "[role_profiles]\np = 3\n"),
        (
            "p q",
            "[role_profiles.\"p q\"]\nrole = \"implementer\"\nprovider = \"c\"\nmax_instances = 1\n",
        ),
    ];
    let profile_refs: Vec<(&str, Reference)> = vec![
        (
            "an operation's profile",
            Box::new(move |n| op(&format!("profile = \"{n}\"\n"))),
        ),
        (
            "[cluster.worker_tags]",
            Box::new(move |n| {
                format!(
                    "[cluster]\nnats = \"nats://h:4222\"\n[cluster.worker_tags]\n\"{n}\" = [\"gpu\"]\n{}",
                    op("")
                )
            }),
        ),
        (
            "an operation of its role with tools",
            Box::new(move |_| op("tools = { permission = \"read-only\" }\n")),
        ),
    ];

    let user_ok = "[profiles.u]\ndescription = \"mine\"\n";
    let user_breaks: &[(&str, &str)] = &[
        ("u", "[profiles]\nu = 3\n"),
        ("u!", "[profiles.\"u!\"]\ndescription = \"mine\"\n"),
    ];
    let on = |n: &str, extra: &str| {
        format!(
            "[palette]\nroles = [{{ role = \"{n}\" }}]\n[[operations]]\nid = \"a\"\nrole = \"{n}\"\ninstruction = \"x\"\n{extra}"
        )
    };
    let user_refs: Vec<(&str, Reference)> = vec![
        (
            "a palette role and its operation",
            Box::new(move |n| on(n, "")),
        ),
        (
            "a role profile's role",
            Box::new(move |n| {
                on(
                    n,
                    &format!(
                        "[capacity]\n[role_profiles.p]\nrole = \"{n}\"\nprovider = \"sim\"\nmax_instances = 1\n"
                    ),
                )
            }),
        ),
    ];

    let kinds = [
        ("", agent_ok, agent_breaks, &agent_refs, "x"),
        (cli, profile_ok, profile_breaks, &profile_refs, "p"),
        ("", user_ok, user_breaks, &user_refs, "u"),
    ];
    let mut checked = 0;
    for (prefix, ok, breaks, refs, ok_name) in kinds {
        for (name, def) in breaks {
            for (what, reference) in refs.iter() {
                let src = format!("{HEAD}{prefix}{def}{}", reference(name));
                let e = errors(&src);
                assert_eq!(e.len(), 1, "{what}: one error\n{src}\n{e:#?}");
                let line: usize = e[0].0.split(':').next().unwrap().parse().unwrap();
                assert!(
                    lines_of(&src, def).contains(&line),
                    "{what}: the error is inside the definition\n{src}\n{e:#?}"
                );
                for f in FOLLOW_ONS {
                    assert!(!e[0].1.contains(f), "{what}: {f}\n{src}\n{e:#?}");
                }
                let fixed = format!("{HEAD}{prefix}{ok}{}", reference(ok_name));
                if let Err(d) = Play::from_str("p.toml", &fixed) {
                    panic!("{what}, with the definition fixed, loads:\n{fixed}\n{d:?}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * 4 + 6 * 3 + 2 * 2);
}

/// A name that is defined nowhere is still reported beside a broken
/// definition — with the names there are, the broken ones marked, and
/// never an empty list.
#[test]
fn an_unknown_name_beside_a_broken_one_is_still_reported() {
    let broken_agent = "[agents.x]\nstream_format = \"jsonl\"\n";
    let op = |extra: &str| {
        format!("[[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"x\"\n{extra}")
    };
    let e = errors(&play(&format!("{broken_agent}{}", op("agent = \"y\"\n"))));
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!(e[1].1, "agent of operation \"a\" names unknown agent \"y\"");
    let e = errors(&play(&format!(
        "{broken_agent}{}",
        op("agent_tools = { y = { permission = \"read-only\" } }\n")
    )));
    assert_eq!(e.len(), 2, "{e:#?}");
    assert!(
        e[1].1.contains("names agent \"y\", which is not defined"),
        "{e:#?}"
    );

    let broken_profile = "[capacity]\n[role_profiles.p]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 0\n";
    let src = play(&format!(
        "{broken_profile}[cluster]\nnats = \"nats://h:4222\"\n[cluster.worker_tags]\nzzz = [\"gpu\"]\n{}",
        op("profile = \"zzz\"\n")
    ));
    let e = errors(&src);
    assert_eq!(e.len(), 3, "{e:#?}");
    assert!(
        e[1].1.contains("names \"zzz\", which is no role profile"),
        "{e:#?}"
    );
    assert_eq!(e[2].1, "operation \"a\" names unknown profile \"zzz\"");
    assert_eq!(
        helps(&src)[2],
        "no role profile reads without errors; with errors of their own: p"
    );
    // With no role profile at all, the help says so rather than listing
    // nothing.
    let src = play(&format!(
        "[capacity]\nenabled = false\n[role_profiles]\n{}",
        op("profile = \"zzz\"\n")
    ));
    let e = errors(&src);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].1, "operation \"a\" names unknown profile \"zzz\"");
    assert!(
        helps(&src)[0].starts_with("no role profile is configured; define it under"),
        "{:?}",
        helps(&src)
    );
}

/// `[workspace]` (issue 41): each bad value at its position, with what is
/// allowed; keys that need worktrees without them; worktrees outside a
/// repository.
#[test]
fn the_workspace_section_is_checked_where_it_is_written() {
    let op = "[[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"x\"\n";
    let e = errors(&play(&format!(
        "[workspace]\nisolation = \"worktree\"\nland = \"squash\"\ninclude = [\"../secrets\", \"\"]\nsetup = [\" \"]\n{op}"
    )));
    assert_eq!(e.len(), 4, "{e:?}");
    assert_eq!(e[0].0, "5:8", "{e:?}");
    assert!(e[0].1.contains("squash"), "{e:?}");
    assert!(
        e[1].1
            .contains("\"../secrets\" is not a path inside the repository"),
        "{e:?}"
    );
    assert!(e[2].1.contains("include \"\""), "{e:?}");
    assert!(e[3].1.contains("setup has an empty command"), "{e:?}");
    let h = helps(&play(&format!(
        "[workspace]\nisolation = \"worktree\"\nland = \"squash\"\n{op}"
    )));
    assert!(h[0].contains("merge") && h[0].contains("rebase"), "{h:?}");
    let e = errors(&play(&format!(
        "[workspace]\nland = \"rebase\"\nsetup = [\"npm ci\"]\n{op}"
    )));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, "3:2", "at the section's name: {e:?}");
    assert!(
        e[0].1
            .contains("land, setup applies only with isolation = \"worktree\""),
        "{e:?}"
    );
    // Outside a repository.
    let dir = tempfile::tempdir().unwrap();
    let src = play(&format!("[workspace]\nisolation = \"worktree\"\n{op}"));
    let d = Play::from_str_in("p.toml", &src, dir.path()).unwrap_err();
    assert!(
        d.items[0]
            .message
            .contains("needs the play in a git repository"),
        "{:?}",
        d.items
    );
    // `review` on an operation reaches its agent's parameters.
    let p = Play::from_str(
        "p.toml",
        &play(&format!(
            "[workspace]\nisolation = \"worktree\"\n{op}review = true\n"
        )),
    )
    .unwrap();
    assert_eq!(p.operations[0].params()["review"], true);
    assert!(p.workspace.isolated());
}
