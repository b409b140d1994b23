//! Unit tests of operator commands on an executor driven step by step.

use super::super::testkit::executor;
use super::*;
use crate::kernel::RunConfig;

fn paused() -> RunConfig {
    RunConfig {
        start_paused: true,
        ..RunConfig::default()
    }
}

#[test]
fn a_paused_run_parks_ready_work_and_a_step_starts_exactly_the_one_named() {
    let (mut ex, tape) = executor(&[("a", &[], false), ("b", &[], false)], paused());
    ex.begin();
    ex.advance();
    assert_eq!(
        tape.take(),
        [
            "run_started",
            "run_paused",
            "queued a",
            "queued b",
            "paused a",
            "paused b"
        ]
    );
    let answer = ex
        .apply(Request::Step {
            op: Some("b".into()),
        })
        .unwrap();
    assert_eq!(
        answer,
        Answer::Stepped {
            op: Some("b".into())
        }
    );
    ex.advance();
    assert_eq!(tape.take(), ["stepped", "unpaused b", "started b"]);
    assert_eq!(ex.sched.parked.len(), 1);
    // Stepping what is not waiting in the paused lane says why.
    let e = ex
        .apply(Request::Step {
            op: Some("b".into()),
        })
        .unwrap_err();
    assert_eq!(
        e,
        CommandError::NotWaiting {
            name: "b".into(),
            state: "running"
        }
    );
    assert!(tape.take().is_empty(), "a refusal emits nothing");
}

#[test]
fn a_step_with_nothing_waiting_lets_the_next_ready_one_start() {
    let (mut ex, tape) = executor(&[("a", &[], false), ("b", &["a"], false)], paused());
    ex.begin();
    ex.advance();
    ex.apply(Request::Step { op: None }).unwrap();
    ex.advance();
    tape.take();
    assert_eq!(
        ex.apply(Request::Step { op: None }).unwrap(),
        Answer::Stepped { op: None },
        "nothing waits: a credit"
    );
    ex.finish_ok("a");
    ex.advance();
    assert_eq!(
        tape.take(),
        ["stepped", "completed a", "stepped", "started b"],
        "b starts on the credit, still paused"
    );
    assert_eq!(ex.sched.step_credits, 0);
}

#[test]
fn pause_parks_what_waits_for_a_slot_and_resume_lets_all_but_held_go() {
    let cfg = RunConfig {
        max_concurrent: 1,
        ..RunConfig::default()
    };
    let (mut ex, tape) = executor(
        &[("a", &[], false), ("b", &[], false), ("c", &[], false)],
        cfg,
    );
    ex.begin();
    ex.advance();
    tape.take();
    ex.apply(Request::Hold { op: "c".into() }).unwrap();
    assert_eq!(tape.take(), ["held c", "paused c"]);
    ex.apply(Request::Pause).unwrap();
    assert_eq!(tape.take(), ["run_paused", "paused b"]);
    assert_eq!(
        ex.apply(Request::Pause),
        Ok(Answer::Done),
        "pausing twice is fine"
    );
    assert!(tape.take().is_empty());
    ex.apply(Request::Resume).unwrap();
    assert_eq!(tape.take(), ["run_resumed", "unpaused b"]);
    assert_eq!(
        ex.apply(Request::Hold { op: "a".into() }),
        Err(CommandError::CannotHold {
            name: "a".into(),
            state: "running"
        })
    );
    ex.apply(Request::Unhold { op: "c".into() }).unwrap();
    assert_eq!(tape.take(), ["unheld c", "unpaused c"]);
    assert_eq!(
        ex.apply(Request::Unhold { op: "c".into() }),
        Err(CommandError::NotHeld { name: "c".into() })
    );
}

#[test]
fn gates_are_decided_once_by_the_operator_with_a_default_reason() {
    let (mut ex, tape) = executor(
        &[
            ("ship", &[], true),
            ("plain", &[], false),
            ("later", &[], true),
        ],
        RunConfig::default(),
    );
    ex.begin();
    ex.advance();
    tape.take();
    assert_eq!(
        ex.apply(Request::Approve {
            op: "ghost".into(),
            on: None
        }),
        Err(CommandError::UnknownOperation("ghost".into()))
    );
    assert_eq!(
        ex.apply(Request::Approve {
            op: "plain".into(),
            on: None
        }),
        Err(CommandError::NoApprovalGate {
            name: "plain".into()
        })
    );
    ex.apply(Request::Deny {
        on: None,
        op: "ship".into(),
        reason: vec![],
    })
    .unwrap();
    let sigs = tape.0.lock().unwrap().clone();
    let denied = serde_json::to_value(&*sigs[0]).unwrap();
    assert_eq!(
        (
            denied["type"].as_str(),
            denied["by"].as_str(),
            denied["reason"].as_str()
        ),
        (
            Some("denied"),
            Some("operator"),
            Some("denied by the operator")
        )
    );
    assert_eq!(
        ex.apply(Request::Approve {
            op: "ship".into(),
            on: None
        }),
        Err(CommandError::AlreadyDecided {
            name: "ship".into(),
            decision: "denied"
        })
    );
    // An op_id names an operation too.
    let id = ex.graph[ex.ix("later")].op.op_id.to_string();
    ex.apply(Request::Approve { op: id, on: None }).unwrap();
}

#[test]
fn a_retry_reopens_what_was_skipped_only_because_of_it() {
    let (mut ex, tape) = executor(
        &[
            ("gate", &[], true),
            ("after", &["gate"], false),
            ("next", &["after"], false),
        ],
        RunConfig::default(),
    );
    ex.begin();
    ex.advance();
    ex.apply(Request::Deny {
        on: None,
        op: "gate".into(),
        reason: vec!["no".into()],
    })
    .unwrap();
    ex.advance();
    assert_eq!(ex.sched.terminal, 3, "denied, then two skipped");
    tape.take();
    assert_eq!(
        ex.apply(Request::Retry {
            op: "after".into(),
            on: None
        }),
        Err(CommandError::CannotRetry {
            name: "after".into(),
            state: "skipped"
        })
    );
    ex.apply(Request::Retry {
        op: "gate".into(),
        on: None,
    })
    .unwrap();
    ex.advance();
    assert_eq!(
        tape.take(),
        [
            "retried gate",
            "retried after",
            "retried next",
            "awaiting_approval gate"
        ],
        "the denied gate asks again"
    );
    assert_eq!(ex.sched.terminal, 0);
}

#[test]
fn cancel_fails_running_work_and_skips_the_rest_once() {
    let (mut ex, tape) = executor(
        &[("a", &[], false), ("b", &["a"], false)],
        RunConfig::default(),
    );
    ex.begin();
    ex.advance();
    tape.take();
    ex.apply(Request::Cancel).unwrap();
    ex.apply(Request::Cancel).unwrap();
    assert_eq!(tape.take(), ["failed a", "skipped b"]);
    assert!(ex.is_finished());
    assert_eq!(
        ex.apply(Request::Retry {
            op: "a".into(),
            on: None
        }),
        Err(CommandError::RunFinished)
    );
}

fn add(after: &[&str], role: Option<&str>, name: Option<&str>) -> Request {
    Request::Add {
        after: after.iter().map(|s| s.to_string()).collect(),
        role: role.map(str::to_string),
        instruction: role.map(|_| "more work".to_string()),
        name: name.map(str::to_string),
    }
}

#[test]
fn the_operator_adds_work_after_operations_the_run_has() {
    let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
    ex.begin();
    ex.advance();
    tape.take();
    let answer = ex
        .apply(add(&["a"], Some("worker"), Some("extra")))
        .unwrap();
    assert!(matches!(answer, Answer::Added { ref name, .. } if name == "extra"));
    assert_eq!(tape.take(), ["spawned extra", "queued extra"]);
    // Spawned, but not against max_spawn: that bounds what agents spawn.
    assert_eq!((ex.adm.accepted, ex.adm.operator_added), (0, 1));
    ex.finish_ok("a");
    ex.advance();
    assert_eq!(tape.take(), ["completed a", "started extra"]);
    // Without a name it is numbered like spawned work.
    let answer = ex.apply(add(&[], Some("worker"), None)).unwrap();
    assert!(matches!(answer, Answer::Added { ref name, .. } if name == "spawn-1"));
}

#[test]
fn unknown_roles_and_operations_are_refused_with_what_was_wrong() {
    let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
    ex.begin();
    tape.take();
    assert_eq!(
        ex.apply(add(&["ghost"], Some("worker"), None)),
        Err(CommandError::UnknownOperation("ghost".into()))
    );
    let e = ex.apply(add(&[], Some("wizard"), None)).unwrap_err();
    assert!(matches!(e, CommandError::Dropped { .. }), "{e:?}");
    assert!(e.to_string().contains("no role \"wizard\""), "{e}");
    assert_eq!(tape.take(), ["spawn_dropped"], "the drop is in the ledger");
    assert!(matches!(
        ex.apply(add(&[], None, None)),
        Err(CommandError::BadRequest(_))
    ));
    let e = ex
        .apply(add(&[], Some("worker"), Some("spawn-9")))
        .unwrap_err();
    assert!(e.to_string().contains("not spawn-N"), "{e}");
}

#[test]
fn a_run_that_is_not_reactive_takes_nothing_new() {
    let cfg = RunConfig {
        reactive: false,
        ..RunConfig::default()
    };
    let (mut ex, tape) = executor(&[("a", &[], false)], cfg);
    ex.begin();
    tape.take();
    assert_eq!(
        ex.apply(add(&[], Some("worker"), None)),
        Err(CommandError::NotReactive)
    );
    assert_eq!(tape.take(), ["warning"]);
}

#[test]
fn dependencies_added_to_a_waiting_operation_hold_it_and_cycles_are_dropped() {
    let cfg = RunConfig {
        max_concurrent: 1,
        ..RunConfig::default()
    };
    let (mut ex, tape) = executor(
        &[
            ("a", &[], false),
            ("b", &[], false),
            ("c", &["b"], false),
            ("d", &[], false),
        ],
        cfg,
    );
    ex.begin();
    ex.advance();
    tape.take();
    // b was about to start (waiting for the slot a holds): now it also
    // waits for a.
    ex.apply(add(&["a"], None, Some("b"))).unwrap();
    assert_eq!(tape.take(), ["dependencies_added b"]);
    assert_eq!(ex.graph[ex.ix("b")].status, NodeStatus::Pending);
    // c -> b would close b -> c -> b.
    let e = ex.apply(add(&["c"], None, Some("b"))).unwrap_err();
    assert!(e.to_string().contains("dropped (cycle)"), "{e}");
    // a has started: nothing can be added to it.
    let e = ex.apply(add(&["d"], None, Some("a"))).unwrap_err();
    assert!(e.to_string().contains("already started"), "{e}");
    ex.finish_ok("a");
    ex.advance();
    assert_eq!(
        tape.take(),
        ["spawn_dropped", "spawn_dropped", "completed a", "started d"],
        "d was ready first; b waits its turn again"
    );
}
