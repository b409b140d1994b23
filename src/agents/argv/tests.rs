use super::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn echo_claude() -> AgentDef {
    let mut a = AgentDef::new("echo", "echo", StreamFormat::Claude);
    a.subcommand = "-p".into();
    a.model = Some("test-model".into());
    a.flags.insert("plan".into(), s(&["--verbose"]));
    a
}

fn argv_of(a: &AgentDef, profile: Option<&str>, tools: Option<&ToolSet>) -> BuiltCommand {
    let mut req = ArgvRequest::new(a, "write tests");
    req.flag_profile = profile;
    req.tools = tools;
    build(&req).unwrap()
}

#[test]
fn issue_examples() {
    let a = echo_claude();
    let b = argv_of(&a, Some("plan"), None);
    assert_eq!(
        b.argv,
        s(&[
            "echo",
            "-p",
            "write tests",
            "--model",
            "test-model",
            "--verbose"
        ])
    );
    assert!(b.warnings.is_empty());

    let b = argv_of(&a, None, None);
    assert_eq!(
        b.argv,
        s(&["echo", "-p", "write tests", "--model", "test-model"])
    );

    let b = argv_of(&a, Some("research"), None);
    assert_eq!(
        b.argv,
        s(&["echo", "-p", "write tests", "--model", "test-model"])
    );
    assert_eq!(b.warnings.len(), 1);
    assert!(b.warnings[0].contains("no flags for profile 'research'"));
    assert!(b.warnings[0].contains("\"echo\""), "names the agent");
    assert!(b.warnings[0].contains("plan"), "lists what exists");

    let mut codex = echo_claude();
    codex.stream_format = StreamFormat::Codex;
    codex
        .flags
        .insert("plan".into(), s(&["-s", "read-only", "--json", "--think"]));
    let tools = ToolSet {
        permission: Permission::WorkspaceWrite,
        ..ToolSet::default()
    };
    let b = argv_of(&codex, Some("plan"), Some(&tools));
    assert_eq!(
        b.argv,
        s(&[
            "echo",
            "-p",
            "write tests",
            "--model",
            "test-model",
            "--think",
            "-s",
            "workspace-write",
            "--json",
            "--skip-git-repo-check"
        ])
    );
    assert_eq!(b.warnings.len(), 2, "{:?}", b.warnings);
    assert!(b.warnings[0].contains("-s read-only"));
    assert!(b.warnings[1].contains("--json"));
}

#[test]
fn order_subcommand_and_stdin() {
    let mut a = AgentDef::new("x", "bin", StreamFormat::Jsonl);
    a.flags.insert("p".into(), s(&["--fast"]));
    let mut req = ArgvRequest::new(&a, "do it");
    req.flag_profile = Some("p");
    req.model = Some("m2");
    let b = build(&req).unwrap();
    assert_eq!(b.argv, s(&["bin", "do it", "--model", "m2", "--fast"]));
    assert_eq!(b.stdin, None);

    a.prompt_via = PromptVia::Stdin;
    a.subcommand = "run".into();
    a.model = Some("m1".into());
    let mut req = ArgvRequest::new(&a, "do it");
    req.flag_profile = Some("p");
    let b = build(&req).unwrap();
    assert_eq!(b.argv, s(&["bin", "run", "-", "--model", "m1", "--fast"]));
    assert_eq!(b.stdin.as_deref(), Some("do it"));
}

#[test]
fn malformed_profile_names_are_rejected() {
    let a = echo_claude();
    for bad in ["", "--verbose", "-p", ".x", "a b", "pl/an"] {
        let mut req = ArgvRequest::new(&a, "p");
        req.flag_profile = Some(bad);
        assert_eq!(
            build(&req).unwrap_err(),
            ArgvError::InvalidProfile(bad.into())
        );
    }
}

#[test]
fn every_toolset_field_is_carried_or_refused() {
    use Permission::*;
    let set = |internal: &[&str], permission, max_turns| ToolSet {
        internal: s(internal),
        mcp: vec![],
        mcp_read_only: vec![],
        permission,
        max_turns,
        ask: Vec::new(),
        ask_timeout: None,
    };
    let refused = |f: StreamFormat, t: &ToolSet| {
        let a = AgentDef::new("a", "a", f);
        let mut req = ArgvRequest::new(&a, "go");
        req.tools = Some(t);
        match build(&req) {
            Err(ArgvError::ToolSet(e)) => Some(e.to_string()),
            Err(e) => panic!("{e}"),
            Ok(_) => None,
        }
    };
    // max_turns: claude takes it (a JSON-lines program in its env).
    for f in [StreamFormat::Claude, StreamFormat::Jsonl] {
        assert_eq!(refused(f, &set(&[], WorkspaceWrite, Some(5))), None);
    }
    for f in [
        StreamFormat::Codex,
        StreamFormat::Copilot,
        StreamFormat::Gemini,
        StreamFormat::Opencode,
        StreamFormat::Antigravity,
    ] {
        let e = refused(f, &set(&[], WorkspaceWrite, Some(5))).expect("refused");
        assert!(e.contains("max_turns cannot be expressed"), "{e}");
        assert_eq!(refused(f, &set(&[], WorkspaceWrite, None)), None);
    }
    // A tool list where there is no flag to carry it.
    for f in [StreamFormat::Codex, StreamFormat::Antigravity] {
        let e = refused(f, &set(&["Read"], ReadOnly, None)).expect("refused");
        assert!(e.contains("a tool list cannot be expressed"), "{e}");
    }
    // Full access that would widen the list to every tool.
    for f in [
        StreamFormat::Copilot,
        StreamFormat::Opencode,
        StreamFormat::Claude,
        StreamFormat::Gemini,
    ] {
        let e = refused(f, &set(&["read"], FullAccess, None)).expect("refused");
        assert!(e.contains("would not limit it"), "{e}");
        assert_eq!(refused(f, &set(&[], FullAccess, None)), None);
    }
    // Read-only holds for every tool listed: a shell writes too.
    for (f, shell) in [
        (StreamFormat::Claude, "Bash"),
        (StreamFormat::Copilot, "shell"),
        (StreamFormat::Gemini, "run_shell_command"),
        (StreamFormat::Opencode, "bash"),
    ] {
        let e = refused(f, &set(&["Read", shell], ReadOnly, None)).expect("refused");
        assert!(e.contains(&format!("{shell:?} among its tools")), "{e}");
        assert_eq!(
            refused(f, &set(&["Read", shell], WorkspaceWrite, None)),
            None
        );
    }
}

#[test]
fn translation_per_format_and_permission() {
    use Permission::*;
    let tools = |permission| ToolSet {
        internal: s(&["Read", "Bash"]),
        mcp: s(&["mcp__gh__issues"]),
        mcp_read_only: s(&["mcp__gh__issues"]),
        permission,
        max_turns: Some(7),
        ..ToolSet::default()
    };
    // The translation itself, for every field (which of these a
    // format refuses is `every_toolset_field_is_carried_or_refused`).
    let tail = |f: StreamFormat, p: Permission| {
        let mut out = BuiltCommand::default();
        translate(&mut out, f, &tools(p));
        (out.argv, out.env)
    };
    let claude = |mode: &[&str]| {
        let mut v = s(&[
            "--allowedTools",
            "Read,Bash,mcp__gh__issues",
            "--max-turns",
            "7",
        ]);
        v.extend(s(mode));
        v.extend(s(&[
            "--verbose",
            "--output-format",
            "stream-json",
            "--include-partial-messages",
        ]));
        v
    };
    assert_eq!(
        tail(StreamFormat::Claude, ReadOnly).0,
        claude(&[
            "--permission-mode",
            "default",
            "--disallowedTools",
            "Edit,MultiEdit,Write,NotebookEdit"
        ])
    );
    assert_eq!(
        tail(StreamFormat::Claude, WorkspaceWrite).0,
        claude(&["--permission-mode", "acceptEdits"])
    );
    assert_eq!(
        tail(StreamFormat::Claude, FullAccess).0,
        claude(&["--permission-mode", "bypassPermissions"])
    );
    for (p, sandbox) in [
        (ReadOnly, "read-only"),
        (WorkspaceWrite, "workspace-write"),
        (FullAccess, "danger-full-access"),
    ] {
        assert_eq!(
            tail(StreamFormat::Codex, p).0,
            s(&["-s", sandbox, "--json", "--skip-git-repo-check"])
        );
    }
    let allow = s(&[
        "--allow-tool",
        "read",
        "--allow-tool",
        "bash",
        "--allow-tool",
        "mcp__gh__issues",
    ]);
    let copilot = |last: &[&str]| {
        let mut v = allow.clone();
        v.extend(s(last));
        v.extend(s(&["--output-format", "json"]));
        v
    };
    assert_eq!(
        tail(StreamFormat::Copilot, ReadOnly).0,
        copilot(&["--deny-tool", "write"])
    );
    assert_eq!(
        tail(StreamFormat::Copilot, WorkspaceWrite).0,
        copilot(&["--allow-tool", "write"])
    );
    assert_eq!(
        tail(StreamFormat::Copilot, FullAccess).0,
        s(&[
            "--allow-all-tools",
            "--allow-all-paths",
            "--output-format",
            "json"
        ])
    );
    for (p, mode) in [
        (ReadOnly, "default"),
        (WorkspaceWrite, "auto_edit"),
        (FullAccess, "yolo"),
    ] {
        assert_eq!(
            tail(StreamFormat::Gemini, p).0,
            s(&[
                "--approval-mode",
                mode,
                "--allowed-tools",
                "Read",
                "--allowed-tools",
                "Bash",
                "--allowed-tools",
                "mcp__gh__issues",
                "--output-format",
                "stream-json"
            ])
        );
    }
    let opencode = |p| {
        let (argv, env) = tail(StreamFormat::Opencode, p);
        assert_eq!(argv, s(&["--format", "json"]));
        assert_eq!(env.len(), 1);
        assert_eq!(env[0].0, "OPENCODE_CONFIG_CONTENT");
        serde_json::from_str::<serde_json::Value>(&env[0].1).unwrap()
    };
    assert_eq!(
        opencode(ReadOnly).to_string(),
        r#"{"permission":{"*":"deny","edit":"deny","bash":"deny","external_directory":"deny","Read":"allow","Bash":"allow","mcp__gh__issues":"allow"}}"#
    );
    assert_eq!(opencode(WorkspaceWrite)["permission"]["edit"], "allow");
    // A list that leaves the shell out keeps it out (issue 43).
    let no_shell = ToolSet {
        internal: vec!["read".into(), "edit".into()],
        mcp: vec![],
        mcp_read_only: vec![],
        permission: WorkspaceWrite,
        max_turns: None,
        ..ToolSet::default()
    };
    let p = opencode_permission(&no_shell);
    assert_eq!(
        (&p["permission"]["bash"], &p["permission"]["edit"]),
        (&serde_json::json!("deny"), &serde_json::json!("allow")),
        "{p}"
    );
    assert_eq!(
        opencode(FullAccess).to_string(),
        r#"{"permission":"allow"}"#
    );
    assert_eq!(
        tail(StreamFormat::Antigravity, FullAccess).0,
        s(&[
            "--dangerously-skip-permissions",
            "--output-format",
            "stream-json"
        ])
    );
    assert_eq!(
        tail(StreamFormat::Antigravity, ReadOnly).0,
        s(&["--output-format", "stream-json"])
    );
    assert_eq!(
        tail(StreamFormat::Antigravity, WorkspaceWrite).0,
        s(&["--mode", "accept-edits", "--output-format", "stream-json"])
    );
    let (argv, env) = tail(StreamFormat::Jsonl, FullAccess);
    assert!(argv.is_empty());
    assert!(env.contains(&("PLAYDECK_PERMISSION".into(), "full-access".into())));
    assert!(env.contains(&("PLAYDECK_TOOLS".into(), "Read,Bash,mcp__gh__issues".into())));
    // Every permission gives a different command line where the format
    // has a flag for it.
    for f in [
        StreamFormat::Claude,
        StreamFormat::Codex,
        StreamFormat::Copilot,
        StreamFormat::Gemini,
        StreamFormat::Opencode,
        StreamFormat::Antigravity,
    ] {
        let all: std::collections::HashSet<_> = [ReadOnly, WorkspaceWrite, FullAccess]
            .into_iter()
            .map(|p| tail(f, p))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(a, e)| format!("{a:?}{e:?}"))
            .collect();
        assert_eq!(all.len(), 3, "{f:?}");
    }
}

#[test]
fn a_read_only_toolset_with_a_writing_tool_is_refused() {
    for (f, tool) in [
        (StreamFormat::Claude, "Edit"),
        (StreamFormat::Copilot, "Write"),
        (StreamFormat::Gemini, "write_file"),
        (StreamFormat::Opencode, "edit"),
    ] {
        let a = AgentDef::new("a", "a", f);
        let t = ToolSet {
            internal: s(&["Read", tool]),
            ..ToolSet::default()
        };
        let mut req = ArgvRequest::new(&a, "p");
        req.tools = Some(&t);
        let e = build(&req).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{tool:?} among its tools")) && e.contains("workspace-write"),
            "{e}"
        );
        let ww = ToolSet {
            permission: Permission::WorkspaceWrite,
            ..t.clone()
        };
        req.tools = Some(&ww);
        assert!(build(&req).is_ok());
    }
}

#[test]
fn the_model_a_flag_sets_is_read_in_every_form() {
    for (args, want) in [
        (&["--model", "m1"][..], "m1"),
        (&["--model=m2"], "m2"),
        (&["-mm3"], "m3"),
        (&["-m", "m4"], "m4"),
        (&["-c", "model=\"m5\""], "m5"),
        (&["--config=model=m6"], "m6"),
    ] {
        let mut cx = AgentDef::new("cx", "codex", StreamFormat::Codex);
        cx.model = Some("agent-model".into());
        cx.flags.insert("p".into(), s(args));
        let mut req = ArgvRequest::new(&cx, "p");
        req.flag_profile = Some("p");
        assert_eq!(
            build(&req).unwrap().model.as_deref(),
            Some(want),
            "{args:?}"
        );
        req.flag_profile = None;
        assert_eq!(build(&req).unwrap().model.as_deref(), Some("agent-model"));
    }
}

#[test]
fn one_model_and_one_thinking_level_win() {
    let mut cx = AgentDef::new("cx", "codex", StreamFormat::Codex);
    cx.model = Some("agent-model".into());
    cx.flags.insert(
        "deep".into(),
        s(&[
            "-c",
            "model_reasoning_effort=high",
            "--model",
            "flag-model",
            "--search",
        ]),
    );
    // The flag profile's model replaces the agent's default.
    let mut req = ArgvRequest::new(&cx, "p");
    req.flag_profile = Some("deep");
    let b = build(&req).unwrap();
    assert_eq!(
        b.argv[2..],
        s(&[
            "-c",
            "model_reasoning_effort=high",
            "--model",
            "flag-model",
            "--search"
        ])
    );
    assert!(b.warnings.is_empty());
    assert_eq!(
        b.model.as_deref(),
        Some("flag-model"),
        "what [prices] is read by"
    );
    // A role profile's model and thinking win over the flag profile's.
    req.model = Some("profile-model");
    req.thinking = Some(Thinking::Low);
    let b = build(&req).unwrap();
    assert_eq!(b.model.as_deref(), Some("profile-model"));
    assert_eq!(
        b.argv[2..],
        s(&[
            "--model",
            "profile-model",
            "--search",
            "-c",
            "model_reasoning_effort=low"
        ])
    );
    assert_eq!(b.warnings.len(), 2, "{:?}", b.warnings);
    assert!(b.warnings[0].contains("dropped --model flag-model"));
    assert!(b.warnings[1].contains("dropped -c model_reasoning_effort=high"));
}

#[test]
fn a_prompt_over_the_argument_limit_goes_on_stdin_or_in_a_file() {
    let big = "x".repeat(ARG_LIMIT);
    let file = std::path::Path::new("/run/logs/op.1.prompt.md");
    let mut cl = AgentDef::new("a", "claude", StreamFormat::Claude);
    cl.subcommand = "-p".into();
    let mut req = ArgvRequest::new(&cl, &big);
    req.prompt_file = Some(file);
    let b = build(&req).unwrap();
    assert_eq!(b.argv, s(&["claude", "-p"]));
    assert_eq!(b.stdin.as_deref(), Some(big.as_str()));
    assert_eq!(b.prompt_passed, "stdin");
    assert!(b.prompt_note.unwrap().contains("131072 bytes"));
    let cx = AgentDef::new("a", "codex", StreamFormat::Codex);
    let b = build(&ArgvRequest::new(&cx, &big)).unwrap();
    assert_eq!((b.argv[1].as_str(), b.prompt_passed), ("-", "stdin"));
    let cp = AgentDef::new("a", "copilot", StreamFormat::Copilot);
    let mut req = ArgvRequest::new(&cp, &big);
    req.prompt_file = Some(file);
    let b = build(&req).unwrap();
    assert!(
        b.argv[1].contains("/run/logs/op.1.prompt.md"),
        "{:?}",
        b.argv
    );
    assert_eq!(b.stdin, None);
    assert_eq!(b.prompt_file.as_deref(), Some(file));
    // Just under the limit it stays an argument.
    let b = build(&ArgvRequest::new(&cx, &big[1..])).unwrap();
    assert_eq!((b.argv[1].len(), b.prompt_passed), (ARG_LIMIT - 1, "argv"));
}

/// (kept, dropped groups) for `args` under `format`'s ToolSet domain.
fn split(f: StreamFormat, args: &[&str]) -> (Vec<String>, Vec<Vec<String>>) {
    drop_managed(f, &s(args))
}

fn groups(g: &[&[&str]]) -> Vec<Vec<String>> {
    g.iter().map(|x| s(x)).collect()
}

#[test]
fn claude_managed_flags_every_form_and_arity() {
    // Rest: every value up to the next flag; `=` forms take their own.
    let (kept, dropped) = split(
        StreamFormat::Claude,
        &[
            "--tools",
            "Read",
            "Bash",
            "--think",
            "--allowedTools=Read",
            "--allowed-tools",
            "Edit",
            "--disallowedTools",
            "Bash",
            "WebFetch",
            "--disallowed-tools=Write",
            "x",
        ],
    );
    assert_eq!(kept, s(&["--think", "x"]));
    assert_eq!(
        dropped,
        groups(&[
            &["--tools", "Read", "Bash"],
            &["--allowedTools=Read"],
            &["--allowed-tools", "Edit"],
            &["--disallowedTools", "Bash", "WebFetch"],
            &["--disallowed-tools=Write"],
        ])
    );
    // One value, separated or attached with `=`.
    let (kept, dropped) = split(
        StreamFormat::Claude,
        &[
            "--max-turns",
            "3",
            "--output-format=json",
            "--permission-mode",
            "plan",
            "--permission-prompt-tool=mcp__x",
            "--effort=high",
        ],
    );
    assert_eq!(kept, s(&["--effort=high"]));
    assert_eq!(
        dropped,
        groups(&[
            &["--max-turns", "3"],
            &["--output-format=json"],
            &["--permission-mode", "plan"],
            &["--permission-prompt-tool=mcp__x"],
        ])
    );
    // No value: what follows stays.
    let (kept, dropped) = split(
        StreamFormat::Claude,
        &[
            "--verbose",
            "keep",
            "--include-partial-messages",
            "--dangerously-skip-permissions",
            "--allow-dangerously-skip-permissions",
            "--json=x",
        ],
    );
    assert_eq!(kept, s(&["keep", "--json=x"]));
    assert_eq!(
        dropped,
        groups(&[
            &["--verbose"],
            &["--include-partial-messages"],
            &["--dangerously-skip-permissions"],
            &["--allow-dangerously-skip-permissions"],
        ])
    );
}

#[test]
fn codex_managed_flags_every_form_and_arity() {
    let (kept, dropped) = split(
        StreamFormat::Codex,
        &[
            "-sread-only",
            "--sandbox",
            "workspace-write",
            "-anever",
            "--ask-for-approval=never",
            "-a",
            "on-request",
            "--think",
            "--json",
            "--full-auto",
            "--yolo",
            "--dangerously-bypass-approvals-and-sandbox",
        ],
    );
    assert_eq!(kept, s(&["--think"]));
    assert_eq!(
        dropped,
        groups(&[
            &["-sread-only"],
            &["--sandbox", "workspace-write"],
            &["-anever"],
            &["--ask-for-approval=never"],
            &["-a", "on-request"],
            &["--json"],
            &["--full-auto"],
            &["--yolo"],
            &["--dangerously-bypass-approvals-and-sandbox"],
        ])
    );
    // Config overrides: only the sandbox and approval keys, in every
    // spelling, dotted fields included.
    let (kept, dropped) = split(
        StreamFormat::Codex,
        &[
            "-c",
            "sandbox_mode=danger-full-access",
            "-c",
            "model_reasoning_effort=high",
            "--config=approval_policy=never",
            "-c=sandbox_mode=danger-full-access",
            "-csandbox_mode=x",
            "--config",
            "sandbox_workspace_write.network_access=true",
            "-c",
            "sandbox_modes_extra=1",
        ],
    );
    assert_eq!(
        kept,
        s(&[
            "-c",
            "model_reasoning_effort=high",
            "-c",
            "sandbox_modes_extra=1"
        ])
    );
    assert_eq!(
        dropped,
        groups(&[
            &["-c", "sandbox_mode=danger-full-access"],
            &["--config=approval_policy=never"],
            &["-c=sandbox_mode=danger-full-access"],
            &["-csandbox_mode=x"],
            &["--config", "sandbox_workspace_write.network_access=true"],
        ])
    );
}

#[test]
fn other_formats_managed_flags() {
    let (kept, dropped) = split(
        StreamFormat::Opencode,
        &["-s", "x", "--format=json", "--format", "text"],
    );
    assert_eq!(kept, s(&["-s", "x"]));
    assert_eq!(
        dropped,
        groups(&[&["--format=json"], &["--format", "text"]])
    );
    let (kept, dropped) = split(
        StreamFormat::Copilot,
        &[
            "--allow-all-tools",
            "--deny-tool",
            "shell",
            "--allow-tool=read",
            "--allow-all-paths",
            "--yolo",
            "--x",
        ],
    );
    assert_eq!(kept, s(&["--x"]));
    assert_eq!(
        dropped,
        groups(&[
            &["--allow-all-tools"],
            &["--deny-tool", "shell"],
            &["--allow-tool=read"],
            &["--allow-all-paths"],
            &["--yolo"],
        ])
    );
    let (kept, dropped) = split(
        StreamFormat::Antigravity,
        &[
            "--mode",
            "plan",
            "--yolo",
            "--approval-mode=auto",
            "--output-format",
            "text",
            "--dangerously-skip-permissions",
            "--keep",
        ],
    );
    assert_eq!(kept, s(&["--keep"]));
    assert_eq!(
        dropped,
        groups(&[
            &["--mode", "plan"],
            &["--yolo"],
            &["--approval-mode=auto"],
            &["--output-format", "text"],
            &["--dangerously-skip-permissions"],
        ])
    );
    let (kept, dropped) = split(StreamFormat::Jsonl, &["--yolo", "-s", "x"]);
    assert_eq!((kept, dropped.len()), (s(&["--yolo", "-s", "x"]), 0));
}

#[test]
fn a_prompt_that_looks_like_a_flag_stays_positional() {
    let a = AgentDef::new("a", "cli", StreamFormat::Jsonl);
    let b = build(&ArgvRequest::new(&a, "--help me")).unwrap();
    assert_eq!(b.argv, s(&["cli", " --help me"]));
}

#[test]
fn without_a_toolset_profile_flags_pass_verbatim() {
    let mut a = AgentDef::new("a", "claude", StreamFormat::Claude);
    a.flags.insert(
        "yolo".into(),
        s(&["--dangerously-skip-permissions", "--max-turns", "3"]),
    );
    let b = argv_of(&a, Some("yolo"), None);
    assert_eq!(
        b.argv[2..],
        s(&["--dangerously-skip-permissions", "--max-turns", "3"])
    );
    assert!(b.warnings.is_empty());
}

#[test]
fn startup_args_and_thinking() {
    let a = AgentDef::new("cx", "codex", StreamFormat::Codex);
    let extra = s(&["--search", "-s", "read-only"]);
    let tools = ToolSet::default();
    let mut req = ArgvRequest::new(&a, "p");
    req.extra_args = &extra;
    req.thinking = Some(Thinking::High);
    req.tools = Some(&tools);
    let b = build(&req).unwrap();
    assert_eq!(
        b.argv[2..],
        s(&[
            "--search",
            "-c",
            "model_reasoning_effort=high",
            "-s",
            "read-only",
            "--json",
            "--skip-git-repo-check"
        ])
    );
    let cl = AgentDef::new("cl", "claude", StreamFormat::Claude);
    let mut req = ArgvRequest::new(&cl, "p");
    req.thinking = Some(Thinking::Low);
    let b = build(&req).unwrap();
    assert_eq!(b.env, vec![("MAX_THINKING_TOKENS".into(), "4000".into())]);
}

#[test]
fn each_format_continues_a_session_its_own_way() {
    let resumed = |format: StreamFormat, sub: &str, via: PromptVia| {
        let mut a = AgentDef::new("a", "cli", format);
        a.subcommand = sub.into();
        a.prompt_via = via;
        a.flags.insert("p".into(), s(&["--json"]));
        let mut req = ArgvRequest::new(&a, "carry on");
        req.flag_profile = Some("p");
        req.resume = Some("S-1");
        build(&req).unwrap()
    };
    let b = resumed(StreamFormat::Claude, "-p", PromptVia::Argv);
    assert_eq!(
        b.argv,
        s(&["cli", "-p", "carry on", "--json", "--resume", "S-1"])
    );
    assert_eq!(b.continues.as_deref(), Some("S-1"));
    // codex: the exec flags first, then `resume ID PROMPT` (0.47 takes its
    // flags nowhere else); the stdin sentinel moves with the prompt.
    let b = resumed(StreamFormat::Codex, "exec", PromptVia::Argv);
    assert_eq!(
        b.argv,
        s(&["cli", "exec", "--json", "resume", "S-1", "carry on"])
    );
    let b = resumed(StreamFormat::Codex, "exec", PromptVia::Stdin);
    assert_eq!(b.argv, s(&["cli", "exec", "--json", "resume", "S-1", "-"]));
    assert_eq!(b.stdin.as_deref(), Some("carry on"));
    let b = resumed(StreamFormat::Opencode, "run", PromptVia::Argv);
    assert_eq!(
        b.argv,
        s(&["cli", "run", "carry on", "--json", "--session", "S-1"])
    );
    for f in [StreamFormat::Gemini, StreamFormat::Copilot] {
        let b = resumed(f, "-p", PromptVia::Argv);
        assert_eq!(
            b.argv,
            s(&["cli", "-p", "carry on", "--json", "--resume", "S-1"])
        );
    }
    let b = resumed(StreamFormat::Jsonl, "", PromptVia::Argv);
    assert_eq!(b.argv, s(&["cli", "carry on", "--json"]));
    assert!(b.env.contains(&("PLAYDECK_SESSION".into(), "S-1".into())));
    assert!(!can_resume(StreamFormat::Antigravity));
    // Not continuing: nothing of it.
    let a = echo_claude();
    assert_eq!(argv_of(&a, None, None).continues, None);
}

/// claude under a ToolSet takes its prompt, and the operator's messages,
/// as stream-json user messages on stdin: never in argv, however it was
/// configured to take it, and a resumed session's prompt the same way.
#[test]
fn claude_under_a_toolset_reads_its_prompt_and_messages_live_on_stdin() {
    for via in [PromptVia::Argv, PromptVia::Stdin] {
        let mut a = AgentDef::new("c", "claude", StreamFormat::Claude);
        a.subcommand = "-p".into();
        a.prompt_via = via;
        let tools = ToolSet::default();
        let mut req = ArgvRequest::new(&a, "-write the parser");
        req.tools = Some(&tools);
        req.resume = Some("S-1");
        let b = build(&req).unwrap();
        assert_eq!(b.argv[..2], s(&["claude", "-p"]), "{via:?}: {:?}", b.argv);
        assert!(
            !b.argv
                .iter()
                .any(|x| x.contains("write the parser") || x == "-")
        );
        let at = b.argv.iter().position(|x| x == "--input-format").unwrap();
        assert_eq!(b.argv[at + 1], "stream-json");
        assert!(b.argv.contains(&"--replay-user-messages".to_string()));
        assert!(b.argv.ends_with(&s(&["--resume", "S-1"])));
        assert!(b.live_input);
        assert_eq!(b.prompt_passed, "stdin");
        let line = b.stdin.unwrap();
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "one line"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["content"], "-write the parser");
    }
    // Without a ToolSet nothing is translated: the prompt stays as set.
    let a = echo_claude();
    assert!(!argv_of(&a, None, None).live_input);
}

/// A ToolSet's `ask`: claude gets playdeck as its permission prompt tool
/// (an MCP server started with the attempt's socket), and a writer it may
/// ask about is not refused outright; every other format refuses `ask`.
#[test]
fn ask_makes_playdeck_claudes_permission_prompt_tool_and_others_refuse_it() {
    let mut a = AgentDef::new("c", "claude", StreamFormat::Claude);
    a.subcommand = "-p".into();
    let tools = ToolSet {
        internal: s(&["Read"]),
        ask: s(&["Write", "Bash(rm *)"]),
        ask_timeout: Some(30),
        ..ToolSet::default()
    };
    let mut req = ArgvRequest::new(&a, "go");
    req.tools = Some(&tools);
    let (me, sock) = (
        std::path::Path::new("/bin/playdeck"),
        std::path::Path::new("/tmp/pd-ask-x/s"),
    );
    req.ask = Some((me, sock));
    let b = build(&req).unwrap();
    assert!(b.asks);
    let at = b
        .argv
        .iter()
        .position(|x| x == "--permission-prompt-tool")
        .unwrap();
    assert_eq!(b.argv[at + 1], ASK_TOOL);
    let at = b.argv.iter().position(|x| x == "--mcp-config").unwrap();
    let config: serde_json::Value = serde_json::from_str(&b.argv[at + 1]).unwrap();
    assert_eq!(
        config["mcpServers"]["playdeck"],
        serde_json::json!({"command": "/bin/playdeck", "args": ["ask-mcp", "/tmp/pd-ask-x/s"]})
    );
    let at = b
        .argv
        .iter()
        .position(|x| x == "--disallowedTools")
        .unwrap();
    assert_eq!(
        b.argv[at + 1],
        "Edit,MultiEdit,NotebookEdit",
        "Write asks instead"
    );
    for f in [
        StreamFormat::Codex,
        StreamFormat::Opencode,
        StreamFormat::Gemini,
        StreamFormat::Copilot,
        StreamFormat::Antigravity,
        StreamFormat::Jsonl,
    ] {
        let only_ask = ToolSet {
            ask: s(&["Write"]),
            ..ToolSet::default()
        };
        assert!(
            matches!(check_toolset(f, &only_ask), Err(ToolSetError::Ask { .. })),
            "{f:?}"
        );
    }
    assert!(check_toolset(StreamFormat::Claude, &tools).is_ok());
}
