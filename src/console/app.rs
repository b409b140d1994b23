//! The console's state besides the view model: focus, lists, overlays,
//! filter, theme, status line. Keys become actions through the key table
//! and are carried out in `actions.rs`; actions change this state or
//! return effects (run control, replay moves, the report, the bell) for
//! the event loop to carry out. Nothing here blocks.

use std::path::PathBuf;
use std::sync::Arc;

use ratatui::layout::Rect;

use super::keymap::{Keymap, Mode};
use super::model::{COLS, PlayFacts, ViewModel, col_lane};
use super::overlay::Overlay;
use super::scroll::ScrollList;
use super::theme::Theme;
use super::ui::CapRow;
use super::warnings::WarningFold;
use crate::capacity::ReleaseResult;
use crate::kernel::{InstructionDecorator, Lane, LedgerOutcome, Request, Signal};
use crate::projection::{Instance, StartHold};

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
    Page(super::pager::Page),
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
}

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

pub struct App {
    pub vm: ViewModel,
    pub focus: Pane,
    /// Which bottom pane shows when only one fits.
    pub bottom: Pane,
    pub lane_col: usize,
    /// The focused lane fills the lanes' width (`z`).
    pub zoomed: bool,
    /// Gates marked to approve together (`m`), in the order marked.
    pub marks: Vec<u32>,
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
            zoomed: false,
            marks: Vec::new(),
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
        let text = text.into();
        if self.messages.len() >= MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back(Message {
            at: self.clock,
            level,
            text: text.clone(),
        });
        self.status = Some(Status {
            text,
            level,
            since: tokio::time::Instant::now(),
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
                None => self.info(format!("{by}: {action}")),
            }
        }
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
        // A mark is for approving: a gate decided meanwhile loses it.
        let vm = &self.vm;
        self.marks
            .retain(|&ix| vm.node(ix).lane == Lane::AwaitingApproval);
        effects
    }

    /// Remembers the operation under each lane's cursor: after every
    /// operator key and click.
    pub fn pick(&mut self) {
        for col in 0..COLS {
            self.picked[col] = self.lanes[col]
                .selected()
                .and_then(|row| self.lane_window(col, row, 1).first().copied());
        }
        self.capacity_pick = self.selected_instance().map(|i| i.name.clone());
    }

    /// After the run moved: the capacity cursor goes back to the instance
    /// it was on. One that was released is no longer listed; the cursor
    /// stays at its row, on what follows.
    fn follow_capacity_pick(&mut self) {
        let rows = super::ui::capacity_rows(self);
        self.capacity.set_len(rows.len());
        let Some(name) = &self.capacity_pick else {
            return;
        };
        let Some(ix) = self.vm.capacity.instances.get_index_of(name) else {
            return;
        };
        if let Some(row) = rows.iter().position(|r| *r == CapRow::Instance(ix)) {
            self.capacity.select(row);
        }
    }

    /// What the capacity cursor is on.
    pub fn capacity_row(&self) -> Option<CapRow> {
        let row = self.capacity.selected()?;
        super::ui::capacity_rows(self).get(row).copied()
    }

    /// The instance under the capacity cursor.
    pub fn selected_instance(&self) -> Option<&Instance> {
        match self.capacity_row()? {
            CapRow::Instance(ix) => self.vm.capacity.instances.get_index(ix).map(|(_, i)| i),
            _ => None,
        }
    }

    /// Focus came to the capacity pane with the cursor on a title: it
    /// moves to the first instance, the row keys act on.
    pub fn capacity_to_instance(&mut self) {
        if matches!(
            self.capacity_row(),
            Some(CapRow::Instance(_) | CapRow::Waiting(_))
        ) {
            return;
        }
        let rows = super::ui::capacity_rows(self);
        self.capacity.set_len(rows.len());
        if let Some(row) = rows.iter().position(|r| matches!(r, CapRow::Instance(_))) {
            self.capacity.select(row);
        }
    }

    /// After the run moved: each lane's cursor goes back to the operation
    /// it was on; when that operation left its lane, the cursor stays at
    /// the same row (its neighbour now) and the focused lane says so.
    fn follow_picks(&mut self) {
        for col in 0..COLS {
            let Some(ix) = self.picked[col] else {
                continue;
            };
            match self.lane_row_of(ix) {
                Some((c, row)) if c == col => self.lanes[col].select(row),
                _ => {
                    let now_on = self.lanes[col]
                        .selected()
                        .and_then(|row| self.lane_window(col, row, 1).first().copied());
                    self.picked[col] = now_on;
                    let own = self.vm.acted(ix).is_some_and(|(by, _)| *by == *self.me);
                    if col == self.lane_col && self.focus == Pane::Lanes && self.replay.is_none() {
                        if own {
                            // The operator's own decision moved it: their
                            // answer is in the status line already, but the
                            // row that slid under the cursor is not chosen
                            // (a held `a` would approve the next gate).
                            if self.overlays.is_empty() {
                                self.drift = Some(Drift::new(ix, now_on, false));
                            }
                        } else {
                            self.drifted(ix, now_on);
                        }
                    }
                }
            }
        }
    }

    fn drifted(&mut self, left: u32, now_on: Option<u32>) {
        let n = self.vm.node(left);
        let was = col_lane(self.lane_col);
        let mut text = format!("{} left {}", n.name(), was.title());
        if n.lane != was || n.skipped() {
            text.push_str(&format!(" for {}", n.place()));
        }
        if let Some((by, action)) = self.vm.acted(left) {
            text.push_str(&format!(" ({action} by {by})"));
        }
        match now_on {
            Some(c) => text.push_str(&format!("; the cursor moved to {}", self.vm.node(c).name())),
            None => text.push_str("; the lane is empty"),
        }
        self.info(text);
        self.drift = Some(Drift::new(left, now_on, false));
    }

    // ----- rows the panes show ---------------------------------------------

    fn matches(&self, ix: u32) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let n = self.vm.node(ix);
        let f = self.filter.to_lowercase();
        self.vm.label(ix).to_lowercase().contains(&f)
            || n.name().to_lowercase().contains(&f)
            || n.role().is_some_and(|r| r.to_lowercase().contains(&f))
    }

    /// The number of rows a lane shows (filter applied).
    pub fn lane_len(&self, col: usize) -> usize {
        let lane = &self.vm.lanes[col];
        if self.filter.is_empty() {
            lane.len()
        } else {
            lane.iter().filter(|&ix| self.matches(ix)).count()
        }
    }

    /// Rows `[from, from + n)` of a lane (filter applied): only these are
    /// built.
    pub fn lane_window(&self, col: usize, from: usize, n: usize) -> Vec<u32> {
        let lane = &self.vm.lanes[col];
        if self.filter.is_empty() {
            lane.window(from, n)
        } else {
            lane.iter()
                .filter(|&ix| self.matches(ix))
                .skip(from)
                .take(n)
                .collect()
        }
    }

    /// Where an operation is in its lane's rows (filter applied).
    pub fn lane_row_of(&self, ix: u32) -> Option<(usize, usize)> {
        let col = self.vm.col(ix);
        if self.filter.is_empty() {
            return Some((col, self.vm.lane_pos(ix)?));
        }
        let row = self.vm.lanes[col]
            .iter()
            .filter(|&i| self.matches(i))
            .position(|i| i == ix)?;
        Some((col, row))
    }

    pub fn selected_node(&self) -> Option<u32> {
        let col = self.lane_col;
        let row = self.lanes[col].selected()?;
        self.lane_window(col, row, 1).first().copied()
    }

    /// The operation the operation keys act on: the inspected one, else the
    /// one selected in the lanes.
    pub fn target(&self) -> Option<u32> {
        self.target_under(self.overlays.last())
    }

    /// The operation the operation keys would act on with `top` the
    /// topmost overlay.
    pub fn target_under(&self, top: Option<&Overlay>) -> Option<u32> {
        match top {
            Some(Overlay::Inspector { node, .. }) => Some(*node),
            Some(Overlay::Problems { rows, scroll }) => scroll
                .selected()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| rows.get(i))
                .copied(),
            Some(Overlay::Follow(f)) => Some(f.node),
            None if self.focus == Pane::Lanes => self.selected_node(),
            _ => None,
        }
    }

    /// What needs the operator, oldest first: failures (not what was
    /// skipped by design), escalations and gates waiting for approval, by
    /// when they got there.
    pub fn problems(&self) -> Vec<u32> {
        let mut v: Vec<(f64, u32)> = [Lane::Failed, Lane::Escalated, Lane::AwaitingApproval]
            .into_iter()
            .flat_map(|l| self.vm.lane(l).iter())
            .filter(|&ix| !self.vm.node(ix).skipped())
            .map(|ix| (self.entered(ix), ix))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, ix)| ix).collect()
    }

    /// When an operation came into the lane it is in.
    fn entered(&self, ix: u32) -> f64 {
        self.vm
            .history(ix)
            .last()
            .map_or(self.vm.node(ix).queued_at, |(_, t)| *t)
    }

    /// Selects the next (or previous) problem after the selected operation
    /// and says what it is: `2/5 · impl-api failed: 2 tests failed`.
    pub fn to_problem(&mut self, forward: bool) {
        let all = self.problems();
        if all.is_empty() {
            self.info("no failures, escalations or waiting gates");
            return;
        }
        let at = self
            .selected_node()
            .and_then(|s| all.iter().position(|&ix| ix == s));
        let i = match (at, forward) {
            (Some(i), true) => (i + 1) % all.len(),
            (Some(i), false) => (i + all.len() - 1) % all.len(),
            (None, true) => 0,
            (None, false) => all.len() - 1,
        };
        let ix = all[i];
        self.go_to(ix);
        let n = self.vm.node(ix);
        let what = match n.lane {
            Lane::AwaitingApproval => format!(
                "waits for approval ({} so far){}",
                super::ui::duration(self.clock - self.entered(ix)),
                self.vm
                    .failed_deps(ix)
                    .map(|f| format!(" · {}", f.words()))
                    .unwrap_or_default()
            ),
            Lane::Escalated => format!(
                "escalated: {}",
                first_line(n.escalation.as_deref().unwrap_or("no reason given"))
            ),
            _ => format!(
                "failed: {}",
                first_line(n.error.as_deref().unwrap_or("no error given"))
            ),
        };
        self.info(format!("{}/{} · {} {what}", i + 1, all.len(), n.name()));
    }

    /// Opens the problems list, on the selected operation if it is one.
    pub fn open_problems(&mut self) {
        let rows = self.problems();
        let at = self
            .selected_node()
            .and_then(|s| rows.iter().position(|&ix| ix == s))
            .unwrap_or(0);
        let mut scroll = ScrollList::list();
        // Row 0 is the columns' titles.
        scroll.set_len(rows.len() + 1);
        scroll.select(at + 1);
        self.overlays.push(Overlay::Problems { rows, scroll });
    }

    /// After the run moved: the problems list's rows are current, its
    /// cursor on the operation it was on (or the same row when that one
    /// is no longer a problem: what the keys act on is named anyway).
    fn refresh_problems(&mut self) {
        if !self
            .overlays
            .iter()
            .any(|o| matches!(o, Overlay::Problems { .. }))
        {
            return;
        }
        let fresh = self.problems();
        let mut left = None;
        let mut own_left = None;
        // The operator's own decision moved it: the cursor goes on to its
        // neighbour, as in a lane.
        let own = |ix: u32| self.vm.acted(ix).is_some_and(|(by, _)| *by == *self.me);
        let own: Vec<u32> = self
            .overlays
            .iter()
            .filter_map(|o| match o {
                Overlay::Problems { rows, .. } => Some(rows.iter().copied().filter(|&ix| own(ix))),
                _ => None,
            })
            .flatten()
            .collect();
        for o in &mut self.overlays {
            if let Overlay::Problems { rows, scroll } = o {
                let on = scroll
                    .selected()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| rows.get(i))
                    .copied();
                *rows = fresh.clone();
                scroll.set_len(rows.len() + 1);
                // The cursor's operation left the list (decided elsewhere,
                // retried): the cursor goes to the titles, where no key
                // acts, rather than onto a neighbour the operator did not
                // choose.
                let at = match on {
                    Some(ix) => match rows.iter().position(|&r| r == ix) {
                        Some(i) => i + 1,
                        // The operator's own decision: the cursor stays at
                        // the row (its neighbour now), which the next key
                        // names before acting on it.
                        None if own.contains(&ix) => {
                            let at = scroll.selected().unwrap_or(0).min(rows.len());
                            let now_on = at.checked_sub(1).and_then(|i| rows.get(i)).copied();
                            own_left = Some((ix, now_on));
                            at
                        }
                        None => {
                            left = Some(ix);
                            0
                        }
                    },
                    None => scroll.selected().unwrap_or(0).min(rows.len()),
                };
                scroll.select(at);
            }
        }
        if let Some((ix, now_on)) = own_left
            && matches!(self.overlays.last(), Some(Overlay::Problems { .. }))
        {
            self.drift = Some(Drift::new(ix, now_on, true));
        }
        if let Some(ix) = left {
            let n = self.vm.node(ix);
            let what = format!(
                "{} left the problems list ({} now); nothing is selected: ↓ selects",
                self.vm.label(ix),
                n.place()
            );
            self.info(what);
        }
    }

    /// Every node index the console holds, as operation ids: a
    /// resynchronisation rebuilds the nodes in the snapshot's order, so
    /// indices are carried across it by id ([`App::remap`]).
    pub fn held_ids(&self) -> Vec<Option<crate::kernel::OpId>> {
        let id = |ix: u32| self.vm.nodes.get(ix as usize).map(|n| n.op.op_id);
        let mut v: Vec<Option<crate::kernel::OpId>> = self.marks.iter().map(|&ix| id(ix)).collect();
        v.extend(self.picked.iter().map(|p| p.and_then(id)));
        for o in &self.overlays {
            match o {
                Overlay::Inspector { node, .. } => v.push(id(*node)),
                Overlay::Follow(f) => v.push(id(f.node)),
                Overlay::Problems { rows, .. } => v.extend(rows.iter().map(|&ix| id(ix))),
                _ => {}
            }
        }
        v
    }

    /// After a resynchronisation: each held index again names the
    /// operation it named before. A window whose operation is gone closes.
    pub fn remap(&mut self, ids: Vec<Option<crate::kernel::OpId>>) {
        let vm = &self.vm;
        let mut it = ids.into_iter().map(|id| id.and_then(|id| vm.ix(&id)));
        let marks: Vec<u32> = self
            .marks
            .iter()
            .filter_map(|_| it.next().flatten())
            .collect();
        self.marks = marks;
        for p in self.picked.iter_mut() {
            *p = it.next().flatten();
        }
        self.overlays.retain_mut(|o| match o {
            Overlay::Inspector { node, .. } => it.next().flatten().map(|ix| *node = ix).is_some(),
            Overlay::Follow(f) => it.next().flatten().map(|ix| f.node = ix).is_some(),
            Overlay::Problems { rows, .. } => {
                let n = rows.len();
                *rows = it.by_ref().take(n).flatten().collect();
                true
            }
            _ => true,
        });
    }

    /// The time an operation has been in its lane, for the problems list.
    pub fn in_lane_for(&self, ix: u32) -> f64 {
        self.clock - self.entered(ix)
    }

    /// The gate that has waited longest for approval.
    pub fn oldest_gate(&self) -> Option<u32> {
        self.vm
            .lane(Lane::AwaitingApproval)
            .iter()
            .min_by(|&a, &b| self.entered(a).total_cmp(&self.entered(b)))
    }

    /// The gate `a`/`d` decide with `top` the topmost overlay: the one
    /// under the cursor, else (on the main screen) the oldest, which is
    /// then asked about by name.
    pub fn gate_under(&self, top: Option<&Overlay>) -> Option<u32> {
        let gate = |ix: &u32| self.vm.node(*ix).lane == Lane::AwaitingApproval;
        match self.target_under(top).filter(gate) {
            Some(ix) => Some(ix),
            None if top.is_none() => self.oldest_gate(),
            None => None,
        }
    }

    /// Selects the gate that has waited longest for approval.
    pub fn to_oldest_gate(&mut self) {
        let oldest = self.oldest_gate();
        match oldest {
            Some(ix) => {
                self.go_to(ix);
                let waited = super::ui::duration(self.clock - self.entered(ix));
                let n = self.vm.lane(Lane::AwaitingApproval).len();
                self.info(format!(
                    "{} has waited {waited} for approval (the oldest of {n}): a approves, d denies",
                    self.vm.node(ix).name()
                ));
            }
            None => self.info("no operation waits for approval"),
        }
    }

    /// Selects an operation in its lane, focusing the lanes; a filter that
    /// hides it is cleared.
    pub fn go_to(&mut self, ix: u32) {
        if self.lane_row_of(ix).is_none() {
            self.filter.clear();
            self.clamp();
        }
        if let Some((col, row)) = self.lane_row_of(ix) {
            self.focus = Pane::Lanes;
            self.lane_col = col;
            self.lanes[col].select(row);
        }
    }

    /// Changes the filter, keeping the selected operation selected when it
    /// still shows.
    pub fn set_filter(&mut self, f: impl FnOnce(&mut String)) {
        let keep = self.selected_node();
        f(&mut self.filter);
        self.clamp();
        match keep.and_then(|ix| self.lane_row_of(ix)) {
            Some((col, row)) if col == self.lane_col => self.lanes[col].select(row),
            _ => self.lanes[self.lane_col].select(0),
        }
    }

    fn ledger_keeps(&self, i: usize) -> bool {
        let r = &self.vm.ledger[i];
        match self.ledger_filter {
            LedgerFilter::All => true,
            LedgerFilter::Accepted => matches!(r.outcome, LedgerOutcome::Accepted { .. }),
            LedgerFilter::Dropped => matches!(r.outcome, LedgerOutcome::Dropped { .. }),
        }
    }

    /// Rows the ledger shows (newest first, filter applied).
    pub fn ledger_len(&self) -> usize {
        match self.ledger_filter {
            LedgerFilter::All => self.vm.ledger.len(),
            _ => (0..self.vm.ledger.len())
                .filter(|&i| self.ledger_keeps(i))
                .count(),
        }
    }

    /// Ledger indices of rows `[from, from + n)`, newest first; without a
    /// filter only those rows are touched.
    pub fn ledger_window(&self, from: usize, n: usize) -> Vec<usize> {
        (0..self.vm.ledger.len())
            .rev()
            .filter(|&i| self.ledger_keeps(i))
            .skip(from)
            .take(n)
            .collect()
    }

    /// The ledger row selected in the ledger pane.
    pub fn selected_ledger_row(&self) -> Option<usize> {
        let row = self.ledger.selected()?;
        self.ledger_window(row, 1).first().copied()
    }

    /// Keeps every list's length current, and so its cursor inside it.
    pub fn clamp(&mut self) {
        for col in 0..COLS {
            let len = self.lane_len(col);
            self.lanes[col].set_len(len);
        }
        let len = self.ledger_len();
        self.ledger.set_len(len);
    }

    /// Lays the screen out for `area`: pane geometry, each list's window,
    /// the open overlay's content. Done before each frame (and by tests),
    /// so keys always move lists that know their size.
    pub fn arrange(&mut self, area: Rect) {
        self.too_small = super::ui::too_small(area);
        if self.too_small {
            return;
        }
        let areas = super::ui::layout(area, self);
        self.geometry = areas.geometry;
        let inner = |r: Rect, chrome: u16| r.height.saturating_sub(chrome) as usize;
        for col in 0..COLS {
            let len = self.lane_len(col);
            let h = inner(self.geometry.lane_cols[col], 2);
            self.lanes[col].resize(len, h);
        }
        let len = self.ledger_len();
        self.ledger.resize(len, inner(self.geometry.ledger, 3));
        let (len, h) = super::ui::capacity_size(self, self.geometry.capacity);
        self.capacity.resize(len, h);
        let (len, h) = super::ui::budgets_size(self, self.geometry.budgets);
        self.budgets.resize(len, h);
        if let Some((len, h)) = super::ui::overlay_size(self, area)
            && let Some(s) = self.overlays.last_mut().and_then(Overlay::scroll_mut)
        {
            s.resize(len, h);
        }
        self.follow_agents(area);
    }

    /// Reads what followed agents wrote since the last frame, into every
    /// open follow view (one under help keeps up too).
    fn follow_agents(&mut self, area: Rect) {
        let rows = super::ui::follow_rows(area, self);
        let logs = self.hooks.run_dir.as_ref().map(|d| d.join("logs"));
        for o in &mut self.overlays {
            let Overlay::Follow(f) = o else {
                continue;
            };
            if let Some(logs) = &logs {
                let n = self.vm.node(f.node);
                f.poll(logs, n.name(), n.attempt);
            }
            f.resize(rows);
        }
    }

    /// The run's state as the header says it.
    pub fn run_state(&self) -> String {
        let r = &self.vm.run;
        if let Some(o) = r.finished {
            return match self.vm.cause() {
                Some(c) => format!("finished: {} — {c}", o.as_str()),
                None => format!("finished: {}", o.as_str()),
            };
        }
        if self.quitting {
            return "cancelling".into();
        }
        if !r.started {
            return "starting".into();
        }
        // A reached cap holds new work until it is raised ($).
        if let Some(held) = &self.vm.spend.held {
            return format!("paused — {held}");
        }
        if r.paused {
            let stepped_runs = r
                .stepped
                .and_then(|id| self.vm.find(&id))
                .is_some_and(|n| !n.lane.is_terminal());
            if r.stepping || stepped_runs {
                "stepping".into()
            } else if self.vm.running() > 0 {
                "draining".into()
            } else {
                "paused".into()
            }
        } else {
            // Nothing runs and holds are what keeps work waiting: say so,
            // or "running" reads as a hang.
            let held = self.vm.held();
            if self.vm.running() == 0 && held > 0 {
                format!("running — {held} held")
            } else {
                "running".into()
            }
        }
    }

    /// Seconds an operation has spent where it is now, or took in all.
    pub fn node_time(&self, ix: u32) -> f64 {
        let n = self.vm.node(ix);
        match n.lane {
            Lane::Running => self.clock - n.started_at.unwrap_or(self.clock),
            Lane::Succeeded | Lane::Failed | Lane::Escalated => {
                n.finished_at.unwrap_or(self.clock) - n.started_at.unwrap_or(n.queued_at)
            }
            _ => self.clock - self.vm.history(ix).last().map_or(n.queued_at, |(_, t)| *t),
        }
    }

    /// The exact blocker of an operation that has not started.
    pub fn waiting_for(&self, ix: u32) -> Option<String> {
        let n = self.vm.node(ix);
        if n.held && !n.lane.is_terminal() && n.lane != Lane::Running {
            return Some("held by the operator (o releases the hold)".into());
        }
        match n.lane {
            Lane::AwaitingApproval => Some(match self.vm.failed_deps(ix) {
                Some(f) => format!("approval by an operator — {}", f.words()),
                None => "approval by an operator".into(),
            }),
            Lane::Paused => Some("the run is paused".into()),
            Lane::Queued => {
                if let Some(r) = &n.retry_wait {
                    return Some(format!("its retry: {}", r.words));
                }
                if let Some(c) = &n.capacity_wait {
                    return Some(c.to_string());
                }
                match self.vm.start_hold(ix) {
                    Some(StartHold::Spend(h)) => {
                        return Some(format!("the spend cap: {h} ($ raises it)"));
                    }
                    Some(StartHold::Provider(h)) => return Some(format!("its provider: {h}")),
                    None => {}
                }
                let pending: Vec<String> = n
                    .depends_on
                    .iter()
                    .filter_map(|d| self.vm.find(d))
                    .filter(|d| !d.lane.is_terminal())
                    .map(|d| d.name().to_string())
                    .collect();
                if !pending.is_empty() {
                    let n = pending.len();
                    let shown: Vec<&str> = pending.iter().take(5).map(String::as_str).collect();
                    let more = if n > 5 {
                        format!(" (+{} more)", super::text::group(n - 5))
                    } else {
                        String::new()
                    };
                    return Some(format!(
                        "{} {}{more}",
                        if n == 1 { "dependency" } else { "dependencies" },
                        shown.join(", ")
                    ));
                }
                Some(format!(
                    "concurrency limit ({} of {} running)",
                    self.vm.running(),
                    self.vm.run.max_concurrent
                ))
            }
            _ => None,
        }
    }

    /// How to name this run to `playdeck resume`.
    pub fn resume_name(&self) -> String {
        self.hooks
            .resume_name
            .clone()
            .unwrap_or_else(|| self.vm.run.run_id.to_string())
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

impl App {
    /// The runs screen, with the rows read: this run's own row is taken
    /// from what the console shows now (it is the freshest).
    pub fn open_runs(&mut self, mut rows: Vec<crate::control::listing::RunRow>) {
        let here = self.hooks.run_dir.clone();
        let vm = &self.vm;
        // This run, even when its directory is elsewhere.
        if let Some(d) = &here
            && !rows.iter().any(|r| same_dir(d, &r.dir))
        {
            let id = vm.run.run_id.to_string();
            rows.insert(
                0,
                crate::control::listing::RunRow {
                    started: crate::control::listing::started_of_id(&id).unwrap_or(0),
                    id,
                    dir: d.clone(),
                    play: vm.run.play.to_string(),
                    state: String::new(),
                    live: true,
                    elapsed: 0.0,
                    done: None,
                    total: 0,
                    awaiting_approval: Vec::new(),
                    spent: None,
                    workers: None,
                },
            );
        }
        for r in &mut rows {
            if here.as_ref().is_some_and(|d| same_dir(d, &r.dir)) && vm.run.finished.is_none() {
                let waiting = vm.approvals_waiting();
                r.live = true;
                r.elapsed = self.clock;
                r.total = vm.counts.total();
                r.done = Some(vm.counts.settled());
                r.spent = Some((vm.spend.usd, vm.spend.tokens));
                r.state = if waiting > 0 {
                    format!("needs approval ×{waiting}")
                } else if vm.run.paused {
                    "paused".into()
                } else {
                    "running".into()
                };
                let ws = vm.capacity.workers.as_ref().map(|(ws, _)| &ws[..]);
                r.state = crate::control::listing::with_workers(std::mem::take(&mut r.state), ws);
                r.workers = ws.map(<[_]>::to_vec);
            }
        }
        // Row 0 is the columns' titles; runs are 1…
        let mut scroll = ScrollList::list();
        scroll.set_len(rows.len() + 1);
        let at = rows
            .iter()
            .position(|r| here.as_ref().is_some_and(|d| same_dir(d, &r.dir)))
            .unwrap_or(0);
        scroll.select(at + 1);
        self.overlays.push(Overlay::Runs { rows, scroll });
    }

    /// `enter` on the runs screen.
    pub fn pick_run(&mut self) {
        let Some(Overlay::Runs { rows, scroll }) = self.overlays.last() else {
            return;
        };
        let Some(r) = scroll
            .selected()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| rows.get(i))
            .cloned()
        else {
            return;
        };
        let here = self
            .hooks
            .run_dir
            .as_ref()
            .is_some_and(|d| same_dir(d, &r.dir));
        if here {
            self.overlays.pop();
            self.info(format!("run {} is the one shown", r.id));
        } else if !r.live {
            self.info(format!(
                "run {} is {}: `playdeck replay {}` shows it",
                r.id,
                r.state,
                r.dir.display()
            ));
        } else if !self.hooks.attached || self.hooks.run_dir.is_none() {
            self.info(format!(
                "this console holds its own run; from another terminal: playdeck attach {}",
                r.dir.display()
            ));
        } else {
            self.switch_to = Some(r.dir.clone());
            self.should_exit = true;
        }
    }
}

fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || std::fs::canonicalize(a)
            .ok()
            .zip(std::fs::canonicalize(b).ok())
            .is_some_and(|(x, y)| x == y)
}

/// The first line of a message, for a status line.
pub fn first_line(s: &str) -> &str {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}
