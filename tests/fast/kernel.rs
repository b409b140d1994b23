//! The kernel's rules (ADR-0033), under tokio's paused clock.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use playdeck::kernel::{
    ApprovalPolicy, CommandError, Condition, DropReason, GraphBuilder, Lane, NewOperation,
    Observed, Operation, OperationKind, Outcome, Request, RunConfig, SignalKind, lane_for,
};
use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

fn cfg() -> RunConfig {
    RunConfig::default()
}

fn fail(ms: u64, error: &str) -> Value {
    sim_with(ms, json!({"outcome": "fail", "error": error}))
}

fn result(ms: u64, result: Value) -> Value {
    sim_with(ms, json!({ "result": result }))
}

fn drops(env: &playdeck::kernel::Envelope) -> Vec<DropReason> {
    env.dropped_spawns
        .as_ref()
        .unwrap()
        .iter()
        .map(|d| d.reason)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn edge_conditions_and_skip_propagation() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", fail(100, "boom")));
    let on_ok = b.add_after(
        op("on-success", "worker", sim(100)),
        [(a, Condition::Succeeded)],
    );
    b.add_after(
        op("on-failure", "worker", sim(100)),
        [(a, Condition::Failed)],
    );
    b.add_after(op("always", "worker", sim(100)), [(a, Condition::Always)]);
    let s2 = b.add_after(
        op("after-skip", "worker", sim(100)),
        [(on_ok, Condition::Always)],
    );
    b.add_after(
        op("after-skip-2", "worker", sim(100)),
        [(s2, Condition::Failed)],
    );
    let (env, sig, agents) = harness(b.build().unwrap(), cfg()).run().await;

    assert_eq!(names(&env, &env.failed_operations), ["a"]);
    assert_eq!(
        names(&env, &env.skipped_operations),
        ["after-skip", "after-skip-2", "on-success"]
    );
    // Every settled operation not skipped is completed, failed ones too
    // (ADR-0033); failed_operations says which.
    assert_eq!(
        names(&env, &env.completed_operations),
        ["a", "always", "on-failure"]
    );
    let ids = ids_by_name(&env);
    assert_eq!(env.result_of(&ids["a"]), Some(&json!({"error": "boom"})));
    // Skips are recorded and reported, and never produce a result.
    assert!(env.result_of(&ids["on-success"]).is_none());
    assert_eq!(sig.types_for("on-success"), ["queued", "skipped"]);
    assert_eq!(agents.rec.invocations("on-success"), 0);
    assert_eq!(env.outcome, Outcome::Failed);
    env.check_disjoint().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_node_runs_when_any_incoming_edge_is_valid() {
    let mut b = GraphBuilder::new();
    let ok = b.add_root(op("ok", "worker", sim(100)));
    let bad = b.add_root(op("bad", "worker", fail(100, "x")));
    let skipped = b.add_after(
        op("skipped", "worker", sim(100)),
        [(bad, Condition::Succeeded)],
    );
    b.add_after(
        op("one-valid", "worker", sim(100)),
        [(ok, Condition::Succeeded), (bad, Condition::Succeeded)],
    );
    b.add_after(
        op("none-valid", "worker", sim(100)),
        [(bad, Condition::Succeeded), (skipped, Condition::Always)],
    );
    b.add_after(
        op("skipped-and-valid", "worker", sim(100)),
        [(skipped, Condition::Always), (ok, Condition::Always)],
    );
    let (env, _, _) = harness(b.build().unwrap(), cfg()).run().await;
    assert_eq!(
        names(&env, &env.completed_operations),
        ["bad", "ok", "one-valid", "skipped-and-valid"]
    );
    assert_eq!(
        names(&env, &env.skipped_operations),
        ["none-valid", "skipped"]
    );
}

#[tokio::test(start_paused = true)]
async fn pointer_conditions_pick_a_branch() {
    let mut b = GraphBuilder::new();
    let t = b.add_root(op(
        "triage",
        "worker",
        result(100, json!({"verdict": "ship", "n": {"k": [1, 2]}})),
    ));
    let when = |p: &str, v: Value| Condition::pointer(p, v);
    b.add_after(
        op("ship", "worker", sim(100)),
        [(t, when("/verdict", json!("ship")))],
    );
    b.add_after(
        op("hold", "worker", sim(100)),
        [(t, when("/verdict", json!("hold")))],
    );
    b.add_after(
        op("nested", "worker", sim(100)),
        [(t, when("/n/k/1", json!(2)))],
    );
    b.add_after(
        op("missing", "worker", sim(100)),
        [(t, when("/nope", json!(null)))],
    );
    let (env, _, _) = harness(b.build().unwrap(), cfg()).run().await;
    assert_eq!(
        names(&env, &env.completed_operations),
        ["nested", "ship", "triage"]
    );
    assert_eq!(names(&env, &env.skipped_operations), ["hold", "missing"]);
}

#[tokio::test(start_paused = true)]
async fn context_flows_from_predecessors_and_back_into_the_flow() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op(
        "a",
        "worker",
        result(100, json!({"n": 1, "context": {"team": {"lead": "ana"}}})),
    ));
    let c = b.add_root(op("c", "worker", result(50, json!({"m": 2}))));
    b.add_after(
        op("b", "worker", sim(100)),
        [(a, Condition::Succeeded), (c, Condition::Succeeded)],
    );
    let graph = b.build().unwrap();
    let mut config = cfg();
    config.context = json!({"repo": "x", "team": {"size": 3}})
        .as_object()
        .unwrap()
        .clone();
    let (env, _, agents) = harness(graph, config).run().await;

    let ctx = agents.rec.context_of("b");
    let a_result = env.result_of(&a).unwrap();
    assert_eq!(ctx[&format!("{a}_result")], *a_result);
    assert_eq!(ctx[&format!("{c}_result")], json!({"m": 2}));
    // The flow context is merged in, including what `a` merged back.
    assert_eq!(ctx["repo"], json!("x"));
    assert_eq!(ctx["team"], json!({"size": 3, "lead": "ana"}));
    assert_eq!(
        Value::Object(env.final_context.clone()),
        json!({"repo": "x", "team": {"size": 3, "lead": "ana"}})
    );
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_limit_holds_and_waiting_on_approval_holds_no_slot() {
    let mut b = GraphBuilder::new();
    b.add_root(op("gate", "worker", sim(100)).with_approval(true));
    for i in 0..6 {
        b.add_root(op(&format!("w{i}"), "worker", sim(100)));
    }
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            max_concurrent: 2,
            ..cfg()
        },
    );
    let run = h.spawn();
    let t0 = Instant::now();
    // Six 100 ms operations, two at a time, while the gate waits unapproved.
    sleep(Duration::from_millis(350)).await;
    assert_eq!(h.signals.count("completed"), 6);
    assert_eq!(h.signals.types_for("gate"), ["queued", "awaiting_approval"]);
    h.handle
        .request(Request::Approve {
            op: "gate".into(),
            on: None,
        })
        .await
        .unwrap();
    let env = run.await.unwrap();
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(h.agents.rec.record.lock().unwrap().max_running, 2);
    assert_eq!(t0.elapsed(), Duration::from_millis(450));
}

#[tokio::test(start_paused = true)]
async fn pause_step_and_resume_act_at_operation_boundaries() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", sim(100)));
    b.add_root(op("d", "worker", sim(100)));
    b.add_after(op("b", "worker", sim(100)), [(a, Condition::Succeeded)]);
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            start_paused: true,
            ..cfg()
        },
    );
    let run = h.spawn();
    settle().await;
    assert!(h.signals.started_order().is_empty());
    assert_eq!(h.signals.types_for("a"), ["queued", "paused"]);

    h.handle.request(Request::Step { op: None }).await.unwrap();
    settle().await;
    assert_eq!(h.signals.started_order(), ["a"]);
    sleep(Duration::from_millis(150)).await;
    // a finished; b became ready and waits; nothing else started.
    assert_eq!(h.signals.started_order(), ["a"]);
    assert_eq!(h.signals.types_for("b"), ["queued", "paused"]);

    h.handle.request(Request::Step { op: None }).await.unwrap();
    settle().await;
    assert_eq!(h.signals.started_order(), ["a", "d"]);

    // Still paused: d runs to its end, b keeps waiting.
    sleep(Duration::from_millis(300)).await;
    assert_eq!(h.signals.started_order(), ["a", "d"]);
    assert_eq!(
        h.signals.types_for("d"),
        ["queued", "paused", "unpaused", "started", "completed"]
    );
    h.handle.request(Request::Resume).await.unwrap();
    let env = run.await.unwrap();
    assert_eq!(h.signals.started_order(), ["a", "d", "b"]);
    assert_eq!(env.completed_operations.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_soft_pause_lets_running_work_finish_and_parks_what_would_start() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", sim(200)));
    b.add_after(op("b", "worker", sim(100)), [(a, Condition::Succeeded)]);
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    sleep(Duration::from_millis(50)).await;
    h.handle.request(Request::Pause).await.unwrap();
    sleep(Duration::from_millis(500)).await;
    assert_eq!(h.signals.types_for("a"), ["queued", "started", "completed"]);
    assert_eq!(h.signals.types_for("b"), ["queued", "paused"]);
    assert_eq!(
        h.handle.snapshot().await.unwrap().nodes[1]
            .waiting_for
            .as_deref(),
        Some("paused")
    );
    h.handle.request(Request::Resume).await.unwrap();
    run.await.unwrap();
    assert_eq!(
        h.signals.types_for("b"),
        ["queued", "paused", "unpaused", "started", "completed"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_with_nothing_waiting_starts_the_next_ready_operation() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", sim(100)));
    b.add_after(op("b", "worker", sim(100)), [(a, Condition::Succeeded)]);
    b.add_after(op("c", "worker", sim(100)), [(a, Condition::Succeeded)]);
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            start_paused: true,
            ..cfg()
        },
    );
    let run = h.spawn();
    settle().await;
    h.handle.request(Request::Step { op: None }).await.unwrap(); // a
    settle().await;
    h.handle.request(Request::Step { op: None }).await.unwrap(); // nothing waits: a credit
    sleep(Duration::from_millis(300)).await;
    assert_eq!(h.signals.started_order(), ["a", "b"]);
    assert_eq!(h.signals.types_for("c"), ["queued", "paused"]);
    h.handle.request(Request::Resume).await.unwrap();
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn step_requires_a_pause() {
    let mut b = GraphBuilder::new();
    b.add_root(op("a", "worker", sim(100)));
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    assert_eq!(
        h.handle.request(Request::Step { op: None }).await,
        Err(CommandError::NotPaused)
    );
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn approval_gates_wait_for_a_decision() {
    let mut b = GraphBuilder::new();
    let g1 = b.add_root(op("approved", "worker", sim(100)).with_approval(true));
    let g2 = b.add_root(op("denied", "worker", sim(100)).with_approval(true));
    b.add_after(
        op("after-approved", "worker", sim(100)),
        [(g1, Condition::Succeeded)],
    );
    b.add_after(
        op("after-denied", "worker", sim(100)),
        [(g2, Condition::Succeeded)],
    );
    b.add_root(op("plain", "worker", sim(100)));
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    sleep(Duration::from_millis(500)).await;
    let h2 = &h.handle;
    assert!(matches!(
        h2.request(Request::Approve {
            op: "ghost".into(),
            on: None
        })
        .await,
        Err(CommandError::UnknownOperation(_))
    ));
    assert!(matches!(
        h2.request(Request::Approve {
            op: "plain".into(),
            on: None
        })
        .await,
        Err(CommandError::NoApprovalGate { .. })
    ));
    h2.request(Request::Approve {
        on: None,
        op: "approved".into(),
    })
    .await
    .unwrap();
    assert!(matches!(
        h2.request(Request::Approve {
            on: None,
            op: "approved".into()
        })
        .await,
        Err(CommandError::AlreadyDecided { .. })
    ));
    h2.request(Request::Deny {
        on: None,
        op: "denied".into(),
        reason: vec!["not today".into()],
    })
    .await
    .unwrap();
    let env = run.await.unwrap();

    assert_eq!(
        names(&env, &env.completed_operations),
        ["after-approved", "approved", "denied", "plain"]
    );
    assert_eq!(names(&env, &env.failed_operations), ["denied"]);
    assert_eq!(names(&env, &env.skipped_operations), ["after-denied"]);
    assert_eq!(
        env.result_of(&g2),
        Some(&json!({"error": "denied by operator: not today"}))
    );
    assert_eq!(
        h.signals.types_for("denied"),
        ["queued", "awaiting_approval", "denied", "failed"]
    );
    assert_eq!(
        h.signals.types_for("approved"),
        [
            "queued",
            "awaiting_approval",
            "approved",
            "started",
            "completed"
        ]
    );
    assert_eq!(env.outcome, Outcome::Failed);
}

#[tokio::test(start_paused = true)]
async fn approvals_can_be_decided_before_the_gate_is_reached_or_by_policy() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", sim(100)));
    b.add_after(
        op("gate", "worker", sim(100)).with_approval(true),
        [(a, Condition::Succeeded)],
    );
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    h.handle
        .request(Request::Approve {
            op: "gate".into(),
            on: None,
        })
        .await
        .unwrap();
    let env = run.await.unwrap();
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(
        h.signals.types_for("gate"),
        ["queued", "approved", "started", "completed"]
    );

    for (policy, outcome) in [
        (ApprovalPolicy::ApproveAll, Outcome::Succeeded),
        (
            ApprovalPolicy::DenyAll {
                reason: Arc::from("no operator"),
            },
            Outcome::Failed,
        ),
    ] {
        let mut b = GraphBuilder::new();
        b.add_root(op("gate", "worker", sim(100)).with_approval(true));
        let (env, _, _) = harness(
            b.build().unwrap(),
            RunConfig {
                approvals: policy,
                ..cfg()
            },
        )
        .run()
        .await;
        assert_eq!(env.outcome, outcome);
    }
}

#[tokio::test(start_paused = true)]
async fn denying_what_waits_when_the_operator_leaves() {
    let mut b = GraphBuilder::new();
    b.add_root(op("gate", "worker", sim(100)).with_approval(true));
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    settle().await;
    assert!(
        h.handle
            .set_approval_policy(ApprovalPolicy::DenyAll {
                reason: Arc::from("no operator"),
            })
            .await
    );
    let env = run.await.unwrap();
    assert_eq!(
        env.result_of(&env.failed_operations[0]),
        Some(&json!({"error": "denied by policy: no operator"}))
    );
}

#[tokio::test(start_paused = true)]
async fn hold_keeps_one_queued_operation_back_without_a_slot() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", sim(100)));
    b.add_after(op("held", "worker", sim(100)), [(a, Condition::Succeeded)]);
    b.add_after(op("free", "worker", sim(100)), [(a, Condition::Succeeded)]);
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            max_concurrent: 1,
            ..cfg()
        },
    );
    let run = h.spawn();
    h.handle
        .request(Request::Hold { op: "held".into() })
        .await
        .unwrap();
    settle().await;
    assert!(matches!(
        h.handle.request(Request::Hold { op: "a".into() }).await,
        Err(CommandError::CannotHold {
            state: "running",
            ..
        })
    ));
    sleep(Duration::from_millis(500)).await;
    // With one slot, `free` ran although `held` was ready first.
    assert_eq!(h.signals.started_order(), ["a", "free"]);
    assert_eq!(h.signals.types_for("held"), ["queued", "held", "paused"]);
    let snap = h.handle.snapshot().await.unwrap();
    let held = snap.nodes.iter().find(|n| &*n.name == "held").unwrap();
    assert_eq!(
        (held.lane, held.waiting_for.as_deref()),
        (Lane::Paused, Some("held by the operator"))
    );
    h.handle
        .request(Request::Unhold { op: "held".into() })
        .await
        .unwrap();
    assert!(matches!(
        h.handle
            .request(Request::Unhold { op: "held".into() })
            .await,
        Err(CommandError::NotHeld { .. })
    ));
    let env = run.await.unwrap();
    assert_eq!(env.completed_operations.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn spawn_requests_are_admitted_under_the_emitter() {
    let mut b = GraphBuilder::new();
    let root = b.add_root(op(
        "root",
        "orchestrator",
        result(
            100,
            json!({"spawn_request": [
                {"instruction": "write tests", "assignee": "tester", "reason": "coverage"},
                {"instruction": "free work", "assignee": "worker", "independent": true}
            ]}),
        ),
    ));
    let graph = b.build().unwrap();
    let (env, sig, _) = harness(graph, cfg()).run().await;
    assert_eq!(env.spawned_operations, Some(2));
    let spawned: Vec<_> = sig
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::Spawned {
                name,
                parent_id,
                independent,
                assignee,
                ..
            } => Some((
                name.to_string(),
                *parent_id,
                *independent,
                assignee.as_deref().map(str::to_string),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        spawned,
        [
            ("spawn-1".into(), Some(root), false, Some("tester".into())),
            ("spawn-2".into(), Some(root), true, Some("worker".into())),
        ]
    );
    // The dependent child waits on its emitter; the independent one has no edge.
    let queued_deps: Vec<usize> = sig
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::Queued { node, .. } if node.name.starts_with("spawn-") => {
                Some(node.depends_on.len())
            }
            _ => None,
        })
        .collect();
    assert_eq!(queued_deps, [1, 0]);
    assert_eq!(env.completed_operations.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn every_drop_reason_reaches_the_ledger() {
    let long_name = "g".repeat(600);
    let mut b = GraphBuilder::new();
    b.add_root(op(
        "root",
        "orchestrator",
        sim_with(
            300,
            json!({
                "result": {"spawn_request": [
                    {"instruction": "early", "assignee": "tester"},
                    {"instruction": "ok", "assignee": "worker"},
                    {"instruction": "ok", "assignee": "worker"},
                    {"instruction": "x", "assignee": long_name},
                    {"assignee": "worker"},
                    {"instruction": "   "},
                    {"instruction": "second", "assignee": "worker"},
                    {"instruction": "third", "assignee": "worker"}
                ]},
                "emits": [{"at_ms": 100, "value": {"spawn_request": {"instruction": "early", "assignee": "tester"}}},
                          {"at_ms": 200, "value": {"spawn_request": {"instruction": "early", "assignee": "tester"}}}]
            }),
        ),
    ));
    let (env, sig, _) = harness(
        b.build().unwrap(),
        RunConfig {
            max_spawn: 3,
            ..cfg()
        },
    )
    .run()
    .await;
    assert_eq!(
        drops(&env),
        [
            DropReason::Duplicate,        // the result repeats a streamed request
            DropReason::MaxSpawnExceeded, // the second "ok" would be the fourth
            DropReason::BuilderError,     // unknown assignee
            DropReason::BuilderError,     // no instruction
            DropReason::NullChild,        // blank instruction
            DropReason::MaxSpawnExceeded, // second and third: a row each,
            DropReason::MaxSpawnExceeded, // each with its own name
        ]
    );
    let d = env.dropped_spawns.as_ref().unwrap();
    assert!(
        d.iter()
            .all(|d| d.emitter_id == Some(env.completed_operations[0])
                && d.detail.chars().count() <= 500)
    );
    assert_eq!(d[2].detail.chars().count(), 500);
    assert!(d[3].detail.contains("missing instruction"));
    assert!(
        d[5].detail.starts_with("spawn-5 refused") && d[6].detail.starts_with("spawn-6 refused"),
        "each refusal keeps its own detail: {} / {}",
        d[5].detail,
        d[6].detail
    );
    // spawn-N is allocated after routing: early, early, ok accepted; the
    // second ok got spawn-4 and was refused, and so on.
    assert!(
        d[1].detail.starts_with("spawn-4 refused"),
        "{}",
        d[1].detail
    );
    assert!(
        d[5].detail.starts_with("spawn-5 refused"),
        "{}",
        d[5].detail
    );
    assert_eq!(env.spawned_operations, Some(3));
    // Identical requests emitted on purpose are each a request.
    let early = sig
        .all()
        .iter()
        .filter(|s| matches!(&s.kind, SignalKind::Spawned { instruction, .. } if &**instruction == "early"))
        .count();
    assert_eq!(early, 2);
    // Every drop is a signal; the ledger folds the repeat.
    assert_eq!(sig.count("spawn_dropped"), 7);
}

#[tokio::test(start_paused = true)]
async fn the_spawned_signal_cuts_the_instruction_but_the_operation_keeps_it() {
    let long = "é".repeat(700);
    let mut b = GraphBuilder::new();
    b.add_root(op(
        "root",
        "worker",
        result(100, json!({"spawn_request": {"instruction": long.clone()}})),
    ));
    let (env, sig, _) = harness(b.build().unwrap(), cfg()).run().await;
    let (cut, queued) = sig.all().iter().fold((None, None), |acc, s| match &s.kind {
        SignalKind::Spawned { instruction, .. } => (Some(instruction.chars().count()), acc.1),
        SignalKind::Queued {
            node, instruction, ..
        } if &*node.name == "spawn-1" => (acc.0, Some(instruction.chars().count())),
        _ => acc,
    });
    assert_eq!((cut, queued), (Some(512), Some(700)));
    assert_eq!(env.spawned_operations, Some(1));
}

#[tokio::test(start_paused = true)]
async fn extraction_stops_below_depth_four_and_the_allowlist_holds() {
    let nested = |depth: usize| {
        (0..depth).fold(
            json!({"spawn_request": {"instruction": format!("d{depth}"), "operation": "shell"}}),
            |acc, i| json!({ format!("k{i}"): acc }),
        )
    };
    let mut b = GraphBuilder::new();
    b.add_root(op(
        "root",
        "worker",
        result(100, json!({"deep": [nested(2)], "deeper": [[nested(2)]]})),
    ));
    let (env, sig, _) = harness(b.build().unwrap(), cfg()).run().await;
    // deep: object(0) -> array(1) -> k1(2) -> k0(3) -> request object(4).
    // deeper adds one array level: depth 5, not found.
    assert_eq!(env.spawned_operations, Some(1));
    let warnings = sig.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("\"shell\"") && warnings[0].contains("operate"));
    let _ = OperationKind::Operate;
}

#[tokio::test(start_paused = true)]
async fn escalation_completes_the_operation_and_flags_the_run() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op(
        "a",
        "worker",
        sim_with(
            100,
            json!({"outcome": "escalate", "escalation": "need a human"}),
        ),
    ));
    b.add_after(op("next", "worker", sim(100)), [(a, Condition::Succeeded)]);
    let (env, sig, _) = harness(b.build().unwrap(), cfg()).run().await;
    assert_eq!(env.escalated_operations, Some(vec![a]));
    assert!(env.completed_operations.contains(&a));
    assert_eq!(names(&env, &env.completed_operations), ["a", "next"]);
    assert_eq!(env.outcome, Outcome::Failed);
    assert_eq!(sig.types_for("a"), ["queued", "started", "escalated"]);
    let lane = sig
        .all()
        .iter()
        .filter(|s| s.kind.node().is_some_and(|n| &*n.name == "a"))
        .fold(Lane::Queued, |l, s| lane_for(l, &s.kind));
    assert_eq!(lane, Lane::Escalated);
}

#[tokio::test(start_paused = true)]
async fn a_non_reactive_run_extracts_nothing() {
    let mut b = GraphBuilder::new();
    b.add_root(op(
        "a",
        "worker",
        result(100, json!({"spawn_request": {"instruction": "x"}})),
    ));
    let (env, sig, _) = harness(
        b.build().unwrap(),
        RunConfig {
            reactive: false,
            ..cfg()
        },
    )
    .run()
    .await;
    assert_eq!(env.spawned_operations, None);
    assert_eq!(env.dropped_spawns, None);
    assert_eq!(sig.count("spawned"), 0);
    let json = serde_json::to_value(&env).unwrap();
    assert!(json.get("spawned_operations").is_none());
}

#[tokio::test(start_paused = true)]
async fn inject_goes_through_admission_and_fails_outside_a_run() {
    let mut b = GraphBuilder::new();
    let a_op = op("a", "worker", sim(300));
    let a_clone = a_op.clone();
    let a = b.add_root(a_op);
    let bb = b.add_after(op("b", "worker", sim(100)), [(a, Condition::Succeeded)]);
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            max_spawn: 2,
            ..cfg()
        },
    );
    let run = h.spawn();
    settle().await;
    let new = |o: Operation, parent| NewOperation {
        op: o,
        depends_on: vec![],
        parent,
        independent: false,
    };
    // Accepted: a fresh operation under `a`.
    assert!(
        h.handle
            .inject(new(op("", "worker", sim(100)), Some(a)))
            .await
            .is_some()
    );
    // Cycle: `a` again, now under `b` (b -> a closes a -> b -> a).
    assert_eq!(h.handle.inject(new(a_clone, Some(bb))).await, None);
    // Cap: max_spawn 2 counts accepted spawns only; one more is fine, then refused.
    assert!(
        h.handle
            .inject(new(op("extra", "worker", sim(100)), None))
            .await
            .is_some()
    );
    assert_eq!(
        h.handle
            .inject(new(op("over", "worker", sim(100)), None))
            .await,
        None
    );
    let env = run.await.unwrap();
    assert_eq!(
        drops(&env),
        [DropReason::Cycle, DropReason::MaxSpawnExceeded]
    );
    assert_eq!(env.dropped_spawns.as_ref().unwrap()[0].op_id, Some(a));
    assert_eq!(
        names(&env, &env.completed_operations),
        ["a", "b", "extra", "spawn-1"]
    );
    assert_eq!(
        h.handle
            .inject(new(op("late", "worker", sim(100)), None))
            .await,
        None
    );
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_running_work_and_skips_the_rest() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("long", "worker", sim(10_000)));
    b.add_after(op("next", "worker", sim(100)), [(a, Condition::Succeeded)]);
    b.add_root(op("gate", "worker", sim(100)).with_approval(true));
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    let t0 = Instant::now();
    sleep(Duration::from_millis(1000)).await;
    h.handle.request(Request::Cancel).await.unwrap();
    let env = run.await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(1000));
    assert_eq!(env.outcome, Outcome::Cancelled);
    assert_eq!(names(&env, &env.failed_operations), ["long"]);
    assert_eq!(env.result_of(&a), Some(&json!({"error": "cancelled"})));
    assert_eq!(names(&env, &env.skipped_operations), ["gate", "next"]);
    assert_eq!(
        h.agents.rec.record.lock().unwrap().running,
        0,
        "the agent future was dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn terminal_operations_are_never_invoked_again_and_signals_have_no_gaps() {
    let mut b = GraphBuilder::new();
    let mut prev = b.add_root(op("n0", "worker", sim(10)));
    for i in 1..20 {
        let o = op(
            &format!("n{i}"),
            "worker",
            if i % 7 == 0 { fail(10, "x") } else { sim(10) },
        );
        prev = b.add_after(o, [(prev, Condition::Always)]);
    }
    for i in 0..10 {
        b.add_root(op(&format!("r{i}"), "worker", sim(5)));
    }
    let (env, sig, agents) = harness(b.build().unwrap(), cfg()).run().await;
    for name in ids_by_name(&env).keys() {
        assert_eq!(agents.rec.invocations(name), 1, "{name}");
    }
    let seqs: Vec<u64> = sig.all().iter().map(|s| s.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(sig.all().last().unwrap().kind.type_name(), "run_finished");
    assert_eq!(sig.all()[0].kind.type_name(), "run_started");
}

#[tokio::test(start_paused = true)]
async fn a_lagging_observer_is_told_and_resynchronises_from_a_snapshot() {
    let mut b = GraphBuilder::new();
    for i in 0..200 {
        b.add_root(op(&format!("n{i}"), "worker", json!(null)).with_agent("noop", json!(null)));
    }
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            signal_buffer: 16,
            max_concurrent: 50,
            ..cfg()
        },
    );
    let mut sub = h.handle.subscribe();
    let env = h.spawn().await.unwrap();
    assert_eq!(env.completed_operations.len(), 200);
    let Observed::Lagged { missed } = sub.next().await else {
        panic!("expected a lag");
    };
    assert!(missed > 0);
    let snap = h.handle.snapshot().await.unwrap();
    let last_seq = h.signals.all().last().unwrap().seq;
    assert_eq!(snap.seq, last_seq);
    assert!(snap.nodes.iter().all(|n| n.lane == Lane::Succeeded));
    // What remains in the buffer is the tail, then the stream closes.
    let mut tail = Vec::new();
    loop {
        match sub.next().await {
            Observed::Signal(s) => tail.push(s.seq),
            Observed::Closed => break,
            Observed::Lagged { .. } => {}
        }
    }
    assert_eq!(tail.last(), Some(&last_seq));
}

#[tokio::test(start_paused = true)]
async fn a_round_ends_each_time_the_run_drains() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", sim(100)));
    b.add_after(
        op("gate", "worker", sim(100)).with_approval(true),
        [(a, Condition::Succeeded)],
    );
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    sleep(Duration::from_millis(500)).await;
    h.handle
        .request(Request::Approve {
            op: "gate".into(),
            on: None,
        })
        .await
        .unwrap();
    run.await.unwrap();
    let rounds: Vec<u32> = h
        .signals
        .all()
        .iter()
        .filter_map(|s| match s.kind {
            SignalKind::RoundEnded { round } => Some(round),
            _ => None,
        })
        .collect();
    assert_eq!(rounds, [1, 2]);
}

/// Fails its first attempt, succeeds after (100 ms each).
fn flaky() -> Operation {
    op(
        "flaky",
        "worker",
        sim_with(
            100,
            json!({"outcome": "fail", "error": "boom", "fail_attempts": 1}),
        ),
    )
}

#[tokio::test(start_paused = true)]
async fn retry_starts_a_new_attempt_and_reopens_what_the_failure_skipped() {
    let mut b = GraphBuilder::new();
    let flaky = b.add_root(flaky());
    let next = b.add_after(
        op("next", "worker", sim(100)),
        [(flaky, Condition::Succeeded)],
    );
    b.add_after(
        op("last", "worker", sim(100)),
        [(next, Condition::Succeeded)],
    );
    b.add_after(
        op("on-failure", "worker", sim(100)),
        [(flaky, Condition::Failed)],
    );
    // Keeps the run alive while the operator looks.
    b.add_root(op("long", "worker", sim(5_000)));
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    sleep(Duration::from_millis(1_000)).await;
    assert_eq!(h.signals.types_for("next"), ["queued", "skipped"]);
    assert!(matches!(
        h.handle
            .request(Request::Retry {
                on: None,
                op: "on-failure".into()
            })
            .await,
        Err(CommandError::CannotRetry {
            state: "completed",
            ..
        })
    ));
    assert!(matches!(
        h.handle
            .request(Request::Retry {
                op: "next".into(),
                on: None
            })
            .await,
        Err(CommandError::CannotRetry {
            state: "skipped",
            ..
        })
    ));
    h.handle
        .request(Request::Retry {
            op: "flaky".into(),
            on: None,
        })
        .await
        .unwrap();
    let env = run.await.unwrap();
    assert_eq!(
        h.signals.types_for("flaky"),
        [
            "queued",
            "started",
            "failed",
            "retried",
            "started",
            "completed"
        ]
    );
    assert_eq!(
        h.signals.types_for("next"),
        ["queued", "skipped", "retried", "started", "completed"]
    );
    assert_eq!(
        h.signals.types_for("last")[..3],
        ["queued", "skipped", "retried"]
    );
    let attempts: Vec<(String, u32)> = h
        .signals
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::Retried { node, attempt, .. } => Some((node.name.to_string(), *attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(
        attempts,
        [("flaky".into(), 2), ("next".into(), 0), ("last".into(), 0)]
    );
    // The failure branch already ran; it stands.
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(env.completed_operations.len(), 5);
    assert!(env.failed_operations.is_empty() && env.skipped_operations.is_empty());
    assert!(matches!(
        h.handle
            .request(Request::Retry {
                op: "flaky".into(),
                on: None
            })
            .await,
        Err(CommandError::RunFinished)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_retry_recounts_every_path_to_what_it_reopens() {
    let mut b = GraphBuilder::new();
    let flaky = b.add_root(flaky());
    let mid = b.add_after(
        op("mid", "worker", sim(300)),
        [(flaky, Condition::Succeeded)],
    );
    // Two paths from flaky: directly and through mid.
    b.add_after(
        op("join", "worker", sim(100)),
        [(flaky, Condition::Succeeded), (mid, Condition::Succeeded)],
    );
    // Waits on flaky and on something still running when flaky is retried.
    // slow ends after the retry but before the new attempt does.
    let slow = b.add_root(op("slow", "worker", sim(1_050)));
    b.add_after(
        op("both", "worker", sim(100)),
        [(flaky, Condition::Always), (slow, Condition::Succeeded)],
    );
    b.add_root(op("long", "worker", sim(5_000)));
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    sleep(Duration::from_millis(1_000)).await;
    h.handle
        .request(Request::Retry {
            op: "flaky".into(),
            on: None,
        })
        .await
        .unwrap();
    let env = run.await.unwrap();
    assert_eq!(env.outcome, Outcome::Succeeded);
    let at = |name: &str, ty: &str| {
        h.signals
            .all()
            .iter()
            .filter(|s| s.kind.type_name() == ty && s.kind.node().is_some_and(|n| &*n.name == name))
            .map(|s| s.elapsed)
            .next_back()
            .unwrap_or_else(|| panic!("no {ty} for {name}"))
    };
    // join waits for mid (reopened through flaky), not only for flaky.
    assert!(at("join", "started") >= at("mid", "completed"));
    // both, still waiting on slow when flaky was retried, waits for the
    // new attempt too.
    assert!(at("both", "started") >= at("flaky", "completed"));
    assert!(at("both", "started") >= at("slow", "completed"));
    assert_eq!(
        h.signals.types_for("both"),
        ["queued", "started", "completed"]
    );
}

/// ADR-0033 D5: "inject() outside an active reactive run returns False and
/// logs a warning" — for the Rust API as for `ctl add`.
#[tokio::test(start_paused = true)]
async fn rule_a33_52_inject_outside_a_reactive_run_warns_and_returns_none() {
    let new = |name: &str| NewOperation {
        op: op(name, "worker", sim(100)),
        depends_on: vec![],
        parent: None,
        independent: true,
    };
    let mut b = GraphBuilder::new();
    b.add_root(op("a", "worker", sim(300)));
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            reactive: false,
            ..cfg()
        },
    );
    let run = h.spawn();
    settle().await;
    assert_eq!(h.handle.inject(new("extra")).await, None);
    let env = run.await.unwrap();
    assert_eq!(names(&env, &env.completed_operations), ["a"]);
    assert!(
        env.dropped_spawns.is_none(),
        "no ledger in a non-reactive run"
    );
    let warnings = h.signals.warnings();
    assert_eq!(
        warnings,
        ["inject refused: the run is not reactive (reactive = false)"]
    );

    // A reactive run refuses once it was cancelled; it has ended, so the
    // refusal is logged rather than signalled.
    let mut b = GraphBuilder::new();
    b.add_root(op("a", "worker", sim(300)));
    let mut h = harness(b.build().unwrap(), cfg());
    let run = h.spawn();
    settle().await;
    h.handle.request(Request::Cancel).await.unwrap();
    assert_eq!(h.handle.inject(new("late")).await, None);
    let env = run.await.unwrap();
    assert_eq!(env.spawned_operations, Some(0));
}

/// Streams an escalation and fails on its first attempt; later attempts
/// succeed without one.
struct EscalatesThenFails;

impl playdeck::kernel::Agent for EscalatesThenFails {
    fn invoke(
        &self,
        inv: playdeck::kernel::Invocation,
    ) -> playdeck::kernel::BoxFuture<playdeck::kernel::AgentOutcome> {
        Box::pin(async move {
            if inv.attempt == 1 {
                inv.events.emit(playdeck::kernel::AgentEvent::Emitted(
                    json!({"escalation": {"reason": "unsure about the schema"}}),
                ));
                sleep(Duration::from_millis(100)).await;
                return Err(playdeck::kernel::AgentFailure::new("simulated", "it broke"));
            }
            sleep(Duration::from_millis(100)).await;
            Ok(json!({"summary": "clean"}))
        })
    }
}

struct OneAgent;

impl playdeck::kernel::AgentResolver for OneAgent {
    fn resolve(&self, name: &str) -> Option<Arc<dyn playdeck::kernel::Agent>> {
        if name == "esc" {
            Some(Arc::new(EscalatesThenFails))
        } else {
            Some(Arc::new(playdeck::agents::SimAgent::new(1.0)))
        }
    }
}

/// Escalation state belongs to an attempt: what a failed attempt streamed
/// does not make a later, clean attempt escalated.
#[tokio::test(start_paused = true)]
async fn rule_a33_57_a_failed_attempts_escalation_does_not_mark_a_clean_retry() {
    let mut b = GraphBuilder::new();
    b.add_root(
        Operation::new("x", "do x")
            .with_role("worker")
            .with_agent("esc", Value::Null),
    );
    // Keeps the run open for the retry.
    b.add_root(op("y", "worker", sim(1000)));
    let (mut run, handle) = playdeck::kernel::Run::new(
        b.build().unwrap(),
        cfg(),
        Arc::new(OneAgent),
        Arc::new(routes(&["worker"])),
    )
    .unwrap();
    let signals = Collect::default();
    run.add_sink(Box::new(signals.clone()));
    let run = run.spawn();
    sleep(Duration::from_millis(150)).await;
    assert_eq!(signals.types_for("x"), ["queued", "started", "failed"]);
    handle
        .request(Request::Retry {
            op: "x".into(),
            on: None,
        })
        .await
        .unwrap();
    let env = run.await.unwrap();
    assert_eq!(names(&env, &env.completed_operations), ["x", "y"]);
    assert_eq!(env.escalated_operations, Some(vec![]));
    assert_eq!(signals.count("escalated"), 0);
    assert_eq!(env.outcome, Outcome::Succeeded);
}

/// Panics in its future, or at once, by name.
struct Panics;

impl playdeck::kernel::Agent for Panics {
    fn invoke(
        &self,
        inv: playdeck::kernel::Invocation,
    ) -> playdeck::kernel::BoxFuture<playdeck::kernel::AgentOutcome> {
        assert!(&*inv.name != "at-once", "the agent fell over at once");
        Box::pin(async {
            sleep(Duration::from_millis(50)).await;
            panic!("the agent fell over later")
        })
    }
}

struct PanicAgents;

impl playdeck::kernel::AgentResolver for PanicAgents {
    fn resolve(&self, name: &str) -> Option<Arc<dyn playdeck::kernel::Agent>> {
        if name == "panics" {
            Some(Arc::new(Panics))
        } else {
            Some(Arc::new(playdeck::agents::SimAgent::new(1.0)))
        }
    }
}

/// ADR-0033 D4: an unexpected error becomes an error result. An agent that
/// panics fails its own operation (category `agent_panic`); the rest of
/// the run goes on and ends with an envelope.
#[tokio::test(start_paused = true)]
async fn rule_a33_37_a_panicking_agent_fails_its_operation_and_the_run_goes_on() {
    let panics = |name: &str| {
        Operation::new(name, format!("do {name}"))
            .with_role("worker")
            .with_agent("panics", Value::Null)
    };
    let mut b = GraphBuilder::new();
    let later = b.add_root(panics("later"));
    b.add_root(panics("at-once"));
    b.add_after(
        op("after", "worker", sim(100)),
        [(later, Condition::Succeeded)],
    );
    b.add_root(op("other", "worker", sim(300)));
    let (mut run, _handle) = playdeck::kernel::Run::new(
        b.build().unwrap(),
        cfg(),
        Arc::new(PanicAgents),
        Arc::new(routes(&["worker"])),
    )
    .unwrap();
    let signals = Collect::default();
    run.add_sink(Box::new(signals.clone()));
    let env = run.run().await;
    assert_eq!(env.outcome, Outcome::Failed);
    assert_eq!(names(&env, &env.failed_operations), ["at-once", "later"]);
    assert_eq!(
        names(&env, &env.completed_operations),
        ["at-once", "later", "other"]
    );
    assert_eq!(names(&env, &env.skipped_operations), ["after"]);
    let failures: Vec<(String, String, String)> = signals
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::Failed {
                node,
                error,
                category,
            } => Some((
                node.name.to_string(),
                category.to_string(),
                error.to_string(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    for (name, category, error) in failures {
        assert_eq!(category, "agent_panic", "{name}");
        assert!(
            error.starts_with("the agent panicked: the agent fell over"),
            "{error}"
        );
    }
    assert_eq!(signals.count("run_finished"), 1);
}

/// A node builder that panics: at once for "sync", in its future for
/// "async"; anything else goes to the static map.
struct PanicBuilder(playdeck::kernel::StaticRoleBuilder);

impl playdeck::kernel::NodeBuilder for PanicBuilder {
    fn build(
        &self,
        request: &playdeck::kernel::SpawnRequest,
        emitter: &playdeck::kernel::Emitter,
    ) -> playdeck::kernel::BoxFuture<playdeck::kernel::RouteResult> {
        if request.assignee.as_deref() == Some("async") {
            return Box::pin(async { panic!("the router fell over later") });
        }
        self.0.build(request, emitter)
    }

    fn route_now(
        &self,
        request: &playdeck::kernel::SpawnRequest,
        emitter: &playdeck::kernel::Emitter,
    ) -> Option<playdeck::kernel::RouteResult> {
        match request.assignee.as_deref() {
            Some("sync") => panic!("the router fell over at once"),
            Some("async") => None,
            _ => self.0.route_now(request, emitter),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn rule_a33_37_a_panicking_node_builder_drops_the_request_with_a_reason() {
    let mut b = GraphBuilder::new();
    b.add_root(op(
        "a",
        "worker",
        result(
            100,
            json!({"spawn_request": [
                {"instruction": "x", "assignee": "sync"},
                {"instruction": "y", "assignee": "async"},
                {"instruction": "z", "assignee": "worker"},
            ]}),
        ),
    ));
    let h = harness_with(
        b.build().unwrap(),
        cfg(),
        Arc::new(PanicBuilder(routes(&["worker"]))),
    );
    let (env, _, _) = h.run().await;
    let dropped = env.dropped_spawns.clone().unwrap();
    let rows: Vec<(&str, DropReason, &str)> = dropped
        .iter()
        .map(|d| (d.assignee.as_deref().unwrap(), d.reason, &*d.detail))
        .collect();
    assert_eq!(
        rows,
        [
            (
                "sync",
                DropReason::RoleProvisionFailed,
                "routing the request panicked: the router fell over at once"
            ),
            (
                "async",
                DropReason::RoleProvisionFailed,
                "routing the request panicked: the router fell over later"
            ),
        ]
    );
    assert_eq!(env.spawned_operations, Some(1), "the worker's request");
    assert_eq!(names(&env, &env.completed_operations), ["a", "spawn-1"]);
}

/// Completions that are all ready at once are taken in batches of the
/// loop's step size; none is lost between batches (one was, once: the
/// wake fetched past the end of a full batch was dropped, and the run
/// never ended).
#[tokio::test(start_paused = true)]
async fn a_burst_larger_than_one_step_settles_every_operation() {
    let mut b = GraphBuilder::new();
    for i in 0..3000 {
        b.add_root(op(&format!("n{i}"), "worker", json!(null)).with_agent("noop", json!(null)));
    }
    let mut h = harness(
        b.build().unwrap(),
        RunConfig {
            max_concurrent: 10_000,
            ..cfg()
        },
    );
    let env = tokio::time::timeout(std::time::Duration::from_secs(60), h.spawn())
        .await
        .expect("the run ends")
        .unwrap();
    assert_eq!(env.completed_operations.len(), 3000);
}
