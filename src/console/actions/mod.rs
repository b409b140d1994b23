//! Carrying out actions. [`App::available`] is the one place that decides
//! whether an action can be used now and, if not, why: the footer offers
//! what it allows, help dims what it refuses, and [`App::act`] refuses
//! with its reason. Nothing else second-guesses it.

mod available;
mod decide;
mod mouse;
mod navigate;
mod views;

use std::cell::RefCell;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Position;
use tui_tree_widget::TreeState;

use super::app::CapRow;
use super::app::Page;
use super::app::{App, Drift, Effect, Follow, LedgerFilter, PANES, Pane, ReplayCmd};
use super::follow::FollowView;
use super::keymap::{Action, Mode, Scope, info};
use super::overlay::{AddForm, Overlay};
use super::scroll::{Motion, ScrollList};
use crate::capacity::ReleaseResult;
use crate::kernel::command::ReleaseSelect;
use crate::kernel::{Lane, LedgerOutcome, Request};
use crate::operator::words::short_instance;
use crate::projection::Instance;
use crate::vocab::InstanceState;

/// Tree identifiers of the palette inspector's branches, open at first.
pub const PALETTE_BRANCHES: [&str; 5] =
    ["initial", "expanded", "reserved", "budgets", "rejections"];

/// The most of an operation's name the footer gives one key.
const TARGET_WIDTH: usize = 24;

/// Why an action cannot be used now, worded for the operator (the status
/// line shows it when the key is pressed anyway).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

impl From<&str> for Unavailable {
    fn from(s: &str) -> Self {
        Unavailable(s.to_string())
    }
}

impl From<String> for Unavailable {
    fn from(s: String) -> Self {
        Unavailable(s)
    }
}

impl App {
    // ----- input -----------------------------------------------------------

    pub fn on_key(&mut self, e: KeyEvent) -> Vec<Effect> {
        self.touched = true;
        let mode = self.mode();
        match self.keymap.action(mode, &e) {
            Some(a) => self.act(a),
            None if mode == Mode::Text => {
                self.type_key(e);
                Vec::new()
            }
            None if mode == Mode::Replay => {
                // A control key: say why it does nothing here.
                if let Some(a) = self.keymap.action(Mode::Live, &e)
                    && matches!(info(a).scope, Scope::Run | Scope::Operation)
                    && let Err(why) = self.not_replay(a)
                {
                    self.warn(why.0);
                }
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// Carries out an action the key table named, if it is available now.
    /// An operation key right after the run moved the cursor off the
    /// operation the operator chose only names the new target: the
    /// operator acts on what they saw selected, or presses again.
    pub fn act(&mut self, a: Action) -> Vec<Effect> {
        if self.drift_holds(a) {
            return Vec::new();
        }
        let effects = self.act_now(a);
        self.pick();
        effects
    }

    /// Whether `a` is an operation key pressed on a row that slid under
    /// the cursor (its operation left the lane or the problems list): the
    /// first press names the new target and does nothing, presses within
    /// [`Drift::READ`] of that are a held key's repeats and do nothing
    /// either; a press after that acts. Any other key forgets the drift.
    fn drift_holds(&mut self, a: Action) -> bool {
        let Some(mut d) = self.drift.take() else {
            return false;
        };
        let where_ok = match self.overlays.last() {
            None => !d.in_problems,
            Some(Overlay::Problems { .. }) => d.in_problems,
            Some(_) => false,
        };
        let Some(now) = self.target().filter(|&t| Some(t) == d.now_on) else {
            return false;
        };
        if !matches!(
            a,
            Action::Approve | Action::Deny | Action::Hold | Action::Retry | Action::Step
        ) || !where_ok
            || self.available(a).is_err()
        {
            return false;
        }
        match d.named_at {
            Some(t) if t.elapsed() >= Drift::READ => false,
            Some(_) => {
                self.drift = Some(d);
                true
            }
            None => {
                let left = self.vm.node(d.left).name().to_string();
                let now = self.vm.node(now).name().to_string();
                let key = self.keymap.label(a);
                let label = self.action_label(a);
                let list = if d.in_problems {
                    "the problems list"
                } else {
                    "the lane"
                };
                self.warn(format!(
                    "{left} left {list}, so the cursor moved to {now}: nothing done — press {key} again to {label} {now}"
                ));
                d.named_at = Some(tokio::time::Instant::now());
                self.drift = Some(d);
                true
            }
        }
    }

    fn act_now(&mut self, a: Action) -> Vec<Effect> {
        if let Err(why) = self.available(a) {
            self.warn(why.0);
            return Vec::new();
        }
        match a {
            Action::RaiseBudget
            | Action::Release
            | Action::ReleaseInstance
            | Action::AddWork
            | Action::Mark
            | Action::MarkAll
            | Action::Acknowledge
            | Action::Approve
            | Action::Deny
            | Action::Hold
            | Action::Retry
            | Action::Talk
            | Action::Breakpoint
            | Action::RunToHere
            | Action::ClearBreak
            | Action::Quit
            | Action::CancelRun
            | Action::Yes
            | Action::Submit
            | Action::SendBack => self.decide(a),
            Action::Pause | Action::Resume | Action::Step => self.run_command(a),
            Action::FollowAgent
            | Action::PageOutput
            | Action::WorktreeDiff
            | Action::Shell
            | Action::Open
            | Action::PaletteInspector
            | Action::Warnings
            | Action::Runs
            | Action::Filter
            | Action::Report
            | Action::Messages
            | Action::Breakpoints
            | Action::Problems
            | Action::Help
            | Action::Jump => self.views(a),
            Action::NextProblem
            | Action::PrevProblem
            | Action::OldestGate
            | Action::LedgerFilter
            | Action::Back
            | Action::CycleTheme
            | Action::FocusNext
            | Action::FocusPrev
            | Action::Zoom
            | Action::Left
            | Action::Right
            | Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => self.navigate(a),
            Action::PlayPause
            | Action::Faster
            | Action::Slower
            | Action::EventBack
            | Action::EventForward
            | Action::Back10
            | Action::Forward10
            | Action::Start
            | Action::End => self.replay_key(a),
            Action::Close
            | Action::No
            | Action::Collapse
            | Action::Expand
            | Action::Toggle
            | Action::ShowAll
            | Action::RawLines
            | Action::NextHunk
            | Action::PrevHunk
            | Action::NextFile
            | Action::PrevFile
            | Action::NoteLine
            | Action::GoTo
            | Action::Cancel
            | Action::NextField
            | Action::PrevField => self.overlay_key(a),
        }
    }

    /// The run's own commands: pause, resume, step.
    pub(super) fn run_command(&mut self, a: Action) -> Vec<Effect> {
        let control = |r| vec![Effect::Control(r)];
        match a {
            Action::Pause => control(Request::Pause),
            Action::Resume => control(Request::Resume),
            Action::Step => {
                // The selected paused operation, else the next one.
                let op = self
                    .target()
                    .map(|ix| self.vm.node(ix))
                    .filter(|n| n.lane == Lane::Paused && !n.held)
                    .map(|n| n.name().to_string());
                control(Request::Step { op })
            }
            // Dispatched to another seam by act_now.
            _ => Vec::new(),
        }
    }

    /// A replay's transport keys.
    pub(super) fn replay_key(&mut self, a: Action) -> Vec<Effect> {
        let replay = |c| vec![Effect::Replay(c)];
        match a {
            Action::PlayPause => replay(ReplayCmd::PlayPause),
            Action::Faster => replay(ReplayCmd::Faster),
            Action::Slower => replay(ReplayCmd::Slower),
            Action::EventBack => replay(ReplayCmd::Events(-1)),
            Action::EventForward => replay(ReplayCmd::Events(1)),
            Action::Back10 => replay(ReplayCmd::Seconds(-10.0)),
            Action::Forward10 => replay(ReplayCmd::Seconds(10.0)),
            Action::Start => replay(ReplayCmd::Start),
            Action::End => replay(ReplayCmd::End),
            // Dispatched to another seam by act_now.
            _ => Vec::new(),
        }
    }
}
