//! Role profiles and capacity: validation, the JSON contract of ensure /
//! status / release, reuse policies, lifetimes, leases at scale, git
//! worktrees.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use playdeck::agents::AgentRegistry;
use playdeck::capacity::{
    CapacityConfig, InstanceState, Lifetime, Reconciler, Reuse, RoleProfile, WorkspaceMode,
};
use playdeck::kernel::{
    GraphBuilder, LeaseAnswer, LeaseProvider, LeaseRequest, Operation, Run, RunConfig, Signal,
    SignalKind, SignalSink, StaticRoleBuilder,
};
use playdeck::play::Play;
use serde_json::{Value, json};

use crate::common::git;

fn profile(name: &str, role: &str, max: u32) -> RoleProfile {
    RoleProfile {
        name: name.into(),
        role: role.into(),
        provider: "sim".into(),
        model: Some("sonnet".into()),
        thinking: None,
        workspace_mode: WorkspaceMode::Inplace,
        workspace_group: None,
        startup_args: vec![],
        provider_profile: None,
        max_instances: max,
        reuse: None,
        lifetime: None,
        tools: None,
        pinned: 0,
        review: false,
    }
}

fn config(profiles: Vec<RoleProfile>, max_nodes: u32, dir: &Path) -> Arc<CapacityConfig> {
    Arc::new(CapacityConfig {
        enabled: true,
        max_nodes,
        default_lifetime: Lifetime::CurrentRound,
        name_template: "loop-{loop_id}-{profile}-{index}".into(),
        reuse: Reuse::PreferIdle,
        profiles: profiles
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect::<IndexMap<_, _>>(),
        repo_root: playdeck::capacity::config::find_repo_root(dir),
        workspace: dir.to_path_buf(),
    })
}

fn req<'a>(name: &'a str, role: &'a str) -> LeaseRequest<'a> {
    LeaseRequest {
        op_id: uuid::Uuid::new_v4(),
        name,
        role: Some(role),
        profile: None,
        queued: false,
    }
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

// ----- the JSON contract ---------------------------------------------------

#[tokio::test]
async fn ensure_status_release_release() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(
            vec![
                profile("coder", "implementer", 3),
                profile("checker", "tester", 1),
            ],
            4,
            dir.path(),
        ),
        "r1",
        dir.path().to_path_buf(),
    );
    let ensured = serde_json::to_value(r.ensure(&[("coder".into(), 2)], None).unwrap()).unwrap();
    assert_eq!(
        keys(&ensured),
        ["agents", "capacity_ref", "loop_id", "rejected", "status"]
    );
    assert_eq!(ensured["status"], "ok");
    assert_eq!(ensured["loop_id"], "r1");
    let agents = ensured["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    let a = &agents[0];
    for field in [
        "name",
        "profile",
        "role",
        "provider",
        "model",
        "thinking",
        "workspace_mode",
        "lifetime",
        "loop_id",
        "node_id",
        "source",
        "state",
        "placement",
    ] {
        assert!(a.get(field).is_some(), "agent field {field}: {a}");
    }
    assert_eq!(
        (
            a["name"].as_str(),
            a["source"].as_str(),
            a["state"].as_str()
        ),
        (Some("loop-r1-coder-1"), Some("created"), Some("ready"))
    );
    // Idempotent: the same ensure creates nothing and reports reuse.
    let again = serde_json::to_value(r.ensure(&[("coder".into(), 2)], None).unwrap()).unwrap();
    assert!(
        again["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["source"] == "reused")
    );

    let status = serde_json::to_value(r.status()).unwrap();
    assert_eq!(status["active_nodes"], 2);
    assert_eq!(status["state"], "ensured");

    let released = serde_json::to_value(r.release_select(&[], &[]).unwrap()).unwrap();
    assert_eq!(
        keys(&released),
        [
            "capacity_ref",
            "lifetimes",
            "loop_id",
            "released",
            "released_count",
            "retained",
            "retained_count",
            "status"
        ]
    );
    assert_eq!(
        (
            released["released_count"].as_u64(),
            released["retained_count"].as_u64()
        ),
        (Some(2), Some(0))
    );
    assert_eq!(released["status"], "ok");
    assert_eq!(released["lifetimes"], json!(["current_round"]));
    let twice = serde_json::to_value(r.release_select(&[], &[]).unwrap()).unwrap();
    assert_eq!(
        (
            twice["released_count"].as_u64(),
            twice["retained_count"].as_u64()
        ),
        (Some(0), Some(0))
    );

    r.close().await;
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("capacity.json")).unwrap())
            .unwrap();
    assert_eq!(
        (
            file["schema_version"].as_u64(),
            file["record_type"].as_str()
        ),
        (Some(1), Some("playdeck_capacity_state"))
    );
    assert_eq!(file["status"], "released");
    assert_eq!(
        file["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["kind"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["ensure", "ensure", "release", "release"]
    );
    for k in ["created_at", "updated_at", "agents"] {
        assert!(file.get(k).is_some());
    }
    let events = std::fs::read_to_string(dir.path().join("capacity.events.jsonl")).unwrap();
    assert!(events.lines().count() >= 5);
}

#[tokio::test]
async fn ensure_input_errors_are_typed_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(
            vec![
                profile("coder", "implementer", 2),
                profile("checker", "tester", 1),
            ],
            3,
            dir.path(),
        ),
        "r1",
        dir.path().to_path_buf(),
    );
    let code = |w: &[(&str, u32)]| {
        let w: Vec<(String, u32)> = w.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        r.ensure(&w, None).unwrap_err()
    };
    let e = code(&[("nope", 1)]);
    assert_eq!(e.code, "unknown_profile");
    assert!(e.message.contains("configured profiles: coder, checker"));
    assert_eq!(
        code(&[("coder", 1), ("coder", 1)]).code,
        "duplicate_profile"
    );
    // A mistake anywhere in the request creates nothing, even what fits.
    assert_eq!(code(&[("checker", 1), ("nope", 1)]).code, "unknown_profile");
    assert_eq!(r.status().active_nodes, 0);
}

/// RPC-22: ensure returns ready targets or structured blockers: what fits
/// is created, each profile it could not satisfy is in `rejected` with
/// its reason, and the answer is `partial`.
#[tokio::test]
async fn rule_rpc_22_ensure_creates_what_fits_and_lists_rejected_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(
            vec![
                profile("coder", "implementer", 2),
                profile("checker", "tester", 2),
                profile("writer", "technical_writer", 2),
            ],
            3,
            dir.path(),
        ),
        "r1",
        dir.path().to_path_buf(),
    );
    let w: Vec<(String, u32)> = vec![
        ("coder".into(), 3),
        ("checker".into(), 2),
        ("writer".into(), 1),
    ];
    let e = serde_json::to_value(r.ensure(&w, None).unwrap()).unwrap();
    assert_eq!(e["status"], "partial");
    // coder gets its max_instances 2, checker the one node left, writer none.
    let names: Vec<&str> = e["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["loop-r1-coder-1", "loop-r1-coder-2", "loop-r1-checker-1"]
    );
    let rejected: Vec<(&str, &str, u64, u64)> = e["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["profile"].as_str().unwrap(),
                x["reason"].as_str().unwrap(),
                x["requested"].as_u64().unwrap(),
                x["granted"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rejected,
        [
            ("coder", "over_max_instances", 3, 2),
            ("checker", "over_max_nodes", 2, 1),
            ("writer", "over_max_nodes", 1, 0),
        ]
    );
    assert!(
        e["rejected"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("max_instances 2"),
        "{e:#}"
    );
    assert_eq!(r.status().active_nodes, 3);
    // What fits everywhere is `ok`, with nothing rejected.
    let ok = r.ensure(&[("coder".into(), 2)], None).unwrap();
    assert_eq!(ok.status, playdeck::capacity::Outcome::Ok);
    assert!(ok.rejected.is_empty());
}

/// RPC-20 / RPC-48: only instances of the lifetime asked for (or the
/// profile's) count toward the target; `always_new` counts only instances
/// no operation has used; the same request twice creates nothing more.
#[tokio::test]
async fn rule_rpc_20_ensure_counts_only_the_requested_lifetime_and_honours_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let mut fresh = profile("tester_p", "tester", 3);
    fresh.reuse = Some(Reuse::AlwaysNew);
    let r = Reconciler::new(
        config(
            vec![profile("coder", "implementer", 4), fresh],
            6,
            dir.path(),
        ),
        "r1",
        dir.path().to_path_buf(),
    );
    r.ensure(&[("coder".into(), 2)], None).unwrap();
    // Two current_round coders do not make two manual_release ones.
    let manual = r
        .ensure(&[("coder".into(), 2)], Some(Lifetime::ManualRelease))
        .unwrap();
    let made: Vec<(&str, Lifetime, &str)> = manual
        .agents
        .iter()
        .map(|a| (a.name.as_str(), a.lifetime, a.source.as_str()))
        .collect();
    assert_eq!(
        made,
        [
            ("loop-r1-coder-3", Lifetime::ManualRelease, "created"),
            ("loop-r1-coder-4", Lifetime::ManualRelease, "created"),
        ]
    );
    // always_new: an instance an operation used does not count.
    let LeaseAnswer::Granted(lease) = r.acquire(&req("t1", "tester")) else {
        panic!("a lease")
    };
    r.release(lease.id);
    let e = r.ensure(&[("tester_p".into(), 1)], None).unwrap();
    assert_eq!(
        (e.agents[0].name.as_str(), e.agents[0].source.as_str()),
        ("loop-r1-tester_p-2", "created")
    );
    assert_eq!(r.status().active_nodes, 6);
}

/// RPC-48: ensure is idempotent for the same profile, count and lifetime.
#[tokio::test]
async fn rule_rpc_48_ensure_is_idempotent_for_profile_count_and_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 4)], 4, dir.path()),
        "r1",
        dir.path().to_path_buf(),
    );
    for lifetime in [None, Some(Lifetime::CurrentLoop)] {
        let first = r.ensure(&[("coder".into(), 2)], lifetime).unwrap();
        let again = r.ensure(&[("coder".into(), 2)], lifetime).unwrap();
        let names = |e: &playdeck::capacity::EnsureResult| {
            e.agents.iter().map(|a| a.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(&first), names(&again), "{lifetime:?}");
        assert!(again.agents.iter().all(|a| a.source.as_str() == "reused"));
    }
    assert_eq!(r.status().active_nodes, 4);
}

#[tokio::test]
async fn a_busy_instance_is_retained_then_released_without_the_retain_fields() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 2)], 2, dir.path()),
        "r1",
        dir.path().to_path_buf(),
    );
    let LeaseAnswer::Granted(lease) = r.acquire(&req("build", "implementer")) else {
        panic!("a lease")
    };
    r.queue_depth("coder", 3);
    let first = r.release_select(&[], &[]).unwrap();
    assert_eq!((first.released_count, first.retained_count), (0, 1));
    assert_eq!(first.retained[0].reason, "runtime_state=busy queue_depth=3");
    assert_eq!(
        (
            first.retained[0].runtime_state.as_str(),
            first.retained[0].queue_depth
        ),
        ("busy", 3)
    );
    let rec = serde_json::to_value(&r.status().agents[0]).unwrap();
    assert_eq!(
        (rec["state"].as_str(), rec["reason"].as_str()),
        (Some("retained"), Some("runtime_state=busy queue_depth=3"))
    );
    // The operation finishes; a later release lets it go and strips the fields.
    r.release(lease.id);
    let later = r.release_select(&[], &[]).unwrap();
    assert_eq!((later.released_count, later.retained_count), (1, 0));
    let rec = serde_json::to_value(&r.status().agents[0]).unwrap();
    assert_eq!(rec["state"], "released");
    for k in ["reason", "runtime_state", "queue_depth"] {
        assert!(rec.get(k).is_none(), "{k} was not stripped: {rec}");
    }
}

// ----- reuse and lifetimes, in runs ----------------------------------------------

#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<Arc<Signal>>>>);
impl SignalSink for Collect {
    fn write(&mut self, s: &Arc<Signal>) {
        self.0.lock().unwrap().push(s.clone());
    }
}

fn op(name: &str, role: &str, ms: u64) -> Operation {
    Operation::new(name, "work")
        .with_role(role)
        .with_agent("sim", json!({"duration_ms": ms, "outcome": "succeed", "result": null, "context": null, "emits": [], "error": null, "escalation": null}))
}

/// Runs a graph of roots under a reconciler; returns signals.
async fn run_with(
    r: &Arc<Reconciler>,
    ops: Vec<Operation>,
    max_concurrent: usize,
) -> Vec<Arc<Signal>> {
    let mut b = GraphBuilder::new();
    for o in ops {
        b.add_root(o);
    }
    let cfg = RunConfig {
        max_concurrent,
        ..RunConfig::default()
    };
    let (mut run, _h) = Run::new(
        b.build().unwrap(),
        cfg,
        Arc::new(AgentRegistry::builtin(1.0)),
        Arc::new(StaticRoleBuilder::default()),
    )
    .unwrap();
    let sink = Collect::default();
    run.add_sink(Box::new(sink.clone()));
    r.attach(run.external());
    run.set_leases(r.clone());
    run.run().await;
    sink.0.lock().unwrap().clone()
}

fn instance_of_starts(signals: &[Arc<Signal>]) -> Vec<(String, String)> {
    signals
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::Started { node, instance, .. } => Some((
                node.name.to_string(),
                instance.as_deref().unwrap_or("-").to_string(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn prefer_idle_reuses_always_new_creates_pinned_uses_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    // prefer_idle, one at a time: one instance serves all three.
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 3)], 3, dir.path()),
        "a",
        dir.path().to_path_buf(),
    );
    let s = run_with(
        &r,
        vec![
            op("a", "implementer", 10),
            op("b", "implementer", 10),
            op("c", "implementer", 10),
        ],
        1,
    )
    .await;
    let used: std::collections::HashSet<String> =
        instance_of_starts(&s).into_iter().map(|(_, i)| i).collect();
    assert_eq!(used.len(), 1);

    // always_new: a fresh instance while under the cap.
    let mut p = profile("coder", "implementer", 3);
    p.reuse = Some(Reuse::AlwaysNew);
    let r = Reconciler::new(
        config(vec![p], 3, dir.path()),
        "b",
        dir.path().to_path_buf(),
    );
    let s = run_with(
        &r,
        vec![
            op("a", "implementer", 10),
            op("b", "implementer", 10),
            op("c", "implementer", 10),
        ],
        1,
    )
    .await;
    let used: std::collections::HashSet<String> =
        instance_of_starts(&s).into_iter().map(|(_, i)| i).collect();
    assert_eq!(used.len(), 3);

    // pinned: only existing instances; without one, none will come.
    let mut p = profile("coder", "implementer", 1);
    p.reuse = Some(Reuse::Pinned);
    let r = Reconciler::new(
        config(vec![p], 1, dir.path()),
        "c",
        dir.path().to_path_buf(),
    );
    assert!(
        matches!(r.acquire(&req("x", "implementer")), LeaseAnswer::Unavailable { reason } if reason.contains("is pinned and has no instance"))
    );
    let e = r
        .ensure(&[("coder".into(), 1)], Some(Lifetime::ManualRelease))
        .unwrap();
    assert!(e.agents[0].pinned, "ensure creates pinned instances");
    let LeaseAnswer::Granted(_) = r.acquire(&req("x", "implementer")) else {
        panic!("the ensured instance serves")
    };
    // Busy, but it exists: the next one waits for it.
    assert!(
        matches!(r.acquire(&req("y", "implementer")), LeaseAnswer::Wait { reason, .. } if reason.contains("every instance of it is busy"))
    );
}

#[tokio::test(start_paused = true)]
async fn waiting_for_capacity_holds_no_slot_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 1)], 1, dir.path()),
        "w",
        dir.path().to_path_buf(),
    );
    // Two slots: the second implementer waits for capacity, so the
    // unmanaged reviewer takes the free slot at once.
    let s = run_with(
        &r,
        vec![
            op("i1", "implementer", 100),
            op("i2", "implementer", 100),
            op("rev", "reviewer", 50),
        ],
        2,
    )
    .await;
    let starts: Vec<(String, f64)> = s
        .iter()
        .filter_map(|x| match &x.kind {
            SignalKind::Started { node, .. } => Some((node.name.to_string(), x.elapsed)),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            ("i1".to_string(), 0.0),
            ("rev".to_string(), 0.0),
            ("i2".to_string(), 0.1)
        ]
    );
    let waits: Vec<String> = s
        .iter()
        .filter_map(|x| match &x.kind {
            SignalKind::CapacityWait { node, reason } => Some(format!("{}: {reason}", node.name)),
            _ => None,
        })
        .collect();
    assert_eq!(waits, ["i2: capacity: profile coder at max_instances 1"]);
}

/// Issue 38: a spend cap reached while operations wait for a capacity
/// instance holds them too. Before, each one waiting took the instance as
/// it came free and the run spent four times its cap.
#[tokio::test(start_paused = true)]
async fn a_spend_cap_holds_work_that_waited_for_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 1)], 1, dir.path()),
        "cap",
        dir.path().to_path_buf(),
    );
    let mut b = GraphBuilder::new();
    for i in 0..8 {
        b.add_root(
            Operation::new(format!("op{i}"), "work")
                .with_role("implementer")
                .with_agent(
                    "sim",
                    json!({"duration_ms": 100, "outcome": "succeed", "result": null, "context": null, "emits": [], "error": null, "escalation": null, "usage": {"cost_usd": 1.0}}),
                ),
        );
    }
    let cfg = RunConfig {
        max_concurrent: 8,
        budget: Some(playdeck::kernel::spend::Budget {
            usd: Some(2.0),
            warn_at: vec![],
            ..Default::default()
        }),
        ..RunConfig::default()
    };
    let (mut run, handle) = Run::new(
        b.build().unwrap(),
        cfg,
        Arc::new(AgentRegistry::builtin(1.0)),
        Arc::new(StaticRoleBuilder::default()),
    )
    .unwrap();
    let sink = Collect::default();
    run.add_sink(Box::new(sink.clone()));
    r.attach(run.external());
    run.set_leases(r.clone());
    let task = tokio::spawn(run.run());
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    let started = |sink: &Collect| {
        sink.0
            .lock()
            .unwrap()
            .iter()
            .filter(|s| matches!(s.kind, SignalKind::Started { .. }))
            .count()
    };
    assert_eq!(started(&sink), 2, "nothing starts past the cap of 2.00");
    assert!(!task.is_finished(), "the run waits at its cap");
    handle
        .request(playdeck::kernel::Request::Budget {
            raise: vec!["usd=+10".parse().unwrap()],
        })
        .await
        .unwrap();
    task.await.unwrap();
    assert_eq!(started(&sink), 8, "a raise lets the held work go on");
}

#[tokio::test(start_paused = true)]
async fn lifetimes_release_at_round_drain_run_end_or_never() {
    let dir = tempfile::tempdir().unwrap();
    let mut loop_p = profile("tester_p", "tester", 1);
    loop_p.lifetime = Some(Lifetime::CurrentLoop);
    let mut manual = profile("writer_p", "technical_writer", 1);
    manual.lifetime = Some(Lifetime::ManualRelease);
    let r = Reconciler::new(
        config(
            vec![profile("coder", "implementer", 1), loop_p, manual],
            3,
            dir.path(),
        ),
        "l",
        dir.path().to_path_buf(),
    );
    let s = run_with(
        &r,
        vec![
            op("i", "implementer", 10),
            op("t", "tester", 10),
            op("w", "technical_writer", 10),
        ],
        5,
    )
    .await;
    let releases: Vec<(String, Vec<String>)> = s
        .iter()
        .filter_map(|x| match &x.kind {
            SignalKind::CapacityReleased {
                trigger, released, ..
            } => Some((
                trigger.to_string(),
                released.iter().map(|n| n.to_string()).collect(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        releases,
        [
            ("round_end".to_string(), vec!["loop-l-coder-1".to_string()]),
            ("run_end".to_string(), vec!["loop-l-tester_p-1".to_string()]),
        ]
    );
    let states: HashMap<String, InstanceState> = r
        .status()
        .agents
        .into_iter()
        .map(|a| (a.name, a.state))
        .collect();
    assert_eq!(
        states["loop-l-writer_p-1"],
        InstanceState::Ready,
        "manual_release stays"
    );
    // The operator releases it, after the run, by asking for its
    // lifetime: the default release of a finished run leaves it.
    r.close().await;
    let none = playdeck::capacity::offline::release(dir.path(), &[], &[], false).unwrap();
    assert!(none.released.is_empty(), "{none:?}");
    let done =
        playdeck::capacity::offline::release(dir.path(), &[Lifetime::ManualRelease], &[], false)
            .unwrap();
    assert_eq!(done.released, ["loop-l-writer_p-1"]);
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_operations_over_four_instances() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 4)], 4, dir.path()),
        "big",
        dir.path().to_path_buf(),
    );
    let n = 10_000;
    let ops: Vec<Operation> = (0..n)
        .map(|i| op(&format!("op{i}"), "implementer", 5 + (i % 7) as u64))
        .collect();
    let s = run_with(&r, ops, 10_000).await;
    // Each instance serves one operation at a time: its starts and ends alternate.
    let mut busy: HashMap<String, Option<String>> = HashMap::new();
    let mut on: HashMap<String, String> = HashMap::new();
    let mut completed = 0;
    for x in &s {
        match &x.kind {
            SignalKind::Started { node, instance, .. } => {
                let inst = instance
                    .as_deref()
                    .expect("every operation holds a lease")
                    .to_string();
                let slot = busy.entry(inst.clone()).or_default();
                assert!(
                    slot.is_none(),
                    "{inst} used by {} and {}",
                    slot.as_deref().unwrap_or(""),
                    node.name
                );
                *slot = Some(node.name.to_string());
                on.insert(node.name.to_string(), inst);
            }
            SignalKind::Completed { node, .. } => {
                let inst = &on[&*node.name];
                busy.insert(inst.clone(), None);
                completed += 1;
            }
            _ => {}
        }
    }
    assert_eq!(completed, n);
    assert_eq!(busy.len(), 4);
}

// ----- play validation -------------------------------------------------------------

fn errors(src: &str) -> Vec<String> {
    Play::from_str("c.toml", src)
        .unwrap_err()
        .items
        .iter()
        .map(|i| i.message.clone())
        .collect()
}

const OPS: &str = "[[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"x\"\n";

#[test]
fn capacity_validation_reports_every_problem() {
    let src = include_str!("../plays/bad_capacity_settings.toml");
    let e = errors(src);
    let expect = [
        "`default_lifetime` in [capacity] has an unknown value \"forever\"",
        "name_template is missing {loop_id}",
        "`reuse` in [capacity] has an unknown value \"sometimes\"",
        "unknown key `extra` in [capacity]",
        "role profile coder names unknown role \"coder_role\"",
        "provider of [role_profiles.coder] names unknown agent \"gpt\"",
        "`thinking` in [role_profiles.coder] has an unknown value \"extreme\"",
        "workspace_group of coder applies only to git-worktree",
        "startup_args of coder sets the model (--model=opus)",
        "`max_instances` in [role_profiles.coder] is out of range",
        "[role_profiles.noprov] is missing `provider`",
    ];
    for m in expect {
        assert!(e.iter().any(|x| x == m), "missing {m:?} in {e:#?}");
    }
}

#[test]
fn capacity_structure_rules() {
    let base = "[play]\nname = \"c\"\n";
    let e = errors(&format!("{base}[capacity]\nenabled = true\n{OPS}"));
    assert_eq!(
        e,
        ["[capacity] is enabled but no role profile is configured"]
    );
    let e = errors(&format!(
        "{base}[capacity]\nmax_nodes = 5\n[role_profiles.a]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 2\n{OPS}"
    ));
    assert_eq!(
        e,
        ["max_nodes 5 is greater than the sum of max_instances (2)"]
    );
    let e = errors(&format!(
        "{base}[role_profiles.a]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 2\n{OPS}"
    ));
    assert_eq!(e, ["[role_profiles] needs a [capacity] table"]);
    let e = errors(&format!(
        "{base}[capacity]\n[role_profiles.a]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 2\n{OPS}profile = \"a\"\n"
    ));
    assert_eq!(e, ["profile \"a\" is for role tester, not implementer"]);
    let e = errors(&format!("{base}{OPS}profile = \"a\"\n"));
    assert_eq!(
        e,
        ["operation \"a\" names profile \"a\", but the play has no [capacity]"]
    );
}

#[test]
fn git_worktree_needs_a_repository() {
    let dir = tempfile::tempdir().unwrap();
    let src = include_str!("../plays/git_worktree_profile.toml");
    let d = Play::from_str_in("c.toml", src, dir.path()).unwrap_err();
    assert_eq!(
        d.items[0].message,
        "role profile a uses git-worktree, but the play is not in a git repository"
    );
}

#[test]
fn an_empty_dot_git_is_no_repository_but_a_repo_and_its_worktree_are() {
    use playdeck::capacity::config::find_repo_root;
    let top = tempfile::tempdir().unwrap();
    let top_path = top.path().canonicalize().unwrap();
    // What codex's sandbox leaves in a directory it may write: an empty
    // `.git` mount point. It once made /tmp look like a repository.
    let sandboxed = top_path.join("sandboxed");
    std::fs::create_dir_all(sandboxed.join(".git")).unwrap();
    std::fs::create_dir_all(sandboxed.join("play")).unwrap();
    assert_eq!(
        find_repo_root(&sandboxed.join("play")),
        find_repo_root(&top_path)
    );
    let src = include_str!("../plays/git_worktree_profile.toml");
    if find_repo_root(&top_path).is_none() {
        let d = Play::from_str_in("c.toml", src, &sandboxed.join("play")).unwrap_err();
        assert!(d.items[0].message.contains("not in a git repository"));
    }
    let repo = top_path.join("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
    assert_eq!(find_repo_root(&repo.join("sub")), Some(repo.clone()));
    let linked = top_path.join("linked");
    git(&repo, &["worktree", "add", "-q", linked.to_str().unwrap()]);
    assert!(linked.join(".git").is_file());
    assert_eq!(find_repo_root(&linked), Some(linked.clone()));
    Play::from_str_in("c.toml", src, &linked).unwrap();
}

// ----- git worktrees --------------------------------------------------------------------

#[tokio::test]
async fn git_worktrees_are_added_per_instance_and_removed_on_release() {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    git(
        repo.path(),
        &["commit", "-q", "--allow-empty", "-m", "init"],
    );
    let run_dir = repo.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let mut p = profile("coder", "implementer", 2);
    p.workspace_mode = WorkspaceMode::GitWorktree;
    p.lifetime = Some(Lifetime::ManualRelease);
    let r = Reconciler::new(config(vec![p], 2, repo.path()), "g1", run_dir.clone());
    let s = run_with(
        &r,
        vec![op("a", "implementer", 10), op("b", "implementer", 10)],
        2,
    )
    .await;
    // Under load b may start on coder-1 once a is done, while coder-2 is
    // still being added: every instance that ran work has its worktree,
    // and whatever was created is gone after the release and the close.
    let used: std::collections::BTreeSet<String> =
        instance_of_starts(&s).into_iter().map(|(_, i)| i).collect();
    assert!(!used.is_empty());
    let agents = r.status().agents;
    assert!(agents.len() <= 2 && agents.len() >= used.len());
    for a in agents.iter().filter(|a| used.contains(&*a.name)) {
        let path = a.placement.workspace.as_ref().unwrap();
        assert!(
            Path::new(path).join(".git").exists(),
            "{path} is a worktree"
        );
        assert!(
            a.placement
                .branch
                .as_ref()
                .unwrap()
                .starts_with("playdeck/g1/")
        );
    }
    let list = git(repo.path(), &["worktree", "list"]);
    assert!(list.lines().count() > used.len(), "{list}");
    let mut released = r.release_select(&[Lifetime::ManualRelease], &[]).unwrap();
    assert!(released.released_count >= used.len());
    // One still being added is kept, saying so (RPC-29); once it is ready
    // a second release takes it.
    for _ in 0..200 {
        if released.retained.is_empty() {
            break;
        }
        assert!(
            released
                .retained
                .iter()
                .all(|x| x.runtime_state == "starting"),
            "{released:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        released = r.release_select(&[Lifetime::ManualRelease], &[]).unwrap();
    }
    r.close().await;
    let list = git(repo.path(), &["worktree", "list"]);
    assert_eq!(
        list.lines().count(),
        1,
        "{list}\nreleased: {released:?}\nafter: {:?}\nevents: {}",
        r.status().agents,
        std::fs::read_to_string(run_dir.join("capacity-events.jsonl")).unwrap_or_default()
    );
    for a in &agents {
        assert!(!Path::new(a.placement.workspace.as_ref().unwrap()).exists());
    }
    assert!(
        !git(repo.path(), &["branch"]).contains("playdeck/"),
        "empty branches are deleted: {}",
        std::fs::read_to_string(run_dir.join("capacity-events.jsonl")).unwrap_or_default()
    );
}

/// Resume hands a stopped run's capacity file to a new reconciler: what
/// still has its workspace is idle again, the rest is released as an
/// orphan, and new instances are numbered after the old ones.
#[tokio::test]
async fn a_resumed_run_adopts_its_instances_and_releases_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        vec![
            profile("coder", "implementer", 3),
            profile("checker", "tester", 1),
        ],
        4,
        dir.path(),
    );
    let old = Reconciler::new(cfg.clone(), "r1", dir.path().to_path_buf());
    old.ensure(&[("coder".into(), 2), ("checker".into(), 1)], None)
        .unwrap();
    old.close().await;
    let mut file: playdeck::capacity::CapacityFile =
        serde_json::from_slice(&std::fs::read(dir.path().join("capacity.json")).unwrap()).unwrap();
    // The process died with coder-1 busy, and checker's workspace is gone.
    file.agents[0].state = playdeck::capacity::InstanceState::Busy;
    file.agents[0].op = Some("build".into());
    let gone = dir.path().join("gone");
    file.agents[2].placement.workspace = Some(gone.display().to_string());

    let new = Reconciler::new(cfg, "r1", dir.path().to_path_buf());
    let orphans = new.adopt(&file);
    assert_eq!(orphans, ["loop-r1-checker-1"]);
    let s = new.status();
    let states: Vec<(&str, &str)> = s
        .agents
        .iter()
        .map(|a| (a.name.as_str(), a.state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("loop-r1-coder-1", "ready"),
            ("loop-r1-coder-2", "ready"),
            ("loop-r1-checker-1", "released"),
        ]
    );
    assert!(
        s.agents[0].op.is_none(),
        "its operation starts a new attempt"
    );
    // A new instance does not take an old name.
    let e = new.ensure(&[("coder".into(), 3)], None).unwrap();
    let names: Vec<String> = e.agents.iter().map(|a| a.name.clone()).collect();
    assert!(names.contains(&"loop-r1-coder-3".to_string()), "{names:?}");
    new.close().await;
    let log = std::fs::read_to_string(dir.path().join("capacity.events.jsonl")).unwrap();
    assert!(log.contains("\"event\":\"orphaned\"") && log.contains("\"event\":\"adopted\""));
}

// ----- release: lifetimes, names, pinned, partial (RPC-29/30/32/50) ------------

fn lifetimes_config(dir: &Path) -> Arc<CapacityConfig> {
    let mut looper = profile("looper", "tester", 2);
    looper.lifetime = Some(Lifetime::CurrentLoop);
    let mut keeper = profile("keeper", "technical_writer", 2);
    keeper.lifetime = Some(Lifetime::ManualRelease);
    config(
        vec![profile("coder", "implementer", 2), looper, keeper],
        6,
        dir,
    )
}

fn ensure_one_each(r: &Reconciler) {
    let w: Vec<(String, u32)> = ["coder", "looper", "keeper"]
        .into_iter()
        .map(|p| (p.to_string(), 1))
        .collect();
    assert_eq!(
        r.ensure(&w, None).unwrap().status,
        playdeck::capacity::Outcome::Ok
    );
}

fn active_names(r: &Reconciler) -> Vec<String> {
    r.status()
        .agents
        .into_iter()
        .filter(|a| a.state.is_active())
        .map(|a| a.name)
        .collect()
}

/// RPC-29: release selects by lifetime, one or several; the default is
/// the lifetimes due now (`current_round` while the run goes on).
#[tokio::test]
async fn rule_rpc_29_release_selects_by_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(lifetimes_config(dir.path()), "r", dir.path().into());
    ensure_one_each(&r);
    let due = r.release_select(&[], &[]).unwrap();
    assert_eq!(
        (due.lifetimes.as_slice(), due.released.as_slice()),
        (
            &[Lifetime::CurrentRound][..],
            &["loop-r-coder-1".to_string()][..]
        )
    );
    ensure_one_each(&r);
    let two = r
        .release_select(&[Lifetime::CurrentRound, Lifetime::ManualRelease], &[])
        .unwrap();
    assert_eq!(two.released, ["loop-r-keeper-1", "loop-r-coder-2"]);
    assert_eq!(active_names(&r), ["loop-r-looper-1"]);
    let rest = r.release_select(&[Lifetime::CurrentLoop], &[]).unwrap();
    assert_eq!(rest.released, ["loop-r-looper-1"]);
}

/// RPC-30: only instances of the requested lifetime go; a
/// `manual_release` instance goes only when named or asked for by
/// lifetime — never by a default release, a round end or the run's end.
#[tokio::test]
async fn rule_rpc_30_release_keeps_manual_release_unless_named() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(lifetimes_config(dir.path()), "r", dir.path().into());
    ensure_one_each(&r);
    r.round_ended(1);
    assert_eq!(active_names(&r), ["loop-r-looper-1", "loop-r-keeper-1"]);
    r.run_finished();
    assert_eq!(active_names(&r), ["loop-r-keeper-1"]);
    // Once the run has ended, the default takes current_loop too — still
    // not the manual one.
    let default = r.release_select(&[], &[]).unwrap();
    assert_eq!(
        default.lifetimes,
        [Lifetime::CurrentRound, Lifetime::CurrentLoop]
    );
    assert!(default.released.is_empty());
    let e = r
        .release_select(&[], &["loop-r-nope-1".into()])
        .unwrap_err();
    assert_eq!(e.code, "unknown_instance");
    assert!(e.message.contains("loop-r-keeper-1"), "{}", e.message);
    let named = r.release_select(&[], &["loop-r-keeper-1".into()]).unwrap();
    assert_eq!(named.released, ["loop-r-keeper-1"]);
    assert_eq!(named.names, ["loop-r-keeper-1"]);
    assert!(active_names(&r).is_empty());
}

/// RPC-32: pinned instances are long-lived: declared ones exist from the
/// start, round and run ends, default releases and releases by lifetime
/// leave them (issue 27: a lifetime release took them), and they go only
/// when named.
#[tokio::test]
async fn rule_rpc_32_release_keeps_pinned_instances_unless_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut pin = profile("pin", "reviewer", 2);
    pin.reuse = Some(Reuse::Pinned);
    pin.pinned = 2;
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 1), pin], 3, dir.path()),
        "r",
        dir.path().into(),
    );
    let pinned: Vec<(String, bool)> = r
        .status()
        .agents
        .into_iter()
        .map(|a| (a.name, a.pinned))
        .collect();
    assert_eq!(
        pinned,
        [
            ("loop-r-pin-1".to_string(), true),
            ("loop-r-pin-2".to_string(), true)
        ]
    );
    r.ensure(&[("coder".into(), 1)], None).unwrap();
    r.round_ended(1);
    r.run_finished();
    assert_eq!(active_names(&r), ["loop-r-pin-1", "loop-r-pin-2"]);
    assert!(r.release_select(&[], &[]).unwrap().released.is_empty());
    let named = r.release_select(&[], &["loop-r-pin-2".into()]).unwrap();
    assert_eq!(named.released, ["loop-r-pin-2"]);
    let by_lifetime = r.release_select(&[Lifetime::CurrentRound], &[]).unwrap();
    assert!(
        by_lifetime.released.is_empty(),
        "{:?}",
        by_lifetime.released
    );
    assert_eq!(active_names(&r), ["loop-r-pin-1"]);
    let named = r.release_select(&[Lifetime::CurrentRound], &["loop-r-pin-1".into()]);
    assert_eq!(named.unwrap().released, ["loop-r-pin-1"]);
}

/// RPC-50: a release that keeps something it selected (busy) answers
/// `partial`, never `ok`; with nothing kept it is `ok`.
#[tokio::test]
async fn rule_rpc_50_a_release_that_retains_answers_partial() {
    let dir = tempfile::tempdir().unwrap();
    let r = Reconciler::new(
        config(vec![profile("coder", "implementer", 2)], 2, dir.path()),
        "r",
        dir.path().into(),
    );
    r.ensure(&[("coder".into(), 2)], None).unwrap();
    let LeaseAnswer::Granted(lease) = r.acquire(&req("build", "implementer")) else {
        panic!("a lease")
    };
    let partial = serde_json::to_value(r.release_select(&[], &[]).unwrap()).unwrap();
    assert_eq!(partial["status"], "partial");
    assert_eq!(
        (
            partial["released_count"].as_u64(),
            partial["retained_count"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(partial["retained"][0]["runtime_state"], "busy");
    r.release(lease.id);
    let ok = serde_json::to_value(r.release_select(&[], &[]).unwrap()).unwrap();
    assert_eq!(
        (ok["status"].as_str(), ok["released_count"].as_u64()),
        (Some("ok"), Some(1))
    );
}

// ----- never waiting forever (RPC-07, RPC-38, RPC-39) ----------------------------

fn failures(signals: &[Arc<Signal>]) -> Vec<(String, String, String)> {
    signals
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
        .collect()
}

fn completed(signals: &[Arc<Signal>]) -> Vec<String> {
    signals
        .iter()
        .filter_map(|s| match &s.kind {
            SignalKind::Completed { node, .. } => Some(node.name.to_string()),
            _ => None,
        })
        .collect()
}

/// A run that would hang fails the test instead (the clock is paused, so
/// a minute passes at once when nothing else can happen).
async fn run_bounded(
    r: &Arc<Reconciler>,
    ops: Vec<Operation>,
    max_concurrent: usize,
) -> Vec<Arc<Signal>> {
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        run_with(r, ops, max_concurrent),
    )
    .await
    .expect("the run ends instead of waiting for capacity forever")
}

/// RPC-07: `pinned` uses existing instances; with none, and none declared
/// or ensured, the operation fails at once as `capacity_unavailable`.
#[tokio::test(start_paused = true)]
async fn rule_rpc_07_a_pinned_profile_without_instances_fails_its_work_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut pin = profile("pin", "implementer", 1);
    pin.reuse = Some(Reuse::Pinned);
    let r = Reconciler::new(config(vec![pin], 1, dir.path()), "p", dir.path().into());
    let s = run_bounded(
        &r,
        vec![op("a", "implementer", 10), op("b", "tester", 10)],
        2,
    )
    .await;
    let f = failures(&s);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].0.as_str(), f[0].1.as_str()),
        ("a", "capacity_unavailable")
    );
    assert!(
        f[0].2.contains("profile pin is pinned and has no instance"),
        "{}",
        f[0].2
    );
    assert_eq!(completed(&s), ["b"]);
}

/// RPC-07: declared pinned instances (`pinned = N`) exist when the run
/// starts and serve its operations; no other instance is ever made.
#[tokio::test(start_paused = true)]
async fn rule_rpc_07_declared_pinned_instances_serve_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut pin = profile("pin", "implementer", 3);
    pin.reuse = Some(Reuse::Pinned);
    pin.pinned = 2;
    let r = Reconciler::new(config(vec![pin], 3, dir.path()), "p", dir.path().into());
    let s = run_bounded(
        &r,
        vec![
            op("a", "implementer", 10),
            op("b", "implementer", 10),
            op("c", "implementer", 10),
        ],
        3,
    )
    .await;
    assert_eq!(completed(&s).len(), 3);
    let used: std::collections::BTreeSet<String> =
        instance_of_starts(&s).into_iter().map(|(_, i)| i).collect();
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["loop-p-pin-1", "loop-p-pin-2"]
    );
    assert_eq!(active_names(&r), ["loop-p-pin-1", "loop-p-pin-2"]);
}

/// RPC-38: when idle instances of another profile hold every node, one of
/// them is reclaimed (round-scoped first, never manual or pinned) and the
/// waiting operation runs.
#[tokio::test(start_paused = true)]
async fn rule_rpc_38_idle_instances_of_another_profile_are_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = profile("a", "implementer", 2);
    a.lifetime = Some(Lifetime::CurrentLoop);
    let r = Reconciler::new(
        config(vec![a, profile("b", "tester", 1)], 2, dir.path()),
        "x",
        dir.path().into(),
    );
    let s = run_bounded(
        &r,
        vec![
            op("a1", "implementer", 10),
            op("a2", "implementer", 50),
            op("t", "tester", 10),
        ],
        5,
    )
    .await;
    assert!(failures(&s).is_empty(), "{:?}", failures(&s));
    assert_eq!(completed(&s), ["a1", "t", "a2"]);
    let reclaimed: Vec<Vec<String>> = s
        .iter()
        .filter_map(|x| match &x.kind {
            SignalKind::CapacityReleased {
                trigger, released, ..
            } if &**trigger == "reclaim" => Some(released.iter().map(|n| n.to_string()).collect()),
            _ => None,
        })
        .collect();
    assert_eq!(reclaimed, [vec!["loop-x-a-1".to_string()]]);
}

/// RPC-38: nodes held by idle instances nobody may reclaim
/// (`manual_release`) with nothing running: the waiting operation fails
/// as `capacity_unavailable`, naming what holds the nodes.
#[tokio::test(start_paused = true)]
async fn rule_rpc_38_unreclaimable_nodes_fail_waiting_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = profile("a", "implementer", 2);
    a.lifetime = Some(Lifetime::ManualRelease);
    let r = Reconciler::new(
        config(vec![a, profile("b", "tester", 1)], 2, dir.path()),
        "x",
        dir.path().into(),
    );
    let s = run_bounded(
        &r,
        vec![
            op("a1", "implementer", 10),
            op("a2", "implementer", 50),
            op("t", "tester", 10),
        ],
        5,
    )
    .await;
    let f = failures(&s);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].0.as_str(), f[0].1.as_str()),
        ("t", "capacity_unavailable")
    );
    assert!(
        f[0].2.contains("max_nodes 2 is held by idle instances")
            && f[0].2.contains("loop-x-a-1 (manual_release)"),
        "{}",
        f[0].2
    );
    // It waited while a2 worked: it failed only once nothing could change.
    let failed_at = s
        .iter()
        .find(|x| matches!(&x.kind, SignalKind::Failed { .. }))
        .unwrap()
        .elapsed;
    assert!(failed_at >= 0.05, "{failed_at}");
}

/// RPC-39: a profile whose worktree cannot be created fails its waiting
/// operations as `capacity_unavailable` with git's reason, and the run
/// ends.
#[tokio::test(start_paused = true)]
async fn rule_rpc_39_a_profile_whose_worktree_cannot_start_fails_its_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = profile("w", "implementer", 2);
    w.workspace_mode = WorkspaceMode::GitWorktree;
    // The directory is no repository: every `git worktree add` fails.
    let r = Reconciler::new(config(vec![w], 2, dir.path()), "x", dir.path().into());
    let s = run_bounded(
        &r,
        vec![op("a", "implementer", 10), op("b", "implementer", 10)],
        2,
    )
    .await;
    let f = failures(&s);
    assert_eq!(f.len(), 2, "{f:?}");
    for (_, category, error) in &f {
        assert_eq!(category, "capacity_unavailable");
        assert!(
            error.contains("profile w cannot start instances: the play is not in a git repository"),
            "{error}"
        );
    }
    let e = r.ensure(&[("w".into(), 1)], None);
    // The run has ended: ensure is refused as not live.
    assert_eq!(e.unwrap_err().code, "not_live");
}

/// RPC-39 before the run ends: ensure of a broken profile lists it as
/// `profile_broken`.
#[tokio::test]
async fn rule_rpc_39_ensure_of_a_broken_profile_is_rejected_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = profile("w", "implementer", 2);
    w.workspace_mode = WorkspaceMode::GitWorktree;
    let r = Reconciler::new(config(vec![w], 2, dir.path()), "x", dir.path().into());
    r.ensure(&[("w".into(), 1)], None).unwrap();
    wait_until(&r, |a| a.iter().all(|a| a.state == InstanceState::Failed)).await;
    let e = r.ensure(&[("w".into(), 1)], None).unwrap();
    assert_eq!(e.rejected.len(), 1);
    assert_eq!(e.rejected[0].reason.as_str(), "profile_broken");
    assert!(e.rejected[0].detail.contains("not in a git repository"));
}

async fn wait_until(r: &Reconciler, done: impl Fn(&[playdeck::capacity::InstanceRecord]) -> bool) {
    // Real git worktrees: on a loaded two-core machine three of them have
    // taken over 10 s, and once (the whole suite at once) over a minute;
    // this bounds a hang, it does not time anything.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while std::time::Instant::now() < deadline {
        if done(&r.status().agents) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("never: {:#?}", r.status().agents);
}

// ----- names (RPC-45) ------------------------------------------------------------

/// RPC-45: a template that renders one name for two instances is refused
/// at load with its position; at run time a name that exists is never
/// given again.
#[test]
fn rule_rpc_45_instance_names_are_unique_at_load() {
    let src = "[play]\nname = \"c\"\n[capacity]\nname_template = \"{loop_id}-{profile}{index}\"\n\
               [role_profiles.c]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 12\n\
               [role_profiles.c1]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 1\n"
        .to_string()
        + OPS;
    let d = Play::from_str("c.toml", &src).unwrap_err();
    assert_eq!(
        d.items[0].message,
        "name_template \"{loop_id}-{profile}{index}\" gives profile c (instance 11) and profile c1 (instance 1) the same name \"20261129-120000-ab12-c11\""
    );
    assert_eq!(d.positions()[0], "c.toml:4:1");
    // The default template separates them.
    let ok = src.replace("name_template = \"{loop_id}-{profile}{index}\"\n", "");
    Play::from_str("c.toml", &ok).unwrap();
}

#[tokio::test]
async fn rule_rpc_45_a_name_that_exists_is_not_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = (*config(
        vec![profile("c", "implementer", 12), profile("c1", "tester", 1)],
        13,
        dir.path(),
    ))
    .clone();
    cfg.name_template = "{loop_id}-{profile}{index}".into();
    let r = Reconciler::new(Arc::new(cfg), "L", dir.path().into());
    r.ensure(&[("c1".into(), 1)], None).unwrap();
    let e = r.ensure(&[("c".into(), 12)], None).unwrap();
    let names: Vec<String> = e.agents.iter().map(|a| a.name.clone()).collect();
    assert!(names.contains(&"L-c12".to_string()), "{names:?}");
    let all: Vec<String> = r.status().agents.into_iter().map(|a| a.name).collect();
    let unique: std::collections::HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "{all:?}");
    assert_eq!(all.iter().filter(|n| *n == "L-c11").count(), 1);
    r.close().await;
    let log = std::fs::read_to_string(dir.path().join("capacity.events.jsonl")).unwrap();
    assert!(log.contains("\"event\":\"name_taken\""), "{log}");
}

// ----- pinned declarations at load (RPC-07) ----------------------------------------

#[test]
fn rule_rpc_07_pinned_declarations_are_checked_at_load() {
    let base = "[play]\nname = \"c\"\n[capacity]\nmax_nodes = 2\n";
    let e = Play::from_str(
        "c.toml",
        &format!("{base}[role_profiles.p]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 2\npinned = 1\n{OPS}"),
    )
    .unwrap_err();
    assert_eq!(
        e.items[0].message,
        "pinned of p declares pinned instances, but its reuse is prefer_idle"
    );
    let e = Play::from_str(
        "c.toml",
        &format!("{base}[role_profiles.p]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 2\nreuse = \"pinned\"\npinned = 3\n{OPS}"),
    )
    .unwrap_err();
    assert_eq!(
        e.items[0].message,
        "pinned = 3 of p is more than its max_instances 2"
    );
    let e = Play::from_str(
        "c.toml",
        &format!("{base}[role_profiles.p]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 2\nreuse = \"pinned\"\npinned = 2\n\
                  [role_profiles.q]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 1\nreuse = \"pinned\"\npinned = 1\n{OPS}"),
    )
    .unwrap_err();
    assert_eq!(
        e.items[0].message,
        "the declared pinned instances need 3 nodes; max_nodes is 2"
    );
    assert_eq!(e.positions()[0], "c.toml:16:1", "at q's pinned");
    // Pinned without a declaration: its operations are warned about.
    let play = Play::from_str(
        "c.toml",
        &format!("{base}[role_profiles.p]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 2\nreuse = \"pinned\"\n{OPS}"),
    )
    .unwrap();
    assert!(
        play.warnings
            .iter()
            .any(|w| w.contains("runs on pinned profile p that declares no instances")),
        "{:?}",
        play.warnings
    );
    // Pinned instances that take every node leave the other profiles none.
    let play = Play::from_str(
        "c.toml",
        &format!("{base}[role_profiles.p]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 2\nreuse = \"pinned\"\npinned = 2\n\
                  [role_profiles.q]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 1\n{OPS}"),
    )
    .unwrap();
    assert!(
        play.warnings.iter().any(|w| w.starts_with("c.toml:10:1: ")
            && w.contains("the pinned instances take all 2 of max_nodes, so role profile(s) q can never start an instance")),
        "{:?}",
        play.warnings
    );
}

/// One broken profile is one error: it is not also counted out of the
/// `max_instances` sum (which would advise lowering `max_nodes`).
#[test]
fn a_broken_profile_is_reported_once_not_again_as_a_short_sum() {
    let src = include_str!("../plays/bad_profile_provider.toml");
    assert_eq!(
        errors(src),
        ["provider of [role_profiles.b] names unknown agent \"nosuch\""]
    );
}

// ----- worktrees never lose work (issue 11), nor leak (RPC-52) -----------------------

/// A git repository with one commit holding `README.md`.
fn repo() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    std::fs::write(repo.path().join("README.md"), "hello\n").unwrap();
    git(repo.path(), &["add", "README.md"]);
    git(repo.path(), &["commit", "-q", "-m", "init"]);
    repo
}

fn worktree_profile(name: &str, role: &str, max: u32) -> RoleProfile {
    let mut p = profile(name, role, max);
    p.workspace_mode = WorkspaceMode::GitWorktree;
    p
}

/// A reconciler over a real git repository: profile `w` (git worktrees)
/// with `max` instances and nodes, its run directory inside the repository.
fn worktree_reconciler(max: u32) -> (tempfile::TempDir, std::path::PathBuf, Arc<Reconciler>) {
    let repo = repo();
    let run_dir = repo.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let r = Reconciler::new(
        config(
            vec![worktree_profile("w", "implementer", max)],
            max,
            repo.path(),
        ),
        "x",
        run_dir.clone(),
    );
    (repo, run_dir, r)
}

fn workspace_of(r: &Reconciler, name: &str) -> std::path::PathBuf {
    let a = r
        .status()
        .agents
        .into_iter()
        .find(|a| a.name == name)
        .unwrap();
    a.placement.workspace.unwrap().into()
}

/// Issue 11: a release never deletes work. A worktree holding a file the
/// agent created, or a change to a tracked file, stays with the reason
/// `uncommitted_changes` (in the answer and in capacity.json); once the
/// work is committed, the next release removes it and keeps the branch
/// that holds the commit. A clean worktree goes, branch and all.
#[tokio::test]
async fn issue_11_release_keeps_a_worktree_holding_uncommitted_work() {
    let (repo, run_dir, r) = worktree_reconciler(3);
    r.ensure(&[("w".into(), 3)], None).unwrap();
    wait_until(&r, |a| a.iter().all(|a| a.state == InstanceState::Ready)).await;
    let (w1, w2, w3) = (
        workspace_of(&r, "loop-x-w-1"),
        workspace_of(&r, "loop-x-w-2"),
        workspace_of(&r, "loop-x-w-3"),
    );
    std::fs::create_dir_all(w1.join("notes")).unwrap();
    std::fs::write(w1.join("notes/new.txt"), "the agent's work\n").unwrap();
    std::fs::write(w2.join("README.md"), "changed\n").unwrap();

    let first = serde_json::to_value(r.release_select(&[], &[]).unwrap()).unwrap();
    assert_eq!(first["status"], "partial");
    assert_eq!(first["released"], json!(["loop-x-w-3"]));
    let kept: Vec<(&str, &str, &str)> = first["retained"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap(),
                k["reason"].as_str().unwrap(),
                k["runtime_state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kept,
        [
            ("loop-x-w-1", "uncommitted_changes", "idle"),
            ("loop-x-w-2", "uncommitted_changes", "idle"),
        ]
    );
    let detail = |i: usize| first["retained"][i]["detail"].as_str().unwrap().to_string();
    assert!(detail(0).contains("notes/new.txt"), "{}", detail(0));
    assert!(
        detail(0).contains("branch playdeck/x/loop-x-w-1"),
        "{}",
        detail(0)
    );
    assert!(detail(1).contains("README.md"), "{}", detail(1));
    assert_eq!(
        std::fs::read_to_string(w1.join("notes/new.txt")).unwrap(),
        "the agent's work\n"
    );

    // The operator commits w-1's work on its branch; w-2 stays as it is.
    git(&w1, &["add", "-A"]);
    git(&w1, &["commit", "-q", "-m", "work"]);
    let second = r.release_select(&[], &[]).unwrap();
    assert_eq!(second.released, ["loop-x-w-1"]);
    assert_eq!(second.retained.len(), 1);
    assert_eq!(second.retained[0].name, "loop-x-w-2");
    r.close().await;

    assert!(!w1.exists() && !w3.exists(), "clean worktrees are removed");
    assert_eq!(
        std::fs::read_to_string(w2.join("README.md")).unwrap(),
        "changed\n"
    );
    let branches = git(repo.path(), &["branch", "--list", "playdeck/*"]);
    assert!(
        branches.contains("playdeck/x/loop-x-w-1"),
        "the branch with the commit stays: {branches}"
    );
    assert!(branches.contains("playdeck/x/loop-x-w-2"), "{branches}");
    assert!(!branches.contains("playdeck/x/loop-x-w-3"), "{branches}");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("capacity.json")).unwrap())
            .unwrap();
    let w2rec = file["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "loop-x-w-2")
        .unwrap();
    assert_eq!(
        (w2rec["state"].as_str(), w2rec["reason"].as_str()),
        (Some("ready"), Some("uncommitted_changes"))
    );
    let log = std::fs::read_to_string(run_dir.join("capacity.events.jsonl")).unwrap();
    assert!(log.contains("\"branch_kept\":true"), "{log}");
}

/// RPC-52: an instance whose worktree is still being added when the run
/// ends is released as soon as the worktree is there; `close` waits for
/// it, so nothing leaks.
#[tokio::test]
async fn rule_rpc_52_a_worktree_starting_at_run_end_is_released_when_ready() {
    let (repo, run_dir, r) = worktree_reconciler(1);
    let e = r.ensure(&[("w".into(), 1)], None).unwrap();
    assert_eq!(e.agents[0].state, InstanceState::Starting);
    let ws = std::path::PathBuf::from(e.agents[0].placement.workspace.clone().unwrap());
    r.run_finished();
    r.close().await;
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("capacity.json")).unwrap())
            .unwrap();
    assert_eq!(file["agents"][0]["state"], "released");
    assert!(!ws.exists(), "{} leaked", ws.display());
    let list = git(repo.path(), &["worktree", "list"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(!git(repo.path(), &["branch"]).contains("playdeck/"));
}

/// RPC-52: a finished run's file that still shows an instance starting
/// (its process is gone) is released offline like an idle one.
#[tokio::test]
async fn rule_rpc_52_offline_release_takes_a_starting_record_of_a_finished_run() {
    let (_repo, run_dir, r) = worktree_reconciler(1);
    r.ensure(&[("w".into(), 1)], None).unwrap();
    r.close().await;
    let path = run_dir.join("capacity.json");
    let mut file: playdeck::capacity::CapacityFile =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    file.agents[0].state = InstanceState::Starting;
    file.run_finished = true;
    std::fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    let ws = std::path::PathBuf::from(file.agents[0].placement.workspace.clone().unwrap());
    assert!(ws.exists());
    let out = playdeck::capacity::offline::release(&run_dir, &[], &[], false).unwrap();
    assert_eq!(out.released, ["loop-x-w-1"]);
    assert!(!ws.exists());
}

/// Issue 27: codex's config overrides that set the model or the thinking
/// level are refused at load like `--model`, in every form, each at its
/// position; other overrides pass.
#[test]
fn startup_args_setting_the_model_through_config_are_refused_at_load() {
    let src = include_str!("../plays/bad_startup_args_configure_the_model.toml");
    let e = errors(src);
    for m in [
        "startup_args of coder sets the model (-c model=o3)",
        "startup_args of coder sets the model (--config=model=o3)",
        "startup_args of coder sets thinking (-cmodel_reasoning_effort=low)",
        "startup_args of coder sets thinking (--config model_reasoning_effort=high)",
    ] {
        assert!(e.iter().any(|x| x == m), "missing {m:?} in {e:#?}");
    }
    assert_eq!(e.len(), 4, "the network override passes: {e:#?}");
}

/// Issue 43: every form that chooses the model is refused at load, not
/// dropped when the command line is built: the attached short form
/// (`-mo3`), codex's config profiles (`-p`, `--profile`, `-c profile=…`)
/// and providers (`-c model_provider=…`, `--oss`). `-p` is refused for a
/// codex provider only (elsewhere it is the print or prompt flag).
#[test]
fn startup_args_choosing_the_model_in_any_form_are_refused_at_load() {
    let src = include_str!("../plays/bad_startup_args_choose_the_model.toml");
    let e = errors(src);
    for m in [
        "startup_args of coder sets the model (-mo3)",
        "startup_args of coder sets the model (a config profile) (-p fast)",
        "startup_args of coder sets the model (a config profile) (--profile=fast)",
        "startup_args of coder sets the model (a config profile) (-c profile=fast)",
        "startup_args of coder sets the model (its provider) (-cmodel_provider=ollama)",
        "startup_args of coder sets the model (the local open-source provider) (--oss)",
    ] {
        assert!(e.iter().any(|x| x == m), "missing {m:?} in {e:#?}");
    }
    assert_eq!(e.len(), 6, "a flag that chooses no model passes: {e:#?}");
}

/// RPC-22: ensure answers with ready targets or structured blockers —
/// never `ok` over instances still starting. A git worktree takes a
/// moment: within the bound the answer waits for it (ready, `ok`); past
/// the bound it is `partial` and names the instances still starting.
#[tokio::test]
async fn rule_rpc_22_ensure_waits_for_ready_or_names_the_instances_still_starting() {
    let (_repo, _run_dir, r) = worktree_reconciler(3);
    // No time at all: what was just made is still starting.
    let e = r
        .ensure_ready(&[("w".into(), 1)], None, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(e.status.as_str(), "partial", "{e:?}");
    assert_eq!(e.starting, ["loop-x-w-1"]);
    assert!(e.rejected.is_empty());
    // With time: the answer waits until both are ready.
    let e = r
        .ensure_ready(
            &[("w".into(), 2)],
            None,
            std::time::Duration::from_secs(120),
        )
        .await
        .unwrap();
    assert_eq!(e.status.as_str(), "ok", "{e:?}");
    assert!(e.starting.is_empty());
    assert_eq!(e.agents.len(), 2);
    assert!(
        e.agents.iter().all(|a| a.state == InstanceState::Ready),
        "{:?}",
        e.agents
    );
    let json = serde_json::to_value(&e).unwrap();
    assert!(json.get("starting").is_none(), "only when some are: {json}");
    r.close().await;
}
