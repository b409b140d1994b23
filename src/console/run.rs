//! The console's event loop: terminal input, the run's signals, status
//! messages and a clock tick in one `select!`. Signals are folded in
//! bounded batches so keys stay responsive under a flood; frames are drawn
//! only when something changed, at most 30 a second, inside synchronized
//! updates.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::app::{App, Effect, Hooks, Level};
use super::config::ConsoleConfig;
use super::model::{PlayFacts, ProfileView};
use super::terminal;
use crate::kernel::{Observed, Request, RunHandle, Subscription};
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

/// What the view model needs from the play that signals do not carry.
pub fn facts(play: &Play) -> PlayFacts {
    let cfg = &play.palette;
    PlayFacts {
        expansion_only: cfg
            .expansion_only_roles()
            .into_iter()
            .map(Arc::from)
            .collect(),
        orchestrator_may_expand: cfg.palette.expansion.orchestrator_may_expand,
        capacity: play.capacity.as_ref().is_some_and(|c| c.enabled),
        max_nodes: play.capacity.as_ref().map_or(0, |c| c.max_nodes),
        profiles: play
            .capacity
            .as_ref()
            .map(|c| {
                c.profiles
                    .values()
                    .map(|p| ProfileView {
                        name: Arc::from(p.name.as_str()),
                        role: Arc::from(p.role.as_str()),
                        max_instances: p.max_instances,
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
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
    }
}

/// Opens the console on `play`. Returns the exit code (0 when every
/// operation succeeded, 1 otherwise).
pub async fn run(
    play: &Play,
    opts: ConsoleOptions,
    mut stop: mpsc::UnboundedReceiver<()>,
) -> Result<i32, RunError> {
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
    let mut events = EventStream::new();
    let looped = event_loop(
        &mut app,
        &mut sub,
        &mut events,
        |app| draw(&mut term, app),
        Some(&session),
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
    session.close().await;
    looped?;
    let envelope = envelope.map_err(io::Error::other)?;
    session.run_dir.write_result(&envelope)?;
    Ok(crate::headless::exit_code(envelope.outcome))
}

/// The loop itself, over any input stream and any frame sink, so tests and
/// benchmarks drive exactly what the terminal drives. Without a session,
/// run-control effects are ignored.
pub async fn event_loop<E, D>(
    app: &mut App,
    sub: &mut Subscription,
    events: &mut E,
    mut draw: D,
    session: Option<&Session>,
    stop: &mut mpsc::UnboundedReceiver<()>,
) -> io::Result<()>
where
    E: futures_util::Stream<Item = io::Result<Event>> + Unpin,
    D: FnMut(&mut App) -> io::Result<()>,
{
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let (msg_tx, mut msg_rx) = mpsc::unbounded_channel::<(String, Level)>();
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let mut signals_open = true;
    loop {
        app.clock = match app.vm.run.finished {
            Some(_) => app.vm.run.elapsed,
            None => started.elapsed().as_secs_f64().max(app.vm.run.elapsed),
        };
        if dirty && last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
            draw(app)?;
            dirty = false;
            last_draw = Some(Instant::now());
        }
        if app.should_exit {
            return Ok(());
        }
        let next_frame = last_draw.map_or_else(Instant::now, |t| t + FRAME);
        tokio::select! {
            biased;
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    let effects = app.on_key(k);
                    carry_out(app, effects, session, &msg_tx);
                    dirty = true;
                }
                Some(Ok(Event::Mouse(m))) => {
                    app.on_mouse(m);
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            Some(()) = stop.recv() => {
                // SIGTERM / SIGHUP: no questions, end the run and leave.
                app.quitting = true;
                if let Some(s) = session {
                    let _ = s.handle.request(Request::Cancel).await;
                }
                return Ok(());
            }
            obs = sub.next(), if signals_open => {
                signals_open = fold_batch(app, obs, sub, session).await;
                let effects = app.after_fold();
                carry_out(app, effects, session, &msg_tx);
                dirty = true;
            }
            Some((text, level)) = msg_rx.recv() => {
                app.set_status(text, level);
                dirty = true;
            }
            _ = tick.tick() => {
                if app.vm.run.finished.is_none() {
                    dirty = true;
                }
            }
            _ = tokio::time::sleep_until(next_frame), if dirty => {}
        }
    }
}

/// Folds what arrived, up to a budget; false once the stream has closed.
async fn fold_batch(
    app: &mut App,
    first: Observed,
    sub: &mut Subscription,
    session: Option<&Session>,
) -> bool {
    let started = std::time::Instant::now();
    let mut next = Some(first);
    let mut n = 0;
    while let Some(obs) = next.take() {
        match obs {
            Observed::Signal(s) => app.fold(&s),
            Observed::Lagged { .. } => {
                if let Some(session) = session {
                    resync(app, session).await;
                }
            }
            Observed::Closed => return false,
        }
        n += 1;
        if n >= FOLD_BATCH || started.elapsed() >= FOLD_BUDGET {
            break;
        }
        next = sub.try_next();
    }
    true
}

/// The console fell behind: rebuild from the kernel's snapshot, and the
/// budgets and capacity from their owners.
pub async fn resync(app: &mut App, session: &Session) {
    let Some(snap) = session.handle.snapshot().await else {
        return;
    };
    app.vm.resync(&snap);
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
                });
            x.state = a.state;
            x.lifetime = a.lifetime;
            x.op = a.op.as_deref().map(Arc::from);
        }
    }
}

pub(crate) fn draw(term: &mut terminal::Term, app: &mut App) -> io::Result<()> {
    let size = term.size()?;
    let area = ratatui::layout::Rect::new(0, 0, size.width, size.height);
    if !super::ui::too_small(area) {
        app.geometry = super::ui::layout(area, app).geometry;
        app.clamp();
    }
    crossterm::execute!(io::stdout(), BeginSynchronizedUpdate)?;
    let r = term.draw(|f| super::ui::draw(f, app)).map(|_| ());
    crossterm::execute!(io::stdout(), EndSynchronizedUpdate)?;
    r
}

/// Runs effects: run control in tasks (answers come back as status
/// messages), the report, the bell.
pub fn carry_out(
    app: &mut App,
    effects: Vec<Effect>,
    session: Option<&Session>,
    msgs: &mpsc::UnboundedSender<(String, Level)>,
) {
    let Some(session) = session else {
        return;
    };
    for e in effects {
        match e {
            Effect::Bell => terminal::bell(),
            // A live run has no timeline.
            Effect::Replay(_) => {}
            Effect::Report => match crate::store::report::write_for(&session.run_dir.path) {
                Ok(path) => app.info(format!("report written to {}", path.display())),
                Err(e) => app.set_status(format!("no report: {e}"), Level::Error),
            },
            Effect::Control(req) => {
                let h = session.handle.clone();
                let capacity = session.reconciler.clone();
                let tx = msgs.clone();
                tokio::spawn(async move {
                    let _ = tx.send(command(&h, capacity.as_deref(), req).await);
                });
            }
        }
    }
}

/// Carries out one operator command; returns what to tell the operator.
pub async fn command(
    h: &RunHandle,
    capacity: Option<&crate::capacity::Reconciler>,
    req: Request,
) -> (String, Level) {
    match crate::control::apply(h, capacity, req.clone()).await {
        Ok(reply) => (reply.one_line(&req), Level::Info),
        Err(f) => (f.message, Level::Error),
    }
}
