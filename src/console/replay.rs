//! `playdeck replay RUN`: the console on a recorded run, read-only, with
//! time travel. The view model at any event is the nearest periodic
//! snapshot plus the events after it, so a seek anywhere in a long log
//! costs one clone and a bounded fold.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::app::{App, Effect, Level, ReplayBar, ReplayCmd};
use super::model::{PlayFacts, ViewModel};
use crate::kernel::Signal;

/// Snapshots kept over the whole log: seek cost falls with their number,
/// memory grows with it.
const SNAPSHOTS: usize = 32;
const MIN_INTERVAL: usize = 256;
pub const SPEEDS: [f64; 9] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// A recorded run and view models along it.
pub struct Timeline {
    signals: Arc<[Signal]>,
    facts: PlayFacts,
    /// (events applied, view model then), from 0.
    snapshots: Vec<(usize, ViewModel)>,
}

impl Timeline {
    pub fn new(signals: Vec<Signal>, facts: PlayFacts) -> Timeline {
        let interval = (signals.len() / SNAPSHOTS).max(MIN_INTERVAL);
        Timeline::with_interval(signals, facts, interval)
    }

    /// A snapshot every `interval` events (tests use small ones).
    pub fn with_interval(signals: Vec<Signal>, facts: PlayFacts, interval: usize) -> Timeline {
        let interval = interval.max(1);
        let mut vm = ViewModel::new(&facts);
        let mut snapshots = vec![(0, vm.clone())];
        for (i, s) in signals.iter().enumerate() {
            vm.fold(s);
            if (i + 1) % interval == 0 {
                vm.settle();
                snapshots.push((i + 1, vm.clone()));
            }
        }
        Timeline {
            signals: signals.into(),
            facts,
            snapshots,
        }
    }

    pub fn len(&self) -> usize {
        self.signals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.signals.is_empty()
    }

    pub fn facts(&self) -> &PlayFacts {
        &self.facts
    }

    /// Run time after `pos` events.
    pub fn time_at(&self, pos: usize) -> f64 {
        pos.checked_sub(1)
            .and_then(|i| self.signals.get(i))
            .map_or(0.0, |s| s.elapsed)
    }

    pub fn end_time(&self) -> f64 {
        self.time_at(self.len())
    }

    /// How many events happened by run time `t`.
    pub fn pos_at_time(&self, t: f64) -> usize {
        self.signals.partition_point(|s| s.elapsed <= t)
    }

    /// The view model after `pos` events.
    pub fn state_at(&self, pos: usize) -> ViewModel {
        let pos = pos.min(self.len());
        let i = self.snapshots.partition_point(|(p, _)| *p <= pos) - 1;
        let (from, snap) = &self.snapshots[i];
        let mut vm = snap.clone();
        for s in &self.signals[*from..pos] {
            vm.fold(s);
        }
        vm.settle();
        vm
    }

    /// The events in `[from, to)`.
    pub fn between(&self, from: usize, to: usize) -> &[Signal] {
        &self.signals[from.min(self.len())..to.min(self.len())]
    }
}

/// Plays a timeline into an app.
pub struct Player {
    pub timeline: Timeline,
    pub pos: usize,
    pub playing: bool,
    speed_ix: usize,
    /// Run time being shown (between events while playing).
    pub clock: f64,
}

impl Player {
    pub fn new(timeline: Timeline) -> Player {
        Player {
            timeline,
            pos: 0,
            playing: false,
            speed_ix: 2,
            clock: 0.0,
        }
    }

    pub fn speed(&self) -> f64 {
        SPEEDS[self.speed_ix]
    }

    pub fn set_speed(&mut self, speed: f64) {
        self.speed_ix = SPEEDS
            .iter()
            .position(|s| *s >= speed)
            .unwrap_or(SPEEDS.len() - 1);
    }

    /// Shows the state after `pos` events.
    pub fn seek(&mut self, app: &mut App, pos: usize) {
        let pos = pos.min(self.timeline.len());
        if pos >= self.pos {
            self.advance(app, pos);
        } else {
            app.vm = self.timeline.state_at(pos);
            app.after_fold();
            self.pos = pos;
        }
        self.clock = self.timeline.time_at(pos);
        self.sync(app);
    }

    /// Folds forward to `pos` (cheap: only the new events).
    fn advance(&mut self, app: &mut App, pos: usize) {
        for s in self.timeline.between(self.pos, pos) {
            app.fold(s);
        }
        app.after_fold();
        self.pos = pos;
    }

    /// Plays `dt` of wall time.
    pub fn tick(&mut self, app: &mut App, dt: Duration) {
        if !self.playing {
            return;
        }
        self.clock += dt.as_secs_f64() * self.speed();
        let pos = self.timeline.pos_at_time(self.clock);
        if pos > self.pos {
            self.advance(app, pos);
        }
        if self.pos >= self.timeline.len() {
            self.playing = false;
            self.clock = self.timeline.end_time();
            app.info("end of the recording");
        }
        self.sync(app);
    }

    pub fn apply(&mut self, app: &mut App, cmd: ReplayCmd) {
        match cmd {
            ReplayCmd::PlayPause => {
                if self.pos >= self.timeline.len() && !self.playing {
                    self.seek(app, 0);
                }
                self.playing = !self.playing;
            }
            ReplayCmd::Faster => self.speed_ix = (self.speed_ix + 1).min(SPEEDS.len() - 1),
            ReplayCmd::Slower => self.speed_ix = self.speed_ix.saturating_sub(1),
            ReplayCmd::Events(n) => {
                let pos = (self.pos as i64 + n).clamp(0, self.timeline.len() as i64) as usize;
                self.seek(app, pos);
            }
            ReplayCmd::Seconds(d) => {
                let t = (self.clock + d).max(0.0);
                let pos = self.timeline.pos_at_time(t);
                self.seek(app, pos);
                self.clock = t.min(self.timeline.end_time());
            }
            ReplayCmd::Start => self.seek(app, 0),
            ReplayCmd::End => self.seek(app, self.timeline.len()),
            ReplayCmd::JumpTo(text) => match parse_target(&text) {
                Ok(Target::Event(n)) => self.seek(app, n),
                Ok(Target::Time(t)) => {
                    let pos = self.timeline.pos_at_time(t);
                    self.seek(app, pos);
                    self.clock = t.min(self.timeline.end_time());
                }
                Err(e) => app.set_status(e, Level::Warning),
            },
        }
        self.sync(app);
    }

    /// Tells the app where the replay stands.
    pub fn sync(&self, app: &mut App) {
        app.clock = self.clock;
        app.replay = Some(ReplayBar {
            pos: self.pos,
            total: self.timeline.len(),
            at: self.clock,
            end: self.timeline.end_time(),
            playing: self.playing,
            speed: self.speed(),
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    Event(usize),
    Time(f64),
}

/// `#120` or `e120` is an event number; `12.5`, `12.5s` or `1:05` a time.
pub fn parse_target(text: &str) -> Result<Target, String> {
    let t = text.trim();
    let bad =
        || format!("jump to {t:?}? write a time (12.5, 12.5s, 1:05) or an event number (#120)");
    if let Some(n) = t.strip_prefix('#').or_else(|| t.strip_prefix('e')) {
        return n.trim().parse().map(Target::Event).map_err(|_| bad());
    }
    if let Some((m, s)) = t.split_once(':') {
        let m: f64 = m.trim().parse().map_err(|_| bad())?;
        let s: f64 = s.trim().parse().map_err(|_| bad())?;
        return Ok(Target::Time(m * 60.0 + s));
    }
    t.trim_end_matches('s')
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(Target::Time)
        .ok_or_else(bad)
}

const FRAME: Duration = Duration::from_millis(33);

/// The replay's event loop, over any input stream and frame sink.
pub async fn event_loop<E, D>(
    app: &mut App,
    player: &mut Player,
    events: &mut E,
    mut draw: D,
    run_dir: Option<&std::path::Path>,
    stop: &mut mpsc::UnboundedReceiver<()>,
) -> io::Result<()>
where
    E: futures_util::Stream<Item = io::Result<Event>> + Unpin,
    D: FnMut(&mut App) -> io::Result<()>,
{
    let mut tick = tokio::time::interval(FRAME);
    let mut last = Instant::now();
    player.sync(app);
    loop {
        draw(app)?;
        if app.should_exit {
            return Ok(());
        }
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    for e in app.on_key(k) {
                        match e {
                            Effect::Replay(cmd) => player.apply(app, cmd),
                            Effect::Report => match run_dir {
                                Some(dir) => match crate::store::report::write_for(dir) {
                                    Ok(p) => app.info(format!("report written to {}", p.display())),
                                    Err(e) => app.set_status(format!("no report: {e}"), Level::Error),
                                },
                                None => app.set_status("no run directory to write the report to", Level::Warning),
                            },
                            // Nothing runs in a replay.
                            Effect::Control(_) | Effect::Bell => {}
                        }
                    }
                }
                Some(Ok(Event::Mouse(m))) => app.on_mouse(m),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            Some(()) = stop.recv() => return Ok(()),
            _ = tick.tick() => {
                let now = Instant::now();
                player.tick(app, now - last);
                last = now;
            }
        }
    }
}

/// Opens the console on a recorded run.
pub async fn run(
    run_dir: &std::path::Path,
    signals: Vec<Signal>,
    facts: PlayFacts,
    config: super::config::ConsoleConfig,
    speed: f64,
    mut stop: mpsc::UnboundedReceiver<()>,
) -> io::Result<()> {
    let timeline = Timeline::new(signals, facts);
    let mut app = App::new(
        timeline.facts(),
        config.themes,
        config.theme,
        config.keymap,
        false,
        super::app::Hooks::default(),
    );
    let mut player = Player::new(timeline);
    player.set_speed(speed);
    player.playing = true;
    app.info("replay: space plays and pauses, ←/→ step, [ ] ten seconds, : jumps, ? for all keys");
    let mut term = super::terminal::init()?;
    let mut input = EventStream::new();
    let r = event_loop(
        &mut app,
        &mut player,
        &mut input,
        |app| super::run::draw(&mut term, app),
        Some(run_dir),
        &mut stop,
    )
    .await;
    super::terminal::restore();
    r
}
