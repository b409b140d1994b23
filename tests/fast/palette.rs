//! ADR-0036: palette validation, the router's races, trusted identity, the
//! two budgets and the delegation clause. Spawned work on real agent
//! subprocesses through the binary is the cli tier's `palette`.

use std::sync::Arc;
use std::time::Duration;

use playdeck::kernel::{
    DropReason, Emitter, InstructionDecorator, NodeBuilder, SpawnBudget, SpawnRequest,
};
use playdeck::palette::{
    CLAUSE_BEGIN, Disposition, PaletteConfig, PaletteExpansionPolicy, PaletteRole, PaletteRouter,
    PaletteSimulate, PaletteSnapshot, PlayRolePalette, RoleSetups, RunProvisioner,
};
use playdeck::play::Play;

// ----- validation: one table row per rule --------------------------------

const OP: &str = "[[operations]]\nid = \"a\"\nrole = \"orchestrator\"\ninstruction = \"x\"\n";

fn first_error(src: &str) -> (String, String) {
    let d = Play::from_str("p.toml", src).expect_err("rejected");
    let i = &d.items[0];
    let (l, c) = d.line_col(i.span.start);
    (format!("{l}:{c}"), i.message.clone())
}

#[test]
fn each_palette_rule_is_enforced_with_a_position() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "1: at least one role",
            "[palette]\nroles = []\n",
            "4:9",
            "the palette has no roles",
        ),
        (
            "2: a non-empty name",
            "[palette]\nroles = [{ role = \"  \" }]\n",
            "4:19",
            "`role` in [palette] roles[0] is empty",
        ),
        (
            "2: unique by canonical name",
            "[palette]\nroles = [{ role = \"orchestrator\" }, { role = \"Orchestrator\" }]\n",
            "4:46",
            "palette role \"Orchestrator\" appears twice",
        ),
        (
            "3: a catalog role or a configured profile",
            "[palette]\nroles = [{ role = \"orchestrator\" }, { role = \"wizard\" }]\n",
            "4:46",
            "unknown role \"wizard\" in the palette",
        ),
        (
            "4: modes exist",
            "[palette]\nroles = [{ role = \"orchestrator\", modes = [\"loud\"] }]\n",
            "4:44",
            "unknown mode \"loud\" in palette role orchestrator",
        ),
        (
            "4: modes pass the pack's modes_allow",
            "[palette]\nroles = [{ role = \"orchestrator\" }, { role = \"critic\", modes = [\"teaching\"] }]\n",
            "4:65",
            "mode \"teaching\" is not allowed for critic",
        ),
        (
            "5: duplicate modes are rejected",
            "[palette]\nroles = [{ role = \"orchestrator\", modes = [\"concise\", \"concise\"] }]\n",
            "4:55",
            "mode \"concise\" is listed twice for orchestrator",
        ),
        (
            "6: max_new_roles is non-negative",
            "[palette]\nroles = [{ role = \"orchestrator\" }]\n[palette.expansion]\nmax_new_roles = -1\n",
            "6:17",
            "`max_new_roles` in `expansion` in [palette] is out of range",
        ),
        (
            "7: the expansion source is exactly casts",
            "[palette]\nroles = [{ role = \"orchestrator\" }]\n[palette.expansion]\ncatalog = \"./my_roles.py\"\n",
            "6:11",
            "expansion catalog \"./my_roles.py\" is not allowed",
        ),
    ];
    for (rule, palette, pos, msg) in cases {
        let src = format!("[play]\nname = \"t\"\n{palette}{OP}");
        assert_eq!(
            first_error(&src),
            (pos.to_string(), msg.to_string()),
            "rule {rule}"
        );
    }
}

#[test]
fn unknown_roles_list_the_available_names() {
    let d = Play::from_str(
        "p.toml",
        &format!(
            "[play]\nname = \"t\"\n[palette]\nroles = [{{ role = \"tester\" }}]\n{}",
            OP.replace("orchestrator", "astrologer")
        ),
    )
    .unwrap_err();
    let item = &d.items[0];
    assert_eq!(
        item.message,
        "operation \"a\" has unknown role \"astrologer\""
    );
    assert_eq!(item.label, "unknown_catalog_role");
    assert!(item.help.as_ref().unwrap().contains("security_auditor"));
}

#[test]
fn profiles_are_usable_only_in_the_initial_palette() {
    let base = "[play]\nname = \"t\"\n[profiles.house_style]\ndescription = \"our reviewer\"\nmodes = [\"concise\"]\n";
    let ok = format!(
        "{base}[palette]\nroles = [{{ role = \"house_style\" }}, {{ role = \"orchestrator\" }}]\n{OP}"
    );
    let play = Play::from_str("p.toml", &ok).unwrap();
    assert!(play.palette.initial("house_style").is_some());
    let not_in_palette = format!(
        "{base}[palette]\nroles = [{{ role = \"orchestrator\" }}]\n{OP}[[operations]]\nid = \"b\"\nrole = \"house_style\"\ninstruction = \"y\"\n"
    );
    let d = Play::from_str("p.toml", &not_in_palette).unwrap_err();
    assert!(
        d.items[0]
            .message
            .contains("uses profile \"house_style\", which is not in the palette")
    );
    // Never an expansion source.
    assert!(
        !play
            .palette
            .expansion_only_roles()
            .contains(&"house_style".to_string())
    );
}

#[test]
fn initial_operations_outside_the_palette_need_budget_and_authority() {
    let palette = |max: u32, may: bool| {
        format!(
            "[play]\nname = \"t\"\n[palette]\nroles = [{{ role = \"orchestrator\" }}]\n[palette.expansion]\nmax_new_roles = {max}\norchestrator_may_expand = {may}\n{OP}[[operations]]\nid = \"b\"\nrole = \"critic\"\ninstruction = \"y\"\n[[operations]]\nid = \"c\"\nrole = \"debugger\"\ninstruction = \"z\"\n"
        )
    };
    assert!(Play::from_str("p.toml", &palette(2, true)).is_ok());
    let d = Play::from_str("p.toml", &palette(1, true)).unwrap_err();
    assert_eq!(d.items.len(), 1);
    assert_eq!(d.items[0].label, "palette_budget_exhausted");
    assert!(d.items[0].message.contains("\"debugger\""));
    let d = Play::from_str("p.toml", &palette(2, false)).unwrap_err();
    assert_eq!(d.items[0].label, "requester_not_authorized");
}

#[test]
fn pack_overrides_are_validated_and_applied() {
    let src = include_str!("../plays/pack_overrides.toml");
    let p = Play::from_str("p.toml", src).unwrap();
    assert_eq!(p.palette.pack["critic"].model.as_deref(), Some("haiku"));
    let bad = "[play]\nname = \"t\"\n[pack.roles.wizard]\nmodel = \"x\"\n[pack.roles.critic]\neffort = \"max\"\n";
    let d = Play::from_str("p.toml", &format!("{bad}{OP}")).unwrap_err();
    let msgs: Vec<&str> = d.items.iter().map(|i| i.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "[pack.roles.wizard] names no catalog role",
            "`effort` in [pack.roles.critic] has an unknown value \"max\""
        ]
    );
}

#[test]
fn rule_a36_03_default_modes_pass_modes_allow_at_load() {
    // Narrowing modes_allow alone keeps the catalog's default mode
    // (critic: adversarial), which the new list forbids.
    let narrowed = |extra: &str| {
        format!(
            "[play]\nname = \"t\"\n[pack.roles.critic]\nmodes_allow = [\"teaching\"]\n{extra}[palette]\nroles = [{{ role = \"orchestrator\" }}, {{ role = \"critic\" }}]\n{OP}"
        )
    };
    let d = Play::from_str("p.toml", &narrowed("")).unwrap_err();
    assert_eq!(d.items.len(), 1, "{:?}", d.items);
    let (l, c) = d.line_col(d.items[0].span.start);
    assert_eq!(
        (format!("{l}:{c}"), d.items[0].message.as_str()),
        (
            "4:1".to_string(),
            "critic's default mode \"adversarial\" is not in its modes_allow"
        )
    );
    assert!(
        d.items[0]
            .help
            .as_deref()
            .unwrap()
            .contains("default_modes = [\"adversarial\"]")
    );
    // The legacy roster takes default modes from the pack as well.
    let legacy = "[play]\nname = \"t\"\n[pack.roles.critic]\nmodes_allow = [\"socratic\"]\n";
    let d = Play::from_str("p.toml", &format!("{legacy}{OP}")).unwrap_err();
    assert!(d.items[0].message.contains("not in its modes_allow"));
    // Setting the defaults with the list makes the pack consistent, and
    // the role is provisioned with what the pack allows.
    for (extra, modes) in [
        ("default_modes = [\"teaching\"]\n", vec!["teaching"]),
        ("default_modes = []\n", vec![]),
    ] {
        let p = Play::from_str("p.toml", &narrowed(extra)).unwrap();
        assert_eq!(p.palette.pack["critic"].default_modes, modes);
    }
}

// ----- the router ----------------------------------------------------------

fn config(
    roles: &[(&str, Disposition)],
    max_new_roles: u32,
    simulate: PaletteSimulate,
) -> Arc<PaletteConfig> {
    let mut cfg = PaletteConfig::legacy(PaletteConfig::builtin_pack(), Default::default());
    cfg.legacy = false;
    cfg.palette = PlayRolePalette {
        roles: roles
            .iter()
            .map(|(r, d)| PaletteRole {
                role: r.to_string(),
                disposition: *d,
                modes: vec![],
                setup: None,
            })
            .collect(),
        expansion: PaletteExpansionPolicy {
            max_new_roles,
            ..Default::default()
        },
        defaults: None,
    };
    cfg.simulate = simulate;
    Arc::new(cfg)
}

fn router(cfg: Arc<PaletteConfig>, run_dir: Option<std::path::PathBuf>) -> Arc<PaletteRouter> {
    let p = RunProvisioner {
        run_dir,
        simulate: cfg.simulate.clone(),
        speed: 1.0,
        setups: Arc::new(RoleSetups::all_on("sim")),
    };
    PaletteRouter::new(cfg, Arc::new(p))
}

fn slow(ms: u64) -> PaletteSimulate {
    PaletteSimulate {
        provision_delay_ms: ms,
        fail_roles: vec![],
    }
}

fn emitter(role: &str) -> Emitter {
    Emitter {
        op_id: uuid::Uuid::new_v4(),
        name: Arc::from("emitter"),
        role: Some(Arc::from(role)),
        requester_role: Some(Arc::from(role)),
        agent: Arc::from("sim"),
    }
}

async fn ready(cfg: Arc<PaletteConfig>) -> Arc<PaletteRouter> {
    let r = router(cfg, None);
    r.provision_initial().await.unwrap();
    r
}

const ORCH: (&str, Disposition) = ("orchestrator", Disposition::EmissionCapable);

#[tokio::test(start_paused = true)]
async fn a_thousand_concurrent_requests_for_one_new_role_provision_once() {
    let r = ready(config(&[ORCH], 1, slow(50))).await;
    let before = r.provision_attempts();
    let tasks: Vec<_> = (0..1000)
        .map(|i| {
            let r = r.clone();
            tokio::spawn(async move {
                r.route_request(
                    SpawnRequest::new(format!("task {i}")).to("critic"),
                    emitter("orchestrator"),
                )
                .await
            })
        })
        .collect();
    for t in tasks {
        let c = t.await.unwrap().unwrap().unwrap();
        assert_eq!(c.assignee.as_deref(), Some("critic"));
    }
    assert_eq!(r.provision_attempts() - before, 1);
    let s = r.snapshot();
    assert_eq!(
        (
            s.consumed_new_roles,
            s.expanded_roles.clone(),
            s.reserved_roles.len()
        ),
        (1, vec!["critic".to_string()], 0)
    );
}

#[tokio::test(start_paused = true)]
async fn different_new_roles_provision_concurrently_within_the_budget() {
    const ROLES: [&str; 6] = [
        "critic",
        "debugger",
        "data_analyst",
        "refactorer",
        "ux_designer",
        "devops_engineer",
    ];
    let roles = ROLES;
    for budget in [0u32, 1, 3, 6, 10] {
        let r = ready(config(&[ORCH], budget, slow(100))).await;
        let t0 = tokio::time::Instant::now();
        let tasks: Vec<_> = roles
            .into_iter()
            .map(|role| {
                let r = r.clone();
                tokio::spawn(async move {
                    r.route_request(SpawnRequest::new("x").to(role), emitter("orchestrator"))
                        .await
                })
            })
            .collect();
        let mut ok = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(Some(_)) => ok += 1,
                Err(rej) => assert_eq!(rej.reason, DropReason::PaletteBudgetExhausted),
                Ok(None) => unreachable!(),
            }
        }
        let expect = roles.len().min(budget as usize);
        assert_eq!(ok, expect, "budget {budget}");
        assert_eq!(r.snapshot().consumed_new_roles as usize, expect);
        if expect > 0 {
            // Concurrent: the provisions overlap instead of queuing.
            assert_eq!(t0.elapsed(), Duration::from_millis(100), "budget {budget}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_provision_leaves_nothing_and_every_waiter_gets_the_failure() {
    let dir = tempfile::tempdir().unwrap();
    let sim = PaletteSimulate {
        provision_delay_ms: 50,
        fail_roles: vec!["critic".into()],
    };
    let r = router(config(&[ORCH], 1, sim), Some(dir.path().to_path_buf()));
    r.provision_initial().await.unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let r = r.clone();
            tokio::spawn(async move {
                r.route_request(SpawnRequest::new("x").to("critic"), emitter("orchestrator"))
                    .await
            })
        })
        .collect();
    let mut details = Vec::new();
    for t in tasks {
        let rej = t.await.unwrap().unwrap_err();
        assert_eq!(rej.reason, DropReason::RoleProvisionFailed);
        details.push(rej.detail);
    }
    details.dedup();
    assert_eq!(
        details.len(),
        1,
        "the same failure for everyone: {details:?}"
    );
    let s = r.snapshot();
    assert_eq!(
        (
            s.consumed_new_roles,
            s.reserved_roles.len(),
            s.expanded_roles.len()
        ),
        (0, 0, 0)
    );
    assert!(r.route("critic").is_none());
    assert!(
        !dir.path().join("roles/critic").exists(),
        "no partial artifacts"
    );
    assert!(dir.path().join("roles/orchestrator").is_dir());
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_provision_rolls_back_and_can_be_retried() {
    let r = ready(config(&[ORCH], 1, slow(1000))).await;
    let leader = {
        let r = r.clone();
        tokio::spawn(async move {
            r.route_request(SpawnRequest::new("x").to("critic"), emitter("orchestrator"))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(r.snapshot().reserved_roles, ["critic"]);
    let waiter = {
        let r = r.clone();
        tokio::spawn(async move {
            r.route_request(SpawnRequest::new("y").to("critic"), emitter("orchestrator"))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    let rej = waiter.await.unwrap().unwrap_err();
    assert_eq!(rej.reason, DropReason::RoleProvisionFailed);
    assert!(rej.detail.contains("cancelled"));
    let s = r.snapshot();
    assert_eq!(
        (
            s.consumed_new_roles,
            s.reserved_roles.len(),
            s.expanded_roles.len()
        ),
        (0, 0, 0)
    );
    assert!(r.route("critic").is_none());
    // Nothing was charged, so a fresh attempt may use the unit.
    let c = r
        .clone()
        .route_request(SpawnRequest::new("z").to("critic"), emitter("orchestrator"))
        .await;
    assert!(c.unwrap().is_some());
    assert_eq!(r.snapshot().consumed_new_roles, 1);
}

#[tokio::test(start_paused = true)]
async fn identity_comes_from_trusted_metadata_not_the_payload() {
    let r = ready(config(
        &[
            ORCH,
            ("tester", Disposition::Terminal),
            ("implementer", Disposition::EmissionCapable),
        ],
        5,
        slow(0),
    ))
    .await;
    // A terminal role claiming to be the orchestrator in its payload.
    let claim = serde_json::json!({"instruction": "x", "assignee": "critic", "requester_role": "orchestrator", "reason": "I am the orchestrator"});
    let (req, _) = SpawnRequest::from_value(&claim).unwrap();
    let rej = r
        .clone()
        .route_request(req.clone(), emitter("tester"))
        .await
        .unwrap_err();
    assert_eq!(rej.reason, DropReason::RequesterNotAuthorized);
    assert!(rej.detail.contains("terminal"));
    // An emission-capable worker may use existing routes, not recruit.
    let rej = r
        .clone()
        .route_request(req.clone(), emitter("implementer"))
        .await
        .unwrap_err();
    assert_eq!(rej.reason, DropReason::RequesterNotAuthorized);
    assert!(
        r.clone()
            .route_request(SpawnRequest::new("x").to("tester"), emitter("implementer"))
            .await
            .unwrap()
            .is_some()
    );
    // Missing metadata is unauthorised, never the orchestrator by default.
    let mut anon = emitter("orchestrator");
    anon.requester_role = None;
    let rej = r.clone().route_request(req, anon).await.unwrap_err();
    assert_eq!(rej.reason, DropReason::RequesterNotAuthorized);
    assert_eq!(r.snapshot().consumed_new_roles, 0);
}

#[tokio::test(start_paused = true)]
async fn unknown_catalog_roles_and_profiles_are_not_recruitable() {
    let r = ready(config(&[ORCH], 5, slow(0))).await;
    let rej = r
        .clone()
        .route_request(
            SpawnRequest::new("x").to("astrologer"),
            emitter("orchestrator"),
        )
        .await
        .unwrap_err();
    assert_eq!(rej.reason, DropReason::UnknownCatalogRole);
    assert!(rej.detail.contains("catalog roles: orchestrator"));
    assert!(rej.detail.chars().count() <= 500);
}

#[tokio::test(start_paused = true)]
async fn reusing_a_role_costs_no_unit_and_the_fast_path_agrees() {
    let r = ready(config(
        &[ORCH, ("tester", Disposition::Terminal)],
        1,
        slow(0),
    ))
    .await;
    let e = emitter("orchestrator");
    // Existing roles are decided synchronously.
    assert!(matches!(
        r.route_now(&SpawnRequest::new("x").to("tester"), &e),
        Some(Ok(Some(_)))
    ));
    // A new role needs provisioning: not decided synchronously.
    assert!(
        r.route_now(&SpawnRequest::new("x").to("critic"), &e)
            .is_none()
    );
    r.clone()
        .route_request(SpawnRequest::new("x").to("critic"), e.clone())
        .await
        .unwrap();
    for _ in 0..5 {
        assert!(matches!(
            r.route_now(&SpawnRequest::new("again").to("critic"), &e),
            Some(Ok(Some(_)))
        ));
    }
    assert_eq!(r.snapshot().consumed_new_roles, 1);
    // Budget spent: another new role is refused without waiting.
    let out = r
        .route_now(&SpawnRequest::new("x").to("debugger"), &e)
        .unwrap();
    assert_eq!(out.unwrap_err().reason, DropReason::PaletteBudgetExhausted);
}

// ----- the budgets, in a run ---------------------------------------------------

fn play_with(max_spawn: usize, max_new_roles: u32, kickoff_result: &str) -> Play {
    let src = format!(
        "[play]\nname = \"b\"\nmax_spawn = {max_spawn}\n[palette]\nroles = [{{ role = \"orchestrator\", disposition = \"emission_capable\" }}, {{ role = \"tester\" }}]\n[palette.expansion]\nmax_new_roles = {max_new_roles}\n[[operations]]\nid = \"kickoff\"\nrole = \"orchestrator\"\ninstruction = \"go\"\nsim = {{ duration_ms = 100, result = {kickoff_result} }}\n"
    );
    Play::from_str("b.toml", &src).unwrap()
}

async fn run_play(play: &Play) -> (playdeck::kernel::Envelope, Vec<playdeck::kernel::Signal>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = playdeck::headless::HeadlessOptions {
        session: playdeck::session::SessionOptions {
            run_dir: Some(dir.path().join("run")),
            approvals: playdeck::kernel::ApprovalPolicy::ApproveAll,
            ..Default::default()
        },
        asks_operator: false,
        ..Default::default()
    };
    let (_tx, control) = tokio::sync::mpsc::unbounded_channel();
    let (_stop, stop) = tokio::sync::mpsc::unbounded_channel();
    // No timeout here: the printer is a plain thread, and a paused clock
    // with a pending timer would jump ahead while waiting for it.
    let done = playdeck::headless::run(
        play.clone(),
        &opts,
        control,
        stop,
        Box::new(std::io::sink()),
        Box::new(std::io::sink()),
    )
    .await
    .unwrap();
    let events = playdeck::store::read_events(&done.run_dir.events_path()).unwrap();
    (done.envelope, events)
}

fn reasons(env: &playdeck::kernel::Envelope) -> Vec<DropReason> {
    env.dropped_spawns
        .as_ref()
        .unwrap()
        .iter()
        .map(|d| d.reason)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_new_role_can_spend_a_unit_and_still_lose_admission() {
    // max_spawn 0: the expansion succeeds (one unit), the operation is refused at the cap.
    let play = play_with(
        0,
        1,
        "{ spawn_request = { instruction = \"critique\", assignee = \"critic\" } }",
    );
    let (env, events) = run_play(&play).await;
    assert_eq!(reasons(&env), [DropReason::MaxSpawnExceeded]);
    let last = events.iter().rev().find_map(|s| match &s.kind {
        playdeck::kernel::SignalKind::Budget {
            consumed_new_roles,
            expanded_roles,
            spawns_accepted,
            ..
        } => Some((*consumed_new_roles, expanded_roles.len(), *spawns_accepted)),
        _ => None,
    });
    assert_eq!(
        last,
        Some((1, 1, 0)),
        "the role stays available; no spawn was accepted"
    );
}

#[tokio::test(start_paused = true)]
async fn an_existing_role_costs_a_spawn_but_no_unit() {
    let play = play_with(
        2,
        0,
        "{ spawn_request = [{ instruction = \"t1\", assignee = \"tester\" }, { instruction = \"t2\", assignee = \"tester\" }, { instruction = \"t3\", assignee = \"tester\" }] }",
    );
    let (env, events) = run_play(&play).await;
    assert_eq!(env.spawned_operations, Some(2));
    assert_eq!(reasons(&env), [DropReason::MaxSpawnExceeded]);
    let consumed: Vec<u32> = events
        .iter()
        .filter_map(|s| match &s.kind {
            playdeck::kernel::SignalKind::Budget {
                consumed_new_roles, ..
            } => Some(*consumed_new_roles),
            _ => None,
        })
        .collect();
    assert!(consumed.iter().all(|c| *c == 0));
}

#[tokio::test(start_paused = true)]
async fn the_agent_receives_its_roles_clause() {
    let r = ready(config(
        &[ORCH, ("tester", Disposition::Terminal)],
        2,
        slow(0),
    ))
    .await;
    let i: Arc<str> = Arc::from("Plan the release.");
    let orch = r.decorate(
        Some("orchestrator"),
        &i,
        SpawnBudget {
            accepted: 3,
            max: 10,
        },
    );
    assert!(orch.starts_with("Plan the release.\n\n"));
    assert_eq!(orch.matches(CLAUSE_BEGIN).count(), 1);
    assert!(orch.contains("Allowed assignees now: orchestrator, tester"));
    assert!(orch.contains("2 new role(s) and 7 spawn(s) remain"));
    let tester = r.decorate(
        Some("tester"),
        &i,
        SpawnBudget {
            accepted: 0,
            max: 10,
        },
    );
    assert!(tester.contains("cannot create graph work"));
    // Decorating again replaces, never appends.
    let again = r.decorate(
        Some("orchestrator"),
        &orch,
        SpawnBudget {
            accepted: 4,
            max: 10,
        },
    );
    assert_eq!(again.matches(CLAUSE_BEGIN).count(), 1);
    assert!(again.contains("6 spawn(s) remain"));
}

#[tokio::test(start_paused = true)]
async fn an_initial_operation_outside_the_palette_is_recruited_or_failed_before_the_run() {
    let src = include_str!("../plays/recruit_before_the_run.toml");
    let play = Play::from_str("p.toml", src).unwrap();
    let (env, _) = run_play(&play).await;
    // The failed one is completed too (ADR-0033), and said failed.
    assert_eq!(env.completed_operations.len(), 2);
    let failed = &env.failed_operations[0];
    assert_eq!(env.name_of(failed), Some("dbg"));
    assert!(
        env.result_of(failed).unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("simulated provisioning failure")
    );
}

/// ADR-0036 D6: a stopped run's palette comes back from its snapshot,
/// once, without charging; what the current catalog or pack no longer
/// allows fails the resume with a clear error.
#[tokio::test(start_paused = true)]
async fn a_snapshot_restores_routes_without_charging_and_is_checked() {
    let cfg = config(
        &[ORCH, ("implementer", Disposition::Terminal)],
        2,
        slow(5_000),
    );
    let r = router(cfg.clone(), None);
    let snap = PaletteSnapshot {
        initial_roles: vec!["orchestrator".into(), "implementer".into()],
        expanded_roles: vec!["tester".into()],
        reserved_roles: vec!["critic".into()],
        max_new_roles: 2,
        consumed_new_roles: 1,
    };
    let t0 = tokio::time::Instant::now();
    r.restore(&snap).await.unwrap();
    assert_eq!(
        t0.elapsed(),
        Duration::ZERO,
        "no simulated provisioning delay"
    );
    let after = r.snapshot();
    assert_eq!(after.expanded_roles, ["tester"]);
    assert_eq!(after.consumed_new_roles, 1, "nothing charged again");
    assert!(
        after.reserved_roles.is_empty(),
        "the in-flight reservation is dropped"
    );
    assert!(r.route("tester").is_some());
    // The dropped reservation can be asked for again, within the budget.
    let critic = r
        .route_role(Arc::from("critic"), Some(Arc::from("orchestrator")), None)
        .await;
    assert!(critic.is_ok());
    assert_eq!(r.snapshot().consumed_new_roles, 2);

    let unknown = PaletteSnapshot {
        expanded_roles: vec!["astrologer".into()],
        ..snap.clone()
    };
    let err = router(cfg.clone(), None)
        .restore(&unknown)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"astrologer\"") && err.contains("current catalog"),
        "{err}"
    );

    let mut bad_mode = (*cfg).clone();
    bad_mode.palette.roles[0].modes = vec!["telepathic".into()];
    let err = router(Arc::new(bad_mode), None)
        .restore(&snap)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("mode \"telepathic\""), "{err}");

    let mut narrowed = (*cfg).clone();
    narrowed.palette.roles[0].modes = vec!["thorough".into()];
    narrowed.pack.get_mut("orchestrator").unwrap().modes_allow = vec!["concise".into()];
    let err = router(Arc::new(narrowed), None)
        .restore(&snap)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no longer allows") && err.contains("concise"),
        "{err}"
    );
}

// ----- authority: a spawned operation never exceeds its emitter ---------------

/// An agent that acts on the first line of its instruction, so spawned
/// work can be scripted through the requests that create it.
struct Script;

impl playdeck::kernel::Agent for Script {
    fn invoke(
        &self,
        inv: playdeck::kernel::Invocation,
    ) -> playdeck::kernel::BoxFuture<playdeck::kernel::AgentOutcome> {
        let first = inv.instruction.lines().next().unwrap_or("").to_string();
        let spawn = |instruction: &str, assignee: &str| serde_json::json!({"spawn_request": {"instruction": instruction, "assignee": assignee}});
        let out = match first.as_str() {
            // A worker asks for an orchestrator child, hoping it recruits.
            "attack" | "delegate" => spawn("recruit", "orchestrator"),
            "recruit" => spawn("critique", "critic"),
            "recruit and build" => serde_json::json!({"spawn_request": [
                {"instruction": "critique", "assignee": "critic"},
                {"instruction": "build", "assignee": "implementer"},
            ]}),
            _ => serde_json::json!({"summary": first}),
        };
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(out)
        })
    }
}

struct ScriptAgents;

impl playdeck::kernel::AgentResolver for ScriptAgents {
    fn resolve(&self, name: &str) -> Option<Arc<dyn playdeck::kernel::Agent>> {
        (name == "script").then(|| Arc::new(Script) as Arc<dyn playdeck::kernel::Agent>)
    }
}

/// Runs `play` on the kernel with the palette router as its node builder,
/// every role on the scripted agent; returns the envelope and the router.
async fn run_scripted(play: &Play) -> (playdeck::kernel::Envelope, Arc<PaletteRouter>) {
    run_scripted_with(play, Arc::new(script_provisioner(play))).await
}

fn script_provisioner(play: &Play) -> RunProvisioner {
    RunProvisioner {
        run_dir: None,
        simulate: play.palette.simulate.clone(),
        speed: 1.0,
        setups: Arc::new(RoleSetups::all_on("script")),
    }
}

async fn run_scripted_with(
    play: &Play,
    provisioner: Arc<dyn playdeck::palette::Provisioner>,
) -> (playdeck::kernel::Envelope, Arc<PaletteRouter>) {
    let r = PaletteRouter::new(Arc::new(play.palette.clone()), provisioner);
    let built = play.build();
    let op_roles = play.op_roles(&built);
    let (mut run, _h) = playdeck::kernel::Run::new(
        built.graph,
        play.run_config("r"),
        Arc::new(ScriptAgents),
        Arc::new(r.clone()),
    )
    .unwrap();
    playdeck::palette::prepare(&r, &op_roles, &mut run)
        .await
        .unwrap();
    (run.run().await, r)
}

fn authority_play(first_op: &str, role: &str, max_new_roles: u32) -> Play {
    let src = format!(
        "[play]\nname = \"a\"\n[palette]\nroles = [{{ role = \"orchestrator\", disposition = \"emission_capable\" }}, {{ role = \"implementer\", disposition = \"emission_capable\" }}]\n[palette.expansion]\nmax_new_roles = {max_new_roles}\n[[operations]]\nid = \"first\"\nrole = \"{role}\"\nagent = \"noop\"\ninstruction = \"{first_op}\"\n"
    );
    let mut play = Play::from_str("a.toml", &src).unwrap();
    // The scripted agent runs the authored operation too.
    play.operations[0].agent = "script".into();
    play
}

#[tokio::test(start_paused = true)]
async fn rule_a36_46_a_spawned_child_never_exceeds_its_emitters_authority() {
    // The two-step attack: an emission-capable worker may not expand the
    // palette, so it asks for an orchestrator child to do it.
    let (env, r) = run_scripted(&authority_play("attack", "implementer", 1)).await;
    let dropped = env.dropped_spawns.clone().unwrap();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0].reason, DropReason::RequesterNotAuthorized);
    assert_eq!(dropped[0].assignee.as_deref(), Some("orchestrator"));
    assert!(
        dropped[0]
            .detail
            .contains("only the orchestrator may assign work to \"orchestrator\""),
        "{}",
        dropped[0].detail
    );
    assert_eq!(env.spawned_operations, Some(0));
    let s = r.snapshot();
    assert_eq!((s.consumed_new_roles, s.expanded_roles.len()), (0, 0));
    assert!(r.route("critic").is_none(), "nothing was recruited");

    // The orchestrator's own orchestrator child keeps the authority it was
    // given: the same script recruits the critic.
    let (env, r) = run_scripted(&authority_play("delegate", "orchestrator", 1)).await;
    assert_eq!(env.spawned_operations, Some(2), "{:?}", env.dropped_spawns);
    assert_eq!(r.snapshot().expanded_roles, ["critic"]);

    // Without expansion there is nothing to launder: a worker may hand work
    // to the orchestrator like to any palette role.
    let (env, _) = run_scripted(&authority_play("attack", "implementer", 0)).await;
    assert_eq!(env.spawned_operations, Some(1));
    let reasons: Vec<DropReason> = env
        .dropped_spawns
        .unwrap()
        .iter()
        .map(|d| d.reason)
        .collect();
    assert_eq!(
        reasons,
        [DropReason::PaletteBudgetExhausted],
        "the child recruits nothing"
    );

    // The fast path and the awaited path decide alike, and the clause the
    // worker reads agrees with both.
    let r = ready(config(
        &[ORCH, ("implementer", Disposition::EmissionCapable)],
        1,
        slow(0),
    ))
    .await;
    let req = SpawnRequest::new("recruit").to("orchestrator");
    let now = r
        .route_now(&req, &emitter("implementer"))
        .unwrap()
        .unwrap_err();
    let later = r
        .clone()
        .route_request(req.clone(), emitter("implementer"))
        .await
        .unwrap_err();
    assert_eq!(now, later);
    assert_eq!(now.reason, DropReason::RequesterNotAuthorized);
    assert!(
        r.route_now(&req, &emitter("orchestrator"))
            .unwrap()
            .unwrap()
            .is_some()
    );
    let budget = SpawnBudget {
        accepted: 0,
        max: 10,
    };
    let i: Arc<str> = Arc::from("x");
    let worker = r.decorate(Some("implementer"), &i, budget);
    assert!(
        worker.contains("Allowed assignees now: implementer (omit"),
        "{worker}"
    );
    let orch = r.decorate(Some("orchestrator"), &i, budget);
    assert!(
        orch.contains("Allowed assignees now: orchestrator, implementer"),
        "{orch}"
    );
}

/// ADR-0036 D6: a resumed palette must be one the play could have
/// produced; an edited or damaged snapshot names the field that is wrong.
#[tokio::test(start_paused = true)]
async fn rule_a36_65_resume_checks_the_palette_snapshot_field_by_field() {
    let mut cfg = (*config(&[ORCH, ("implementer", Disposition::Terminal)], 2, slow(0))).clone();
    cfg.profiles.insert(
        "house_style".into(),
        playdeck::palette::UserProfile {
            description: None,
            model: None,
            modes: vec![],
        },
    );
    let cfg = Arc::new(cfg);
    let good = PaletteSnapshot {
        initial_roles: vec!["orchestrator".into(), "implementer".into()],
        expanded_roles: vec!["critic".into()],
        reserved_roles: vec![],
        max_new_roles: 2,
        consumed_new_roles: 1,
    };
    router(cfg.clone(), None).restore(&good).await.unwrap();
    // A run stopped before its palette was first recorded has the
    // default snapshot: the declaration stands in.
    router(cfg.clone(), None)
        .restore(&PaletteSnapshot::default())
        .await
        .unwrap();
    let cases: Vec<(PaletteSnapshot, &str, &str)> = vec![
        (
            PaletteSnapshot {
                expanded_roles: vec!["house_style".into()],
                ..good.clone()
            },
            "expanded_roles has \"house_style\"",
            "user profile",
        ),
        (
            PaletteSnapshot {
                expanded_roles: vec!["implementer".into()],
                ..good.clone()
            },
            "expanded_roles has \"implementer\"",
            "initial palette role",
        ),
        (
            PaletteSnapshot {
                expanded_roles: vec!["critic".into(), "critic".into()],
                consumed_new_roles: 2,
                ..good.clone()
            },
            "expanded_roles has \"critic\" twice",
            "twice",
        ),
        (
            PaletteSnapshot {
                consumed_new_roles: 0,
                ..good.clone()
            },
            "consumed_new_roles is 0",
            "expanded_roles has 1 role(s)",
        ),
        (
            PaletteSnapshot {
                expanded_roles: vec!["critic".into(), "debugger".into(), "refactorer".into()],
                consumed_new_roles: 3,
                ..good.clone()
            },
            "consumed_new_roles is 3",
            "over max_new_roles 2",
        ),
        (
            PaletteSnapshot {
                initial_roles: vec![],
                ..good.clone()
            },
            "initial_roles is empty",
            "recruited roles",
        ),
        (
            PaletteSnapshot {
                max_new_roles: 5,
                ..good.clone()
            },
            "max_new_roles is 5",
            "the play allows 2",
        ),
    ];
    for (snap, field, why) in cases {
        let r = router(cfg.clone(), None);
        let err = r.restore(&snap).await.unwrap_err().to_string();
        assert!(err.contains(field) && err.contains(why), "{field}: {err}");
        assert!(r.route("critic").is_none(), "nothing is restored: {err}");
    }
}

// ----- cancel while a role is being provisioned --------------------------------

/// Runs `play` headless in a run directory under `dir`, cancelling it (the
/// first SIGINT's path) after `cancel_after` of run time.
async fn run_and_cancel(
    play: &Play,
    dir: &std::path::Path,
    cancel_after: Duration,
) -> playdeck::headless::Finished {
    let opts = playdeck::headless::HeadlessOptions {
        session: playdeck::session::SessionOptions {
            run_dir: Some(dir.join("run")),
            approvals: playdeck::kernel::ApprovalPolicy::ApproveAll,
            ..Default::default()
        },
        asks_operator: false,
        ..Default::default()
    };
    let (_tx, control) = tokio::sync::mpsc::unbounded_channel();
    let (stop_tx, stop) = tokio::sync::mpsc::unbounded_channel();
    let run = playdeck::headless::run(
        play.clone(),
        &opts,
        control,
        stop,
        Box::new(std::io::sink()),
        Box::new(std::io::sink()),
    );
    let cancel = async {
        tokio::time::sleep(cancel_after).await;
        stop_tx
            .send(playdeck::session::StopSignal::Interrupt)
            .unwrap();
    };
    let (done, ()) = tokio::join!(run, cancel);
    done.unwrap()
}

/// ADR-0033 P6: a dropped child stays inspectable. Cancelling while a new
/// role is being provisioned leaves every request that waited on it in the
/// ledger — the one for the new role and the one held behind it for
/// request order — with its identity, in the envelope and the checkpoint
/// alike.
#[tokio::test(start_paused = true)]
async fn rule_a33_59_a_cancel_during_provisioning_leaves_every_request_in_the_ledger() {
    let src = include_str!("../plays/cancel_while_provisioning.toml");
    let play = Play::from_str("c.toml", src).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let done = run_and_cancel(&play, dir.path(), Duration::from_millis(1000)).await;
    let env = &done.envelope;
    assert_eq!(env.outcome, playdeck::kernel::Outcome::Cancelled);
    let dropped: Vec<(String, DropReason, String)> = env
        .dropped_spawns
        .as_ref()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d.assignee.as_deref().unwrap_or("").to_string(),
                d.reason,
                d.detail.to_string(),
            )
        })
        .collect();
    assert_eq!(dropped.len(), 2, "{dropped:?}");
    assert_eq!(
        (dropped[0].0.as_str(), dropped[0].1),
        ("critic", DropReason::RoleProvisionFailed)
    );
    assert!(
        dropped[0]
            .2
            .contains("cancelled while critic was being provisioned"),
        "{}",
        dropped[0].2
    );
    assert_eq!(
        (dropped[1].0.as_str(), dropped[1].1),
        ("tester", DropReason::RoleProvisionFailed)
    );
    assert!(
        dropped[1].2.contains("cancelled before admission"),
        "{}",
        dropped[1].2
    );
    assert_eq!(env.spawned_operations, Some(0));

    // Each drop carries the request's identity on the log.
    let events = playdeck::store::read_events(&done.run_dir.events_path()).unwrap();
    let identities: Vec<bool> = events
        .iter()
        .filter_map(|s| match &s.kind {
            playdeck::kernel::SignalKind::SpawnDropped { identity, .. } => Some(identity.is_some()),
            _ => None,
        })
        .collect();
    assert_eq!(identities, [true, true]);

    // The checkpoint folds the same ledger, and nothing was charged.
    let cp =
        playdeck::store::checkpoint::Checkpoint::load(&done.run_dir.path.join("checkpoint.json"))
            .unwrap();
    let rows: Vec<(String, DropReason)> = cp
        .state
        .ledger
        .iter()
        .map(|e| match &e.outcome {
            playdeck::kernel::LedgerOutcome::Dropped { reason, .. } => {
                (e.assignee.as_deref().unwrap_or("").to_string(), *reason)
            }
            other => panic!("only drops: {other:?}"),
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("critic".to_string(), DropReason::RoleProvisionFailed),
            ("tester".to_string(), DropReason::RoleProvisionFailed)
        ]
    );
    let snap = cp.state.palette.snapshot.unwrap();
    assert_eq!(
        (
            snap.consumed_new_roles,
            snap.reserved_roles.len(),
            snap.expanded_roles.len()
        ),
        (0, 0, 0)
    );
}

/// A provisioner that panics for one role, now or once polled.
struct Panicky {
    inner: RunProvisioner,
    role: &'static str,
    at_once: bool,
}

impl playdeck::palette::Provisioner for Panicky {
    fn provision(
        &self,
        req: playdeck::palette::ProvisionRequest,
    ) -> playdeck::kernel::BoxFuture<
        Result<playdeck::palette::RouteEntry, playdeck::palette::ProvisionError>,
    > {
        if &*req.role != self.role {
            return self.inner.provision(req);
        }
        assert!(!self.at_once, "the provider's client exploded");
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            panic!("the provider's client exploded")
        })
    }
}

/// ADR-0033 D4 / ADR-0036 D3: a provisioner that panics is a failed
/// provisioning: the request that needed it is dropped with the reason,
/// what waited behind it is admitted, and the run ends with an envelope.
#[tokio::test(start_paused = true)]
async fn rule_a33_37_a_panicking_provisioner_drops_its_requests_and_the_run_goes_on() {
    for at_once in [false, true] {
        let play = authority_play("recruit and build", "orchestrator", 1);
        let p = Panicky {
            inner: script_provisioner(&play),
            role: "critic",
            at_once,
        };
        let (env, r) = run_scripted_with(&play, Arc::new(p)).await;
        let dropped = env.dropped_spawns.clone().unwrap();
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert_eq!(dropped[0].reason, DropReason::RoleProvisionFailed);
        assert_eq!(dropped[0].assignee.as_deref(), Some("critic"));
        assert!(
            dropped[0]
                .detail
                .contains("the provisioner panicked: the provider's client exploded"),
            "{}",
            dropped[0].detail
        );
        assert_eq!(env.spawned_operations, Some(1), "the implementer's request");
        assert_eq!(env.completed_operations.len(), 2);
        let s = r.snapshot();
        assert_eq!((s.consumed_new_roles, s.reserved_roles.len()), (0, 0));
        assert!(r.route("critic").is_none());
    }
}

// ----- what a role's spawned work runs on -------------------------------------

const CLI: &str = "[agents.cli]\nbinary = \"cli-agent\"\nstream_format = \"jsonl\"\nflags.plan = [\"--plan\"]\n[agents.claude]\nbinary = \"claude\"\nstream_format = \"claude\"\n";

fn cli_play(palette: &str) -> String {
    format!(
        "[play]\nname = \"p\"\n{CLI}{palette}[[operations]]\nid = \"kickoff\"\nrole = \"orchestrator\"\nagent = \"cli\"\nflag_profile = \"plan\"\ntools = {{ permission = \"workspace-write\", internal = [\"Read\", \"Edit\"] }}\ninstruction = \"go\"\n"
    )
}

const ROLES: &str = "[palette]\nroles = [\n  { role = \"orchestrator\", disposition = \"emission_capable\" },\n  { role = \"reviewer\", agent = \"cli\", tools = { permission = \"read-only\", internal = [\"Read\"] } },\n  { role = \"tester\", agent = \"claude\" },\n]\n[palette.expansion]\nmax_new_roles = 1\n";

/// ADR-0036 D3 / ADR-0033 P4: a role's route carries its agent, flag
/// profile and ToolSet — declared on its entry, else its own operations',
/// else [palette.defaults] — and never falls back to the simulator in a
/// play whose work runs on agent CLIs; validation says where a role has
/// none (a declared one is refused: see the next test).
#[test]
fn rule_a36_41_a_roles_agent_is_declared_or_derived_never_silently_sim() {
    let play = Play::from_str("p.toml", &cli_play(ROLES)).unwrap();
    let setups = play.role_setups();
    let orch = setups.for_role("orchestrator").unwrap();
    assert_eq!(&*orch.agent, "cli");
    assert_eq!(
        *orch.params,
        serde_json::json!({"flag_profile": "plan", "tools": {"internal": ["Read", "Edit"], "mcp": [], "permission": "workspace-write"}}),
        "the role's own operation's flag profile and ToolSet"
    );
    let reviewer = setups.for_role("reviewer").unwrap();
    assert_eq!(&*reviewer.agent, "cli");
    assert_eq!(reviewer.params["tools"]["permission"], "read-only");
    assert_eq!(&*setups.for_role("tester").unwrap().agent, "claude");
    let e = setups.for_role("critic").unwrap_err();
    assert!(matches!(e, playdeck::palette::SetupError::Missing(_)));
    assert!(
        e.to_string().starts_with(
            "no agent for role critic: this play's work runs on agent CLIs (claude, cli)"
        ),
        "{e}"
    );
    // Validation warns where a recruited role would have none.
    let w = &play.warnings;
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(
        w[0].starts_with("p.toml:17:1: roles the orchestrator recruits have no agent"),
        "{}",
        w[0]
    );

    // The delegation clause offers only roles that can take work: of the
    // legacy roster (which validation only warns about), the orchestrator.
    let legacy = Play::from_str("p.toml", &cli_play("")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = playdeck::session::wiring::preview_router(&legacy);
    rt.block_on(r.provision_initial()).unwrap();
    let clause = r.decorate(
        Some("orchestrator"),
        &Arc::from("go"),
        SpawnBudget {
            accepted: 0,
            max: 5,
        },
    );
    assert!(
        clause.contains("Allowed assignees now: orchestrator (omit"),
        "{clause}"
    );

    // [palette.defaults] gives every other role one, recruited roles too.
    let with_defaults = ROLES.replace(
        "[palette.expansion]",
        "[palette.defaults]\nagent = \"claude\"\ntools = { permission = \"read-only\" }\n[palette.expansion]",
    );
    let play = Play::from_str("p.toml", &cli_play(&with_defaults)).unwrap();
    assert!(play.warnings.is_empty(), "{:?}", play.warnings);
    let s = play.role_setups().for_role("critic").unwrap();
    assert_eq!(
        (&*s.agent, &s.params["tools"]["permission"]),
        ("claude", &serde_json::json!("read-only"))
    );

    // A play that runs only on the simulator keeps simulating.
    let sim = include_str!("../plays/simulator_only_expansion.toml");
    let play = Play::from_str("s.toml", sim).unwrap();
    assert!(play.warnings.is_empty());
    assert_eq!(
        &*play.role_setups().for_role("critic").unwrap().agent,
        "sim"
    );
}

/// (line:col, message) of each problem of a rejected play.
fn errors_of(src: &str) -> Vec<(String, String)> {
    let d = Play::from_str("p.toml", src).expect_err("the play should be rejected");
    d.items
        .iter()
        .map(|i| {
            let (l, c) = d.line_col(i.span.start);
            (format!("{l}:{c}"), i.message.clone())
        })
        .collect()
}

/// A36-41 (issue 43): a declared palette role with no agent, in a play
/// whose work runs on agent CLIs, would be provisioned and then refuse all
/// its work; validation refuses the play instead, at the role's entry. When
/// the missing agent follows from another error — the role's only
/// operation, its entry's setup, its role profile or [palette.defaults]
/// failing to read — that error alone is reported. Roles the play does not
/// name (recruited ones, the legacy roster) are warned about, and a play
/// that runs only on the simulator keeps simulating.
#[test]
fn rule_a36_41_a_declared_role_with_no_agent_refuses_the_play() {
    const BARE: &str = "[palette]\nroles = [\n  { role = \"orchestrator\", disposition = \"emission_capable\" },\n  { role = \"tester\" },\n]\n";
    let e = errors_of(&cli_play(BARE));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].0, "13:12", "at the role's entry");
    assert!(
        e[0].1.starts_with(
            "palette role \"tester\" has no agent: no agent on its entry, no operation or role profile of its own, and this play's work runs on agent CLIs (cli)"
        ),
        "{}",
        e[0].1
    );
    let d = Play::from_str("p.toml", &cli_play(BARE)).unwrap_err();
    assert_eq!(d.items[0].label, "no agent");
    assert_eq!(
        d.items[0].help.as_deref(),
        Some("give its entry agent = \"...\", or set [palette.defaults] agent")
    );

    // Each way the agent comes from something broken: that one error, and
    // the same play with it fixed loads (so the error was the only cause).
    let entry = |tester: &str| BARE.replace("{ role = \"tester\" }", tester);
    let op = |extra: &str| {
        format!("[[operations]]\nid = \"t\"\nrole = \"tester\"\ninstruction = \"x\"\n{extra}")
    };
    let profile = |provider: &str, max: u32| {
        format!(
            "[capacity]\nmax_nodes = 1\n[role_profiles.t]\nrole = \"tester\"\nprovider = {provider}\nmax_instances = {max}\n"
        )
    };
    let cases: Vec<(&str, String, String)> = vec![
        (
            "its only operation",
            format!("{}{}", cli_play(BARE), op("approval = \"yes\"\n")),
            format!("{}{}", cli_play(BARE), op("approval = true\n")),
        ),
        (
            "its only operation's agent",
            format!("{}{}", cli_play(BARE), op("agent = \"nosuch\"\n")),
            format!("{}{}", cli_play(BARE), op("agent = \"cli\"\n")),
        ),
        (
            "its entry's agent",
            cli_play(&entry("{ role = \"tester\", agent = 3 }")),
            cli_play(&entry("{ role = \"tester\", agent = \"cli\" }")),
        ),
        (
            "its entry's agent name",
            cli_play(&entry("{ role = \"tester\", agent = \"c l i\" }")),
            cli_play(&entry("{ role = \"tester\", agent = \"cli\" }")),
        ),
        (
            "its entry's tools, with no agent beside them",
            cli_play(&entry(
                "{ role = \"tester\", tools = { permission = \"read-only\" } }",
            )),
            cli_play(&entry(
                "{ role = \"tester\", agent = \"cli\", tools = { permission = \"read-only\" } }",
            )),
        ),
        (
            "[palette.defaults] with no agent",
            cli_play(&format!("{BARE}[palette.defaults]\n")),
            cli_play(&format!("{BARE}[palette.defaults]\nagent = \"claude\"\n")),
        ),
        (
            "[palette.defaults] not a table",
            cli_play(&format!("{BARE}defaults = 3\n")),
            cli_play(&format!("{BARE}defaults = {{ agent = \"claude\" }}\n")),
        ),
        (
            "its role profile",
            cli_play(&format!("{BARE}{}", profile("\"cli\"", 0))),
            cli_play(&format!("{BARE}{}", profile("\"cli\"", 1))),
        ),
        (
            "its role profile's provider",
            cli_play(&format!("{BARE}{}", profile("3", 1))),
            cli_play(&format!("{BARE}{}", profile("\"cli\"", 1))),
        ),
    ];
    for (what, broken, fixed) in &cases {
        let e = errors_of(broken);
        assert_eq!(e.len(), 1, "{what}: one error\n{broken}\n{e:#?}");
        assert!(!e[0].1.contains("has no agent"), "{what}: {e:#?}");
        if let Err(d) = Play::from_str("p.toml", fixed) {
            panic!("{what}, fixed, loads:\n{fixed}\n{d:?}");
        }
    }

    // [palette.defaults] gives the bare role its agent.
    let play = Play::from_str(
        "p.toml",
        &cli_play(&format!("{BARE}[palette.defaults]\nagent = \"claude\"\n")),
    )
    .unwrap();
    assert_eq!(
        &*play.role_setups().for_role("tester").unwrap().agent,
        "claude"
    );
    // A play that runs only on the simulator needs no agent anywhere.
    let sim = format!("[play]\nname = \"s\"\n{BARE}{OP}");
    let play = Play::from_str("s.toml", &sim).unwrap();
    assert!(play.warnings.is_empty(), "{:?}", play.warnings);
    assert_eq!(
        &*play.role_setups().for_role("tester").unwrap().agent,
        "sim"
    );
    // The legacy roster was not named by the play: still a warning.
    let legacy = Play::from_str("p.toml", &cli_play("")).unwrap();
    assert!(
        legacy.warnings.iter().any(|w| w.contains(
            "roles of the legacy roster with no operation or role profile have no agent"
        )),
        "{:?}",
        legacy.warnings
    );
}

#[test]
fn rule_a36_40_a_roles_setup_is_checked_at_load_with_positions() {
    let errors = |palette: &str| {
        let d = Play::from_str("p.toml", &cli_play(palette)).unwrap_err();
        d.items
            .iter()
            .map(|i| {
                let (l, c) = d.line_col(i.span.start);
                (format!("{l}:{c}"), i.message.clone())
            })
            .collect::<Vec<_>>()
    };
    let e = errors(
        "[palette]\nroles = [{ role = \"orchestrator\", tools = { permission = \"read-only\" } }, { role = \"tester\", agent = \"sim\", flag_profile = \"plan\" }, { role = \"reviewer\", agent = \"claude\", tools = { permission = \"read-only\", internal = [\"Edit\"] } }]\n",
    );
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!(e[0].0, "11:35");
    assert!(
        e[0].1
            .contains("`tools` of [palette] roles[0] needs `agent` beside it"),
        "{}",
        e[0].1
    );
    assert_eq!(e[1].0, "11:109");
    assert!(
        e[1].1.contains(
            "`flag_profile` of [palette] roles[1] has no effect: agent \"sim\" is built in"
        ),
        "{}",
        e[1].1
    );
    assert_eq!(e[2].0, "11:173");
    assert!(e[2].1.contains("Edit"), "{}", e[2].1);
    let e = errors(
        "[palette]\nroles = [{ role = \"orchestrator\" }]\n[palette.defaults]\nflag_profile = \"plan\"\n",
    );
    assert_eq!(
        e.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>(),
        [
            "[palette.defaults] is missing `agent`",
            "`flag_profile` of `defaults` in [palette] needs `agent` beside it"
        ]
    );
    // A name the play does not define may come from the user's agents file:
    // a warning, and the run checks it when it starts.
    let play = Play::from_str(
        "p.toml",
        &cli_play("[palette]\nroles = [{ role = \"orchestrator\" }, { role = \"tester\", agent = \"codex\" }]\n"),
    )
    .unwrap();
    assert_eq!(play.warnings.len(), 1, "{:?}", play.warnings);
    assert!(
        play.warnings[0].contains("agent \"codex\" is neither built in"),
        "{}",
        play.warnings[0]
    );
    let e = play.role_setups().for_role("tester").unwrap_err();
    assert!(matches!(e, playdeck::palette::SetupError::Invalid(_)));
    assert!(
        e.to_string()
            .contains("available agents: sim, noop, claude, cli"),
        "{e}"
    );
}

/// ADR-0036 D5's runtime grant/revoke is not taken: a role's disposition
/// is fixed for a run. The checkpoint keeps the declared palette, so a
/// resume whose play changed a disposition is refused as a conflict, and
/// the run goes on only with the palette it started with.
#[tokio::test(start_paused = true)]
async fn rule_a36_57_dispositions_are_fixed_for_a_run() {
    let src = |tester: &str| {
        format!(
            "[play]\nname = \"d\"\n[palette]\nroles = [{{ role = \"orchestrator\", disposition = \"emission_capable\" }}, {{ role = \"tester\", disposition = \"{tester}\" }}]\n[[operations]]\nid = \"long\"\nrole = \"tester\"\ninstruction = \"x\"\nsim = {{ duration_ms = 60000 }}\n"
        )
    };
    let play = Play::from_str("d.toml", &src("terminal")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let done = run_and_cancel(&play, dir.path(), Duration::from_millis(500)).await;
    assert_eq!(done.envelope.outcome, playdeck::kernel::Outcome::Cancelled);
    let resume = |play: Play| {
        let run_dir = done.run_dir.path.clone();
        async move {
            let opts = playdeck::headless::HeadlessOptions {
                session: playdeck::session::SessionOptions {
                    resume: Some(run_dir),
                    approvals: playdeck::kernel::ApprovalPolicy::ApproveAll,
                    ..Default::default()
                },
                asks_operator: false,
                ..Default::default()
            };
            let (_tx, control) = tokio::sync::mpsc::unbounded_channel();
            let (_stop, stop) = tokio::sync::mpsc::unbounded_channel();
            playdeck::headless::run(
                play.clone(),
                &opts,
                control,
                stop,
                Box::new(std::io::sink()),
                Box::new(std::io::sink()),
            )
            .await
        }
    };
    let granted = Play::from_str("d.toml", &src("emission_capable")).unwrap();
    let Err(playdeck::session::RunError::Open(e)) = resume(granted).await else {
        panic!("a resume may not grant spawn permission");
    };
    let e = e.to_string();
    assert!(e.contains("the play changed since it started"), "{e}");
    assert!(
        e.contains("[palette] was") && e.contains("\"disposition\":\"terminal\""),
        "{e}"
    );
    // The unchanged play takes the run up again.
    let done = resume(play).await.unwrap();
    assert_eq!(done.envelope.outcome, playdeck::kernel::Outcome::Succeeded);
}
