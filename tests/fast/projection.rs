//! One projection of the signal stream, tested as a property over random
//! runs of the real kernel: folding all of a run's signals equals folding a
//! prefix, saving it as a checkpoint does, loading it and folding the rest;
//! the view model folded live, batch by batch, equals the replay of the
//! log; and the kernel's own invariants hold on the way.

use crate::common;

use std::sync::Arc;

use common::*;
use playdeck::console::replay::Timeline;
use playdeck::kernel::{
    ApprovalPolicy, Condition, GraphBuilder, OpId, RunConfig, Signal, SignalKind,
};
use playdeck::operator::model::{PlayFacts, ViewModel};
use playdeck::projection::RunProjection;
use proptest::prelude::*;
use serde_json::json;

/// One operation of a generated play.
#[derive(Debug, Clone)]
struct Op {
    /// Bit i: depends on operation i (earlier ones only: acyclic).
    deps: u32,
    condition: u8,
    fails: bool,
    gate: bool,
    spawns: u8,
    ms: u64,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    (
        any::<u32>(),
        0u8..3,
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.15),
        0u8..3,
        10u64..400,
    )
        .prop_map(|(deps, condition, fails, gate, spawns, ms)| Op {
            deps,
            condition,
            fails,
            gate,
            spawns,
            ms,
        })
}

/// Runs the generated play to its end under the paused clock.
fn run(ops: &[Op], deny: bool, max_concurrent: usize) -> Vec<Arc<Signal>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut b = GraphBuilder::new();
        let mut ids: Vec<OpId> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            let emits: Vec<_> = (0..o.spawns)
                .map(|k| {
                    json!({"at_ms": o.ms / 2, "value": {"spawn_request": {
                        "instruction": format!("child {k} of {i}"), "assignee": "worker"}}})
                })
                .collect();
            let params = sim_with(
                o.ms,
                json!({"outcome": if o.fails { "fail" } else { "succeed" }, "emits": emits}),
            );
            let op = playdeck::kernel::Operation::new(format!("op{i}"), format!("do {i}"))
                .with_role("worker")
                .with_agent("sim", params)
                .with_approval(o.gate);
            let cond = match o.condition {
                0 => Condition::Succeeded,
                1 => Condition::Failed,
                _ => Condition::Always,
            };
            let deps: Vec<(OpId, Condition)> = ids
                .iter()
                .enumerate()
                .filter(|(j, _)| o.deps & (1 << j) != 0)
                .map(|(_, id)| (*id, cond.clone()))
                .collect();
            ids.push(if deps.is_empty() {
                b.add_root(op)
            } else {
                b.add_after(op, deps)
            });
        }
        let cfg = RunConfig {
            max_concurrent,
            max_spawn: 4,
            approvals: if deny {
                ApprovalPolicy::DenyAll {
                    reason: Arc::from("test"),
                }
            } else {
                ApprovalPolicy::ApproveAll
            },
            ..RunConfig::default()
        };
        let (env, signals, _) = harness(b.build().unwrap(), cfg).run().await;
        assert!(env.check_disjoint().is_ok());
        signals.all()
    })
}

fn fold(signals: &[Arc<Signal>]) -> RunProjection {
    // (Counts are checked event by event in the property itself.)
    let mut p = RunProjection::default();
    for s in signals {
        p.apply(s);
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn projections_fold_the_same_however_the_stream_is_cut(
        ops in prop::collection::vec(op_strategy(), 1..10),
        deny in any::<bool>(),
        max_concurrent in 1usize..4,
        cut in any::<prop::sample::Index>(),
        batches in prop::collection::vec(1usize..40, 1..20),
    ) {
        let signals = run(&ops, deny, max_concurrent);

        // Kernel invariants: numbered without gaps, one start per attempt,
        // every operation settled once at the end, counts agree.
        for (i, s) in signals.iter().enumerate() {
            prop_assert_eq!(s.seq, i as u64 + 1);
        }
        let mut whole = RunProjection::default();
        for s in &signals {
            whole.apply(s);
            let mut recount = playdeck::kernel::signal::LaneCounts::default();
            for n in whole.nodes.iter().filter(|n| n.placed) {
                recount.add(n.lane, n.skipped());
            }
            prop_assert_eq!(&whole.counts, &recount, "after event {}", s.seq);
        }
        let Some(SignalKind::RunFinished { counts, .. }) = signals.last().map(|s| &s.kind) else {
            panic!("the run finished");
        };
        prop_assert_eq!(counts, &whole.counts);
        prop_assert_eq!(counts.total(), whole.nodes.len());
        prop_assert!(whole.nodes.iter().all(|n| n.status.is_terminal()));
        prop_assert!(whole.spawn_accepted <= 4, "max_spawn holds");
        for n in &whole.nodes {
            let nums: Vec<u32> = n.attempts.iter().map(|a| a.attempt).collect();
            let expected: Vec<u32> = (1..=nums.len() as u32).collect();
            prop_assert_eq!(nums, expected, "attempts of {}", n.name());
        }

        // A prefix saved as a checkpoint is, loaded, then the rest folded
        // over it (with an overlap, as resume does): the same state.
        let at = cut.index(signals.len() + 1);
        let head = fold(&signals[..at]);
        let mut back: RunProjection =
            serde_json::from_str(&serde_json::to_string(&head).unwrap()).unwrap();
        back.reindex();
        for s in &signals[at.saturating_sub(3)..] {
            back.apply(s);
        }
        prop_assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&whole).unwrap()
        );

        // Live: folded in batches of any size, settled between them; the
        // replay of the same log: the same view.
        let facts = PlayFacts::default();
        let mut live = ViewModel::new(&facts);
        let mut i = 0;
        for size in batches.iter().cycle() {
            if i >= signals.len() {
                break;
            }
            let end = (i + size).min(signals.len());
            for s in &signals[i..end] {
                live.fold(s);
            }
            live.settle();
            i = end;
        }
        let log: Vec<Signal> = signals.iter().map(|s| Signal::clone(s)).collect();
        let tl = Timeline::with_interval(log, facts, 5);
        prop_assert_eq!(tl.state_at(tl.len()), live);
    }
}

/// Issue 42: a warning about an operation names it, so the warnings
/// window says which one without a trip to the log.
#[test]
fn a_warning_about_an_operation_names_it() {
    let signals = run(
        &[Op {
            ms: 10,
            fails: false,
            gate: false,
            deps: 0,
            condition: 0,
            spawns: 0,
        }],
        false,
        1,
    );
    let mut p = fold(&signals);
    let id = p.nodes[0].op.op_id;
    let seq = signals.len() as u64 + 1;
    let warn = |message: &str, op_id, seq| Signal {
        v: 1,
        seq,
        elapsed: 1.0,
        kind: SignalKind::Warning {
            message: Arc::from(message),
            op_id,
        },
    };
    p.apply(&warn("the provider is slow", Some(id), seq));
    p.apply(&warn("op0 retried its tool call", Some(id), seq + 1));
    p.apply(&warn("the run has no palette", None, seq + 2));
    let said: Vec<&str> = p.warnings.iter().map(|(_, m)| &**m).collect();
    assert_eq!(
        said,
        [
            "op0: the provider is slow",
            "op0 retried its tool call",
            "the run has no palette"
        ]
    );
}
