//! Spend caps, on tokio's paused clock with simulated agents whose usage is
//! scripted: warnings at 80% and 95%, a cap that pauses — running attempts
//! finish, nothing new starts — and a raise that lets the held work go on
//! in its order; a role's own cap holds only that role; spawned work counts
//! against the run. The caps through the binary (a kill and resume, `ctl`,
//! the runs list, prices) are the cli tier's `budget`.

use crate::common;

use std::time::Duration;

use common::*;
use playdeck::kernel::spend::{Budget, RoleCaps, default_warn_at};
use playdeck::kernel::{GraphBuilder, Outcome, Request, RunConfig, SignalKind};
use serde_json::{Value, json};

/// Runs `ms`, then reports it cost `usd` and used `tokens`.
fn costs(ms: u64, usd: f64, tokens: u64) -> Value {
    sim_with(
        ms,
        json!({"usage": {"cost_usd": usd, "input_tokens": tokens, "output_tokens": 0}}),
    )
}

fn usd_cap(usd: f64) -> RunConfig {
    RunConfig {
        max_concurrent: 1,
        budget: Some(Budget {
            usd: Some(usd),
            warn_at: default_warn_at(),
            ..Budget::default()
        }),
        ..RunConfig::default()
    }
}

/// The spend signals of a run, in words: `warn 80% 8.00/10.00`,
/// `cap 10.00/10.00`, `raised 15.00`.
fn spend(sig: &Collect) -> Vec<String> {
    sig.all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::SpendWarning {
                role,
                spent,
                cap,
                level,
                ..
            } => Some(format!(
                "warn{} {:.0}% {spent:.2}/{cap:.2}",
                role.as_deref().map(|r| format!(" {r}")).unwrap_or_default(),
                level * 100.0
            )),
            SignalKind::SpendCapReached {
                role, spent, cap, ..
            } => Some(format!(
                "cap{} {spent:.2}/{cap:.2}",
                role.as_deref().map(|r| format!(" {r}")).unwrap_or_default()
            )),
            SignalKind::SpendCapRaised { role, cap, .. } => Some(format!(
                "raised{} {cap:.2}",
                role.as_deref().map(|r| format!(" {r}")).unwrap_or_default()
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_cap_pauses_the_run_and_a_raise_lets_it_go_on() {
    let mut b = GraphBuilder::new();
    let mut prev = b.add_root(op("a", "worker", costs(100, 4.0, 10)));
    for name in ["b", "c", "d"] {
        prev = b.add_after(
            op(name, "worker", costs(100, 4.0, 10)),
            [(prev, playdeck::kernel::Condition::Succeeded)],
        );
    }
    let mut h = harness(b.build().unwrap(), usd_cap(10.0));
    let handle = h.handle.clone();
    let agents = h.agents.clone();
    let task = h.spawn();
    tokio::time::sleep(Duration::from_secs(60)).await;
    // a (4), b (8: past 80%), c (12: past the cap, it ran: it had started).
    assert_eq!(agents.rec.invocations("c"), 1);
    assert_eq!(
        agents.rec.invocations("d"),
        0,
        "nothing new starts at the cap"
    );
    assert_eq!(
        spend(&h.signals),
        ["warn 80% 8.00/10.00", "cap 12.00/10.00"]
    );
    assert!(
        !task.is_finished(),
        "a cap pauses the run, it does not end it"
    );
    handle
        .request(Request::Budget {
            raise: vec!["usd=+5".parse().unwrap()],
        })
        .await
        .unwrap();
    let env = task.await.unwrap();
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(agents.rec.invocations("d"), 1);
    assert_eq!(
        spend(&h.signals),
        [
            "warn 80% 8.00/10.00",
            "cap 12.00/10.00",
            "raised 15.00",
            "cap 16.00/15.00"
        ],
        "the raised cap is reached again by d, which had started"
    );
}

#[tokio::test(start_paused = true)]
async fn warnings_come_once_each_and_a_token_cap_counts_input_and_output() {
    let mut b = GraphBuilder::new();
    for i in 0..10 {
        b.add_root(op(&format!("w{i}"), "worker", costs(100, 0.0, 1000)));
    }
    let cfg = RunConfig {
        max_concurrent: 1,
        budget: Some(Budget {
            tokens: Some(9_600.0),
            warn_at: default_warn_at(),
            ..Budget::default()
        }),
        ..RunConfig::default()
    };
    let mut h = harness(b.build().unwrap(), cfg);
    let agents = h.agents.clone();
    let task = h.spawn();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let ran: usize = (0..10)
        .map(|i| agents.rec.invocations(&format!("w{i}")))
        .sum();
    assert_eq!(ran, 10, "9 600 is reached by the tenth, which had started");
    // 95% and the cap are crossed by the same report: the cap says it.
    assert_eq!(
        spend(&h.signals),
        ["warn 80% 8000.00/9600.00", "cap 10000.00/9600.00"]
    );
    // Nothing was left to start: the run ends although the cap is reached.
    let env = task.await.unwrap();
    assert_eq!(env.outcome, Outcome::Succeeded);
}

#[tokio::test(start_paused = true)]
async fn a_roles_cap_holds_only_that_role() {
    let mut b = GraphBuilder::new();
    b.add_root(op("t1", "tester", costs(100, 3.0, 0)));
    b.add_root(op("t2", "tester", costs(100, 3.0, 0)));
    b.add_root(op("w1", "worker", costs(100, 3.0, 0)));
    b.add_root(op("w2", "worker", costs(100, 3.0, 0)));
    let mut roles = std::collections::BTreeMap::new();
    roles.insert(
        "tester".to_string(),
        RoleCaps {
            usd: Some(2.0),
            tokens: None,
        },
    );
    let cfg = RunConfig {
        max_concurrent: 1,
        budget: Some(Budget {
            usd: Some(100.0),
            warn_at: default_warn_at(),
            roles,
            ..Budget::default()
        }),
        ..RunConfig::default()
    };
    let mut h = harness(b.build().unwrap(), cfg);
    let handle = h.handle.clone();
    let agents = h.agents.clone();
    let task = h.spawn();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        (
            agents.rec.invocations("t1"),
            agents.rec.invocations("t2"),
            agents.rec.invocations("w1"),
            agents.rec.invocations("w2")
        ),
        (1, 0, 1, 1),
        "the worker's work goes on past the tester's cap"
    );
    assert_eq!(spend(&h.signals), ["cap tester 3.00/2.00"]);
    handle
        .request(Request::Budget {
            raise: vec!["tester.usd=10".parse().unwrap()],
        })
        .await
        .unwrap();
    let env = task.await.unwrap();
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(agents.rec.invocations("t2"), 1);
    assert_eq!(spend(&h.signals)[1], "raised tester 10.00");
}

#[tokio::test(start_paused = true)]
async fn spawned_work_counts_against_the_run_that_spawned_it() {
    let mut b = GraphBuilder::new();
    let spawn = json!({"spawn_request": {"instruction": "more work", "assignee": "worker"}});
    b.add_root(op(
        "parent",
        "worker",
        sim_with(
            100,
            json!({"usage": {"cost_usd": 4.0}, "emits": [{"at_ms": 10, "value": spawn}]}),
        ),
    ));
    let mut h = harness(b.build().unwrap(), usd_cap(3.0));
    let agents = h.agents.clone();
    let task = h.spawn();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(h.signals.count("spawned"), 1);
    assert_eq!(spend(&h.signals), ["cap 4.00/3.00"]);
    let spawned: usize = h
        .signals
        .all()
        .iter()
        .filter(|s| s.kind.type_name() == "started")
        .count();
    assert_eq!(spawned, 1, "the spawned operation waits for a raise");
    assert!(!task.is_finished());
    drop(agents);
    task.abort();
}

/// Reports totals of 3.00, then 0 (a CLI that starts counting again),
/// then 3.50 USD, and succeeds.
struct Dipping;
impl playdeck::kernel::Agent for Dipping {
    fn invoke(
        &self,
        inv: playdeck::kernel::Invocation,
    ) -> playdeck::kernel::BoxFuture<playdeck::kernel::AgentOutcome> {
        Box::pin(async move {
            for usd in [3.0, 0.0, 3.5] {
                inv.events.emit(playdeck::kernel::AgentEvent::Usage(
                    playdeck::kernel::Usage {
                        cost_usd: Some(usd),
                        ..Default::default()
                    },
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(Value::Null)
        })
    }
}

struct DippingOnly;
impl playdeck::kernel::AgentResolver for DippingOnly {
    fn resolve(&self, _: &str) -> Option<std::sync::Arc<dyn playdeck::kernel::Agent>> {
        Some(std::sync::Arc::new(Dipping))
    }
}

/// Issue 38: an attempt's totals never go down. The dip to 0 used to
/// reset the meter's base, so 3.0 → 0 → 3.5 was metered 8.50 (past a
/// 5.00 cap) while the report summed 3.50; the log carried the 0.
#[tokio::test(start_paused = true)]
async fn a_dip_in_an_attempts_totals_is_not_spent_twice() {
    let mut b = GraphBuilder::new();
    b.add_root(op("a", "worker", sim(10)).with_agent("dipping", json!({})));
    let (mut run, _handle) = playdeck::kernel::Run::new(
        b.build().unwrap(),
        usd_cap(5.0),
        std::sync::Arc::new(DippingOnly),
        std::sync::Arc::new(routes(&["worker"])),
    )
    .unwrap();
    let signals = Collect::default();
    run.add_sink(Box::new(signals.clone()));
    let env = run.run().await;
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert!(
        spend(&signals).iter().all(|s| !s.starts_with("cap")),
        "{:?}",
        spend(&signals)
    );
    let logged: Vec<f64> = signals
        .all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::AgentUsage { usage, .. } => usage.cost_usd,
            _ => None,
        })
        .collect();
    assert_eq!(
        logged,
        [3.0, 3.0, 3.5],
        "the log never says less than before"
    );
}
