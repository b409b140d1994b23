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

/// Every operation's basis as the kernel holds it, against the view's —
/// a view folded from the signals, and one resynchronised from a
/// snapshot (a console that fell behind).
async fn agree(h: &RunHandle, sig: &Collect) {
    let snap = h.snapshot().await.expect("live");
    let p = view(sig);
    let mut resynced = RunProjection::default();
    resynced.resync(&snap);
    for n in &snap.nodes {
        let kernel = n.deciding.as_ref().map(|d| d.basis.clone());
        let shown = p.ix(&n.op_id).and_then(|ix| p.basis_of(ix));
        assert_eq!(
            kernel, shown,
            "{}: the kernel and the view disagree",
            n.name
        );
        let after = resynced.ix(&n.op_id).and_then(|ix| resynced.basis_of(ix));
        assert_eq!(kernel, after, "{}: a resynchronised view disagrees", n.name);
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

/// The report's Approvals lists every decision with who, when and on what:
/// a gate (with its dependencies' outcomes), a call answered and one that
/// timed out, a review landed (with its commits), a conflict resolved, a
/// retry and a send-back; Landed lists every landing of an operation.
#[tokio::test(start_paused = true)]
async fn the_report_lists_every_decision_and_every_landing() {
    use playdeck::kernel::agent::{LandedWork, QuestionKind};
    use playdeck::kernel::{Signal, SignalKind, signal::NodeHeader};
    let mut h = harness(gated(), RunConfig::default());
    let run = h.spawn();
    sleep(Duration::from_millis(300)).await;
    settle().await;
    h.handle.request(approve("g", None)).await.unwrap();
    settle().await;
    h.handle.request(Request::Cancel).await.unwrap();
    run.await.unwrap();
    let mut sigs: Vec<Signal> = h.signals.all().iter().map(|s| (**s).clone()).collect();
    let b = sigs
        .iter()
        .find_map(|s| s.kind.node().filter(|n| &*n.name == "b").cloned())
        .unwrap();
    let node = || NodeHeader { ..b.clone() };
    let mut seq = sigs.last().unwrap().seq;
    let mut push = |kind: SignalKind| {
        seq += 1;
        sigs.push(Signal {
            v: 1,
            seq,
            elapsed: 1.0,
            kind,
        });
    };
    let answered = |kind, allowed, by: &str, on: &str| SignalKind::PermissionAnswered {
        node: node(),
        attempt: 1,
        tool: "Write(a.txt)".into(),
        allowed,
        by: by.into(),
        reason: (!allowed).then(|| "not there".into()),
        kind,
        on: Some(on.into()),
    };
    push(answered(
        QuestionKind::Permission,
        false,
        "ctl (bo)",
        "Write:00",
    ));
    push(answered(
        QuestionKind::Permission,
        false,
        "timeout",
        "Write:01",
    ));
    push(answered(
        QuestionKind::Review,
        true,
        "console (ana)",
        "aaa..bbb",
    ));
    push(answered(
        QuestionKind::Conflict,
        true,
        "stdin (cy)",
        "bbb..ccc",
    ));
    push(SignalKind::Retried {
        node: node(),
        attempt: 2,
        because: None,
        by: Some("ctl (bo)".into()),
        note: Some("use the v2 schema".into()),
        on: Some("review of aaa..bbb".into()),
    });
    for commit in ["c1", "c2"] {
        push(SignalKind::Landed {
            node: node(),
            attempt: 1,
            work: std::sync::Arc::new(LandedWork {
                mode: playdeck::vocab::LandMode::Merge,
                branch: "playdeck/r".into(),
                commit: Some(commit.into()),
                commits: vec![],
                files: vec![],
            }),
        });
    }
    let md = playdeck::store::report::Report::from_signals(&sigs).to_markdown();
    for want in [
        "g **approved** by operator at",
        "— on ✗ 1 of 2 failed: a; 1 of 2 succeeded",
        "b **call denied** by ctl (bo) at 1.0s — on Write(a.txt): not there",
        "b **call denied** by timeout",
        "b **review approved: landed** by console (ana) at 1.0s — on aaa..bbb",
        "b **conflict resolved** by stdin (cy) at 1.0s — on bbb..ccc",
        "b **sent back** by ctl (bo) at 1.0s — on review of aaa..bbb: use the v2 schema",
        "### b (merge at c1)",
        "### b (merge at c2)",
    ] {
        assert!(md.contains(want), "{want:?} not in:\n{md}");
    }
}
