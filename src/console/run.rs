//! The console's one event loop: terminal input, the source (a live run's
//! signals, or a replay's clock), status messages and a clock tick in one
//! `select!`. Signals are folded in bounded batches so keys stay
//! responsive under a flood; frames are drawn only when something changed,
//! at once after a key or click and otherwise at most 30 a second, inside
//! synchronized updates.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, KeyEventKind};
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::app::{App, Effect, Hooks, Level};
use super::config::ConsoleConfig;
use super::pager::{Lend, Shown};
use super::replay::{LogTail, Player};
use super::terminal;
use super::text::group;
use crate::control::link::{Arrived, Link};
use crate::kernel::{Observed, Outcome, Request, RunHandle, Subscription};
use crate::operator::model::PlayFacts;
use crate::play::Play;
use crate::session::{RunError, Session, SessionOptions};

const FRAME: Duration = Duration::from_millis(33);
/// Signals folded before input is looked at again.
const FOLD_BATCH: usize = 20_000;
const FOLD_BUDGET: Duration = Duration::from_millis(8);

pub struct ConsoleOptions {
    pub session: SessionOptions,
    pub theme: Option<String>,
}

/// What the console knows of a play besides its signals (see
/// [`PlayFacts::of`]).
pub fn facts(play: &Play) -> PlayFacts {
    PlayFacts::of(play)
}

pub fn hooks(session: &Session) -> Hooks {
    Hooks {
        decorate: Some(session.router.clone()),
        release_preview: session.reconciler.clone().map(|r| {
            let f: Arc<dyn Fn() -> crate::capacity::ReleaseResult + Send + Sync> =
                Arc::new(move || r.release_preview());
            f
        }),
        tails: Some(session.tails.clone()),
        run_dir: Some(session.run_dir.path.clone()),
        resume_name: Some(resume_name(&session.run_dir)),
        attached: false,
        read_only: false,
        runs_dir: None,
    }
}

/// How a person names a run to `playdeck resume`: its id when it lives
/// where ids are looked up, else its directory.
pub fn resume_name(dir: &crate::store::RunDir) -> String {
    // The id, wherever the command is typed, when the user's index has it.
    if dir.path == std::path::Path::new(crate::store::RUNS_DIR).join(&dir.run_id)
        || crate::store::index::names(&dir.run_id, &dir.path)
    {
        dir.run_id.clone()
    } else {
        dir.path.display().to_string()
    }
}

/// [`resume_name`] from a directory alone.
pub fn name_of(dir: &std::path::Path) -> String {
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    resume_name(&crate::store::RunDir {
        path: dir.to_path_buf(),
        run_id: id,
    })
}

pub use crate::session::StopSignal;

/// How the console ended, for the line it leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The operator quit.
    Quit,
    /// A signal from outside.
    Stopped(StopSignal),
    /// The terminal's input closed.
    InputClosed,
}

/// What the console leaves behind: the exit code (0 when every operation
/// succeeded, 1 otherwise) and one line for the terminal it returns to.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    pub code: i32,
    pub line: String,
    /// The run chosen on the runs screen, to attach to next.
    pub switch_to: Option<std::path::PathBuf>,
}

/// Opens the console on `play`.
pub async fn run(
    play: &Play,
    opts: ConsoleOptions,
    mut stop: mpsc::UnboundedReceiver<StopSignal>,
) -> Result<Exit, RunError> {
    // Everything that can fail on input fails before the terminal changes.
    let cfg = ConsoleConfig::load(opts.theme.as_deref())
        .map_err(|e| RunError::Open(io::Error::other(e)))?;
    let mut session = Session::open(play, &opts.session, Vec::new())
        .await
        .map_err(RunError::Open)?;
    let mut sub = session.handle.subscribe();
    let history = std::mem::take(&mut session.history);
    let run = session.take_run().expect("a fresh session");
    let run_task = tokio::spawn(run.run());
    let mut app = App::new(
        &facts(play),
        cfg.themes,
        cfg.theme,
        cfg.keymap,
        cfg.bell,
        hooks(&session),
    );
    // A resumed run shows what happened before it stopped.
    for s in &history {
        app.fold(s);
    }
    app.after_fold();
    if let Some(e) = &session.control_error {
        app.set_status(e.clone(), Level::Warning);
    }
    let mut term = terminal::init()?;
    // The terminal is given back if its input cannot be read.
    let input = terminal::Input::new().inspect_err(|_| terminal::restore())?;
    let mut events = input.clone();
    let mut source = Source::Live {
        sub: &mut sub,
        session: Some(&session),
    };
    let looped = event_loop(
        &mut app,
        &mut source,
        &mut events,
        Tty {
            term: &mut term,
            input,
        },
        &mut stop,
    )
    .await;
    // Whatever ended the loop, the run ends cleanly: cancelled if it was
    // still going, every agent process ended with it.
    if !run_task.is_finished() {
        let _ = session.handle.request(Request::Cancel).await;
    }
    let envelope = run_task.await;
    terminal::restore();
    // The last signals (the cancel, the finish) for the exit line.
    while let Some(Observed::Signal(s)) = sub.try_next() {
        app.fold(&s);
    }
    app.after_fold();
    session.close().await;
    let ended = looped?;
    let envelope = envelope.map_err(io::Error::other)?;
    session.run_dir.write_result(&envelope)?;
    session.linger(false).await;
    Ok(Exit {
        code: crate::headless::exit_code(envelope.outcome),
        line: exit_line(&app, envelope.outcome, ended),
        switch_to: None,
    })
}

/// One line for the terminal the console leaves: the run, how it ended
/// and, when there is something to take up, the command that does.
pub fn exit_line(app: &App, outcome: Outcome, ended: Ended) -> String {
    // Where the run is, after what to do with it (when it is named by its
    // id: a path says where already).
    let place = app
        .hooks
        .run_dir
        .as_deref()
        .filter(|_| *app.resume_name() == *app.vm.run.run_id)
        .map(place)
        .unwrap_or_default();
    format!("{}{place}", exit_words(app, outcome, ended))
}

/// ` · it is in /abs/run/dir`: where a run is, for the lines a console
/// leaves.
pub fn place(dir: &std::path::Path) -> String {
    std::path::absolute(dir)
        .map(|d| format!(" · it is in {}", d.display()))
        .unwrap_or_default()
}

fn exit_words(app: &App, outcome: Outcome, ended: Ended) -> String {
    let vm = &app.vm;
    let run = if vm.run.resumes > 0 {
        "resumed run"
    } else {
        "run"
    };
    let id = &vm.run.run_id;
    let name = app.resume_name();
    match outcome {
        Outcome::Succeeded => format!(
            "playdeck: {run} {id} succeeded ({} operations)",
            group(vm.counts.total())
        ),
        Outcome::Cancelled => {
            let how = match ended {
                Ended::Stopped(sig) => format!("stopped by {}", sig.name()),
                Ended::InputClosed => "the terminal closed".into(),
                Ended::Quit if app.quit_cancelled => "quit from the console".into(),
                // It had ended before the operator left.
                Ended::Quit => "through playdeck ctl".into(),
            };
            format!("playdeck: {run} {id} cancelled ({how}); resume it: playdeck resume {name}")
        }
        Outcome::Failed => {
            let cause = vm.cause().map(|c| format!(" — {c}")).unwrap_or_default();
            let ops = match &app.retry_offer {
                Some(op) => vec![op.clone()],
                None => vm.retryable(3),
            };
            if ops.is_empty() {
                format!("playdeck: {run} {id} failed{cause}")
            } else {
                let retry: Vec<String> = ops.iter().map(|o| format!(" --retry {o}")).collect();
                // A hint that names some of the failures says so.
                let failed = vm.counts.failed;
                let some = if app.retry_offer.is_none() && failed > ops.len() {
                    format!(
                        " ({} of {} failed operations; `playdeck report {name}` lists them all)",
                        ops.len(),
                        group(failed)
                    )
                } else {
                    String::new()
                };
                format!(
                    "playdeck: {run} {id} failed{cause}; retry: playdeck resume {name}{}{some}",
                    retry.join("")
                )
            }
        }
    }
}

/// Where a console's events come from: a live run's signals, or a
/// recording played back.
pub enum Source<'a> {
    Live {
        sub: &'a mut Subscription,
        /// Without a session (benchmarks), run control is ignored.
        session: Option<&'a Session>,
    },
    Replay {
        player: &'a mut Player,
        /// A live run's log, followed.
        tail: Option<LogTail>,
    },
    /// A run another process hosts, through its control socket (or an
    /// ssh bridge to it).
    Attached { link: &'a mut Link },
}

/// What comes back to the loop from a command carried out in a task.
pub enum Msg {
    Status(String, Level),
    /// The run's answer to one command: said, or — a decision refused as
    /// stale — asked again.
    Answer(
        Request,
        Result<crate::control::Reply, crate::control::Failure>,
    ),
    /// The run's answer to a release preview: the confirmation opens.
    Preview(crate::capacity::ReleaseResult),
    /// The runs directory, read: the runs screen opens.
    Runs(Vec<crate::control::listing::RunRow>),
}

impl Source<'_> {
    /// The next thing a live run says (never, for a replay).
    async fn observe(&mut self) -> Observed {
        match self {
            Source::Live { sub, .. } => sub.next().await,
            Source::Replay { .. } => std::future::pending().await,
            Source::Attached { link } => arrived(link.events.recv().await),
        }
    }

    /// What has already arrived, without waiting.
    fn try_next(&mut self) -> Option<Observed> {
        match self {
            Source::Live { sub, .. } => sub.try_next(),
            Source::Attached { link } => link.events.try_recv().ok().map(|a| arrived(Some(a))),
            Source::Replay { .. } => None,
        }
    }

    /// A replay needs the clock while it plays or follows.
    fn ticks(&self) -> bool {
        match self {
            Source::Live { .. } | Source::Attached { .. } => false,
            Source::Replay { player, tail } => player.playing || tail.is_some(),
        }
    }

    fn session(&self) -> Option<&Session> {
        match self {
            Source::Live { session, .. } => *session,
            Source::Replay { .. } | Source::Attached { .. } => None,
        }
    }

    /// Whether the console shows a run as it happens (not a recording).
    fn live(&self) -> bool {
        !matches!(self, Source::Replay { .. })
    }

    /// The run's time now, by the run's own clock: the kernel's in this
    /// process, the one the welcome gave for an attached console.
    fn run_clock(&self) -> Option<f64> {
        match self {
            Source::Live { session, .. } => session.and_then(|s| s.handle.elapsed()),
            Source::Attached { link } => link.welcome.run_clock(),
            Source::Replay { .. } => None,
        }
    }
}

/// A stream's arrival as the loop folds it.
fn arrived(a: Option<Arrived>) -> Observed {
    match a {
        Some(Arrived::Signal(s)) => Observed::Signal(Arc::new(*s)),
        Some(Arrived::Closed(_)) | None => Observed::Closed,
    }
}

/// Where the event loop's frames go: the terminal ([`Tty`]), or a test's
/// or a benchmark's closure. Only a terminal can be lent to a pager.
pub trait Screen: Lend {
    fn draw(&mut self, app: &mut App) -> io::Result<()>;
}

impl<F: FnMut(&mut App) -> io::Result<()>> Screen for F {
    fn draw(&mut self, app: &mut App) -> io::Result<()> {
        self(app)
    }
}

impl<F: FnMut(&mut App) -> io::Result<()>> Lend for F {
    fn suspend(&mut self) -> io::Result<bool> {
        Ok(false)
    }

    fn resume(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The terminal, with the input the loop reads from it (the one it stops
/// reading while a pager has the terminal).
pub struct Tty<'a> {
    pub term: &'a mut terminal::Term,
    pub input: terminal::Input,
}

impl Screen for Tty<'_> {
    fn draw(&mut self, app: &mut App) -> io::Result<()> {
        draw(self.term, app)
    }
}

impl Lend for Tty<'_> {
    fn suspend(&mut self) -> io::Result<bool> {
        self.input.pause();
        terminal::suspend();
        Ok(true)
    }

    fn resume(&mut self) -> io::Result<()> {
        let r = terminal::resume(self.term);
        self.input.resume();
        r
    }
}

/// How long after a pager closes a SIGINT is still taken for the `ctrl-c`
/// typed into it (the signal can reach the loop after the pager's exit).
const PAGER_SIGINT: Duration = Duration::from_millis(500);

/// The one event loop, for a live run and a replay alike, over any input
/// stream and any frame sink, so tests and benchmarks drive exactly what
/// the terminal drives. Frames are drawn only when something changed, at
/// most 30 a second; a live run's signals are folded in bounded batches so
/// keys stay responsive under a flood.
pub async fn event_loop<E, D>(
    app: &mut App,
    source: &mut Source<'_>,
    events: &mut E,
    mut screen: D,
    stop: &mut mpsc::UnboundedReceiver<StopSignal>,
) -> io::Result<Ended>
where
    E: futures_util::Stream<Item = io::Result<Event>> + Unpin,
    D: Screen,
{
    let started = Instant::now();
    let live = source.live();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut frame_tick = tokio::time::interval(FRAME);
    let mut last_tick = Instant::now();
    let mut last_poll = Instant::now();
    let (msg_tx, mut msg_rx) = mpsc::unbounded_channel::<Msg>();
    let mut dirty = true;
    let mut keyed = false;
    let mut last_draw: Option<Instant> = None;
    let mut signals_open = live;
    // When a pager last gave the terminal back.
    let mut paged: Option<Instant> = None;
    loop {
        if live {
            app.clock = match app.vm.run.finished {
                Some(_) => app.vm.run.elapsed,
                // One clock, the run's, in every console: one attached
                // late (or again) does not count from its own start.
                None => source
                    .run_clock()
                    .unwrap_or_else(|| started.elapsed().as_secs_f64())
                    .max(app.vm.run.elapsed),
            };
        }
        // What the operator did shows at once; what the run did waits for
        // the next frame (at most 30 a second).
        if dirty && (keyed || last_draw.is_none_or(|t| t.elapsed() >= FRAME)) {
            screen.draw(app)?;
            dirty = false;
            keyed = false;
            last_draw = Some(Instant::now());
        }
        if app.should_exit {
            return Ok(Ended::Quit);
        }
        let next_frame = last_draw.map_or_else(Instant::now, |t| t + FRAME);
        let ticks = source.ticks();
        tokio::select! {
            biased;
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    let (pages, effects): (Vec<Effect>, Vec<Effect>) = app
                        .on_key(k)
                        .into_iter()
                        .partition(|e| matches!(e, Effect::Page(_)));
                    carry_out(app, effects, source, &msg_tx);
                    // The pager has the terminal until it is closed: the
                    // loop waits for it here, the run goes on.
                    for p in pages {
                        let Effect::Page(page) = p else { continue };
                        match super::pager::show(app, &mut screen, page, stop).await? {
                            Shown::NotRun => {}
                            Shown::Closed => {
                                paged = Some(Instant::now());
                                // A playing replay does not jump ahead by
                                // the time the pager was open.
                                last_tick = Instant::now();
                            }
                            Shown::Stopped(sig) => return Ok(stopped_by(app, source, sig).await),
                        }
                    }
                    dirty = true;
                    keyed = true;
                }
                Some(Ok(Event::Mouse(m))) => {
                    app.on_mouse(m);
                    dirty = true;
                    keyed = true;
                }
                Some(Ok(Event::Resize(w, h))) => {
                    // At once, not at the next frame: a key right after a
                    // shrink must already meet the "too small" screen.
                    app.too_small = super::ui::too_small(ratatui::layout::Rect::new(0, 0, w, h));
                    dirty = true;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(Ended::InputClosed),
            },
            Some(sig) = stop.recv() => {
                if sig == StopSignal::Interrupt && paged.is_some_and(|t| t.elapsed() < PAGER_SIGINT) {
                    continue;
                }
                return Ok(stopped_by(app, source, sig).await);
            }
            obs = source.observe(), if signals_open => {
                signals_open = fold_batch(app, obs, source).await;
                let effects = app.after_fold();
                carry_out(app, effects, source, &msg_tx);
                dirty = true;
            }
            _ = frame_tick.tick(), if ticks => {
                let now = Instant::now();
                if let Source::Replay { player, tail } = source {
                    player.tick(app, now - last_tick);
                    // A live run's log is looked at a few times a second.
                    if let Some(tail) = tail
                        && now - last_poll >= Duration::from_millis(250)
                    {
                        last_poll = now;
                        let more = tail.poll();
                        player.grow(app, more);
                    }
                }
                last_tick = now;
                dirty = true;
            }
            Some(msg) = msg_rx.recv() => {
                match msg {
                    Msg::Status(text, level) => app.set_status(text, level),
                    Msg::Answer(req, answer) => app.answered(req, answer),
                    Msg::Preview(preview) => app.offer_release(preview),
                    Msg::Runs(rows) => app.open_runs(rows),
                }
                dirty = true;
            }
            _ = tick.tick() => {
                // The clock in the header moves while the run goes on.
                if live && app.vm.run.finished.is_none() {
                    dirty = true;
                }
                // A message past its time leaves the status line even when
                // nothing else moves (a finished run, a paused replay).
                if app.status.is_some() && app.shown_status().is_none() {
                    app.status = None;
                    dirty = true;
                }
                if !ticks {
                    last_tick = Instant::now();
                }
            }
            _ = tokio::time::sleep_until(next_frame), if dirty => {}
        }
    }
}

/// A stop signal ends the console: an attached one leaves (the run goes
/// on); one that holds its run ends it first, without questions.
async fn stopped_by(app: &mut App, source: &Source<'_>, sig: StopSignal) -> Ended {
    if app.hooks.attached {
        return Ended::Stopped(sig);
    }
    app.quitting = true;
    if let Some(s) = source.session() {
        let _ = s.handle.request(Request::Cancel).await;
    }
    Ended::Stopped(sig)
}

/// Folds what arrived, up to a budget; false once the stream has closed.
async fn fold_batch(app: &mut App, first: Observed, source: &mut Source<'_>) -> bool {
    let started = std::time::Instant::now();
    let mut next = Some(first);
    let mut n = 0;
    while let Some(obs) = next.take() {
        match obs {
            Observed::Signal(s) => app.fold(&s),
            Observed::Lagged { .. } => {
                if let Some(session) = source.session() {
                    resync(app, session).await;
                }
            }
            Observed::Closed => {
                // A hosted run's stream ends with its run; before, its host
                // went away.
                if matches!(source, Source::Attached { .. }) && app.vm.run.finished.is_none() {
                    app.set_status(
                        "the connection to the run closed before its end (its host ended or was killed); `playdeck runs` says where it stands",
                        Level::Error,
                    );
                }
                return false;
            }
        }
        n += 1;
        if n >= FOLD_BATCH || started.elapsed() >= FOLD_BUDGET {
            break;
        }
        next = source.try_next();
    }
    true
}

/// The console fell behind: rebuild from the kernel's snapshot, and the
/// budgets and capacity from their owners.
pub async fn resync(app: &mut App, session: &Session) {
    let Some(snap) = session.handle.snapshot().await else {
        return;
    };
    // Node indices are rebuilt in the snapshot's order: what holds one
    // (marks, a followed agent, the problems list) is carried by id.
    let held = app.held_ids();
    app.vm.resync(&snap);
    app.remap(held);
    let p = session.router.snapshot();
    let proj = app.vm.projection_mut();
    proj.palette.budgets = Some(crate::projection::Budgets {
        consumed_new_roles: p.consumed_new_roles,
        reserved: p.reserved_roles.len(),
        max_new_roles: p.max_new_roles,
        spawns_accepted: snap.run.spawn_accepted,
        max_spawn: snap.run.max_spawn,
    });
    if let Some(r) = &session.reconciler {
        // A state that changed while the console lagged changed by now.
        let now = proj.run.elapsed;
        let instances = &mut proj.capacity.instances;
        for a in r.status().agents {
            let name: Arc<str> = Arc::from(a.name.as_str());
            let x = instances
                .entry(name.clone())
                .or_insert_with(|| crate::projection::Instance {
                    name,
                    profile: Arc::from(a.profile.as_str()),
                    role: Arc::from(a.role.as_str()),
                    state: a.state,
                    lifetime: a.lifetime,
                    op: None,
                    busy_secs: 0.0,
                    busy_since: None,
                    operations: Vec::new(),
                    since: now,
                });
            if x.state != a.state {
                x.since = now;
            }
            x.state = a.state;
            x.lifetime = a.lifetime;
            x.op = a.op.as_deref().map(Arc::from);
        }
    }
}

pub(crate) fn draw(term: &mut terminal::Term, app: &mut App) -> io::Result<()> {
    let size = term.size()?;
    app.vm.settle();
    super::ui::arrange(
        app,
        ratatui::layout::Rect::new(0, 0, size.width, size.height),
    );
    crossterm::execute!(io::stdout(), BeginSynchronizedUpdate)?;
    let r = term.draw(|f| super::ui::draw(f, app)).map(|_| ());
    crossterm::execute!(io::stdout(), EndSynchronizedUpdate)?;
    // What this frame showed selected is what the operator saw.
    app.pick();
    r
}

/// Runs effects: run control in tasks (answers come back as status
/// messages), replay moves, the report, the bell.
pub fn carry_out(
    app: &mut App,
    effects: Vec<Effect>,
    source: &mut Source<'_>,
    msgs: &mpsc::UnboundedSender<Msg>,
) {
    for e in effects {
        match e {
            Effect::Notify(text) => {
                if source.live() && source_has_terminal(source) {
                    terminal::notify(&text);
                }
            }
            Effect::ListRuns => {
                let dir = runs_dir(app);
                let tx = msgs.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(match crate::control::listing::list(&dir) {
                        Ok(rows) => Msg::Runs(rows),
                        Err(e) => Msg::Status(
                            format!("no runs screen: {}: {e}", dir.display()),
                            Level::Error,
                        ),
                    });
                });
            }
            Effect::PreviewRelease => {
                if let Source::Attached { link } = source {
                    let r = link.requester.clone();
                    let tx = msgs.clone();
                    tokio::spawn(async move {
                        let req = Request::Release(crate::kernel::command::ReleaseSelect {
                            dry_run: true,
                            ..Default::default()
                        });
                        let _ = tx.send(match r.send(req).await {
                            Ok(crate::control::Reply::Preview(p)) => Msg::Preview(p),
                            Ok(other) => {
                                Msg::Status(format!("unexpected answer: {other:?}"), Level::Error)
                            }
                            Err(f) => Msg::Status(f.message, Level::Error),
                        });
                    });
                }
            }
            Effect::Replay(cmd) => {
                if let Source::Replay { player, .. } = source {
                    player.apply(app, cmd);
                }
            }
            Effect::Report => write_report(app),
            // Needs the terminal: the event loop runs it (see `pager::show`).
            Effect::Page(_) => {}
            Effect::Controls(reqs) => {
                let tx = msgs.clone();
                if let Source::Attached { link } = source {
                    let r = link.requester.clone();
                    tokio::spawn(async move {
                        let mut answers = Vec::new();
                        for req in reqs {
                            let a = r.send(req.clone()).await.map(|_| ()).map_err(|f| f.message);
                            answers.push((req, a));
                        }
                        let (text, level) = together(&answers);
                        let _ = tx.send(Msg::Status(text, level));
                    });
                    continue;
                }
                let Some(session) = source.session() else {
                    continue;
                };
                let h = session.handle.clone();
                let capacity = session.reconciler.clone();
                tokio::spawn(async move {
                    let (text, level) = commands(&h, capacity.as_deref(), reqs).await;
                    let _ = tx.send(Msg::Status(text, level));
                });
            }
            Effect::Control(req) => {
                if let Source::Attached { link } = source {
                    let r = link.requester.clone();
                    let tx = msgs.clone();
                    tokio::spawn(async move {
                        let answer = r.send(req.clone()).await;
                        let _ = tx.send(Msg::Answer(req, answer));
                    });
                    continue;
                }
                let Some(session) = source.session() else {
                    continue;
                };
                let h = session.handle.clone();
                let capacity = session.reconciler.clone();
                let tx = msgs.clone();
                tokio::spawn(async move {
                    let answer = command(&h, capacity.as_deref(), req.clone()).await;
                    let _ = tx.send(Msg::Answer(req, answer));
                });
            }
        }
    }
}

/// Where the runs screen looks.
pub fn runs_dir(app: &App) -> std::path::PathBuf {
    app.hooks
        .runs_dir
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(crate::store::RUNS_DIR))
}

/// Benchmarks drive a live source without a terminal (no session): they
/// get no bell.
fn source_has_terminal(source: &Source<'_>) -> bool {
    match source {
        Source::Live { session, .. } => session.is_some(),
        _ => true,
    }
}

/// Writes the run report into the run directory and says where.
pub fn write_report(app: &mut App) {
    let Some(dir) = app.hooks.run_dir.clone() else {
        return;
    };
    match crate::store::report::write_for(&dir) {
        Ok(path) => app.info(format!("report written to {}", path.display())),
        Err(e) => app.set_status(format!("no report: {e}"), Level::Error),
    }
}

/// Carries out one operator command; the run's answer.
pub async fn command(
    h: &RunHandle,
    capacity: Option<&crate::capacity::Reconciler>,
    req: Request,
) -> Result<crate::control::Reply, crate::control::Failure> {
    let by = Arc::from(crate::paths::me("console"));
    crate::control::apply(h, capacity, req, by).await
}

/// Carries out several commands in order; one line names what each did.
pub async fn commands(
    h: &RunHandle,
    capacity: Option<&crate::capacity::Reconciler>,
    reqs: Vec<Request>,
) -> (String, Level) {
    let by: Arc<str> = Arc::from(crate::paths::me("console"));
    let mut answers = Vec::new();
    for req in reqs {
        let a = crate::control::apply(h, capacity, req.clone(), by.clone())
            .await
            .map(|_| ())
            .map_err(|f| f.message);
        answers.push((req, a));
    }
    together(&answers)
}

/// `approved 3: gate-a, gate-b, gate-c`, and what was refused with why:
/// one line for a decision taken together.
pub fn together(answers: &[(Request, Result<(), String>)]) -> (String, Level) {
    let done: Vec<&str> = answers
        .iter()
        .filter(|(_, a)| a.is_ok())
        .filter_map(|(r, _)| r.target())
        .collect();
    let refused: Vec<String> = answers
        .iter()
        .filter_map(|(r, a)| a.as_ref().err().map(|why| (r, why)))
        .map(|(r, why)| format!("{} ({why})", r.target().unwrap_or(r.name())))
        .collect();
    let verb = answers.first().map_or("done", |(r, _)| match r {
        Request::Approve { .. } => "approved",
        Request::Retry { .. } => "retrying",
        other => other.name(),
    });
    let mut line = format!("{verb} {}: {}", done.len(), done.join(", "));
    if done.is_empty() {
        line = format!("{verb} none");
    }
    if !refused.is_empty() {
        line.push_str(&format!(
            "; refused {}: {}",
            refused.len(),
            refused.join(", ")
        ));
    }
    let level = if refused.is_empty() {
        Level::Info
    } else {
        Level::Warning
    };
    (line, level)
}
