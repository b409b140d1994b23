use std::sync::Arc;

use super::*;
use crate::kernel::{NodeHeader, SkipReason};

fn header(n: u128, deps: &[u128]) -> NodeHeader {
    NodeHeader {
        op_id: uuid::Uuid::from_u128(n),
        name: Arc::from(format!("op{n}")),
        parent_id: None,
        depends_on: deps.iter().map(|d| uuid::Uuid::from_u128(*d)).collect(),
        pos: crate::kernel::log_line::NO_POS,
    }
}

/// A small run: a fails, b is skipped, a is retried and succeeds, b runs.
fn run() -> Vec<Signal> {
    let q = |n, deps: &[u128]| SignalKind::Queued {
        node: header(n, deps),
        role: Some("worker".into()),
        instruction: "x".into(),
        approval: false,
    };
    let started = |n, attempt| SignalKind::Started {
        node: header(n, &[]),
        attempt,
        role: None,
        instance: None,
    };
    let kinds = vec![
        SignalKind::RunStarted {
            run_id: "r".into(),
            play: "p".into(),
            operations: 2,
            max_concurrent: 2,
            reactive: true,
            max_spawn: 5,
            paused: false,
            budget: None,
        },
        q(1, &[]),
        q(2, &[1]),
        started(1, 1),
        SignalKind::Failed {
            node: header(1, &[]),
            error: "boom".into(),
            category: "simulated".into(),
        },
        SignalKind::Skipped {
            node: header(2, &[1]),
            reason: SkipReason::NoValidPath,
            because: Some("op-1 failed".into()),
        },
        SignalKind::Retried {
            node: header(1, &[]),
            attempt: 2,
            because: None,
            by: None,
            note: None,
            on: None,
        },
        SignalKind::Retried {
            node: header(2, &[1]),
            attempt: 0,
            because: Some("op1".into()),
            by: None,
            note: None,
            on: None,
        },
        started(1, 2),
        SignalKind::Completed {
            node: header(1, &[]),
            result: Arc::new(serde_json::json!({"context": {"k": 1}})),
        },
        started(2, 1),
        SignalKind::Completed {
            node: header(2, &[1]),
            result: Arc::new(serde_json::json!(null)),
        },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Signal {
            v: 1,
            seq: i as u64 + 1,
            elapsed: i as f64,
            kind,
        })
        .collect()
}

fn fold(signals: &[Signal]) -> RunProjection {
    let mut p = RunProjection::default();
    for s in signals {
        p.apply(s);
    }
    p
}

/// The counts a projection's nodes add up to.
fn recount(p: &RunProjection) -> LaneCounts {
    let mut c = LaneCounts::default();
    for n in p.nodes.iter().filter(|n| n.placed) {
        c.add(n.lane, n.skipped());
    }
    c
}

#[test]
fn counts_follow_every_move_and_a_retry_takes_a_skip_back() {
    let signals = run();
    let mut p = RunProjection::default();
    for s in &signals {
        p.apply(s);
        assert_eq!(p.counts, recount(&p), "after {}", s.kind.type_name());
        if s.seq == 6 {
            assert_eq!((p.counts.failed, p.counts.skipped), (1, 1));
        }
        if s.seq == 8 {
            assert_eq!(
                (p.counts.failed, p.counts.skipped, p.counts.queued),
                (0, 0, 2)
            );
        }
    }
    assert_eq!(p.counts.succeeded, 2);
    let a = &p.nodes[0];
    assert_eq!(a.attempts.len(), 2);
    assert_eq!(a.attempts[0].outcome, "failed");
    assert_eq!(a.earlier().count(), 1);
    assert_eq!(p.context["k"], 1);
}

#[test]
fn a_prefix_saved_and_loaded_then_the_rest_folds_to_the_whole() {
    let signals = run();
    let whole = fold(&signals);
    for cut in 0..=signals.len() {
        let head = fold(&signals[..cut]);
        let text = serde_json::to_string(&head).unwrap();
        let mut back: RunProjection = serde_json::from_str(&text).unwrap();
        back.reindex();
        // Overlap is harmless: what is already in is passed over.
        for s in &signals[cut.saturating_sub(2)..] {
            back.apply(s);
        }
        assert_eq!(back.counts, whole.counts, "cut at {cut}");
        assert_eq!(back.seq, whole.seq);
        assert_eq!(
            serde_json::to_value(&back.nodes).unwrap(),
            serde_json::to_value(&whole.nodes).unwrap(),
            "cut at {cut}"
        );
    }
}

/// Issue 38: the held cap's words follow the spend (running work reports
/// after the cap was reached: `budget 4.17/3.00`, not the 3.00 at the
/// moment of the cap), and the caps reached and raised are kept in order.
#[test]
fn a_held_caps_words_follow_the_spend() {
    use crate::kernel::spend::Measure;
    let mut signals = run();
    let n = signals.len() as u64;
    let usage = |usd: f64| SignalKind::AgentUsage {
        op_id: uuid::Uuid::from_u128(1),
        name: "op1".into(),
        attempt: 2,
        usage: crate::kernel::Usage {
            cost_usd: Some(usd),
            ..Default::default()
        },
    };
    let kinds = [
        usage(3.0),
        SignalKind::SpendCapReached {
            role: None,
            measure: Measure::Usd,
            spent: 3.0,
            cap: 3.0,
        },
        usage(4.17),
        SignalKind::SpendCapRaised {
            role: None,
            measure: Measure::Usd,
            cap: 6.0,
            by: "ctl (ana, pid 7)".into(),
        },
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        signals.push(Signal {
            v: 1,
            seq: n + i as u64 + 1,
            elapsed: 20.0 + i as f64,
            kind,
        });
    }
    let p = fold(&signals[..signals.len() - 1]);
    assert_eq!(p.spend.held.as_deref(), Some("budget 4.17/3.00 USD"));
    let p = fold(&signals);
    assert_eq!(p.spend.held, None);
    let caps: Vec<(&str, &str)> = p
        .spend
        .caps
        .iter()
        .map(|c| (c.event.as_str(), c.words.as_str()))
        .collect();
    assert_eq!(
        caps,
        [
            ("reached", "budget 3.00/3.00 USD"),
            ("raised", "usd cap → 6.00 USD")
        ]
    );
    assert_eq!(p.spend.caps[1].by.as_deref(), Some("ctl (ana, pid 7)"));
}

/// Issue 45: a projection holds one attempt record per operation; kept
/// within a 128-byte allocation (and a node within its size), a million
/// operations cost 64 MB less.
#[test]
fn an_attempt_and_a_node_stay_small() {
    assert!(std::mem::size_of::<crate::projection::Attempt>() <= 128);
    assert!(std::mem::size_of::<crate::projection::Node>() <= 264);
}
