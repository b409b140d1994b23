//! The console's state besides the view model: focus, selection, scroll,
//! overlays, filter, theme, status line. Input becomes actions through the
//! key table; actions change this state or return effects (run control,
//! release, bell) for the event loop to carry out. Nothing here blocks.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};
use tui_tree_widget::TreeState;

use super::keymap::{Action, Keymap};
use super::model::{PlayFacts, ViewModel, lane_index};
use super::theme::Theme;
use crate::capacity::ReleaseResult;
use crate::kernel::{InstructionDecorator, Lane, LedgerOutcome, Request, Signal};

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

pub enum Overlay {
    None,
    Help {
        scroll: u16,
    },
    /// A RefCell: the tree widget records what it drew in its state, and
    /// drawing has only `&App`.
    Palette {
        state: std::cell::RefCell<TreeState<String>>,
    },
    Inspector {
        node: u32,
        scroll: u16,
    },
    ConfirmQuit,
    ConfirmRelease {
        preview: ReleaseResult,
    },
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
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// An operator command for the run (the same type every surface uses).
    Control(Request),
    Replay(ReplayCmd),
    /// Write the run report into the run directory.
    Report,
    Bell,
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
}

/// Where panes were drawn last, for mouse hits and page sizes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Geometry {
    pub lanes: Rect,
    pub lane_cols: [Rect; 7],
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
    pub lane_row: [usize; 7],
    pub lane_offset: [usize; 7],
    pub ledger_row: usize,
    pub ledger_offset: usize,
    pub ledger_filter: LedgerFilter,
    pub capacity_offset: usize,
    pub budgets_offset: usize,
    pub overlay: Overlay,
    /// Applied filter on operation name or role.
    pub filter: String,
    pub editing_filter: bool,
    /// A replay: where it stands (the timeline bar); `None` in a live run.
    pub replay: Option<ReplayBar>,
    /// Typing a `:` jump target.
    pub jump_input: Option<String>,
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub keymap: Keymap,
    pub status: Option<Status>,
    pub bell: bool,
    seen_approvals: usize,
    seen_warnings: usize,
    /// The moment shown (seconds since the run started).
    pub clock: f64,
    pub hooks: Hooks,
    /// Quit was confirmed; the run is being cancelled.
    pub quitting: bool,
    pub should_exit: bool,
    pub geometry: Geometry,
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
            lane_row: [0; 7],
            lane_offset: [0; 7],
            ledger_row: 0,
            ledger_offset: 0,
            ledger_filter: LedgerFilter::All,
            capacity_offset: 0,
            budgets_offset: 0,
            overlay: Overlay::None,
            filter: String::new(),
            editing_filter: false,
            replay: None,
            jump_input: None,
            themes,
            theme,
            keymap,
            status: None,
            bell,
            seen_approvals: 0,
            seen_warnings: 0,
            clock: 0.0,
            hooks,
            quitting: false,
            should_exit: false,
            geometry: Geometry::default(),
        }
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme]
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.set_status(text, Level::Info);
    }

    pub fn set_status(&mut self, text: impl Into<String>, level: Level) {
        self.status = Some(Status {
            text: text.into(),
            level,
        });
    }

    pub fn fold(&mut self, s: &Signal) {
        self.vm.fold(s);
    }

    /// After a batch of signals: tidy lanes, surface warnings, ring the bell
    /// once when an operation starts waiting for approval.
    pub fn after_fold(&mut self) -> Vec<Effect> {
        self.vm.settle();
        let mut effects = Vec::new();
        if self.vm.warnings.len() > self.seen_warnings {
            self.seen_warnings = self.vm.warnings.len();
            let (_, w) = self.vm.warnings.last().expect("one");
            let w = w.to_string();
            self.set_status(w, Level::Warning);
        }
        let waiting = self.vm.approvals_waiting();
        if waiting > self.seen_approvals && self.bell {
            effects.push(Effect::Bell);
        }
        self.seen_approvals = waiting;
        if self.vm.run.finished.is_some() && self.quitting {
            self.should_exit = true;
        }
        self.clamp();
        effects
    }

    // ----- rows the panes show ---------------------------------------------

    fn matches(&self, ix: u32) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let n = self.vm.node(ix);
        let f = self.filter.to_lowercase();
        n.name().to_lowercase().contains(&f)
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
            lane.window(from, n).to_vec()
        } else {
            lane.iter()
                .filter(|&ix| self.matches(ix))
                .skip(from)
                .take(n)
                .collect()
        }
    }

    pub fn selected_node(&self) -> Option<u32> {
        let col = self.lane_col;
        self.lane_window(col, self.lane_row[col], 1)
            .first()
            .copied()
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

    /// Keeps selections inside their lists and visible in their panes.
    pub fn clamp(&mut self) {
        let heights = self
            .geometry
            .lane_cols
            .map(|r| r.height.saturating_sub(2) as usize);
        for (col, h) in heights.into_iter().enumerate() {
            let len = self.lane_len(col);
            self.lane_row[col] = self.lane_row[col].min(len.saturating_sub(1));
            let h = h.max(1);
            let row = self.lane_row[col];
            let off = &mut self.lane_offset[col];
            if row < *off {
                *off = row;
            } else if row >= *off + h {
                *off = row + 1 - h;
            }
            *off = (*off).min(len.saturating_sub(h));
        }
        let len = self.ledger_len();
        self.ledger_row = self.ledger_row.min(len.saturating_sub(1));
        let h = (self.geometry.ledger.height.saturating_sub(3) as usize).max(1);
        if self.ledger_row < self.ledger_offset {
            self.ledger_offset = self.ledger_row;
        } else if self.ledger_row >= self.ledger_offset + h {
            self.ledger_offset = self.ledger_row + 1 - h;
        }
    }

    // ----- input -----------------------------------------------------------

    pub fn on_key(&mut self, e: KeyEvent) -> Vec<Effect> {
        if self.editing_filter {
            self.edit_filter(e);
            return Vec::new();
        }
        if let Some(input) = &mut self.jump_input {
            match e.code {
                KeyCode::Enter => {
                    let text = std::mem::take(input);
                    self.jump_input = None;
                    return vec![Effect::Replay(ReplayCmd::JumpTo(text))];
                }
                KeyCode::Esc => self.jump_input = None,
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) if !e.modifiers.contains(KeyModifiers::CONTROL) => input.push(c),
                _ => {}
            }
            return Vec::new();
        }
        if !matches!(self.overlay, Overlay::None) {
            return self.overlay_key(e);
        }
        let action = if self.replay.is_some() {
            self.keymap.replay_action(&e)
        } else {
            self.keymap.action(&e)
        };
        match action {
            Some(a) => self.act(a),
            None => Vec::new(),
        }
    }

    /// A replay key, or a control key a replay refuses.
    fn replay_act(&mut self, a: Action) -> Option<Vec<Effect>> {
        self.replay.as_ref()?;
        let cmd = match a {
            Action::PlayPause => ReplayCmd::PlayPause,
            Action::Faster => ReplayCmd::Faster,
            Action::Slower => ReplayCmd::Slower,
            Action::EventBack => ReplayCmd::Events(-1),
            Action::EventForward => ReplayCmd::Events(1),
            Action::Back10 => ReplayCmd::Seconds(-10.0),
            Action::Forward10 => ReplayCmd::Seconds(10.0),
            Action::Start => ReplayCmd::Start,
            Action::End => ReplayCmd::End,
            Action::Jump => {
                self.jump_input = Some(String::new());
                return Some(Vec::new());
            }
            Action::Quit => {
                self.should_exit = true;
                return Some(Vec::new());
            }
            Action::Pause
            | Action::Resume
            | Action::Step
            | Action::Approve
            | Action::Deny
            | Action::Hold
            | Action::Retry
            | Action::Release => {
                self.set_status(
                    format!(
                        "{} is disabled in a replay: this is a recorded run (`playdeck resume` continues a stopped one)",
                        crate::console::keymap::info(a).name
                    ),
                    Level::Warning,
                );
                return Some(Vec::new());
            }
            _ => return None,
        };
        Some(vec![Effect::Replay(cmd)])
    }

    fn edit_filter(&mut self, e: KeyEvent) {
        match e.code {
            KeyCode::Enter => {
                self.editing_filter = false;
                self.info(if self.filter.is_empty() {
                    "filter cleared".to_string()
                } else {
                    format!("filter: {}", self.filter)
                });
            }
            KeyCode::Esc => {
                self.editing_filter = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) if !e.modifiers.contains(KeyModifiers::CONTROL) => self.filter.push(c),
            _ => {}
        }
        self.lane_row = [0; 7];
        self.clamp();
    }

    fn overlay_key(&mut self, e: KeyEvent) -> Vec<Effect> {
        let esc = matches!(e.code, KeyCode::Esc);
        match &mut self.overlay {
            Overlay::Help { scroll } => match e.code {
                KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => *scroll += 1,
                _ if esc || matches!(e.code, KeyCode::Char('?' | 'q')) => {
                    self.overlay = Overlay::None;
                }
                _ => {}
            },
            Overlay::Palette { state } => match e.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    state.get_mut().key_up();
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    state.get_mut().key_down();
                }
                KeyCode::Left | KeyCode::Char('h') => {
                    state.get_mut().key_left();
                }
                KeyCode::Right | KeyCode::Char('l') => {
                    state.get_mut().key_right();
                }
                KeyCode::Enter | KeyCode::Char(' ') => {
                    state.get_mut().toggle_selected();
                }
                _ if esc || matches!(e.code, KeyCode::Char('i' | 'q')) => {
                    self.overlay = Overlay::None;
                }
                _ => {}
            },
            Overlay::Inspector { scroll, .. } => match e.code {
                KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => *scroll += 1,
                KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
                KeyCode::PageDown => *scroll += 10,
                _ if esc || matches!(e.code, KeyCode::Enter | KeyCode::Char('q')) => {
                    self.overlay = Overlay::None;
                }
                _ => {}
            },
            Overlay::ConfirmQuit => match e.code {
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => {
                    self.overlay = Overlay::None;
                    self.quitting = true;
                    self.info("cancelling the run…");
                    if self.vm.run.finished.is_some() {
                        self.should_exit = true;
                        return Vec::new();
                    }
                    return vec![Effect::Control(Request::Cancel)];
                }
                KeyCode::Char('n' | 'N') => self.overlay = Overlay::None,
                _ if esc => self.overlay = Overlay::None,
                _ => {}
            },
            Overlay::ConfirmRelease { .. } => match e.code {
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => {
                    self.overlay = Overlay::None;
                    return vec![Effect::Control(Request::Release(Default::default()))];
                }
                KeyCode::Char('n' | 'N') => self.overlay = Overlay::None,
                _ if esc => self.overlay = Overlay::None,
                _ => {}
            },
            Overlay::None => {}
        }
        Vec::new()
    }

    fn finished(&mut self) -> bool {
        if self.vm.run.finished.is_some() {
            self.set_status(
                "the run has finished; only viewing works now",
                Level::Warning,
            );
            true
        } else {
            false
        }
    }

    pub fn act(&mut self, a: Action) -> Vec<Effect> {
        if let Some(effects) = self.replay_act(a) {
            return effects;
        }
        let control = |c| vec![Effect::Control(c)];
        match a {
            // Replay keys do nothing in a live run.
            Action::PlayPause
            | Action::Faster
            | Action::Slower
            | Action::EventBack
            | Action::EventForward
            | Action::Back10
            | Action::Forward10
            | Action::Start
            | Action::End
            | Action::Jump => Vec::new(),
            Action::Pause | Action::Resume | Action::Step if self.finished() => Vec::new(),
            Action::Pause => control(Request::Pause),
            Action::Resume => control(Request::Resume),
            Action::Step => {
                if !self.vm.run.paused {
                    self.set_status("step works while paused: press p first", Level::Warning);
                    return Vec::new();
                }
                control(Request::Step { op: None })
            }
            Action::Release => {
                match &self.hooks.release_preview {
                    Some(preview) if self.vm.facts.capacity => {
                        let preview = preview();
                        self.overlay = Overlay::ConfirmRelease { preview };
                    }
                    _ => self.set_status("this run has no [capacity] to release", Level::Warning),
                }
                Vec::new()
            }
            Action::PaletteInspector => {
                let mut state = TreeState::default();
                for id in ["initial", "expanded", "reserved", "budgets", "rejections"] {
                    state.open(vec![id.to_string()]);
                }
                state.select(vec!["initial".to_string()]);
                self.overlay = Overlay::Palette {
                    state: std::cell::RefCell::new(state),
                };
                Vec::new()
            }
            Action::Approve | Action::Deny => self.decide(a == Action::Approve),
            Action::Report => vec![Effect::Report],
            Action::Hold => self.hold(),
            Action::Retry => self.retry(),
            Action::NodeInspector => {
                let node = match self.focus {
                    Pane::Ledger => self.ledger_node(),
                    _ => self.selected_node(),
                };
                match node {
                    Some(node) => self.overlay = Overlay::Inspector { node, scroll: 0 },
                    None => self.set_status("nothing selected to inspect", Level::Warning),
                }
                Vec::new()
            }
            Action::FocusNext | Action::FocusPrev => {
                let i = PANES.iter().position(|p| *p == self.focus).unwrap_or(0);
                let n = PANES.len();
                let j = if a == Action::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus = PANES[j];
                if self.focus != Pane::Lanes {
                    self.bottom = self.focus;
                }
                Vec::new()
            }
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => {
                self.move_rows(a);
                Vec::new()
            }
            Action::Left | Action::Right => {
                if self.focus == Pane::Lanes {
                    self.lane_col = if a == Action::Left {
                        (self.lane_col + 6) % 7
                    } else {
                        (self.lane_col + 1) % 7
                    };
                }
                Vec::new()
            }
            Action::Filter => {
                self.editing_filter = true;
                Vec::new()
            }
            Action::LedgerFilter => {
                self.ledger_filter = match self.ledger_filter {
                    LedgerFilter::All => LedgerFilter::Accepted,
                    LedgerFilter::Accepted => LedgerFilter::Dropped,
                    LedgerFilter::Dropped => LedgerFilter::All,
                };
                self.ledger_row = 0;
                let label = self.ledger_filter.label();
                self.info(format!("ledger: {label}"));
                Vec::new()
            }
            Action::Back => {
                if !self.filter.is_empty() {
                    self.filter.clear();
                    self.info("filter cleared");
                } else if self.focus != Pane::Lanes {
                    self.focus = Pane::Lanes;
                }
                Vec::new()
            }
            Action::CycleTheme => {
                self.theme = (self.theme + 1) % self.themes.len();
                let name = self.theme().name.clone();
                self.info(format!("theme: {name}"));
                Vec::new()
            }
            Action::Help => {
                self.overlay = Overlay::Help { scroll: 0 };
                Vec::new()
            }
            Action::Quit => {
                if self.vm.run.finished.is_some() || self.quitting {
                    self.should_exit = true;
                } else {
                    self.overlay = Overlay::ConfirmQuit;
                }
                Vec::new()
            }
        }
    }

    fn ledger_node(&self) -> Option<u32> {
        let row = &self.vm.ledger[*self.ledger_window(self.ledger_row, 1).first()?];
        let LedgerOutcome::Accepted { op_id, .. } = &row.outcome else {
            return None;
        };
        self.vm.ix(op_id)
    }

    fn decide(&mut self, approve: bool) -> Vec<Effect> {
        let Some(ix) = self.selected_node().filter(|_| self.focus == Pane::Lanes) else {
            self.set_status(
                "select an operation in the awaiting approval lane",
                Level::Warning,
            );
            return Vec::new();
        };
        let n = self.vm.node(ix);
        if n.lane != Lane::AwaitingApproval {
            let name = n.name().to_string();
            self.set_status(format!("{name} is not awaiting approval"), Level::Warning);
            return Vec::new();
        }
        let name = n.name().to_string();
        vec![Effect::Control(if approve {
            Request::Approve { op: name }
        } else {
            Request::Deny {
                op: name,
                reason: Vec::new(),
            }
        })]
    }

    fn hold(&mut self) -> Vec<Effect> {
        let Some(ix) = self.selected_node().filter(|_| self.focus == Pane::Lanes) else {
            self.set_status("select a queued operation to hold", Level::Warning);
            return Vec::new();
        };
        let n = self.vm.node(ix);
        let name = n.name().to_string();
        if n.held {
            return vec![Effect::Control(Request::Unhold { op: name })];
        }
        if !matches!(n.lane, Lane::Queued | Lane::Paused | Lane::AwaitingApproval) {
            self.set_status(
                format!("{name} has started; only queued operations can be held"),
                Level::Warning,
            );
            return Vec::new();
        }
        vec![Effect::Control(Request::Hold { op: name })]
    }

    fn retry(&mut self) -> Vec<Effect> {
        let Some(ix) = self.selected_node().filter(|_| self.focus == Pane::Lanes) else {
            self.set_status("select a failed operation to retry", Level::Warning);
            return Vec::new();
        };
        let n = self.vm.node(ix);
        let name = n.name().to_string();
        if n.lane != Lane::Failed || n.skipped() {
            self.set_status(
                format!("{name} has not failed; only failed or denied operations can be retried"),
                Level::Warning,
            );
            return Vec::new();
        }
        vec![Effect::Control(Request::Retry { op: name })]
    }

    fn move_rows(&mut self, a: Action) {
        let page = |r: Rect| (r.height.saturating_sub(3) as usize).max(1);
        let step = |pos: usize, len: usize, page: usize| -> usize {
            match a {
                Action::Up => pos.saturating_sub(1),
                Action::Down => (pos + 1).min(len.saturating_sub(1)),
                Action::PageUp => pos.saturating_sub(page),
                Action::PageDown => (pos + page).min(len.saturating_sub(1)),
                Action::Top => 0,
                Action::Bottom => len.saturating_sub(1),
                _ => pos,
            }
        };
        match self.focus {
            Pane::Lanes => {
                let col = self.lane_col;
                let len = self.lane_len(col);
                self.lane_row[col] =
                    step(self.lane_row[col], len, page(self.geometry.lane_cols[col]));
            }
            Pane::Ledger => {
                let len = self.ledger_len();
                self.ledger_row = step(self.ledger_row, len, page(self.geometry.ledger));
            }
            Pane::Capacity => {
                self.capacity_offset = step(
                    self.capacity_offset,
                    usize::MAX,
                    page(self.geometry.capacity),
                );
            }
            Pane::Budgets => {
                self.budgets_offset =
                    step(self.budgets_offset, usize::MAX, page(self.geometry.budgets));
            }
        }
        self.clamp();
    }

    pub fn on_mouse(&mut self, m: MouseEvent) {
        let at = Position::new(m.column, m.row);
        let g = self.geometry;
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if let Some(col) = g.lane_cols.iter().position(|r| r.contains(at)) {
                    self.focus = Pane::Lanes;
                    self.lane_col = col;
                    let row = (m.row.saturating_sub(g.lane_cols[col].y + 1)) as usize;
                    self.lane_row[col] = self.lane_offset[col] + row;
                } else if g.ledger.contains(at) {
                    self.focus = Pane::Ledger;
                    self.bottom = Pane::Ledger;
                    let row = (m.row.saturating_sub(g.ledger.y + 2)) as usize;
                    self.ledger_row = self.ledger_offset + row;
                } else if g.capacity.contains(at) {
                    self.focus = Pane::Capacity;
                    self.bottom = Pane::Capacity;
                } else if g.budgets.contains(at) {
                    self.focus = Pane::Budgets;
                    self.bottom = Pane::Budgets;
                }
                self.clamp();
            }
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let up = matches!(m.kind, MouseEventKind::ScrollUp);
                if let Some(col) = g.lane_cols.iter().position(|r| r.contains(at)) {
                    self.focus = Pane::Lanes;
                    self.lane_col = col;
                }
                self.move_rows(if up { Action::Up } else { Action::Down });
            }
            _ => {}
        }
    }

    /// The run's state as the header says it.
    pub fn run_state(&self) -> String {
        let r = &self.vm.run;
        if let Some(o) = r.finished {
            return format!("finished: {}", o.as_str());
        }
        if self.quitting {
            return "cancelling".into();
        }
        if !r.started {
            return "starting".into();
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
            "running".into()
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
        match n.lane {
            Lane::AwaitingApproval => Some("approval by an operator".into()),
            Lane::Paused if n.held => Some("held by the operator".into()),
            Lane::Paused => Some("the run is paused".into()),
            Lane::Queued => {
                if let Some(c) = &n.capacity_wait {
                    return Some(c.to_string());
                }
                let pending: Vec<String> = n
                    .depends_on
                    .iter()
                    .filter_map(|d| self.vm.find(d))
                    .filter(|d| !d.lane.is_terminal())
                    .map(|d| d.name().to_string())
                    .collect();
                if !pending.is_empty() {
                    return Some(format!("dependency {}", pending.join(", ")));
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

    pub fn lane_of_col(col: usize) -> Lane {
        Lane::ALL[col]
    }

    pub fn col_of_lane(l: Lane) -> usize {
        lane_index(l)
    }
}
