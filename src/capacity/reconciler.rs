//! The reconciler inside every run with capacity: it leases instances to
//! operations (the kernel's lease seam), creates them within
//! `max_instances` and `max_nodes` following each profile's reuse policy,
//! releases them by lifetime or on request (idle-only), and persists every
//! change to `capacity.json` and `capacity.events.jsonl`.
//!
//! State lives behind one mutex held for short synchronous sections; file
//! writes and `git` run on a writer thread, never under the lock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak, mpsc};

use serde_json::{Value, json};

use super::config::{CapacityConfig, Lifetime, Reuse, RoleProfile, WorkspaceMode};
use super::state::{
    CapacityError, CapacityFile, EnsureResult, InstanceRecord, InstanceState, Placement,
    RECORD_TYPE, ReleaseResult, RequestRecord, SCHEMA_VERSION, Source, StatusResult, now,
    release_records,
};
use super::workspace;
use crate::kernel::{
    External, ExternalSender, Lease, LeaseAnswer, LeaseId, LeaseProvider, LeaseRequest, Retained,
    SignalKind,
};

/// Runtime facts about an instance that are not part of its record.
#[derive(Default)]
struct Runtime {
    lease: Option<LeaseId>,
    served: u32,
    workspace: Option<PathBuf>,
    group: Option<String>,
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
}

enum Persist {
    Write {
        file: Box<CapacityFile>,
        events: Vec<Value>,
    },
    Cleanup {
        repo: PathBuf,
        path: PathBuf,
        branch: String,
    },
    Flush(tokio::sync::oneshot::Sender<()>),
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

    /// Whether one more instance of `p` fits; the reason it does not.
    fn can_create(&self, st: &CapState, p: &RoleProfile) -> Result<(), String> {
        if let Some(err) = st.broken.get(&p.name) {
            return Err(format!(
                "capacity: profile {} cannot start instances: {err}",
                p.name
            ));
        }
        if Self::active(st, Some(&p.name)) >= p.max_instances as usize {
            return Err(format!(
                "capacity: profile {} at max_instances {}",
                p.name, p.max_instances
            ));
        }
        if Self::active(st, None) >= self.cfg.max_nodes as usize {
            return Err(format!("capacity: max_nodes {}", self.cfg.max_nodes));
        }
        Ok(())
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
        let index = {
            let n = st.next_index.entry(p.name.clone()).or_insert(0);
            *n += 1;
            *n
        };
        st.next_node += 1;
        let name = self.cfg.instance_name(&self.loop_id, &p.name, index);
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
        });
        st.rt.push(rt);
        let i = st.recs.len() - 1;
        events.push(self.announce(st, i));
        i
    }

    /// Starts `git worktree add` in the background; called with the state
    /// locked, so the outcome is reported from the task.
    fn start_worktree(&self, key: String, path: PathBuf, branch: String) {
        let repo = self.cfg.repo_root.clone();
        let me = self.me.clone();
        tokio::spawn(async move {
            let result = match repo {
                Some(repo) => workspace::create_worktree(&repo, &path, &branch).await,
                // Validation refuses git-worktree outside a repository; this
                // is the same refusal at run time, visible on the instance.
                None => Err("the play is not in a git repository".into()),
            };
            if let Some(me) = me.upgrade() {
                me.worktree_done(&key, result);
            }
        });
    }

    fn worktree_done(&self, key: &str, result: Result<(), String>) {
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
            for i in members {
                let at = now();
                match &result {
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
            }
            if result.is_err() {
                st.groups.remove(key);
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

    /// Releases what `select` picks, idle-only, and frees the workspaces of
    /// what was released.
    fn release_where(
        &self,
        select: impl Fn(&InstanceRecord) -> bool,
        trigger: &str,
    ) -> ReleaseResult {
        let result = {
            let mut st = self.lock();
            let before: Vec<(InstanceState, bool)> = st
                .recs
                .iter()
                .map(|r| (r.state, r.retained.is_some()))
                .collect();
            let waiting = st.waiting.clone();
            let mut recs = std::mem::take(&mut st.recs);
            let result = release_records(
                &mut recs,
                select,
                |p| waiting.get(p).copied().unwrap_or(0),
                &self.loop_id,
                &self.capacity_ref,
            );
            st.recs = recs;
            let mut events = Vec::new();
            for (i, was) in before.into_iter().enumerate() {
                if was != (st.recs[i].state, st.recs[i].retained.is_some()) {
                    events.push(self.announce(&st, i));
                }
                if was.0 != InstanceState::Released && st.recs[i].state == InstanceState::Released {
                    self.free_workspace(&mut st, i);
                }
            }
            let released: Vec<Arc<str>> = result
                .released
                .iter()
                .map(|n| Arc::from(n.as_str()))
                .collect();
            let retained: Vec<Retained> = result
                .retained
                .iter()
                .map(|r| Retained {
                    name: Arc::from(r.name.as_str()),
                    reason: Arc::from(r.reason.as_str()),
                    runtime_state: Arc::from(r.runtime_state.as_str()),
                    queue_depth: r.queue_depth,
                })
                .collect();
            self.emit(SignalKind::CapacityReleased {
                trigger: Arc::from(trigger),
                released: released.into(),
                retained: retained.into(),
            });
            let detail = json!({"trigger": trigger, "released": result.released, "retained": result.retained});
            events.push(json!({"at": now(), "event": "release", "detail": detail}));
            push_request(&mut st, "release", detail);
            self.persist_now(&st, events);
            result
        };
        self.changed();
        result
    }

    fn free_workspace(&self, st: &mut CapState, i: usize) {
        let Some(key) = st.rt[i].group.take() else {
            return;
        };
        let done = match st.groups.get_mut(&key) {
            Some(g) => {
                g.refs = g.refs.saturating_sub(1);
                g.refs == 0
            }
            None => false,
        };
        if done
            && let Some(g) = st.groups.remove(&key)
            && let Some(repo) = self.cfg.repo_root.clone()
        {
            self.cleanup(repo, g.path, g.branch);
        }
    }

    /// The operator's release: every idle instance, whatever its lifetime.
    pub fn release_idle(&self) -> ReleaseResult {
        self.release_where(|_| true, "operator")
    }

    /// What a release would do now, without doing it (the confirmation).
    pub fn release_preview(&self) -> ReleaseResult {
        let st = self.lock();
        let mut recs = st.recs.clone();
        release_records(
            &mut recs,
            |_| true,
            |p| st.waiting.get(p).copied().unwrap_or(0),
            &self.loop_id,
            &self.capacity_ref,
        )
    }

    /// Ensures each named profile has at least `count` instances. Every
    /// request is checked before anything is created.
    pub fn ensure(
        &self,
        wanted: &[(String, u32)],
        lifetime: Option<Lifetime>,
    ) -> Result<EnsureResult, CapacityError> {
        let mut st = self.lock();
        if st.finished {
            return Err(CapacityError::new(
                "not_live",
                "the run has finished; ensure needs a live run",
            ));
        }
        let mut seen = HashSet::new();
        let mut need: Vec<(&RoleProfile, usize)> = Vec::new();
        for (name, count) in wanted {
            if !seen.insert(name.as_str()) {
                return Err(CapacityError::new(
                    "duplicate_profile",
                    format!("profile {name:?} is given twice"),
                ));
            }
            let Some(p) = self.cfg.profiles.get(name) else {
                let names: Vec<&str> = self.cfg.profiles.keys().map(String::as_str).collect();
                return Err(CapacityError::new(
                    "unknown_profile",
                    format!(
                        "no role profile {name:?}; configured profiles: {}",
                        names.join(", ")
                    ),
                ));
            };
            if *count > p.max_instances {
                return Err(CapacityError::new(
                    "over_max_instances",
                    format!(
                        "profile {name} allows max_instances {}, asked for {count}",
                        p.max_instances
                    ),
                ));
            }
            let active = Self::active(&st, Some(name));
            need.push((p, (*count as usize).saturating_sub(active)));
        }
        let total = Self::active(&st, None) + need.iter().map(|(_, n)| n).sum::<usize>();
        if total > self.cfg.max_nodes as usize {
            return Err(CapacityError::new(
                "over_max_nodes",
                format!(
                    "ensuring this needs {total} instances; max_nodes is {}",
                    self.cfg.max_nodes
                ),
            ));
        }
        let mut events = Vec::new();
        let mut created = HashSet::new();
        for (p, n) in &need {
            for _ in 0..*n {
                let i = self.create(&mut st, p, lifetime, &mut events);
                created.insert(i);
            }
        }
        let mut agents = Vec::new();
        for (name, _) in wanted {
            for (i, r) in st.recs.iter().enumerate() {
                if r.profile == *name && r.state.is_active() {
                    let mut r = r.clone();
                    r.source = if created.contains(&i) {
                        Source::Created
                    } else {
                        Source::Reused
                    };
                    agents.push(r);
                }
            }
        }
        let detail = json!({
            "profiles": wanted.iter().map(|(n, c)| json!({"profile": n, "count": c})).collect::<Vec<_>>(),
            "lifetime": lifetime.map(|l| l.as_str()),
        });
        push_request(&mut st, "ensure", detail);
        self.persist_now(&st, events);
        drop(st);
        self.changed();
        Ok(EnsureResult {
            status: "ok".into(),
            loop_id: self.loop_id.to_string(),
            capacity_ref: self.capacity_ref.clone(),
            agents,
            rejected: Vec::new(),
        })
    }

    pub fn status(&self) -> StatusResult {
        let st = self.lock();
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
                && let Err(reason) = self.can_create(&st, p)
            {
                blocked.push(format!("{n} operation(s) wait — {reason}"));
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

    /// Waits until everything written so far is on disk, then stops the
    /// writer. Called once the run is over.
    pub async fn close(&self) {
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

impl LeaseProvider for Reconciler {
    fn acquire(&self, req: &LeaseRequest<'_>) -> LeaseAnswer {
        let Some(p) = self.cfg.profile_for(req.role, req.profile) else {
            return LeaseAnswer::NotManaged;
        };
        let queue: Arc<str> = Arc::from(p.name.as_str());
        let wait = |reason: String| LeaseAnswer::Wait {
            queue: queue.clone(),
            reason: Arc::from(reason),
        };
        let mut st = self.lock();
        let mut events = Vec::new();
        let policy = self.cfg.reuse_of(p);
        let idle = (0..st.recs.len())
            .find(|&i| st.recs[i].profile == p.name && st.recs[i].state == InstanceState::Ready);
        let creatable = self.can_create(&st, p);
        let prefer_new = policy == Reuse::AlwaysNew && creatable.is_ok();
        if let Some(i) = idle
            && !prefer_new
        {
            let lease = self.grant(&mut st, i, req.name, &mut events);
            self.persist_now(&st, events);
            return LeaseAnswer::Granted(lease);
        }
        if policy == Reuse::Pinned {
            return wait(format!(
                "capacity: profile {} is pinned and has no idle instance",
                p.name
            ));
        }
        // Create only as many instances as there are operations waiting.
        let starting = st
            .recs
            .iter()
            .filter(|r| r.profile == p.name && r.state == InstanceState::Starting)
            .count();
        let demand = st.waiting.get(&p.name).copied().unwrap_or(0) + usize::from(!req.queued);
        if starting > 0 && starting >= demand {
            return wait(format!(
                "capacity: an instance of profile {} is starting",
                p.name
            ));
        }
        match creatable {
            Err(reason) => wait(reason),
            Ok(()) => {
                let i = self.create(&mut st, p, None, &mut events);
                if st.recs[i].state == InstanceState::Ready {
                    let lease = self.grant(&mut st, i, req.name, &mut events);
                    self.persist_now(&st, events);
                    LeaseAnswer::Granted(lease)
                } else {
                    let name = st.recs[i].name.clone();
                    self.persist_now(&st, events);
                    wait(format!("capacity: starting instance {name}"))
                }
            }
        }
    }

    fn release(&self, lease: LeaseId) {
        let mut st = self.lock();
        let Some(i) = st.rt.iter().position(|r| r.lease == Some(lease)) else {
            return;
        };
        st.rt[i].lease = None;
        let r = &mut st.recs[i];
        r.op = None;
        if matches!(r.state, InstanceState::Busy | InstanceState::Retained) {
            r.state = InstanceState::Ready;
        }
        r.updated_at = now();
        let ev = self.announce(&st, i);
        self.persist_now(&st, vec![ev]);
    }

    fn queue_depth(&self, queue: &str, depth: usize) {
        self.lock().waiting.insert(queue.to_string(), depth);
    }

    fn pending(&self) -> bool {
        self.lock()
            .recs
            .iter()
            .any(|r| r.state == InstanceState::Starting)
    }

    fn round_ended(&self, _round: u32) {
        self.release_where(|r| r.lifetime == Lifetime::CurrentRound, "round_end");
    }

    fn run_finished(&self) {
        self.release_where(
            |r| matches!(r.lifetime, Lifetime::CurrentRound | Lifetime::CurrentLoop),
            "run_end",
        );
        let mut st = self.lock();
        st.finished = true;
        self.persist_now(&st, vec![json!({"at": now(), "event": "run_finished"})]);
    }
}

/// The writer thread: appends events, rewrites the state file atomically
/// (coalescing bursts to the latest state), removes worktrees.
fn writer_loop(rx: mpsc::Receiver<Persist>, file_path: PathBuf, events_path: PathBuf) {
    let mut events = match crate::store::append_private(&events_path) {
        Ok(f) => Some(std::io::BufWriter::new(f)),
        Err(e) => {
            tracing::error!(path = %events_path.display(), "cannot open capacity events: {e}");
            None
        }
    };
    let write_file = |file: &CapacityFile| {
        let mut bytes = serde_json::to_vec_pretty(file).expect("serialisable");
        bytes.push(b'\n');
        if let Err(e) = crate::store::write_atomic(&file_path, &bytes) {
            tracing::error!(path = %file_path.display(), "cannot write capacity state: {e}");
        }
    };
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut latest: Option<Box<CapacityFile>> = None;
        for msg in batch {
            match msg {
                Persist::Write { file, events: evs } => {
                    if let Some(out) = &mut events {
                        for e in evs {
                            let _ = serde_json::to_writer(&mut *out, &e);
                            let _ = out.write_all(b"\n");
                        }
                    }
                    latest = Some(file);
                }
                Persist::Cleanup { repo, path, branch } => {
                    if let Err(e) = workspace::remove_worktree(&repo, &path, Some(&branch)) {
                        tracing::warn!(path = %path.display(), "{e}");
                    }
                }
                Persist::Flush(done) => {
                    if let Some(f) = latest.take() {
                        write_file(&f);
                    }
                    if let Some(out) = &mut events {
                        let _ = out.flush();
                    }
                    let _ = done.send(());
                }
            }
        }
        if let Some(f) = latest {
            write_file(&f);
        }
        if let Some(out) = &mut events {
            let _ = out.flush();
        }
    }
}
