//! The console's state besides the view model: focus, lists, overlays,
//! filter, theme, status line. Keys become actions through the key table
//! and are carried out in `actions.rs`; actions change this state or
//! return effects (run control, replay moves, the report, the bell) for
//! the event loop to carry out. Nothing here blocks.

mod capacity;
mod inspector;
mod palette_tree;
mod problems;
mod runs;
pub use runs::same_dir;
mod selection;
mod words;

pub(crate) use words::plural;

use std::path::PathBuf;
use std::sync::Arc;

use ratatui::layout::Rect;

use super::keymap::{Keymap, Mode};
use super::overlay::Overlay;
use super::scroll::ScrollList;
use super::theme::Theme;
use super::warnings::WarningFold;
use crate::capacity::ReleaseResult;
use crate::kernel::{InstructionDecorator, Lane, LedgerOutcome, Request, Signal};
use crate::operator::model::{COLS, PlayFacts, ViewModel, col_lane};
use crate::projection::{Instance, StartHold};
pub use capacity::{CapRow, WAITING_SHOWN};
pub use inspector::{LIST_MAX, TEXT_MAX};
pub use palette_tree::{Entry, find, palette_items};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Lanes,
    Budgets,
    Ledger,
    Capacity,
}

pub const PANES: [Pane; 4] = [Pane::Lanes, Pane::Budgets, Pane::Ledger, Pane::Capacity];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LedgerFilter {
    #[default]
    All,
    Accepted,
    Dropped,
}

impl LedgerFilter {
    pub fn label(self) -> &'static str {
        match self {
            LedgerFilter::All => "all",
            LedgerFilter::Accepted => "accepted",
            LedgerFilter::Dropped => "dropped",
        }
    }
}

/// What a replay key asks of the player.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayCmd {
    PlayPause,
    Faster,
    Slower,
    /// Events forward (positive) or back.
    Events(i64),
    /// Seconds forward (positive) or back.
    Seconds(f64),
    Start,
    End,
    /// What was typed after `:`.
    JumpTo(String),
}

/// Whether a replay's log can still grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// A finished or stopped run: the log is complete.
    Complete,
    /// The run is live: new events are read as they are written.
    Following,
    /// The log ends without the run's end and nothing writes it: what was
    /// recorded before the run stopped.
    Snapshot,
}

/// Where a replay stands, for the timeline bar.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayBar {
    /// Events applied.
    pub pos: usize,
    pub total: usize,
    pub at: f64,
    pub end: f64,
    pub playing: bool,
    pub speed: f64,
    /// The last event applied, as a person reads it (`#40 9.4s started
    /// kickoff`).
    pub event: Option<String>,
    pub follow: Follow,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// An operator command for the run (the same type every surface uses).
    Control(Request),
    /// Several commands decided together (marked gates approved at once):
    /// carried out in order, answered in one line that names them all.
    Controls(Vec<Request>),
    Replay(ReplayCmd),
    /// Write the run report into the run directory.
    Report,
    /// Something needs the operator (a gate waits, an operation escalated,
    /// the run ended): the bell and a desktop notification (OSC 9 / 777).
    Notify(String),
    /// An attached console's release confirmation: the run says what a
    /// release would do, then the console asks.
    PreviewRelease,
    /// Read the runs directory (off the input path: live runs answer on
    /// their sockets), then open the runs screen.
    ListRuns,
    /// Hand the terminal to `$PAGER` on an attempt's output or a worktree's
    /// diff (the event loop suspends the console around it).
    Page(Page),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

#[derive(Debug, Clone)]
pub struct Status {
    pub text: String,
    pub level: Level,
    /// When it was said: the status line lets it go after a while (the
    /// message log keeps it).
    pub since: tokio::time::Instant,
    /// What kind of notice it is, when it is one (see [`App::notice`]).
    pub fold: Option<&'static str>,
}

/// How long the status line shows a message; a warning or an error stays
/// longer. The message log (`M`) keeps them all.
pub const STATUS_TTL: std::time::Duration = std::time::Duration::from_secs(8);
pub const STATUS_TTL_WARNING: std::time::Duration = std::time::Duration::from_secs(20);
/// Messages the log keeps.
pub const MESSAGES_KEPT: usize = 500;

/// A message the status line showed, for the log: when (run time), how
/// serious, what.
#[derive(Debug, Clone)]
pub struct Message {
    pub at: f64,
    pub level: Level,
    pub text: String,
    /// How many times in a row it was said (the newest words kept).
    pub repeats: u32,
    /// What kind of notice it is: notices of a kind fold into one.
    pub fold: Option<&'static str>,
}

impl Message {
    /// Its words, with how often it was said: `… ×4`.
    pub fn words(&self) -> String {
        if self.repeats > 1 {
            format!("{} ×{}", self.text, self.repeats)
        } else {
            self.text.clone()
        }
    }
}

/// Another terminal's commands of one kind in a row, said as one line.
#[derive(Debug, Clone)]
pub struct ActedRun {
    by: String,
    verb: String,
    /// The first few targets, by name.
    names: Vec<String>,
    total: usize,
    /// Run time of the latest.
    at: f64,
}

impl ActedRun {
    /// `ctl (ana): approve gate-a, gate-b and 12 more`.
    fn words(&self) -> String {
        let more = self.total - self.names.len();
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!("{}: {} {}{tail}", self.by, self.verb, self.names.join(", "))
    }
}

/// The longest an attached console waits to catch up before acting keys
/// work again.
pub const CATCH_UP_AT_MOST: std::time::Duration = std::time::Duration::from_secs(30);

/// Commands closer than this (run seconds) read as one.
const ACTED_TOGETHER: f64 = 5.0;
/// Names one such line lists before counting the rest.
const ACTED_NAMED: usize = 8;

/// What the console may ask of the run's components, in-process.
#[derive(Default, Clone)]
pub struct Hooks {
    /// The delegation clause, for the node inspector.
    pub decorate: Option<Arc<dyn InstructionDecorator>>,
    /// What a release would do now, for the confirmation.
    pub release_preview: Option<Arc<dyn Fn() -> ReleaseResult + Send + Sync>>,
    /// The last lines agent CLIs printed, for the node inspector.
    pub tails: Option<Arc<crate::agents::Tails>>,
    /// The run directory (the report goes there).
    pub run_dir: Option<PathBuf>,
    /// How a person names this run to `playdeck resume`: its id when it is
    /// under `.playdeck/runs`, else its directory.
    pub resume_name: Option<String>,
    /// The console is attached to a run another process hosts: quitting
    /// detaches (the run goes on) unless the operator cancels it.
    pub attached: bool,
    /// Attached with `--read-only`: it watches, it never acts.
    pub read_only: bool,
    /// Where the runs screen looks (default `.playdeck/runs`).
    pub runs_dir: Option<PathBuf>,
}

/// Where panes were drawn last, for mouse hits and page sizes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Geometry {
    pub lanes: Rect,
    pub lane_cols: [Rect; COLS],
    pub budgets: Rect,
    pub ledger: Rect,
    pub capacity: Rect,
}

/// What the panes measured of the screen for the app to size its lists
/// by: made by `ui::measure` from the app as it is, taken by
/// [`App::arrange`], so the app never reaches into the panes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Measured {
    pub too_small: bool,
    pub geometry: Geometry,
    /// The capacity pane's rows and the height of its window.
    pub capacity: (usize, usize),
    /// The budgets pane's rows and the height of its window.
    pub budgets: (usize, usize),
    /// The open overlay's content rows and window, when it scrolls.
    pub overlay: Option<(usize, usize)>,
    /// A follow view's width, and the rows of output it shows.
    pub follow_size: (usize, usize),
}

/// What to show in the pager.
#[derive(Debug, Clone, PartialEq)]
pub enum Page {
    /// Both logs of an attempt, in `logs`.
    Output {
        op: String,
        attempt: u32,
        logs: PathBuf,
    },
    /// What changed in the workspace the attempt worked in: shown in the
    /// console's diff view (the node it is of).
    Diff {
        node: u32,
        op: String,
        attempt: u32,
        /// The capacity instance the attempt ran on, when it had one.
        instance: Option<String>,
        run_dir: PathBuf,
        /// Its work waiting for review (or clashing): the question's
        /// basis, whose commits the view shows, and no others.
        review: Option<crate::kernel::Basis>,
    },
    /// The operator's shell in the operation's own worktree.
    Shell { op: String, run_dir: PathBuf },
}

pub struct App {
    pub vm: ViewModel,
    pub focus: Pane,
    /// Which bottom pane shows when only one fits.
    pub bottom: Pane,
    pub lane_col: usize,
    /// Whether the operator has pressed a key yet: until then a narrow
    /// screen keeps the cursor on the lanes that need them.
    pub touched: bool,
    /// The focused lane fills the lanes' width (`z`).
    pub zoomed: bool,
    /// Operations marked to decide together (`m`), in the order marked,
    /// each with the lane it was marked in: gates to approve, failures to
    /// retry. A mark belongs to its lane: one that leaves it (a gate
    /// another terminal denied) loses it.
    pub marks: Vec<(u32, Lane)>,
    /// An approval refused as stale for an operation this view does not
    /// show waiting yet: asked again once it does.
    pub reask: Option<String>,
    /// Notes made in the diff view on an operation's work, with the
    /// review they are about: `T` sends them while that review waits.
    pub diff_notes: std::collections::HashMap<u32, (Option<crate::kernel::Basis>, Vec<String>)>,
    /// An attached console's first picture: the log's length when the run
    /// welcomed it. Until it has folded that far it says so, and keys
    /// that act wait (what it shows is not yet the present).
    pub catch_up_to: Option<u64>,
    /// When catching up began: past [`CATCH_UP_AT_MOST`] the console stops
    /// waiting (a last line it cannot read would hold it for ever).
    pub catch_up_since: Option<tokio::time::Instant>,
    /// Another terminal's run of one command (see `another_acted`).
    acted_run: Option<ActedRun>,
    /// Failures and escalations the operator has seen to (`K`): the
    /// problems list and `n` pass them by; this console's own view.
    pub acknowledged: rustc_hash::FxHashSet<u32>,
    /// What the status line said, oldest first (`M` shows them).
    pub messages: std::collections::VecDeque<Message>,
    /// Each lane's rows (filter applied).
    pub lanes: [ScrollList; COLS],
    /// The ledger's rows, newest first (filter applied).
    pub ledger: ScrollList,
    pub ledger_filter: LedgerFilter,
    /// The capacity pane's rows, with a cursor (see [`App::selected_instance`]).
    pub capacity: ScrollList,
    /// The instance under the capacity cursor, as the operator last saw it:
    /// the cursor stays on it while rows above come and go.
    capacity_pick: Option<Arc<str>>,
    pub budgets: ScrollList,
    /// What covers the main screen, topmost last.
    pub overlays: Vec<Overlay>,
    /// Filter on operation name or role.
    pub filter: String,
    /// A replay: where it stands (the timeline bar); `None` in a live run.
    pub replay: Option<ReplayBar>,
    /// The operation the last replay step changed, highlighted.
    pub changed: Option<u32>,
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub keymap: Keymap,
    pub status: Option<Status>,
    pub bell: bool,
    seen_approvals: usize,
    seen_escalations: usize,
    /// The cap hold the operator was last called for.
    seen_cap: Option<String>,
    /// The run's end was told (or was already there when the console opened).
    seen_finish: bool,
    seen_warnings: usize,
    /// The run's warnings, repeats folded (see [`App::warnings`]).
    warning_fold: WarningFold,
    /// The moment shown (seconds since the run started).
    pub clock: f64,
    pub hooks: Hooks,
    /// Quit was confirmed; the run is being cancelled.
    pub quitting: bool,
    /// The operator quit a run that was still going: the cancel is the
    /// console's (not a signal's or `playdeck ctl`'s).
    pub quit_cancelled: bool,
    pub should_exit: bool,
    /// `R` on a finished run: the operation whose retry was offered, named
    /// again when the console exits.
    pub retry_offer: Option<String>,
    /// The terminal is smaller than the console needs: only quit works.
    pub too_small: bool,
    pub geometry: Geometry,
    /// The operation the cursor is on in each lane. Rows above it come and
    /// go as the run moves; the cursor stays on the operation the operator
    /// chose, never on a row number.
    picked: [Option<u32>; COLS],
    /// The operation under the focused lane's cursor left the lane and the
    /// run, not the operator, moved the cursor to a neighbour: the next
    /// operation key only names the new target.
    pub drift: Option<Drift>,
    /// This console as the run records who acted (`console (ana, pid 1234)`).
    pub me: Arc<str>,
    /// The run the operator chose on the runs screen: the console leaves
    /// this one and attaches to it.
    pub switch_to: Option<PathBuf>,
}

/// The cursor moved because its operation left the lane (or the problems
/// list): by the run, another terminal or the operator's own decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    /// The operation the operator had selected.
    pub left: u32,
    /// Where the cursor is now.
    pub now_on: Option<u32>,
    /// It moved in the problems list, not in a lane.
    pub in_problems: bool,
    /// When an operation key named the new target. Presses closer than
    /// [`Drift::READ`] after it are a held key's repeats, not a choice.
    pub named_at: Option<tokio::time::Instant>,
}

impl Drift {
    /// How long a named target must have been on screen before a press
    /// acts on it: longer than a key's auto-repeat, shorter than reading.
    pub const READ: std::time::Duration = std::time::Duration::from_millis(600);

    pub fn new(left: u32, now_on: Option<u32>, in_problems: bool) -> Drift {
        Drift {
            left,
            now_on,
            in_problems,
            named_at: None,
        }
    }
}

impl App {
    pub fn new(
        facts: &PlayFacts,
        themes: Vec<Theme>,
        theme: usize,
        keymap: Keymap,
        bell: bool,
        hooks: Hooks,
    ) -> App {
        App {
            vm: ViewModel::new(facts),
            focus: Pane::Lanes,
            bottom: Pane::Ledger,
            lane_col: 0,
            touched: false,
            zoomed: false,
            marks: Vec::new(),
            reask: None,
            diff_notes: Default::default(),
            catch_up_to: None,
            catch_up_since: None,
            acted_run: None,
            acknowledged: Default::default(),
            messages: std::collections::VecDeque::new(),
            lanes: [ScrollList::list(); COLS],
            ledger: ScrollList::list(),
            ledger_filter: LedgerFilter::All,
            capacity: ScrollList::list(),
            capacity_pick: None,
            budgets: ScrollList::text(),
            overlays: Vec::new(),
            filter: String::new(),
            replay: None,
            changed: None,
            themes,
            theme,
            keymap,
            status: None,
            bell,
            seen_approvals: 0,
            seen_warnings: 0,
            warning_fold: WarningFold::default(),
            clock: 0.0,
            hooks,
            quitting: false,
            seen_escalations: 0,
            seen_cap: None,
            seen_finish: false,
            quit_cancelled: false,
            should_exit: false,
            retry_offer: None,
            too_small: false,
            geometry: Geometry::default(),
            picked: [None; COLS],
            drift: None,
            me: Arc::from(crate::paths::me("console")),
            switch_to: None,
        }
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme]
    }

    /// What the screen shows, which decides what keys mean.
    pub fn mode(&self) -> Mode {
        if self.too_small {
            return Mode::TooSmall;
        }
        match self.overlays.last() {
            Some(o) => o.mode(),
            None if self.replay.is_some() => Mode::Replay,
            None => Mode::Live,
        }
    }

    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlays.last()
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.set_status(text, Level::Info);
    }

    pub fn warn(&mut self, text: impl Into<String>) {
        self.set_status(text, Level::Warning);
    }

    pub fn set_status(&mut self, text: impl Into<String>, level: Level) {
        self.say(text.into(), level, None);
    }

    /// A notice of a kind that can come in bursts (the cursor carried off
    /// by the run): repeats fold into one line, `×4`, and it never takes
    /// the status line from a message of another kind still showing.
    pub fn notice(&mut self, fold: &'static str, text: impl Into<String>) {
        self.say(text.into(), Level::Info, Some(fold));
    }

    /// A new line in the message log (the oldest goes past its size).
    fn log(&mut self, text: String, level: Level, fold: Option<&'static str>) {
        if self.messages.len() >= MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back(Message {
            at: self.clock,
            level,
            text,
            repeats: 1,
            fold,
        });
    }

    fn say(&mut self, text: String, level: Level, fold: Option<&'static str>) {
        let repeat = fold.is_some()
            && self
                .messages
                .back()
                .is_some_and(|m| m.fold == fold && m.level == level);
        if repeat && let Some(last) = self.messages.back_mut() {
            last.at = self.clock;
            last.text = text;
            last.repeats += 1;
        } else {
            self.log(text, level, fold);
        }
        // A real message still showing stays; the notice is in the log.
        let other_showing = self
            .shown_status()
            .is_some_and(|s| fold.is_some() && s.fold != fold);
        if other_showing {
            return;
        }
        let last = self.messages.back().expect("just said");
        self.status = Some(Status {
            text: last.words(),
            level,
            since: tokio::time::Instant::now(),
            fold,
        });
    }

    /// The status line's message, while it is fresh.
    pub fn shown_status(&self) -> Option<&Status> {
        self.status.as_ref().filter(|s| {
            let ttl = match s.level {
                Level::Info => STATUS_TTL,
                _ => STATUS_TTL_WARNING,
            };
            s.since.elapsed() < ttl
        })
    }

    pub fn fold(&mut self, s: &Signal) {
        self.vm.fold(s);
        if let Some(op) = &self.reask
            && self.overlays.is_empty()
            && self
                .vm
                .by_name(op)
                .is_some_and(|n| n.lane == Lane::AwaitingApproval)
        {
            let op = self.reask.take().unwrap_or_default();
            self.overlays
                .push(crate::console::overlay::Overlay::ConfirmApprove {
                    ops: vec![op],
                    oldest: false,
                    scroll: crate::console::scroll::ScrollList::text(),
                });
        }
        if let crate::kernel::SignalKind::RunPaused { cause: Some(c) } = &s.kind
            && self.replay.is_none()
        {
            let (step, resume) = (
                self.keymap.label(crate::console::keymap::Action::Step),
                self.keymap.label(crate::console::keymap::Action::Resume),
            );
            self.warn(format!("paused: {c} — {step} steps, {resume} resumes"));
        }
        // A retried failure or escalation that goes wrong again is news
        // again: its acknowledgement goes with the attempt it was for.
        if let crate::kernel::SignalKind::Retried { node, .. } = &s.kind
            && let Some(ix) = self.vm.ix(&node.op_id)
        {
            self.acknowledged.remove(&ix);
        }
        // What another terminal did shows here, with who did it; the
        // console's own commands are answered in the status line already.
        if let crate::kernel::SignalKind::OperatorAction { by, action, op_id } = &s.kind
            && **by != *self.me
            && self.replay.is_none()
        {
            // The command can arrive after the move it caused: a cursor
            // that moved for it says so again, now with who did it.
            let moved = self
                .drift
                .clone()
                .filter(|d| op_id.and_then(|id| self.vm.ix(&id)) == Some(d.left));
            match moved {
                Some(d) => self.drifted(d.left, d.now_on),
                None => self.another_acted(by, action, s.elapsed),
            }
        }
    }

    /// Another terminal's command, said with who gave it. Several of one
    /// kind from the same terminal in a row (gates approved together) read
    /// as one line naming them all: `ctl (ana): approve gate-a, gate-b`.
    fn another_acted(&mut self, by: &str, action: &str, at: f64) {
        // What happened before this console came is history, not news.
        if self.catching_up().is_some() {
            return;
        }
        let (verb, target) = action.split_once(' ').unwrap_or((action, ""));
        let joins = !target.is_empty()
            && !target.contains(':')
            && self
                .messages
                .back()
                .is_some_and(|m| m.fold == Some("another acted"))
            && self
                .acted_run
                .as_ref()
                .is_some_and(|r| r.by == by && r.verb == verb && at - r.at < ACTED_TOGETHER);
        if joins && let Some(r) = self.acted_run.as_mut() {
            r.at = at;
            r.total += 1;
            if r.names.len() < ACTED_NAMED {
                r.names.push(target.to_string());
            }
            let text = r.words();
            if let Some(m) = self.messages.back_mut() {
                m.text = text.clone();
                m.at = self.clock;
            }
            if self
                .status
                .as_ref()
                .is_some_and(|s| s.fold == Some("another acted"))
            {
                self.status = Some(Status {
                    text,
                    level: Level::Info,
                    since: tokio::time::Instant::now(),
                    fold: Some("another acted"),
                });
            }
            return;
        }
        self.acted_run = (!target.is_empty() && !target.contains(':')).then(|| ActedRun {
            by: by.to_string(),
            verb: verb.to_string(),
            names: vec![target.to_string()],
            total: 1,
            at,
        });
        // A kind of its own, so the next one can join it; it is news, so
        // it takes the status line as any message does.
        let text = format!("{by}: {action}");
        self.log(text.clone(), Level::Info, Some("another acted"));
        self.status = Some(Status {
            text,
            level: Level::Info,
            since: tokio::time::Instant::now(),
            fold: Some("another acted"),
        });
    }

    /// The run's warnings with repeats folded. Kept up to date by
    /// [`App::after_fold`]; signals folded without it (a caller drawing
    /// straight after [`App::fold`]) get a fold made for the frame, so
    /// what is drawn is never behind the run.
    pub fn warnings(&self) -> std::borrow::Cow<'_, WarningFold> {
        if self.warning_fold.is_of(&self.vm.warnings) {
            std::borrow::Cow::Borrowed(&self.warning_fold)
        } else {
            std::borrow::Cow::Owned(WarningFold::of(&self.vm.warnings))
        }
    }

    /// After a batch of signals: tidy lanes, surface warnings, ring the bell
    /// once when an operation starts waiting for approval.
    pub fn after_fold(&mut self) -> Vec<Effect> {
        self.vm.settle_some();
        let mut effects = Vec::new();
        if self.vm.warnings.len() > self.seen_warnings {
            self.seen_warnings = self.vm.warnings.len();
            let (_, w) = self.vm.warnings.last().expect("one");
            let w = format!("warning: {w}");
            self.warn(w);
        } else if self.vm.warnings.len() < self.seen_warnings {
            // A replay went back in time.
            self.seen_warnings = self.vm.warnings.len();
        }
        // Here, once a batch, only the new warnings: a frame reads the fold.
        self.warning_fold.sync(&self.vm.warnings);
        let waiting = self.vm.approvals_waiting();
        let escalated = self.vm.count(crate::kernel::Lane::Escalated);
        if self.bell && self.replay.is_none() {
            if waiting > self.seen_approvals {
                effects.push(Effect::Notify(format!(
                    "{} waiting for approval in run {}",
                    plural(waiting, "operation"),
                    self.vm.run.run_id
                )));
            }
            if escalated > self.seen_escalations {
                effects.push(Effect::Notify(format!(
                    "{} escalated in run {}",
                    plural(escalated, "operation"),
                    self.vm.run.run_id
                )));
            }
            if let Some(held) = &self.vm.spend.held
                && self.seen_cap.as_ref() != Some(held)
            {
                effects.push(Effect::Notify(format!(
                    "run {} paused — {held}",
                    self.vm.run.run_id
                )));
            }
            if let Some(o) = self.vm.run.finished
                && !self.seen_finish
            {
                effects.push(Effect::Notify(format!(
                    "run {} {}",
                    self.vm.run.run_id,
                    o.as_str()
                )));
            }
        }
        self.seen_approvals = waiting;
        self.seen_escalations = escalated;
        self.seen_cap = self.vm.spend.held.clone();
        self.seen_finish = self.vm.run.finished.is_some();
        if self.vm.run.finished.is_some() && self.quitting {
            self.should_exit = true;
        }
        self.clamp();
        self.follow_picks();
        self.follow_capacity_pick();
        self.refresh_problems();
        // A mark is for approving a gate or retrying a failure, in the
        // lane it was made in: one decided, denied or retried meanwhile
        // loses it (a gate denied elsewhere is not a failure to retry).
        let vm = &self.vm;
        self.marks.retain(|&(ix, lane)| {
            let n = vm.node(ix);
            n.lane == lane && !n.skipped()
        });
        effects
    }

    /// While catching up: how many of how many events are folded.
    pub fn catching_up(&self) -> Option<(u64, u64)> {
        let fresh = self
            .catch_up_since
            .is_none_or(|t| t.elapsed() < CATCH_UP_AT_MOST);
        self.catch_up_to
            .filter(|&to| fresh && self.vm.seq < to)
            .map(|to| (self.vm.seq, to))
    }

    /// Before the operator's first key, a narrow screen (where not every
    /// lane reads) opens on the lanes that wait for them: the cursor goes
    /// to the first of approval, failed and escalated that has rows, so
    /// that lane is the one sized to read.
    pub fn open_on_problems(&mut self, narrow: bool) {
        if self.touched || !narrow || self.replay.is_some() {
            return;
        }
        let problems = [Lane::AwaitingApproval, Lane::Failed, Lane::Escalated]
            .map(crate::operator::model::lane_index);
        if problems.contains(&self.lane_col) && self.lane_len(self.lane_col) > 0 {
            return;
        }
        if let Some(&col) = problems.iter().find(|&&c| self.lane_len(c) > 0) {
            self.lane_col = col;
            self.focus = Pane::Lanes;
        }
    }

    /// Takes the layout the panes measured for the screen (see
    /// `ui::measure`): pane geometry, each list's window, the open
    /// overlay's content. Done before each frame (and by tests), so keys
    /// always move lists that know their size.
    pub fn arrange(&mut self, m: Measured) {
        self.too_small = m.too_small;
        if self.too_small {
            return;
        }
        self.geometry = m.geometry;
        let inner = |r: Rect, chrome: u16| r.height.saturating_sub(chrome) as usize;
        for col in 0..COLS {
            let len = self.lane_len(col);
            let h = inner(self.geometry.lane_cols[col], 2);
            self.lanes[col].resize(len, h);
        }
        let len = self.ledger_len();
        self.ledger.resize(len, inner(self.geometry.ledger, 3));
        let (len, h) = m.capacity;
        self.capacity.resize(len, h);
        let (len, h) = m.budgets;
        self.budgets.resize(len, h);
        if let Some((len, h)) = m.overlay
            && let Some(s) = self.overlays.last_mut().and_then(Overlay::scroll_mut)
        {
            s.resize(len, h);
        }
        self.follow_agents(m.follow_size);
    }

    /// Reads what followed agents wrote since the last frame, into every
    /// open follow view (one under help keeps up too).
    fn follow_agents(&mut self, (width, rows): (usize, usize)) {
        let logs = self.hooks.run_dir.as_ref().map(|d| d.join("logs"));
        for o in &mut self.overlays {
            if let Overlay::Diff(d) = o {
                let len = d.lines.len();
                d.scroll.resize(len, rows);
                continue;
            }
            let Overlay::Follow(f) = o else {
                continue;
            };
            if let Some(logs) = &logs {
                let n = self.vm.node(f.node);
                f.poll(logs, n.name(), n.attempt);
            }
            f.resize(width, rows);
        }
    }
}

/// The first line of a message, for a status line.
pub fn first_line(s: &str) -> &str {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}
