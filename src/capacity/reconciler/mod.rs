//! The reconciler inside every run with capacity: it leases instances to
//! operations (the kernel's lease seam), creates them within
//! `max_instances` and `max_nodes` following each profile's reuse policy,
//! releases them by lifetime or on request (idle-only), and persists every
//! change to `capacity.json` and `capacity.events.jsonl`.
//!
//! State lives behind one mutex held for short synchronous sections; file
//! writes and `git` run on a writer thread, never under the lock. The one
//! `git` a release runs itself — `git status` of a worktree it would
//! remove, so work nobody committed is never deleted — runs with the lock
//! released, the instances it concerns marked as leaving meanwhile.

mod ensure;
mod release;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak, mpsc};

use serde_json::{Value, json};

use super::config::{CapacityConfig, Lifetime, Reuse, RoleProfile, WorkspaceMode};
use super::state::{
    CapacityError, CapacityFile, EnsureResult, InstanceRecord, InstanceState, Outcome, Placement,
    RECORD_TYPE, RejectReason, Rejected, ReleaseResult, RequestRecord, SCHEMA_VERSION, Selection,
    Source, Standing, StatusResult, now, plan_release, retain_working, settle_idle,
};
use super::workspace;
use crate::kernel::{External, ExternalSender, Lease, LeaseId, Retained, SignalKind};

mod lease;
mod writer;

use writer::{Persist, writer_loop};

/// Runtime facts about an instance that are not part of its record.
#[derive(Default)]
struct Runtime {
    lease: Option<LeaseId>,
    served: u32,
    workspace: Option<PathBuf>,
    group: Option<String>,
    /// A release is checking its worktree: nobody may lease it meanwhile.
    leaving: bool,
    /// The run ended while its worktree was being added: it goes as soon
    /// as the worktree is there.
    release_when_ready: bool,
}

/// A shared git worktree (a `workspace_group`, or one instance's own).
struct Group {
    path: PathBuf,
    branch: String,
    refs: usize,
    ready: bool,
}

#[derive(Default)]
struct CapState {
    recs: Vec<InstanceRecord>,
    rt: Vec<Runtime>,
    next_index: HashMap<String, u32>,
    next_node: u32,
    waiting: HashMap<String, usize>,
    requests: Vec<RequestRecord>,
    groups: HashMap<String, Group>,
    /// Profiles whose instances cannot start, with the error.
    broken: HashMap<String, String>,
    created_at: String,
    finished: bool,
    /// The declared pinned instances (`pinned = N`) exist.
    declared: bool,
}

pub struct Reconciler {
    cfg: Arc<CapacityConfig>,
    loop_id: Arc<str>,
    run_dir: PathBuf,
    capacity_ref: String,
    st: Mutex<CapState>,
    events: OnceLock<ExternalSender>,
    persist: Mutex<Option<mpsc::Sender<Persist>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// `git worktree add` tasks: [`Reconciler::close`] waits for them, so a
    /// worktree that finishes starting after the run is released, not
    /// leaked.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    me: Weak<Reconciler>,
    next_lease: AtomicU64,
}

/// Requests kept in the file: enough history to read, bounded.
const MAX_REQUESTS: usize = 200;

impl Reconciler {
    pub fn new(cfg: Arc<CapacityConfig>, loop_id: &str, run_dir: PathBuf) -> Arc<Self> {
        let (tx, rx) = mpsc::channel();
        let capacity_ref = run_dir.join("capacity.json").display().to_string();
        let file_path = run_dir.join("capacity.json");
        let events_path = run_dir.join("capacity.events.jsonl");
        let writer = std::thread::Builder::new()
            .name("capacity-writer".into())
            .spawn(move || writer_loop(rx, file_path, events_path))
            .expect("a writer thread");
        let r = Arc::new_cyclic(|me| Reconciler {
            cfg,
            loop_id: Arc::from(loop_id),
            run_dir,
            capacity_ref,
            st: Mutex::new(CapState {
                created_at: now(),
                ..CapState::default()
            }),
            events: OnceLock::new(),
            persist: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            tasks: Mutex::new(Vec::new()),
            me: me.clone(),
            next_lease: AtomicU64::new(1),
        });
        r.persist_now(
            &r.lock(),
            vec![json!({"at": now(), "event": "opened", "loop_id": loop_id})],
        );
        r
    }

    pub fn config(&self) -> &CapacityConfig {
        &self.cfg
    }

    /// Takes over the instances a stopped run left (`capacity.json`): those
    /// whose workspace still exists are idle again (the operations they ran
    /// start a new attempt); the rest are released as orphans. Returns the
    /// orphans' names. Call before attaching to the run.
    pub fn adopt(&self, previous: &CapacityFile) -> Vec<String> {
        let mut st = self.lock();
        let mut orphaned = Vec::new();
        let mut events = Vec::new();
        for rec in &previous.agents {
            let mut rec = rec.clone();
            let mut rt = Runtime::default();
            *st.next_index.entry(rec.profile.clone()).or_insert(0) += 1;
            st.next_node += 1;
            if rec.state.is_active() {
                let ws = rec.placement.workspace.as_deref().map(PathBuf::from);
                rec.op = None;
                rec.updated_at = now();
                if ws.as_ref().is_some_and(|p| p.is_dir()) {
                    rec.state = InstanceState::Ready;
                    if rec.workspace_mode == WorkspaceMode::GitWorktree
                        && let (Some(path), Some(branch)) =
                            (ws.clone(), rec.placement.branch.clone())
                    {
                        let key = self
                            .cfg
                            .profiles
                            .get(&rec.profile)
                            .and_then(|p| p.workspace_group.clone())
                            .unwrap_or_else(|| rec.name.clone());
                        let g = st.groups.entry(key.clone()).or_insert(Group {
                            path,
                            branch,
                            refs: 0,
                            ready: true,
                        });
                        g.refs += 1;
                        rt.group = Some(key);
                    }
                    rt.workspace = ws;
                    events.push(json!({"at": now(), "event": "adopted", "name": rec.name}));
                } else {
                    rec.state = InstanceState::Released;
                    orphaned.push(rec.name.clone());
                    if let (Some(repo), Some(path), Some(branch)) = (
                        self.cfg.repo_root.clone(),
                        ws.clone(),
                        rec.placement.branch.clone(),
                    ) {
                        self.cleanup(repo, path, branch);
                    }
                    events.push(json!({"at": now(), "event": "orphaned", "name": rec.name, "detail": "its workspace is gone"}));
                }
            }
            st.recs.push(rec);
            st.rt.push(rt);
        }
        for i in 0..st.recs.len() {
            if previous.agents[i].state.is_active() {
                events.push(self.announce(&st, i));
            }
        }
        self.persist_now(&st, events);
        orphaned
    }

    /// Connects the reconciler's signals to a run's stream.
    pub fn attach(&self, events: ExternalSender) {
        let _ = self.events.set(events);
    }

    fn lock(&self) -> MutexGuard<'_, CapState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn emit(&self, kind: SignalKind) {
        if let Some(tx) = self.events.get() {
            let _ = tx.send(External::Signal(kind));
        }
    }

    fn changed(&self) {
        if let Some(tx) = self.events.get() {
            let _ = tx.send(External::CapacityChanged);
        }
    }

    fn file(&self, st: &CapState) -> CapacityFile {
        CapacityFile {
            schema_version: SCHEMA_VERSION,
            record_type: RECORD_TYPE.into(),
            loop_id: self.loop_id.to_string(),
            status: CapacityFile::status_of(&st.recs),
            max_nodes: self.cfg.max_nodes,
            run_finished: st.finished,
            repo_root: self.cfg.repo_root.as_ref().map(|p| p.display().to_string()),
            agents: st.recs.clone(),
            requests: st.requests.clone(),
            created_at: st.created_at.clone(),
            updated_at: now(),
        }
    }

    fn persist_now(&self, st: &CapState, events: Vec<Value>) {
        let msg = Persist::Write {
            file: Box::new(self.file(st)),
            events,
        };
        if let Some(tx) = &*self.persist.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = tx.send(msg);
        }
    }

    fn cleanup(&self, repo: PathBuf, path: PathBuf, branch: String) {
        if let Some(tx) = &*self.persist.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = tx.send(Persist::Cleanup { repo, path, branch });
        }
    }

    /// Signals and records one instance's new state.
    fn announce(&self, st: &CapState, i: usize) -> Value {
        let r = &st.recs[i];
        self.emit(SignalKind::Instance {
            name: Arc::from(r.name.as_str()),
            profile: Arc::from(r.profile.as_str()),
            role: Arc::from(r.role.as_str()),
            state: r.state,
            lifetime: r.lifetime,
            source: r.source,
            node_id: Arc::from(r.node_id.as_str()),
            op: r.op.as_deref().map(Arc::from),
        });
        json!({"at": now(), "event": "instance", "name": r.name, "state": r.state, "op": r.op})
    }

    fn active(st: &CapState, profile: Option<&str>) -> usize {
        st.recs
            .iter()
            .filter(|r| r.state.is_active() && profile.is_none_or(|p| r.profile == p))
            .count()
    }

    /// Whether one more instance of `p` fits, and what stops it.
    fn can_create(&self, st: &CapState, p: &RoleProfile) -> Result<(), Blocked> {
        if let Some(err) = st.broken.get(&p.name) {
            return Err(Blocked::Broken(err.clone()));
        }
        if Self::active(st, Some(&p.name)) >= p.max_instances as usize {
            return Err(Blocked::MaxInstances);
        }
        if Self::active(st, None) >= self.cfg.max_nodes as usize {
            return Err(Blocked::MaxNodes);
        }
        Ok(())
    }

    fn blocked_reason(&self, b: &Blocked, p: &RoleProfile) -> String {
        match b {
            Blocked::Broken(err) => {
                format!("capacity: profile {} cannot start instances: {err}", p.name)
            }
            Blocked::MaxInstances => format!(
                "capacity: profile {} at max_instances {}",
                p.name, p.max_instances
            ),
            Blocked::MaxNodes => format!("capacity: max_nodes {}", self.cfg.max_nodes),
        }
    }

    /// The instance name for the next index of `p` that no instance of the
    /// run has: names key worktrees and branches, so a template that
    /// renders one name twice (with `{profile}{index}`, `coder` number 11
    /// and `coder1` number 1) never makes two instances share them. The
    /// colliding index is passed over, and the event log says so.
    fn fresh_name(&self, st: &mut CapState, p: &RoleProfile, events: &mut Vec<Value>) -> String {
        loop {
            let index = {
                let n = st.next_index.entry(p.name.clone()).or_insert(0);
                *n += 1;
                *n
            };
            let name = self.cfg.instance_name(&self.loop_id, &p.name, index);
            if !st.recs.iter().any(|r| r.name == name) {
                return name;
            }
            tracing::warn!(
                "instance name {name} exists already; profile {} takes the next index",
                p.name
            );
            events.push(json!({"at": now(), "event": "name_taken", "name": name, "profile": p.name, "index": index}));
        }
    }

    /// Creates an instance of `p`; `inplace` ones are ready at once, git
    /// worktrees start in the background.
    fn create(
        &self,
        st: &mut CapState,
        p: &RoleProfile,
        lifetime: Option<Lifetime>,
        events: &mut Vec<Value>,
    ) -> usize {
        let name = self.fresh_name(st, p, events);
        st.next_node += 1;
        let at = now();
        let mut rt = Runtime::default();
        let mut placement = Placement {
            mode: "execution_node".into(),
            workspace: None,
            branch: None,
        };
        let mut state = InstanceState::Ready;
        match p.workspace_mode {
            WorkspaceMode::Inplace => {
                placement.workspace = Some(self.cfg.workspace.display().to_string());
                rt.workspace = Some(self.cfg.workspace.clone());
            }
            WorkspaceMode::GitWorktree => {
                let key = p.workspace_group.clone().unwrap_or_else(|| name.clone());
                let group = st.groups.entry(key.clone()).or_insert_with(|| Group {
                    path: self.run_dir.join("worktrees").join(&key),
                    branch: format!("playdeck/{}/{key}", self.loop_id),
                    refs: 0,
                    ready: false,
                });
                group.refs += 1;
                placement.workspace = Some(group.path.display().to_string());
                placement.branch = Some(group.branch.clone());
                rt.workspace = Some(group.path.clone());
                let start = group.refs == 1;
                if !group.ready {
                    state = InstanceState::Starting;
                }
                if start {
                    self.start_worktree(key.clone(), group.path.clone(), group.branch.clone());
                }
                rt.group = Some(key);
            }
        }
        st.recs.push(InstanceRecord {
            name,
            profile: p.name.clone(),
            role: p.role.clone(),
            provider: p.provider.clone(),
            model: p.model.clone(),
            thinking: p.thinking,
            workspace_mode: p.workspace_mode,
            lifetime: lifetime.unwrap_or_else(|| self.cfg.lifetime_of(p)),
            loop_id: self.loop_id.to_string(),
            node_id: format!("node{}", st.next_node),
            placement,
            source: Source::Created,
            state,
            op: None,
            error: None,
            created_at: at.clone(),
            updated_at: at,
            retained: None,
            pinned: self.cfg.reuse_of(p) == Reuse::Pinned,
        });
        st.rt.push(rt);
        let i = st.recs.len() - 1;
        events.push(self.announce(st, i));
        i
    }

    /// The pinned instances profiles declare (`pinned = N`), made when the
    /// run first asks anything of capacity (its first operation): the
    /// profile's whole set, counting what a resumed run took over.
    fn declare(&self, st: &mut CapState, events: &mut Vec<Value>) {
        // After the run nothing is made: a status of a finished run makes
        // no instances.
        if st.declared || st.finished {
            return;
        }
        st.declared = true;
        for p in self.cfg.profiles.values() {
            if self.cfg.reuse_of(p) != Reuse::Pinned {
                continue;
            }
            while Self::active(st, Some(&p.name)) < p.pinned as usize {
                if let Err(b) = self.can_create(st, p) {
                    // Validation keeps Σ pinned within max_nodes; a resumed
                    // run's instances may still hold the nodes.
                    let reason = self.blocked_reason(&b, p);
                    tracing::warn!("declared pinned instances of {}: {reason}", p.name);
                    events.push(json!({"at": now(), "event": "declared_short", "profile": p.name, "detail": reason}));
                    break;
                }
                self.create(st, p, None, events);
            }
        }
    }

    /// Starts `git worktree add` in the background; called with the state
    /// locked, so the outcome is reported from the task.
    fn start_worktree(&self, key: String, path: PathBuf, branch: String) {
        let repo = self.cfg.repo_root.clone();
        let me = self.me.clone();
        let task = tokio::spawn(async move {
            let result = match repo {
                Some(repo) => workspace::create_worktree(&repo, &path, &branch).await,
                // Visible on the instance.
                None => Err(workspace::WorktreeError::NoRepository),
            };
            if let Some(me) = me.upgrade() {
                me.worktree_done(&key, result);
            }
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    fn worktree_done(&self, key: &str, result: Result<(), workspace::WorktreeError>) {
        let result = result.map_err(|e| e.to_string());
        let mut events = Vec::new();
        {
            let mut st = self.lock();
            if let Some(g) = st.groups.get_mut(key) {
                g.ready = result.is_ok();
            }
            let members: Vec<usize> = (0..st.recs.len())
                .filter(|&i| {
                    st.rt[i].group.as_deref() == Some(key)
                        && st.recs[i].state == InstanceState::Starting
                })
                .collect();
            let mut gone = Vec::new();
            for i in members {
                let at = now();
                match &result {
                    // The run ended meanwhile: nobody worked in the new
                    // worktree, it goes at once.
                    Ok(()) if st.rt[i].release_when_ready => {
                        st.recs[i].state = InstanceState::Released;
                        st.recs[i].retained = None;
                        gone.push(st.recs[i].name.clone());
                    }
                    Ok(()) => st.recs[i].state = InstanceState::Ready,
                    Err(e) => {
                        st.recs[i].state = InstanceState::Failed;
                        st.recs[i].error = Some(e.clone());
                        let profile = st.recs[i].profile.clone();
                        st.broken.insert(profile, e.clone());
                    }
                }
                st.recs[i].updated_at = at;
                events.push(self.announce(&st, i));
                if st.recs[i].state == InstanceState::Released {
                    self.free_workspace(&mut st, i);
                }
            }
            if result.is_err() {
                st.groups.remove(key);
            }
            if !gone.is_empty() {
                let detail = json!({"trigger": "run_end", "released": gone, "detail": "its worktree was still being added when the run ended"});
                events.push(json!({"at": now(), "event": "release", "detail": detail}));
                push_request(&mut st, "release", detail);
            }
            self.persist_now(&st, events);
        }
        self.changed();
    }

    fn grant(&self, st: &mut CapState, i: usize, op: &str, events: &mut Vec<Value>) -> Lease {
        let id = self.next_lease.fetch_add(1, Ordering::Relaxed);
        let rt = &mut st.rt[i];
        rt.lease = Some(id);
        let reused = rt.served > 0;
        rt.served += 1;
        let workspace = rt.workspace.clone();
        let r = &mut st.recs[i];
        r.state = InstanceState::Busy;
        r.op = Some(op.to_string());
        // Whatever kept it before, it works now.
        r.retained = None;
        r.source = if reused {
            Source::Reused
        } else {
            Source::Created
        };
        r.updated_at = now();
        let instance = Arc::from(r.name.as_str());
        let agent = Some(Arc::from(r.provider.as_str()));
        let profile = Some(Arc::from(r.profile.as_str()));
        events.push(self.announce(st, i));
        Lease {
            id,
            instance,
            workspace,
            agent,
            profile,
        }
    }

    /// The lifetimes a release takes when asked for none: `current_round`
    /// while the run goes on, `current_loop` too once it has ended.
    fn due_now(st: &CapState) -> Vec<Lifetime> {
        if st.finished {
            vec![Lifetime::CurrentRound, Lifetime::CurrentLoop]
        } else {
            vec![Lifetime::CurrentRound]
        }
    }

    pub fn status(&self) -> StatusResult {
        let mut st = self.lock();
        let mut events = Vec::new();
        self.declare(&mut st, &mut events);
        if !events.is_empty() {
            self.persist_now(&st, events);
        }
        let waiting: BTreeMap<String, usize> = st
            .waiting
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let mut desired: BTreeMap<String, usize> = BTreeMap::new();
        for name in self.cfg.profiles.keys() {
            let busy = st
                .recs
                .iter()
                .filter(|r| {
                    r.profile == *name
                        && matches!(r.state, InstanceState::Busy | InstanceState::Retained)
                })
                .count();
            desired.insert(name.clone(), busy + waiting.get(name).copied().unwrap_or(0));
        }
        let mut blocked = Vec::new();
        for (name, n) in &waiting {
            if let Some(p) = self.cfg.profiles.get(name)
                && let Err(b) = self.can_create(&st, p)
            {
                blocked.push(format!(
                    "{n} operation(s) wait — {}",
                    self.blocked_reason(&b, p)
                ));
            }
        }
        for r in st.recs.iter().filter(|r| r.state.is_active()) {
            if let Some(ret) = &r.retained {
                blocked.push(format!("{} retained: {}", r.name, ret.reason));
            }
        }
        StatusResult {
            status: "ok".into(),
            loop_id: self.loop_id.to_string(),
            capacity_ref: self.capacity_ref.clone(),
            state: CapacityFile::status_of(&st.recs),
            live: !st.finished,
            max_nodes: self.cfg.max_nodes,
            active_nodes: Self::active(&st, None),
            agents: st.recs.clone(),
            waiting,
            desired,
            blocked,
        }
    }

    /// Waits for worktrees still being added (an instance that finishes
    /// starting after the run is released then), then until everything
    /// written so far is on disk, then stops the writer. Called once the
    /// run is over.
    pub async fn close(&self) {
        loop {
            let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
            if tasks.is_empty() {
                break;
            }
            for t in tasks {
                let _ = t.await;
            }
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sender = self
            .persist
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(s) = sender {
            let _ = s.send(Persist::Flush(tx));
            drop(s);
            let _ = rx.await;
        }
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = writer {
            let _ = tokio::task::spawn_blocking(move || w.join()).await;
        }
    }
}

/// What stops a new instance.
enum Blocked {
    Broken(String),
    MaxInstances,
    MaxNodes,
}

fn push_request(st: &mut CapState, kind: &str, detail: Value) {
    st.requests.push(RequestRecord {
        kind: kind.into(),
        at: now(),
        detail,
    });
    if st.requests.len() > MAX_REQUESTS {
        let extra = st.requests.len() - MAX_REQUESTS;
        st.requests.drain(..extra);
    }
}
