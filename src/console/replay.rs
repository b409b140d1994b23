//! `playdeck replay RUN`: the console on a recorded run, read-only, with
//! time travel. The view model at any event is the nearest periodic
//! snapshot plus the events after it, so a seek anywhere in a long log
//! costs one clone and a bounded fold. A run still live is followed: its
//! log is read as it grows. The event loop is the live console's
//! (`run::event_loop`), over a replay source.

use std::path::Path;

use super::app::{App, Follow, ReplayBar, ReplayCmd};
use super::text::group;
use crate::kernel::{Signal, SignalKind};
use crate::operator::model::{PlayFacts, ViewModel};

/// Snapshots kept over the whole log: seek cost falls with their number,
/// memory grows with it.
const SNAPSHOTS: usize = 32;
const MIN_INTERVAL: usize = 256;
pub const SPEEDS: [f64; 9] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// A recorded run and view models along it.
pub struct Timeline {
    signals: Vec<Signal>,
    facts: PlayFacts,
    interval: usize,
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
        let vm = ViewModel::new(&facts);
        let mut t = Timeline {
            signals: Vec::new(),
            facts,
            interval,
            snapshots: vec![(0, vm)],
        };
        t.extend(signals);
        t
    }

    /// Appends events (a live run's log grew), with snapshots as due.
    pub fn extend(&mut self, more: Vec<Signal>) {
        if more.is_empty() {
            return;
        }
        let mut vm = self.state_at(self.len());
        for s in more {
            vm.fold(&s);
            self.signals.push(s);
            if self.signals.len().is_multiple_of(self.interval) {
                vm.settle();
                self.snapshots.push((self.signals.len(), vm.clone()));
            }
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

    /// The last event's `seq` (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.signals.last().map_or(0, |s| s.seq)
    }

    /// Whether the log ends with the run's end.
    pub fn complete(&self) -> bool {
        self.signals
            .iter()
            .rev()
            .find(|s| !matches!(s.kind, SignalKind::AgentUsage { .. }))
            .is_some_and(|s| matches!(s.kind, SignalKind::RunFinished { .. }))
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

    /// Event `pos` (numbered from 1), if there is one.
    pub fn event(&self, pos: usize) -> Option<&Signal> {
        pos.checked_sub(1).and_then(|i| self.signals.get(i))
    }
}

/// An event as a person reads it: `#40 9.4s ▶ started kickoff
/// (orchestrator)`, in the headless printer's words.
pub fn describe(pos: usize, s: &Signal) -> String {
    let what = crate::headless::HumanPrinter::default()
        .line(s)
        .map(|l| {
            // The printer's own time column is replaced by ours.
            let l = l.trim_start();
            let l = l.split_once("s  ").map_or(l, |(_, rest)| rest);
            l.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .unwrap_or_else(|| match s.kind.node() {
            Some(n) => format!("{} {}", s.kind.type_name().replace('_', " "), n.name),
            None => s.kind.type_name().replace('_', " "),
        });
    format!(
        "#{} {}  {what}",
        group(pos),
        crate::operator::words::duration(s.elapsed)
    )
}

/// Plays a timeline into an app.
pub struct Player {
    pub timeline: Timeline,
    pub pos: usize,
    pub playing: bool,
    speed_ix: usize,
    /// Run time being shown (between events while playing).
    pub clock: f64,
    pub follow: Follow,
}

impl Player {
    pub fn new(timeline: Timeline) -> Player {
        let follow = if timeline.complete() {
            Follow::Complete
        } else {
            Follow::Snapshot
        };
        Player {
            timeline,
            pos: 0,
            playing: false,
            speed_ix: 2,
            clock: 0.0,
            follow,
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
    pub fn tick(&mut self, app: &mut App, dt: std::time::Duration) {
        if !self.playing {
            return;
        }
        self.clock += dt.as_secs_f64() * self.speed();
        let pos = self.timeline.pos_at_time(self.clock);
        if pos > self.pos {
            self.advance(app, pos);
        }
        if self.pos >= self.timeline.len() {
            self.clock = self.timeline.end_time();
            if self.follow != Follow::Following {
                self.playing = false;
                app.info("end of the recording");
            }
        }
        self.sync(app);
    }

    /// New events of a live run: shown at once when the replay was at its
    /// end, as a live console would.
    pub fn grow(&mut self, app: &mut App, more: Vec<Signal>) {
        if more.is_empty() {
            return;
        }
        let at_end = self.pos >= self.timeline.len();
        self.timeline.extend(more);
        if self.timeline.complete() {
            self.follow = Follow::Complete;
        }
        if at_end {
            let end = self.timeline.len();
            self.advance(app, end);
            self.clock = self.timeline.end_time();
        }
        self.sync(app);
    }

    pub fn apply(&mut self, app: &mut App, cmd: ReplayCmd) {
        // A move answers for itself: an old message would be stale.
        app.status = None;
        let len = self.timeline.len();
        match cmd {
            ReplayCmd::PlayPause => {
                if self.pos >= len && !self.playing {
                    self.seek(app, 0);
                }
                self.playing = !self.playing;
            }
            ReplayCmd::Faster => self.speed_ix = (self.speed_ix + 1).min(SPEEDS.len() - 1),
            ReplayCmd::Slower => self.speed_ix = self.speed_ix.saturating_sub(1),
            ReplayCmd::Events(n) => {
                let pos = (self.pos as i64 + n).clamp(0, len as i64) as usize;
                self.seek(app, pos);
            }
            ReplayCmd::Seconds(d) => {
                let t = (self.clock + d).max(0.0);
                let pos = self.timeline.pos_at_time(t);
                self.seek(app, pos);
                self.clock = t.min(self.timeline.end_time());
            }
            ReplayCmd::Start => self.seek(app, 0),
            ReplayCmd::End => self.seek(app, len),
            ReplayCmd::JumpTo(text) => match parse_target(&text) {
                Ok(Target::Event(n)) => {
                    if n > len {
                        app.warn(format!(
                            "there is no event #{}: the recording has {} events; showing the last",
                            group(n),
                            group(len)
                        ));
                    }
                    self.seek(app, n);
                }
                Ok(Target::Time(t)) => {
                    let end = self.timeline.end_time();
                    if t > end {
                        app.warn(format!(
                            "{} is past the end: the recording ends at {}; showing the end",
                            crate::operator::words::duration(t),
                            crate::operator::words::duration(end)
                        ));
                    }
                    let pos = self.timeline.pos_at_time(t);
                    self.seek(app, pos);
                    self.clock = t.min(end);
                }
                Err(e) => app.warn(e.to_string()),
            },
        }
        self.sync(app);
    }

    /// Tells the app where the replay stands: the bar, the last event and
    /// the operation it changed.
    pub fn sync(&self, app: &mut App) {
        app.clock = self.clock;
        let last = self.timeline.event(self.pos);
        app.changed = last
            .and_then(|s| s.kind.node())
            .and_then(|h| app.vm.ix(&h.op_id));
        app.replay = Some(ReplayBar {
            pos: self.pos,
            total: self.timeline.len(),
            at: self.clock,
            end: self.timeline.end_time(),
            playing: self.playing,
            speed: self.speed(),
            event: last.map(|s| describe(self.pos, s)),
            follow: self.follow,
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    Event(usize),
    Time(f64),
}

/// What the replay's jump prompt cannot read, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jump to {0:?}? write a time (12.5, 12.5s, 1:05) or an event number (#120)")]
pub struct NotATarget(pub String);

/// `#120` or `e120` is an event number; `12.5`, `12.5s` or `1:05` a time.
pub fn parse_target(text: &str) -> Result<Target, NotATarget> {
    let t = text.trim();
    let bad = || NotATarget(t.to_string());
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

pub use crate::operator::log::LogTail;

/// Whether a run directory's run is live: its control socket answers.
pub fn is_live(dir: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(crate::control::socket_path(dir)).is_ok()
}
