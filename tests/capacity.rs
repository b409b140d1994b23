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

    let released = serde_json::to_value(r.release_idle()).unwrap();
    assert_eq!(
        keys(&released),
        [
            "capacity_ref",
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
    let twice = serde_json::to_value(r.release_idle()).unwrap();
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
async fn ensure_errors_are_typed_and_nothing_is_created() {
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
    assert_eq!(code(&[("coder", 3)]).code, "over_max_instances");
    assert_eq!(
        code(&[("coder", 1), ("coder", 1)]).code,
        "duplicate_profile"
    );
    r.ensure(&[("coder".into(), 2)], None).unwrap();
    // 2 + 1 fits max_nodes 3; the same with a 4th node does not.
    let tight = Reconciler::new(
        config(
            vec![
                profile("coder", "implementer", 2),
                profile("checker", "tester", 2),
            ],
            3,
            dir.path(),
        ),
        "r2",
        dir.path().join("r2"),
    );
    std::fs::create_dir_all(dir.path().join("r2")).unwrap();
    let w: Vec<(String, u32)> = vec![("coder".into(), 2), ("checker".into(), 2)];
    assert_eq!(tight.ensure(&w, None).unwrap_err().code, "over_max_nodes");
    assert_eq!(
        tight.status().active_nodes,
        0,
        "a rejected ensure creates nothing"
    );
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
    let first = r.release_idle();
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
    let later = r.release_idle();
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
async fn prefer_idle_reuses_always_new_creates_pinned_waits() {
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

    // pinned: only existing instances; without one the operation waits.
    let mut p = profile("coder", "implementer", 1);
    p.reuse = Some(Reuse::Pinned);
    let r = Reconciler::new(
        config(vec![p], 1, dir.path()),
        "c",
        dir.path().to_path_buf(),
    );
    assert!(
        matches!(r.acquire(&req("x", "implementer")), LeaseAnswer::Wait { reason, .. } if reason.contains("pinned"))
    );
    r.ensure(&[("coder".into(), 1)], Some(Lifetime::ManualRelease))
        .unwrap();
    assert!(matches!(
        r.acquire(&req("x", "implementer")),
        LeaseAnswer::Granted(_)
    ));
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
    // The operator releases it, after the run.
    r.close().await;
    let done = playdeck::capacity::offline::release(dir.path()).unwrap();
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
    let src = format!(
        "[play]\nname = \"c\"\n[capacity]\nenabled = true\nmax_nodes = 9\ndefault_lifetime = \"forever\"\nname_template = \"{{profile}}-{{index}}\"\nreuse = \"sometimes\"\nextra = 1\n\
         [role_profiles.coder]\nrole = \"coder_role\"\nprovider = \"gpt\"\nthinking = \"extreme\"\nworkspace_group = \"g\"\nstartup_args = [\"--model=opus\"]\nmax_instances = 0\n\
         [role_profiles.fine]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 2\n\
         [role_profiles.noprov]\nrole = \"tester\"\nmax_instances = 1\n{OPS}"
    );
    let e = errors(&src);
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
    let src = format!(
        "[play]\nname = \"c\"\n[capacity]\n[role_profiles.a]\nrole = \"implementer\"\nprovider = \"sim\"\nworkspace_mode = \"git-worktree\"\nmax_instances = 1\n{OPS}"
    );
    let d = Play::from_str_in("c.toml", &src, dir.path()).unwrap_err();
    assert_eq!(
        d.items[0].message,
        "role profile a uses git-worktree, but the play is not in a git repository"
    );
}

// ----- git worktrees --------------------------------------------------------------------

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn git_worktrees_are_added_per_instance_and_removed_on_release() {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    git(
        repo.path(),
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
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
    assert_eq!(instance_of_starts(&s).len(), 2);
    let agents = r.status().agents;
    assert_eq!(agents.len(), 2);
    for a in &agents {
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
    assert_eq!(list.lines().count(), 3, "{list}");
    let released = r.release_idle();
    assert_eq!(released.released_count, 2);
    r.close().await;
    let list = git(repo.path(), &["worktree", "list"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    for a in &agents {
        assert!(!Path::new(a.placement.workspace.as_ref().unwrap()).exists());
    }
    assert!(
        !git(repo.path(), &["branch"]).contains("playdeck/"),
        "empty branches are deleted"
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
