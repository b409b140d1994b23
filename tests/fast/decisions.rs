//! Decisions bound to what was shown (issue 55): every decision names the
//! state it answers, and the run refuses one whose basis changed. The
//! kernel and a view folded from the signals work out the same basis, so
//! a console, `ctl` and a page decide on what they showed.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use playdeck::kernel::{
    Answer, Basis, BasisKind, CommandError, Condition, GraphBuilder, Request, RunConfig, RunHandle,
};
use playdeck::projection::RunProjection;
use serde_json::json;
use tokio::time::sleep;

/// A view of the run folded from every signal so far, as a console has it.
fn view(sig: &Collect) -> RunProjection {
    let mut p = RunProjection::default();
    for s in sig.all() {
        p.apply(&s);
    }
    p
}

/// The basis the view shows for `name`.
fn seen(sig: &Collect, name: &str) -> Option<Basis> {
    let p = view(sig);
    let id = p.by_name(name)?.op.op_id;
    p.basis_of(p.ix(&id)?)
}

/// Every operation's basis as the kernel holds it, against the view's.
async fn agree(h: &RunHandle, sig: &Collect) {
    let snap = h.snapshot().await.expect("live");
    let p = view(sig);
    for n in &snap.nodes {
        let kernel = n.deciding.as_ref().map(|d| d.basis.clone());
        let shown = p.ix(&n.op_id).and_then(|ix| p.basis_of(ix));
        assert_eq!(
            kernel, shown,
            "{}: the kernel and the view disagree",
            n.name
        );
    }
}

fn approve(op: &str, on: Option<Basis>) -> Request {
    Request::Approve { op: op.into(), on }
}

/// A gate after a failing and a succeeding operation (it waits whatever
/// they do): what the operator approves is the gate with the outcomes
/// they saw.
fn gated() -> playdeck::kernel::Graph {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op(
        "a",
        "worker",
        sim_with(100, json!({"outcome": "fail", "error": "boom"})),
    ));
    let ok = b.add_root(op("b", "worker", sim(100)));
    b.add_after(
        op("g", "worker", sim(100)).with_approval(true),
        [(a, Condition::Always), (ok, Condition::Always)],
    );
    b.build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_gate_approved_on_outcomes_that_changed_is_refused_saying_what_is_there_now() {
    let mut h = harness(gated(), RunConfig::default());
    let run = h.spawn();
    sleep(Duration::from_millis(300)).await;
    settle().await;
    agree(&h.handle, &h.signals).await;
    let gate = seen(&h.signals, "g").expect("the gate waits");
    assert_eq!(gate.kind, BasisKind::Gate);
    // A colleague retries the failed dependency: the gate still waits,
    // but on other outcomes than the operator saw.
    let a = seen(&h.signals, "a").expect("a failed");
    assert_eq!(a.kind, BasisKind::Failure);
    h.handle
        .request_by(
            Request::Retry {
                op: "a".into(),
                on: Some(a.clone()),
            },
            Arc::from("ctl (bo)"),
        )
        .await
        .unwrap();
    settle().await;
    agree(&h.handle, &h.signals).await;
    let refused = h.handle.request(approve("g", Some(gate.clone()))).await;
    let Err(e @ CommandError::StaleDecision { .. }) = refused else {
        panic!("{refused:?}");
    };
    let said = e.to_string();
    assert!(
        said.contains("its dependencies' outcomes changed since you saw them"),
        "{said}"
    );
    assert!(
        said.contains("1 of 2 not settled: a"),
        "what is there now: {said}"
    );
    // The same retry twice: the second was made on the failure the first
    // already answered.
    let again = h
        .handle
        .request(Request::Retry {
            op: "a".into(),
            on: Some(a),
        })
        .await;
    assert!(
        matches!(&again, Err(CommandError::StaleDecision { changed, .. }) if changed.contains("waits for no decision now")),
        "{again:?}"
    );
    // a failed again: the outcomes are what the operator saw, and the
    // decision made on them holds.
    sleep(Duration::from_millis(300)).await;
    settle().await;
    agree(&h.handle, &h.signals).await;
    assert_eq!(seen(&h.signals, "g").unwrap(), gate);
    assert_eq!(
        h.handle.request(approve("g", Some(gate))).await,
        Ok(Answer::Done)
    );
    let approved = h
        .signals
        .all()
        .into_iter()
        .find(|s| s.kind.type_name() == "approved")
        .unwrap();
    let v = serde_json::to_value(&*approved).unwrap();
    assert_eq!(
        v["on"], "✗ 1 of 2 failed: a; 1 of 2 succeeded",
        "what it was approved on is recorded"
    );
    h.handle.request(Request::Cancel).await.unwrap();
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_decision_without_a_basis_is_made_on_what_is_there_and_says_so() {
    let mut h = harness(gated(), RunConfig::default());
    let run = h.spawn();
    sleep(Duration::from_millis(300)).await;
    settle().await;
    let gate = seen(&h.signals, "g").unwrap();
    let answer = h.handle.request(approve("g", None)).await.unwrap();
    let Answer::Decided { on, now } = &answer else {
        panic!("{answer:?}");
    };
    assert_eq!(on, &gate, "the basis it was decided on");
    assert!(now.contains("✗ 1 of 2 failed: a"), "{now}");
    let said = approve("g", None).done_message(&answer);
    assert!(
        said.starts_with("approved g, on what was there: its approval gate, ✗ 1 of 2 failed: a"),
        "{said}"
    );
    assert!(said.contains(&format!("--on {gate}")), "{said}");
    h.handle.request(Request::Cancel).await.unwrap();
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_basis_of_another_kind_or_an_older_event_is_refused() {
    let mut h = harness(gated(), RunConfig::default());
    let run = h.spawn();
    sleep(Duration::from_millis(300)).await;
    settle().await;
    let gate = seen(&h.signals, "g").unwrap();
    let older = Basis {
        seq: gate.seq - 1,
        ..gate.clone()
    };
    let e = h
        .handle
        .request(approve("g", Some(older)))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("its gate was asked again since you saw it"),
        "{e}"
    );
    let review = Basis {
        kind: BasisKind::Review,
        ..gate.clone()
    };
    let e = h
        .handle
        .request(Request::Deny {
            op: "g".into(),
            on: Some(review),
            reason: vec![],
        })
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("you decided on its work waiting for review"),
        "{e}"
    );
    assert_eq!(
        playdeck::control::ErrorCode::from(&e).as_str(),
        "stale_decision"
    );
    // Nothing was decided: the gate still waits on the same basis.
    assert_eq!(seen(&h.signals, "g"), Some(gate));
    h.handle.request(Request::Cancel).await.unwrap();
    run.await.unwrap();
}
