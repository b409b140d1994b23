//! One run's set-up, shared by every surface (headless, console,
//! screenshots): the run directory, the graph, the palette router, the
//! capacity reconciler, the control socket, palette preparation. A surface
//! adds its sinks or subscribes, then starts the run.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod notify;
pub mod wiring;

use crate::agents::Tails;
use crate::capacity::Reconciler;
use crate::control::ControlServer;
use crate::kernel::{ApprovalPolicy, NodeBuilder, Run, RunHandle, Signal, SignalSink};
use crate::palette::PaletteRouter;
use crate::play::Play;
use crate::store::RunDir;
use crate::store::checkpoint::{Checkpoint, CheckpointSink};

/// A signal that asks a surface (the console, a replay, a headless run) to
/// stop; the console names it in its exit line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
    Hangup,
}

impl StopSignal {
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Overrides `[play] speed`.
    pub speed: Option<f64>,
    pub paused: bool,
    pub approvals: ApprovalPolicy,
    pub run_dir: Option<PathBuf>,
    /// A fixed run id (screenshots); otherwise the directory's name.
    pub run_id: Option<String>,
    /// Listen on the control socket.
    pub control: bool,
    /// Take up the stopped run in this directory instead of starting one.
    pub resume: Option<PathBuf>,
    /// With `resume`: failed operations to start again (the run may have
    /// finished).
    pub retry: Vec<String>,
    /// With `resume`: operations whose merge conflict was resolved by hand
    /// since they failed on it; their work lands, their agents do not run.
    pub resolve: Vec<String>,
    /// `--budget`: caps over the play's (or the resumed run's).
    pub budget: Vec<crate::kernel::spend::CapChange>,
    /// `--break`: where the run pauses by itself.
    pub breakpoints: Vec<crate::kernel::breakpoint::Breakpoint>,
    /// `--nats`: perform the agents on workers through this server.
    pub nats: Option<String>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            speed: None,
            paused: false,
            approvals: ApprovalPolicy::Ask,
            run_dir: None,
            run_id: None,
            control: true,
            resume: None,
            retry: Vec::new(),
            resolve: Vec::new(),
            budget: Vec::new(),
            breakpoints: Vec::new(),
            nats: None,
        }
    }
}

/// Why a run could not be run to its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run could not be opened as asked (a damaged checkpoint, a live
    /// run, a changed play, a run directory in use): input, exit 2.
    #[error("{0}")]
    Open(std::io::Error),
    /// Something failed after the run started (the terminal, the disk):
    /// exit 1.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub struct Session {
    run: Option<Run>,
    pub handle: RunHandle,
    pub run_dir: RunDir,
    pub router: Arc<PaletteRouter>,
    pub reconciler: Option<Arc<Reconciler>>,
    pub control: Option<ControlServer>,
    /// Set when the control socket could not be opened (the run goes on).
    pub control_error: Option<String>,
    pub speed: f64,
    /// The last lines of each agent CLI's output.
    pub tails: Arc<Tails>,
    /// A resumed run's earlier signals, for views that show its history.
    pub history: Vec<Signal>,
    /// The checkpoint writer's counters (and its last failure).
    pub checkpoint: Arc<crate::store::checkpoint::WriterStats>,
    /// `[notify]` commands, delivered before the run's process ends.
    notify: Option<notify::Delivery>,
    /// This process owns the run while the session lives.
    _lock: crate::store::RunLock,
}

impl Session {
    /// Prepares a run of `play` (or, with `opts.resume`, takes up a stopped
    /// one); `sinks` see every signal from the first.
    pub async fn open(
        play: &Play,
        opts: &SessionOptions,
        sinks: Vec<Box<dyn SignalSink>>,
    ) -> std::io::Result<Session> {
        Session::open_with(PlayIn::Kept(play), opts, sinks).await
    }

    /// Like [`Session::open`], for a caller that needs only the play's
    /// settings afterwards and shows no history (a headless run): a fresh
    /// run lets go of the operation definitions as soon as the graph is
    /// built, so they are never alive beside the run's own graph and its
    /// checkpoint (about 40 MB at 100 000 operations), and a resumed run
    /// does not read its earlier events back (`history` stays empty).
    pub async fn open_releasing(
        play: &mut Play,
        opts: &SessionOptions,
        sinks: Vec<Box<dyn SignalSink>>,
    ) -> std::io::Result<Session> {
        Session::open_with(PlayIn::Released(play), opts, sinks).await
    }

    async fn open_with(
        mut play: PlayIn<'_>,
        opts: &SessionOptions,
        sinks: Vec<Box<dyn SignalSink>>,
    ) -> std::io::Result<Session> {
        // Orphans agents leave (a setsid grandchild) come to this process,
        // not to init, so they can be ended.
        crate::agents::process::become_subreaper();
        if let Some(dir) = &opts.resume {
            let history = matches!(play, PlayIn::Kept(_));
            return Session::resume(play.get(), dir, opts, sinks, history).await;
        }
        let (mut run_dir, lock) = RunDir::claim(opts.run_dir.as_deref())?;
        // Written and made durable beside the build, on its own thread.
        let copy = run_dir.copy_play(play.get().source.clone());
        let play_hash = crate::cluster::wire::play_hash(&play.get().source);
        let welcome = Arc::new(crate::control::WelcomeParts::of(play.get()));
        play.release_source();
        if let Some(id) = &opts.run_id {
            run_dir.run_id = id.clone();
        }
        let built = play.get().build();
        let op_roles = play.get().op_roles(&built);
        let speed = opts.speed.unwrap_or(play.get().speed);
        let cfg = run_config(play.get(), &run_dir, opts);
        // Reads each role's agent from the operations written for it.
        let parts = match Parts::new(play.get(), &run_dir, speed, &play_hash, opts).await {
            Ok(p) => p,
            Err(e) => {
                // Refused before its first line (no NATS server): no run
                // is left behind to list or resume.
                let _ = copy.wait();
                for f in [
                    "play.toml",
                    NATS_FILE,
                    crate::cluster::hub::NONCE_FILE,
                    crate::store::lock::LOCK_FILE,
                ] {
                    let _ = std::fs::remove_file(run_dir.path.join(f));
                }
                if opts.run_dir.is_none() {
                    let _ = std::fs::remove_dir(&run_dir.path);
                }
                return Err(e);
            }
        };
        play.release();
        let play = play.get();
        let (mut run, handle) = Run::new(
            built.graph,
            cfg.clone(),
            parts.agents.clone(),
            parts.builder(),
        )
        .map_err(std::io::Error::other)?;
        // Seeded from the run's graph: the built one is gone by now.
        let mut seed = Checkpoint::seed_run(&run, &cfg);
        drop(cfg);
        seed.play_path = std::fs::canonicalize(&*play.file).ok();
        seed.declared_palette = declared_palette(play);
        // The copy is on disk before the run's first line is.
        copy.wait()?;
        let checkpoint = add_sinks(&mut run, &run_dir, seed, sinks)?;
        let notify = add_notify(play, &mut run, &handle, &run_dir);
        let reconciler = parts.reconciler(play, &run_dir, &mut run);
        if let Some(hub) = &parts.hub {
            hub.attach(run.external());
        }
        let (control, control_error) =
            control_server(opts, &run_dir, &handle, &reconciler, welcome);
        parts.landing_starts(&run);
        crate::palette::prepare(&parts.router, &op_roles, &mut run)
            .await
            .map_err(std::io::Error::other)?;
        Ok(Session {
            run: Some(run),
            handle,
            run_dir,
            router: parts.router,
            reconciler,
            control,
            control_error,
            speed,
            tails: parts.tails,
            history: Vec::new(),
            checkpoint,
            notify,
            _lock: lock,
        })
    }

    /// Takes up the stopped (crashed or cancelled) run in `dir`: its
    /// checkpoint and the log after it, checked against `play` (a changed
    /// palette or budget is a conflict, shown), the palette and capacity
    /// rebuilt, then the kernel restored.
    async fn resume(
        play: &Play,
        dir: &Path,
        opts: &SessionOptions,
        sinks: Vec<Box<dyn SignalSink>>,
        with_history: bool,
    ) -> std::io::Result<Session> {
        fn fail(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> std::io::Error {
            std::io::Error::new(std::io::ErrorKind::InvalidData, e)
        }
        // One owner: a live run, or a second resume, is refused here, before
        // anything is read or written.
        let lock = crate::store::RunLock::take(dir).map_err(|e| fail(e.to_string()))?;
        let retrying = !opts.retry.is_empty() || !opts.resolve.is_empty();
        let cp = crate::store::resume::read_stopped(dir, retrying).map_err(fail)?;
        check_conflicts(play, &cp).map_err(fail)?;
        // Agents of the stopped process that outlived it (their group, or a
        // tool that left it) end before a new attempt starts beside them.
        let tag = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let survivors = tokio::task::spawn_blocking(move || {
            crate::agents::process::end_tagged(&tag.display().to_string(), None)
        })
        .await
        .unwrap_or_default();
        // A capacity file that cannot be read is not silently replaced.
        let previous_capacity =
            crate::capacity::offline::read_existing(dir).map_err(|e| fail(e.message))?;
        // Deleted while the run had instances: their workspaces would be
        // forgotten (a worktree with work in it), so say so instead.
        let known: Vec<&str> = cp
            .state
            .capacity
            .instances
            .values()
            .filter(|i| i.state.is_active())
            .map(|i| &*i.name)
            .collect();
        if previous_capacity.is_none() && !known.is_empty() {
            return Err(fail(format!(
                "{} is missing, but the run had capacity instances ({}); put it back, or start over with --new-run (nothing was changed)",
                dir.join("capacity.json").display(),
                known.join(", ")
            )));
        }
        // The process died writing its last line: drop that part, so the
        // log goes on from a whole line.
        crate::store::resume::repair_log(&dir.join("events.jsonl")).map_err(fail)?;
        let speed = opts.speed.unwrap_or(play.speed);
        let run_dir = RunDir {
            path: dir.to_path_buf(),
            run_id: cp.state.run.run_id.to_string(),
        };
        let history = if with_history {
            crate::store::resume::read_log(&run_dir.events_path()).map_err(fail)?
        } else {
            Vec::new()
        };
        let play_hash = crate::cluster::wire::play_hash(&play.source);
        let parts = Parts::new(play, &run_dir, speed, &play_hash, opts).await?;
        let snapshot = cp.state.palette.snapshot.clone().unwrap_or_default();
        let palette = &cp.state.palette;
        let saved_modes = palette
            .initial
            .iter()
            .chain(&palette.expanded)
            .map(|row| {
                let modes = row.modes.iter().map(|m| m.to_string()).collect();
                (row.role.to_string(), modes)
            })
            .collect();
        parts
            .router
            .restore_checked(&snapshot, &saved_modes)
            .await
            .map_err(fail)?;
        let dropped: Vec<Arc<str>> = snapshot
            .reserved_roles
            .iter()
            .map(|r| Arc::from(r.as_str()))
            .collect();
        let (graph, mut restore) = crate::store::resume::rebuild(&cp, dropped).map_err(fail)?;
        crate::store::resume::retry(&mut restore, &cp, &opts.retry).map_err(fail)?;
        crate::store::resume::resolve(&mut restore, &cp, &opts.resolve).map_err(fail)?;
        let mut cfg = run_config(play, &run_dir, opts);
        cfg.start_paused |= cp.state.run.paused;
        let (mut run, handle) =
            Run::restore(graph, cfg, parts.agents.clone(), parts.builder(), restore)
                .map_err(std::io::Error::other)?;
        let checkpoint = add_sinks(&mut run, &run_dir, cp, sinks)?;
        let notify = add_notify(play, &mut run, &handle, &run_dir);
        let reconciler = parts.reconciler(play, &run_dir, &mut run);
        if let Some(hub) = &parts.hub {
            hub.attach(run.external());
        }
        if let (Some(r), Some(prev)) = (&reconciler, &previous_capacity) {
            r.adopt(prev);
        }
        let welcome = Arc::new(crate::control::WelcomeParts::of(play));
        let (control, control_error) =
            control_server(opts, &run_dir, &handle, &reconciler, welcome);
        if !survivors.is_empty() {
            let pids: Vec<String> = survivors.iter().map(i32::to_string).collect();
            let message = format!(
                "ended {} process(es) the stopped run's agents left running (pid {})",
                survivors.len(),
                pids.join(", ")
            );
            tracing::warn!("{message}");
            let _ = run.external().send(crate::kernel::External::Signal(
                crate::kernel::SignalKind::Warning {
                    message: Arc::from(message),
                    op_id: None,
                },
            ));
        }
        parts.router.attach(run.external());
        parts.router.emit_counts();
        parts.landing_starts(&run);
        run.set_decorator(parts.router.clone());
        Ok(Session {
            run: Some(run),
            handle,
            run_dir,
            router: parts.router,
            reconciler,
            control,
            control_error,
            speed,
            tails: parts.tails,
            history,
            checkpoint,
            notify,
            _lock: lock,
        })
    }

    /// Takes the prepared run to start it (once).
    pub fn take_run(&mut self) -> Option<Run> {
        self.run.take()
    }

    /// After the run: waits for capacity state to reach the disk (the
    /// last checkpoint was written when the run ended).
    pub async fn close(&self) {
        if let Some(r) = &self.reconciler {
            r.close().await;
        }
    }
}

impl Session {
    /// After the run's result is written: watchers get the log's last
    /// lines, and (a run host) attached consoles are waited for (see
    /// [`ControlServer::finish`]).
    pub async fn linger(&self, wait_for_consoles: bool) {
        // The run is over and its result written: its last events
        // (run_finished) reach the operator's command before the process
        // exits, within a bound.
        if let Some(n) = &self.notify {
            n.finish().await;
        }
        if let Some(c) = &self.control {
            c.finish(wait_for_consoles).await;
        }
    }
}

/// What a run of a play is made of besides its graph.
struct Parts {
    agents: Arc<crate::agents::AgentRegistry>,
    /// The run's branch, when its work lands on one.
    landing: Option<Arc<crate::land::Landing>>,
    router: Arc<PaletteRouter>,
    tails: Arc<Tails>,
    /// With `[cluster]`: where the agents are performed.
    hub: Option<Arc<crate::cluster::hub::Hub>>,
}

impl Parts {
    async fn new(
        play: &Play,
        run_dir: &RunDir,
        speed: f64,
        play_hash: &str,
        opts: &SessionOptions,
    ) -> std::io::Result<Parts> {
        let tails = Tails::new();
        let log_dir = run_dir.path.join("logs");
        let ctx = wiring::run_context(play, &run_dir.run_id, Some(log_dir.clone()), tails.clone());
        let mut local = wiring::agent_registry(play, speed, ctx);
        let mut landed_on = None;
        if play.workspace.isolated() {
            let reviewed = play
                .capacity
                .iter()
                .flat_map(|c| c.profiles.values())
                .filter(|p| p.review)
                .map(|p| p.name.clone())
                .collect();
            let landing = crate::land::Landing::open(
                &play.workspace,
                &play.dir,
                &run_dir.path,
                &run_dir.run_id,
                reviewed,
            )
            .await
            .map_err(std::io::Error::other)?;
            let landing = Arc::new(landing);
            landed_on = Some(landing.clone());
            // Agent CLIs change the repository; `sim` and `noop` do not.
            local.wrap(play.agents.keys().map(String::as_str), |a| {
                Arc::new(crate::land::Isolated::new(a, landing.clone()))
            });
        }
        let (agents, hub) = match cluster_of(play, opts, run_dir)? {
            None => (local, None),
            Some(c) => {
                let settings = crate::cluster::hub::HubSettings {
                    run_id: run_dir.run_id.clone(),
                    play: play.name.clone(),
                    play_hash: play_hash.to_string(),
                    needs: c.worker_tags.clone(),
                    log_dir: Some(log_dir),
                };
                let hub = crate::cluster::hub_for(&c.nats, settings, tails.clone())
                    .await
                    .map_err(std::io::Error::other)?;
                (crate::cluster::remote_registry(&local, &hub), Some(hub))
            }
        };
        Ok(Parts {
            agents: Arc::new(agents),
            landing: landed_on,
            router: wiring::palette_router(play, Some(&run_dir.path), speed),
            tails,
            hub,
        })
    }

    /// Where the run's work lands, from its start: the branch watched (a
    /// commit no landing made is put back and said), said in the run's
    /// record, and what of the checkout its base leaves out said on
    /// stderr too, where the operator started it.
    fn landing_starts(&self, run: &Run) {
        let Some(l) = &self.landing else {
            return;
        };
        l.attach(run.external());
        let ws = crate::projection::Workspace {
            branch: Arc::from(l.branch.as_str()),
            base: Arc::from(l.base()),
            uncommitted: l
                .uncommitted
                .iter()
                .map(|p| Arc::from(p.as_str()))
                .collect(),
        };
        // A file they edited and did not commit is not what the agents
        // start from.
        if let Some(w) = ws.left_out() {
            eprintln!("playdeck: {w}; commit them first for the run's operations to have them");
        }
        let _ = run.external().send(crate::kernel::External::Signal(
            crate::kernel::SignalKind::Workspace {
                branch: ws.branch,
                base: ws.base,
                uncommitted: ws.uncommitted,
            },
        ));
    }

    fn builder(&self) -> Arc<dyn NodeBuilder> {
        Arc::new(self.router.clone())
    }

    fn reconciler(&self, play: &Play, run_dir: &RunDir, run: &mut Run) -> Option<Arc<Reconciler>> {
        let r =
            play.capacity.as_ref().filter(|c| c.enabled).map(|c| {
                Reconciler::new(Arc::new(c.clone()), &run_dir.run_id, run_dir.path.clone())
            })?;
        r.attach(run.external());
        run.set_leases(r.clone());
        Some(r)
    }
}

/// Where a run's agents are performed: `--nats` (kept in the run
/// directory, so a resume goes on there), else the server a resumed run
/// was given so, else the play's `[cluster]`; none, here.
fn cluster_of(
    play: &Play,
    opts: &SessionOptions,
    run_dir: &RunDir,
) -> std::io::Result<Option<crate::play::cluster_section::ClusterConfig>> {
    let kept = run_dir.path.join(NATS_FILE);
    let url = match &opts.nats {
        Some(url) => {
            std::fs::write(&kept, format!("{url}\n"))?;
            Some(url.clone())
        }
        None => std::fs::read_to_string(&kept)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
    };
    Ok(match (url, &play.cluster) {
        (Some(nats), Some(c)) => {
            Some(crate::play::cluster_section::ClusterConfig { nats, ..c.clone() })
        }
        (Some(nats), None) => Some(crate::play::cluster_section::ClusterConfig {
            nats,
            worker_tags: Default::default(),
        }),
        (None, c) => c.clone(),
    })
}

/// The NATS server given to `run --nats`, in the run directory.
const NATS_FILE: &str = "nats";

fn run_config(play: &Play, run_dir: &RunDir, opts: &SessionOptions) -> crate::kernel::RunConfig {
    let mut cfg = play.run_config(&run_dir.run_id);
    cfg.start_paused = opts.paused;
    cfg.approvals = opts.approvals.clone();
    cfg.budget_set = opts.budget.clone();
    cfg.breakpoints = opts.breakpoints.clone();
    // Observers that fall behind resynchronise; a roomy buffer makes that
    // rare.
    cfg.signal_buffer = 1 << 16;
    cfg
}

/// The event log first (a line is written before a checkpoint covers it),
/// then the checkpoint, then the caller's sinks.
fn add_sinks(
    run: &mut Run,
    run_dir: &RunDir,
    mut seed: Checkpoint,
    sinks: Vec<Box<dyn SignalSink>>,
) -> std::io::Result<Arc<crate::store::checkpoint::WriterStats>> {
    let log = run_dir.event_log()?;
    let written = log.written();
    // A resumed run's log already holds what the checkpoint was folded to
    // (its cut last line repaired): the seed, written at once, covers
    // exactly that much of it.
    {
        let mut mark = written.lock().unwrap_or_else(|e| e.into_inner());
        mark.seq = seed.state.seq;
        seed.log = Some(*mark);
    }
    let sync = std::fs::File::open(run_dir.events_path())?;
    run.add_sink(Box::new(log));
    let checkpoint = CheckpointSink::new(&run_dir.path, seed, Some(sync), Some(written))?;
    let stats = checkpoint.stats();
    run.add_sink(Box::new(checkpoint));
    for s in sinks {
        run.add_sink(s);
    }
    Ok(stats)
}

/// `[notify]` of the play, else of the user's config: its sink.
fn add_notify(
    play: &Play,
    run: &mut Run,
    handle: &RunHandle,
    run_dir: &RunDir,
) -> Option<notify::Delivery> {
    let cfg = match &play.notify {
        Some(n) => Some(n.clone()),
        None => notify::user_notify().unwrap_or_else(|e| {
            tracing::warn!("{e}");
            // A closed stderr loses the warning, not the run.
            let _ = writeln!(
                std::io::stderr(),
                "playdeck: warning: {e} (no notifications for this run)"
            );
            None
        }),
    };
    let cfg = cfg?;
    let dir = std::fs::canonicalize(&run_dir.path).unwrap_or_else(|_| run_dir.path.clone());
    let (sink, delivery) = notify::start(
        cfg,
        handle.clone(),
        &run_dir.run_id,
        &dir.display().to_string(),
    );
    run.add_sink(Box::new(sink));
    Some(delivery)
}

fn control_server(
    opts: &SessionOptions,
    run_dir: &RunDir,
    handle: &RunHandle,
    reconciler: &Option<Arc<Reconciler>>,
    welcome: Arc<crate::control::WelcomeParts>,
) -> (Option<ControlServer>, Option<String>) {
    if !opts.control {
        return (None, None);
    }
    match ControlServer::start(&run_dir.path, handle.clone(), reconciler.clone(), welcome) {
        Ok(c) => (Some(c), None),
        Err(e) => (None, Some(format!("no control socket for this run: {e}"))),
    }
}

/// `[palette]` as the play declares it, for the checkpoint and the
/// conflict check on resume.
pub fn declared_palette(play: &Play) -> serde_json::Value {
    serde_json::to_value(&play.palette.palette).unwrap_or_default()
}

/// Resume refuses a play whose palette or budgets changed since the run
/// started, showing the difference.
fn check_conflicts(play: &Play, cp: &Checkpoint) -> Result<(), PlayChanged> {
    let mut diffs = Vec::new();
    let now = declared_palette(play);
    let was = &cp.declared_palette;
    if !was.is_null() && *was != now {
        let show = |v: &serde_json::Value| serde_json::to_string(v).unwrap_or_default();
        diffs.push(format!(
            "  [palette] was {}\n            now {}",
            show(was),
            show(&now)
        ));
    }
    if cp.state.run.max_spawn != play.max_spawn {
        diffs.push(format!(
            "  max_spawn was {}, now {}",
            cp.state.run.max_spawn, play.max_spawn
        ));
    }
    if diffs.is_empty() {
        return Ok(());
    }
    Err(PlayChanged {
        run_id: cp.state.run.run_id.clone(),
        diffs,
    })
}

/// A resume refused because the play's palette or budgets changed since
/// the run started: each difference, was and now.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot resume run {run_id}: the play changed since it started\n{}\nput the play back as it was, or start over with --new-run",
    diffs.join("\n")
)]
pub struct PlayChanged {
    pub run_id: Arc<str>,
    pub diffs: Vec<String>,
}

/// The play a session opens: kept whole, or with its operation definitions
/// let go once the graph is built.
enum PlayIn<'a> {
    Kept(&'a Play),
    Released(&'a mut Play),
}

impl PlayIn<'_> {
    fn get(&self) -> &Play {
        match self {
            PlayIn::Kept(p) => p,
            PlayIn::Released(p) => p,
        }
    }

    fn release_source(&mut self) {
        if let PlayIn::Released(p) = self {
            p.source = Arc::from("");
        }
    }

    /// Lets go of the definitions if this session may.
    fn release(&mut self) {
        if let PlayIn::Released(p) = self {
            p.release_definitions();
        }
    }
}
