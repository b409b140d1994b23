//! The retry policy in the kernel, on tokio's paused clock: a failure whose
//! cause the policy takes back waits (its backoff, or the provider's reset
//! time to the letter) and starts again; other causes fail at once; the
//! attempts run out with the reason said; a pause, a hold and a cancel
//! apply to an operation waiting for its retry as to any queued one. A
//! retry across a killed process is the cli tier's `retry`.

use crate::common;

use std::time::Duration;

use common::*;
use playdeck::kernel::{GraphBuilder, Outcome, Request, RetryPolicy, RunConfig, SignalKind};
use serde_json::{Value, json};
use tokio::time::Instant;

/// Fails its first `n` attempts with `cause` after 100 ms, then succeeds.
fn flaky(n: u32, cause: &str, retry_after_ms: Option<u64>) -> Value {
    let mut extra = json!({"outcome": "fail", "fail_attempts": n, "cause": cause, "error": format!("{cause} from the provider")});
    if let Some(ms) = retry_after_ms {
        extra["retry_after_ms"] = json!(ms);
    }
    sim_with(100, extra)
}

/// The scheduled retries of a run: (failed attempt, category, wait ms, next, of).
fn scheduled(sig: &Collect) -> Vec<(u32, String, u64, u32, u32)> {
    sig.all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::RetryScheduled {
                attempt,
                category,
                wait_ms,
                next,
                of,
                ..
            } => Some((*attempt, category.to_string(), *wait_ms, *next, *of)),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_provider_is_retried_with_growing_jittered_waits_then_succeeds() {
    let mut b = GraphBuilder::new();
    b.add_root(op("build", "worker", flaky(2, "overloaded", None)));
    let t0 = Instant::now();
    let (env, sig, agents) = harness(b.build().unwrap(), RunConfig::default())
        .run()
        .await;
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(agents.rec.invocations("build"), 3);
    let s = scheduled(&sig);
    assert_eq!(s.len(), 2, "{s:?}");
    // Backoff 2 s doubling, equal jitter: the first in [1, 2] s, the
    // second in [2, 4] s.
    assert_eq!(
        (s[0].0, s[0].1.as_str(), s[0].3, s[0].4),
        (1, "overloaded", 2, 3)
    );
    assert!((1000..=2000).contains(&s[0].2), "{s:?}");
    assert_eq!((s[1].0, s[1].3), (2, 3));
    assert!((2000..=4000).contains(&s[1].2), "{s:?}");
    // The run took the three attempts plus exactly the waits it announced.
    let took = t0.elapsed().as_millis() as u64;
    let expected = 300 + s[0].2 + s[1].2;
    assert!(
        took.abs_diff(expected) <= 5,
        "took {took} ms, expected {expected}"
    );
    assert_eq!(
        sig.types_for("build"),
        [
            "queued",
            "started",
            "retry_scheduled",
            "started",
            "retry_scheduled",
            "started",
            "completed"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_waits_the_reset_time_the_provider_gave() {
    let mut b = GraphBuilder::new();
    b.add_root(op("call", "worker", flaky(1, "rate_limit", Some(30_000))));
    let t0 = Instant::now();
    let (env, sig, _) = harness(b.build().unwrap(), RunConfig::default())
        .run()
        .await;
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(scheduled(&sig), [(1, "rate_limit".into(), 30_000, 2, 3)]);
    assert_eq!(t0.elapsed(), Duration::from_millis(30_200));
}

#[tokio::test(start_paused = true)]
async fn authentication_and_turn_limits_fail_at_once() {
    for cause in ["auth", "turn_limit", "budget_limit", "agent_crash"] {
        let mut b = GraphBuilder::new();
        b.add_root(op("call", "worker", flaky(1, cause, None)));
        let (env, sig, agents) = harness(b.build().unwrap(), RunConfig::default())
            .run()
            .await;
        assert_eq!(env.outcome, Outcome::Failed, "{cause}");
        assert_eq!(agents.rec.invocations("call"), 1, "{cause}");
        assert!(scheduled(&sig).is_empty(), "{cause}");
        let failed = sig
            .all()
            .iter()
            .find_map(|s| match &s.kind {
                SignalKind::Failed {
                    category, error, ..
                } => Some((category.to_string(), error.to_string())),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            failed,
            (cause.to_string(), format!("{cause} from the provider"))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn when_the_attempts_run_out_the_failure_says_so() {
    let mut b = GraphBuilder::new();
    b.add_root(op("call", "worker", flaky(5, "server_error", None)));
    let (env, sig, agents) = harness(b.build().unwrap(), RunConfig::default())
        .run()
        .await;
    assert_eq!(env.outcome, Outcome::Failed);
    assert_eq!(agents.rec.invocations("call"), 3);
    assert_eq!(scheduled(&sig).len(), 2);
    let error = sig
        .all()
        .iter()
        .find_map(|s| match &s.kind {
            SignalKind::Failed { error, .. } => Some(error.to_string()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        error,
        "server_error from the provider (not retried: provider error after 3 attempts)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reset_further_than_max_wait_fails_naming_both() {
    let mut b = GraphBuilder::new();
    b.add_root(op(
        "call",
        "worker",
        flaky(1, "rate_limit", Some(2 * 3600 * 1000)),
    ));
    let (env, sig, _) = harness(b.build().unwrap(), RunConfig::default())
        .run()
        .await;
    assert_eq!(env.outcome, Outcome::Failed);
    let error = sig
        .all()
        .iter()
        .find_map(|s| match &s.kind {
            SignalKind::Failed { error, .. } => Some(error.to_string()),
            _ => None,
        })
        .unwrap();
    assert!(
        error.ends_with(
            "(not retried: rate limit: the provider asks to wait 2h, longer than max_wait 15m)"
        ),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_policy_of_one_attempt_never_retries_and_an_agent_may_have_its_own() {
    let mut b = GraphBuilder::new();
    b.add_root(op("call", "worker", flaky(1, "overloaded", None)));
    let mut cfg = RunConfig::default();
    cfg.retry.by_agent.insert(
        "rec".into(),
        RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        },
    );
    let (env, sig, _) = harness(b.build().unwrap(), cfg).run().await;
    assert_eq!(env.outcome, Outcome::Failed);
    assert!(scheduled(&sig).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cancel_while_waiting_ends_the_run_without_another_attempt() {
    let mut b = GraphBuilder::new();
    b.add_root(op("call", "worker", flaky(1, "rate_limit", Some(60_000))));
    let mut h = harness(b.build().unwrap(), RunConfig::default());
    let handle = h.handle.clone();
    let agents = h.agents.clone();
    let task = h.spawn();
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.request(Request::Cancel).await.unwrap();
    let env = task.await.unwrap();
    let sig = h.signals;
    assert_eq!(env.outcome, Outcome::Cancelled);
    assert_eq!(agents.rec.invocations("call"), 1);
    assert_eq!(sig.types_for("call").last(), Some(&"skipped"));
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_comes_due_in_a_pause_waits_for_the_resume() {
    let mut b = GraphBuilder::new();
    b.add_root(op("call", "worker", flaky(1, "rate_limit", Some(10_000))));
    let mut h = harness(b.build().unwrap(), RunConfig::default());
    let handle = h.handle.clone();
    let agents = h.agents.clone();
    let task = h.spawn();
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.request(Request::Pause).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(agents.rec.invocations("call"), 1, "no attempt in a pause");
    handle.request(Request::Resume).await.unwrap();
    let env = task.await.unwrap();
    let sig = h.signals;
    assert_eq!(env.outcome, Outcome::Succeeded);
    assert_eq!(agents.rec.invocations("call"), 2);
    let types = sig.types_for("call");
    assert_eq!(
        &types[2..],
        [
            "retry_scheduled",
            "paused",
            "unpaused",
            "started",
            "completed"
        ]
    );
}

/// The agent of the operations in these tests (the recording sim).
const AGENT: &str = "rec";

fn provider_signals(sig: &Collect) -> Vec<String> {
    sig.all()
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::ProviderHeld {
                agent,
                category,
                until,
                ..
            } => Some(format!("held {agent} {category} {}", until.is_some())),
            SignalKind::ProviderReleased { agent } => Some(format!("released {agent}")),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_holds_the_providers_other_work_until_its_reset() {
    let mut b = GraphBuilder::new();
    b.add_root(op("first", "worker", flaky(1, "rate_limit", Some(30_000))));
    b.add_root(op("second", "worker", sim(100)));
    let cfg = RunConfig {
        max_concurrent: 1,
        ..RunConfig::default()
    };
    let t0 = Instant::now();
    let (env, sig, agents) = harness(b.build().unwrap(), cfg).run().await;
    assert_eq!(env.outcome, Outcome::Succeeded);
    let seen = agents.rec.record.lock().unwrap().seen.clone();
    let second = seen.iter().find(|s| s.name == "second").unwrap();
    assert!(
        second.at - t0 >= Duration::from_secs(30),
        "the second operation waited for the reset, not failing against it: {:?}",
        second.at - t0
    );
    assert_eq!(
        provider_signals(&sig),
        [
            format!("held {AGENT} rate_limit true"),
            format!("released {AGENT}")
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_key_holds_the_providers_work_until_the_operator_resumes() {
    let mut b = GraphBuilder::new();
    b.add_root(op("first", "worker", flaky(1, "auth", None)));
    b.add_root(op("second", "worker", sim(100)));
    let cfg = RunConfig {
        max_concurrent: 1,
        ..RunConfig::default()
    };
    let mut h = harness(b.build().unwrap(), cfg);
    let handle = h.handle.clone();
    let agents = h.agents.clone();
    let task = h.spawn();
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(
        agents.rec.invocations("second"),
        0,
        "nothing more goes to a refused key"
    );
    assert!(!task.is_finished(), "the run waits for the operator");
    handle.request(Request::Resume).await.unwrap();
    let env = task.await.unwrap();
    assert_eq!(
        env.outcome,
        Outcome::Failed,
        "the refused attempt stays failed"
    );
    assert_eq!(agents.rec.invocations("second"), 1);
    assert_eq!(
        provider_signals(&h.signals),
        [
            format!("held {AGENT} auth true"),
            format!("released {AGENT}")
        ]
    );
}

/// Issue 39: a hold never outlasts max_wait. Unattended (nobody resumes),
/// a refused key's hold ends at max_wait and the run ends; a provider
/// asking for ten days fails its operation and holds the agent's other
/// work no longer than max_wait (it held it the ten days).
#[tokio::test(start_paused = true)]
async fn a_hold_never_outlasts_max_wait_and_an_unattended_run_ends() {
    for (cause, wait) in [("auth", None), ("rate_limit", Some(10 * 24 * 3600 * 1000))] {
        let mut b = GraphBuilder::new();
        b.add_root(op("first", "worker", flaky(1, cause, wait)));
        b.add_root(op("second", "worker", sim(100)));
        let cfg = RunConfig {
            max_concurrent: 1,
            ..RunConfig::default()
        };
        let t0 = Instant::now();
        // Bounded: before, the refused key's hold never ended.
        let (env, _sig, agents) = tokio::time::timeout(
            Duration::from_secs(3600),
            harness(b.build().unwrap(), cfg).run(),
        )
        .await
        .unwrap_or_else(|_| panic!("{cause}: the unattended run did not end within an hour"));
        assert_eq!(
            env.outcome,
            Outcome::Failed,
            "{cause}: the first stays failed"
        );
        let seen = agents.rec.record.lock().unwrap().seen.clone();
        let second = seen.iter().find(|s| s.name == "second").unwrap();
        let waited = second.at - t0;
        assert!(
            waited >= Duration::from_secs(15 * 60) && waited < Duration::from_secs(16 * 60),
            "{cause}: the second waited {waited:?}, not max_wait (15m)"
        );
    }
}

/// Issue 56: unattended — stdin closed, nobody to fix a refused key — the
/// work held on it ends at once, as gates with nobody to approve them
/// are denied; it does not wait max_wait for nobody.
#[tokio::test(start_paused = true)]
async fn with_nobody_to_fix_a_refused_key_its_held_work_ends_at_once() {
    use playdeck::kernel::control::ApprovalPolicy;
    let mut b = GraphBuilder::new();
    b.add_root(op("first", "worker", flaky(1, "auth", None)));
    b.add_root(op("second", "worker", sim(100)));
    let cfg = RunConfig {
        max_concurrent: 1,
        approvals: ApprovalPolicy::DenyAll {
            reason: std::sync::Arc::from("no operator: stdin is closed"),
        },
        ..RunConfig::default()
    };
    let t0 = Instant::now();
    let (env, sig, agents) = harness(b.build().unwrap(), cfg).run().await;
    assert_eq!(env.outcome, Outcome::Failed);
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "ended in {:?}, not max_wait",
        t0.elapsed()
    );
    assert_eq!(
        agents.rec.invocations("second"),
        0,
        "never sent to the refused key"
    );
    let failed = sig
        .all()
        .iter()
        .find_map(|s| match &s.kind {
            SignalKind::Failed {
                node,
                error,
                category,
            } if &*node.name == "second" => Some(format!("{category}: {error}")),
            _ => None,
        })
        .expect("the second failed");
    assert!(
        failed.starts_with("auth: not started: agent rec's key was refused")
            && failed.contains("nobody can fix it"),
        "{failed}"
    );
}
