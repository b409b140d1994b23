//! Agent CLIs in play files: `[agents.*]`, flag profile selections and
//! ToolSets, validated with positions and loaded atomically. What the
//! binary does with them (`playdeck argv`, the user's agents file, the
//! environment policy end to end) is the cli tier's `agents_play`.

use crate::common;

use playdeck::agents::{Permission, StreamFormat};
use playdeck::play::Play;

const HEAD: &str = "[play]\nname = \"t\"\n";
const OP: &str = "[[operations]]\nid = \"a\"\nrole = \"tester\"\ninstruction = \"write tests\"\n";

fn errors(src: &str) -> Vec<(String, String)> {
    common::play_errors(src)
}

#[test]
fn an_agent_entry_loads_with_defaults() {
    let src = format!(
        "{HEAD}[agents.echo]\nbinary = \"echo\"\nsubcommand = \"-p\"\nmodel = \"test-model\"\nstream_format = \"claude\"\nflags.plan = [\"--verbose\"]\n{OP}agent = \"echo\"\nflag_profile = \"plan\"\n"
    );
    let p = Play::from_str("p.toml", &src).unwrap();
    let a = &p.agents["echo"];
    assert_eq!(
        (a.binary.as_str(), a.subcommand.as_str(), a.stream_format),
        ("echo", "-p", StreamFormat::Claude)
    );
    assert_eq!(a.flags["plan"], vec!["--verbose".to_string()]);
    assert_eq!(a.stall_timeout.as_secs(), 300);
    assert!(a.kill_on_stall && a.max_runtime.is_none());
    assert_eq!(p.operations[0].flag_profile.as_deref(), Some("plan"));
}

#[test]
fn every_bad_agent_entry_is_reported_with_its_position_and_none_registered() {
    let src = format!(
        "{HEAD}[agents.good]\nbinary = \"x\"\nstream_format = \"jsonl\"\n\
         [agents.sim]\nbinary = \"x\"\nstream_format = \"jsonl\"\n\
         [agents.\"-bad\"]\nbinary = \"x\"\n\
         [agents.c]\nbinary = \"x\"\nstream_format = \"vertex\"\nflags.\"--plan\" = [\"-x\"]\nflags.ok = [1]\nenv_vars.\"1X\" = \"v\"\nenv_passlist = [\"A B\"]\nstall_timeout = -1\nenv_policy = \"open\"\nprompt_via = \"pipe\"\ncolour = true\n\
         [agents.d]\nstream_format = \"codex\"\n{OP}"
    );
    let errs = errors(&src);
    let expect = [
        ("6:9", "agent \"sim\" is built in"),
        ("9:9", "agent name \"-bad\" is not a valid name"),
        ("13:17", "stream_format"),
        (
            "14:7",
            "flag profile \"--plan\" of agent \"c\" is not a valid name",
        ),
        (
            "15:13",
            "flag profile \"ok\" of agent \"c\" must hold strings",
        ),
        (
            "16:10",
            "\"1X\" in env_vars of agent \"c\" is not a variable name",
        ),
        ("17:17", "\"A B\" in env_passlist"),
        ("18:17", "stall_timeout"),
        ("19:14", "env_policy"),
        ("20:14", "prompt_via"),
        ("21:1", "colour"),
        ("22:1", "binary"),
    ];
    for (pos, needle) in expect {
        assert!(
            errs.iter().any(|(p, m)| p == pos && m.contains(needle)),
            "no error at {pos} containing {needle:?}; got {errs:#?}"
        );
    }
    assert_eq!(errs.len(), expect.len(), "one error per problem: {errs:#?}");
}

#[test]
fn flag_profile_selections_must_be_well_formed_names() {
    let src = include_str!("../plays/bad_flag_profile_names.toml");
    let errs = errors(src);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(errs[0].0, "3:16");
    assert!(
        errs[0]
            .1
            .contains("flag_profile \"--plan\" of [play] is not a valid name")
    );
    assert_eq!(errs[1].0, "8:16");
}

#[test]
fn an_operation_names_a_known_agent() {
    let src = format!(
        "{HEAD}[agents.claude]\nbinary = \"claude\"\nstream_format = \"claude\"\n{OP}agent = \"cluade\"\n"
    );
    let d = Play::from_str("p.toml", &src).unwrap_err();
    assert_eq!(d.items.len(), 1);
    assert!(d.items[0].message.contains("unknown agent \"cluade\""));
    let help = d.items[0].help.as_deref().unwrap();
    assert!(
        help.contains("did you mean \"claude\"") && help.contains("sim, noop, claude"),
        "{help}"
    );
}

#[test]
fn agent_options_on_a_built_in_agent_are_refused() {
    let src =
        format!("{HEAD}{OP}flag_profile = \"plan\"\ntools = {{ permission = \"full-access\" }}\n");
    let errs = errors(&src);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].1.contains(
        "flag_profile of operation \"a\" has no effect: it runs on the built-in agent \"sim\""
    ));
    assert!(errs[1].1.starts_with("tools of operation \"a\""));
}

#[test]
fn toolsets_are_validated() {
    let src = format!(
        "{HEAD}[agents.x]\nbinary = \"x\"\nstream_format = \"claude\"\n{OP}agent = \"x\"\ntools = {{ internal = [\"Read\", \"Bash, Edit\"], permission = \"root\", max_turns = 0, extra = 1 }}\n"
    );
    let errs = errors(&src);
    let all: String = errs.iter().map(|(_, m)| format!("{m}\n")).collect();
    for needle in ["\"Bash, Edit\"", "permission", "max_turns", "extra"] {
        assert!(all.contains(needle), "{needle} missing from {all}");
    }
    let ok = format!(
        "{HEAD}[agents.x]\nbinary = \"x\"\nstream_format = \"claude\"\n{OP}agent = \"x\"\ntools = {{ internal = [\"Read\"], permission = \"workspace-write\" }}\n"
    );
    let p = Play::from_str("p.toml", &ok).unwrap();
    let t = p.operations[0].tools.as_ref().unwrap();
    assert_eq!(
        (t.permission, t.max_turns, t.turns()),
        (Permission::WorkspaceWrite, None, 25)
    );
}

#[test]
fn role_profile_agent_options_are_checked() {
    let src = format!(
        "{HEAD}[capacity]\n[agents.w]\nbinary = \"w\"\nstream_format = \"jsonl\"\n\
         [role_profiles.t]\nrole = \"tester\"\nprovider = \"w\"\nprovider_profile = \"--fast\"\nmax_instances = 1\n\
         [role_profiles.u]\nrole = \"reviewer\"\nprovider = \"sim\"\nprovider_profile = \"plan\"\ntools = {{ permission = \"read-only\" }}\nmax_instances = 1\n{OP}"
    );
    let errs = errors(&src);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0]
            .1
            .contains("provider_profile \"--fast\" of t is not a valid name")
    );
    assert!(
        errs[1]
            .1
            .contains("provider_profile of role profile u has no effect")
    );
    assert!(errs[2].1.contains("tools of role profile u has no effect"));
}

#[test]
fn role_profiles_name_registry_agents_and_supported_thinking() {
    let src = format!(
        "{HEAD}[capacity]\n[agents.cop]\nbinary = \"copilot\"\nstream_format = \"copilot\"\n\
         [role_profiles.t]\nrole = \"tester\"\nprovider = \"cop\"\nthinking = \"high\"\nmax_instances = 1\n\
         [role_profiles.u]\nrole = \"reviewer\"\nprovider = \"ghost\"\nmax_instances = 1\n{OP}"
    );
    let errs = errors(&src);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0]
            .1
            .contains("agent \"cop\" (copilot format) has no thinking control")
    );
    assert!(errs[1].1.contains("unknown agent \"ghost\""));
}

#[test]
fn a_toolset_a_format_cannot_express_is_refused_with_its_position() {
    let src = format!(
        "{HEAD}[agents.cl]\nbinary = \"claude\"\nstream_format = \"claude\"\n{OP}agent = \"cl\"\ntools = {{ internal = [\"Read\", \"Edit\"], permission = \"read-only\" }}\n"
    );
    let errs = errors(&src);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].0, "11:1");
    assert!(
        errs[0].1.contains("\"Edit\" among its tools") && errs[0].1.contains("read-only"),
        "{errs:?}"
    );
}

/// Issue 43 (F11-03): an MCP tool's name does not say whether it writes,
/// so `read-only` takes one only when the play vouches for it
/// (`mcp_read_only`); unvouched, the ToolSet is refused at its position,
/// and a vouch for a tool the list does not hold is refused too.
#[test]
fn an_mcp_tool_under_read_only_needs_the_play_s_word_that_it_only_reads() {
    let tools = |t: &str| {
        format!(
            "{HEAD}[agents.cl]\nbinary = \"claude\"\nstream_format = \"claude\"\n{OP}agent = \"cl\"\ntools = {{ {t}, permission = \"read-only\" }}\n"
        )
    };
    let errs = errors(&tools("mcp = [\"mcp__gh__issues\"]"));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].0, "11:1");
    assert!(
        errs[0]
            .1
            .contains("cannot vouch for the MCP tool \"mcp__gh__issues\"")
            && errs[0].1.contains("mcp_read_only"),
        "{errs:?}"
    );
    let vouched = tools("mcp = [\"mcp__gh__issues\"], mcp_read_only = [\"mcp__gh__issues\"]");
    if let Err(e) = Play::from_str("p.toml", &vouched) {
        panic!("vouched for, it loads: {e}");
    }
    let stray = errors(&tools("mcp = [], mcp_read_only = [\"mcp__gh__push\"]"));
    assert_eq!(stray.len(), 1, "{stray:?}");
    assert!(
        stray[0].1.contains("which its mcp list does not"),
        "{stray:?}"
    );
}

/// Issue 40: `ask` (calls the operator answers) is claude's alone, refused
/// at its position for a format that cannot ask; a pattern that is not one
/// is refused with what is allowed; a good one loads.
#[test]
fn ask_is_checked_where_it_is_written() {
    let tools = |format: &str, t: &str| {
        format!(
            "{HEAD}[agents.cl]\nbinary = \"x\"\nstream_format = \"{format}\"\n{OP}agent = \"cl\"\ntools = {{ {t} }}\n"
        )
    };
    let errs = errors(&tools("codex", "ask = [\"Bash\"]"));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].0, "11:1");
    assert!(
        errs[0]
            .1
            .contains("ask cannot be expressed for the codex format"),
        "{errs:?}"
    );
    let errs = errors(&tools(
        "claude",
        "ask = [\"Bash(rm *\", \"rm -rf\"], ask_timeout = 0",
    ));
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(
        errs[0].1.contains("\"Bash(rm *\" in the ask list"),
        "{errs:?}"
    );
    assert!(errs[1].1.contains("\"rm -rf\" in the ask list"), "{errs:?}");
    assert!(errs[2].1.contains("ask_timeout"), "{errs:?}");
    let good = tools(
        "claude",
        "internal = [\"Read\"], ask = [\"Write\", \"Bash(rm *)\", \"*\"], ask_timeout = 60",
    );
    if let Err(e) = Play::from_str("p.toml", &good) {
        panic!("it loads: {e}");
    }
}
