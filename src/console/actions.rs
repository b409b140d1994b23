//! Carrying out actions. [`App::available`] is the one place that decides
//! whether an action can be used now and, if not, why: the footer offers
//! what it allows, help dims what it refuses, and [`App::act`] refuses
//! with its reason. Nothing else second-guesses it.

use std::cell::RefCell;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Position;
use tui_tree_widget::TreeState;

use super::app::{App, Drift, Effect, Follow, LedgerFilter, PANES, Pane, ReplayCmd};
use super::follow::FollowView;
use super::keymap::{Action, Mode, Scope, info};
use super::overlay::{AddForm, Overlay};
use super::pager::Page;
use super::scroll::{Motion, ScrollList};
use super::ui::{CapRow, short_instance};
use crate::capacity::ReleaseResult;
use crate::kernel::command::ReleaseSelect;
use crate::kernel::{Lane, LedgerOutcome, Request};
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
    /// Whether `a` can be used now; the error says why not, for people.
    pub fn available(&self, a: Action) -> Result<(), Unavailable> {
        self.available_under(a, self.overlays.len())
    }

    /// Whether `a` could be used with only the first `depth` overlays open:
    /// help asks it of the screen beneath itself.
    pub fn available_under(&self, a: Action, depth: usize) -> Result<(), Unavailable> {
        use Action::*;
        let top = depth.checked_sub(1).and_then(|i| self.overlays.get(i));
        let mode = match top {
            _ if self.too_small => Mode::TooSmall,
            Some(o) => o.mode(),
            None if self.replay.is_some() => Mode::Replay,
            None => Mode::Live,
        };
        match a {
            RaiseBudget => {
                self.live_run(a)?;
                if self.raise_offer().is_none() {
                    return Err("no spend cap holds work back (playdeck ctl RUN budget --raise sets any cap)".into());
                }
                Ok(())
            }
            Pause | Resume | Step | Release | AddWork => {
                self.live_run(a)?;
                let r = &self.vm.run;
                match a {
                    Pause if r.paused => Err("the run is already paused (r resumes)".into()),
                    Resume if !r.paused => Err("the run is not paused".into()),
                    Step if !r.paused => {
                        Err("step works while paused: press p first, then s for each step".into())
                    }
                    Release
                        if !self.vm.facts.capacity
                            || (self.hooks.release_preview.is_none() && !self.hooks.attached) =>
                    {
                        Err("this run has no [capacity] to release".into())
                    }
                    // No question whose answer is "nothing": the status
                    // line says what holds each instance instead.
                    Release => match self.nothing_due() {
                        Some(why) => Err(why.into()),
                        None => Ok(()),
                    },
                    AddWork if !r.reactive => Err(
                        "the run is not reactive (reactive = false): nothing can be added to it"
                            .into(),
                    ),
                    _ => Ok(()),
                }
            }
            ReleaseInstance => {
                self.live_run(a)?;
                if !self.vm.facts.capacity {
                    return Err("this run has no [capacity] to release".into());
                }
                if self.focus != Pane::Capacity {
                    return Err(format!(
                        "{} releases the instance selected in the capacity pane: move to it with {} first",
                        self.keymap.label(ReleaseInstance),
                        self.keymap.label(FocusNext)
                    )
                    .into());
                }
                let Some(i) = self.selected_instance() else {
                    return Err(format!(
                        "select an instance in the capacity pane ({}) to release it",
                        self.keymap.label(Down)
                    )
                    .into());
                };
                self.releasable(i)
            }
            Mark => {
                self.not_replay(a)?;
                match self.target_under(top).map(|ix| self.vm.node(ix)) {
                    Some(n) if n.lane == Lane::AwaitingApproval => Ok(()),
                    Some(n) => Err(format!(
                        "{} is not awaiting approval; only gates are marked (to approve several at once)",
                        n.name()
                    )
                    .into()),
                    None => Err("select an operation in the awaiting approval lane to mark it".into()),
                }
            }
            // Marked gates, or the oldest from anywhere on the main screen:
            // asked by name first.
            Approve if !self.marks.is_empty() && top.is_none() => {
                self.not_replay(a)?;
                self.still_running()
            }
            Approve | Deny
                if top.is_none()
                    && self.target_under(top) != self.gate_under(top)
                    && self.gate_under(top).is_some() =>
            {
                self.not_replay(a)?;
                self.still_running()
            }
            Approve | Deny | Hold | Retry => {
                self.not_replay(a)?;
                let Some(ix) = self.target_under(top) else {
                    return Err(match a {
                        Approve | Deny => "select an operation in the awaiting approval lane",
                        Hold => "select an operation that has not started to hold it",
                        _ => "select a failed operation to retry it",
                    }
                    .into());
                };
                let n = self.vm.node(ix);
                let name = n.name();
                let finished = self.vm.run.finished.is_some();
                match a {
                    _ if finished && a != Retry => {
                        Err("the run has finished; only viewing works now".into())
                    }
                    Approve | Deny if n.lane != Lane::AwaitingApproval => {
                        Err(format!("{name} is not awaiting approval").into())
                    }
                    Hold if !n.held
                        && !matches!(
                            n.lane,
                            Lane::Queued | Lane::Paused | Lane::AwaitingApproval
                        ) =>
                    {
                        let state = match n.lane {
                            Lane::Running => "is running".to_string(),
                            _ if n.skipped() => format!(
                                "was skipped ({})",
                                self.vm.skip_cause(ix).unwrap_or_default()
                            ),
                            lane => format!("has {}", lane.title()),
                        };
                        Err(format!(
                            "{name} {state}; only an operation that has not started can be held"
                        )
                        .into())
                    }
                    Retry if n.lane != Lane::Failed || n.skipped() => Err(format!(
                        "{name} has not failed; only failed or denied operations can be retried"
                    )
                    .into()),
                    _ => Ok(()),
                }
            }
            FollowAgent | PageOutput | WorktreeDiff => self.agent_target(a, top).map(|_| ()),
            Open => match self.focus {
                Pane::Lanes if self.selected_node().is_none() => {
                    Err("nothing selected to inspect".into())
                }
                Pane::Ledger if self.selected_ledger_row().is_none() => {
                    Err("the ledger has no row to open".into())
                }
                Pane::Capacity => match self.capacity_row() {
                    Some(CapRow::Waiting(_)) => Ok(()),
                    Some(CapRow::Instance(_)) => {
                        let Some(i) = self.selected_instance() else {
                            return Err("that instance is gone".into());
                        };
                        let name = short_instance(&i.name, &self.vm.run.run_id);
                        match (&i.op, i.state) {
                            (Some(_), InstanceState::Busy | InstanceState::Retained) => Ok(()),
                            (_, InstanceState::Ready) => Err(format!(
                                "{name} is idle ({}): no operation runs on it",
                                super::ui::state_age(self, i)
                            )
                            .into()),
                            _ => Err(format!(
                                "{name} runs no operation: it is {}",
                                super::ui::state_words(self, i)
                            )
                            .into()),
                        }
                    }
                    _ => Err(format!(
                        "select an instance ({}) to go to its operation",
                        self.keymap.label(Down)
                    )
                    .into()),
                },
                _ => Ok(()),
            },
            Warnings if self.vm.warnings.is_empty() => Err("the run has no warnings".into()),
            LedgerFilter if self.focus != Pane::Ledger => Err(format!(
                "{} filters the spawn ledger: move to it with {} first",
                self.keymap.label(LedgerFilter),
                self.keymap.label(FocusNext)
            )
            .into()),
            Back if self.filter.is_empty() && self.focus == Pane::Lanes => {
                Err("no filter to clear".into())
            }
            CycleTheme if self.themes.len() < 2 => Err("there is only one theme".into()),
            Report if self.hooks.run_dir.is_none() => {
                Err("no run directory to write the report to".into())
            }
            Left | Right if mode == Mode::Live || mode == Mode::Replay => {
                if self.focus == Pane::Lanes {
                    Ok(())
                } else {
                    Err("← → move between lanes; tab back to the lanes first".into())
                }
            }
            Help if mode == Mode::TooSmall => Err("the terminal is too small".into()),
            PlayPause | Faster | Slower | EventBack | EventForward | Back10 | Forward10 | Start
            | End | Jump
                if self.replay.is_none() =>
            {
                Err("only a replay has a timeline".into())
            }
            GoTo => match top {
                Some(Overlay::LedgerRow { row, .. }) => match self.ledger_op(*row) {
                    Some(_) => Ok(()),
                    None => Err("this request was dropped: no operation came of it".into()),
                },
                Some(Overlay::Runs { .. }) => Ok(()),
                Some(o @ Overlay::Problems { .. }) if self.target_under(Some(o)).is_some() => {
                    Ok(())
                }
                Some(Overlay::Problems { .. }) => {
                    Err("no failures, escalations or waiting gates".into())
                }
                _ => Err("nothing to go to".into()),
            },
            ShowAll => match top {
                Some(Overlay::Inspector { node, all, .. })
                    if *all || super::ui::collapsible(self, *node) =>
                {
                    Ok(())
                }
                _ => Err("nothing here is collapsed".into()),
            },
            NextField | PrevField if !matches!(top, Some(Overlay::Add(_))) => {
                Err("one field only".into())
            }
            _ => Ok(()),
        }
    }

    /// Whether `X` may release this instance now, and if not why, in
    /// words: only idle instances are released (the capacity contract), of
    /// any lifetime — naming one is how a `manual_release` or pinned
    /// instance goes.
    pub fn releasable(&self, i: &Instance) -> Result<(), Unavailable> {
        let name = short_instance(&i.name, &self.vm.run.run_id);
        let why = match (i.state, i.op.as_deref()) {
            (InstanceState::Ready, _) => return Ok(()),
            (InstanceState::Busy | InstanceState::Retained, Some(op)) => {
                format!("{name} is busy with {op}; only idle instances are released")
            }
            (InstanceState::Busy | InstanceState::Retained, None) => {
                format!("{name} is busy; only idle instances are released")
            }
            (InstanceState::Starting, _) => format!(
                "{name} is starting (its worktree is being added); only idle instances are released"
            ),
            (InstanceState::Planned, _) => {
                format!("{name} has not started yet; only idle instances are released")
            }
            (InstanceState::Failed, _) => {
                format!("{name} failed to start: it holds no node, there is nothing to release")
            }
            (InstanceState::Released, _) => format!("{name} is released already"),
        };
        Err(why.into())
    }

    /// Why the release that is due (`x`) would let nothing go now, in
    /// words; `None` when some idle instance is due.
    pub fn nothing_due(&self) -> Option<String> {
        let run_id = &self.vm.run.run_id;
        let active: Vec<&Instance> = self
            .vm
            .capacity
            .instances
            .values()
            .filter(|i| i.state.is_active())
            .collect();
        if active
            .iter()
            .any(|i| i.state == InstanceState::Ready && super::ui::kept_by(self, i).is_none())
        {
            return None;
        }
        if active.is_empty() {
            return Some("nothing to release: no instance is active".into());
        }
        const SAID: usize = 3;
        let mut parts: Vec<String> = active
            .iter()
            .take(SAID)
            .map(|i| {
                format!(
                    "{} {}",
                    short_instance(&i.name, run_id),
                    super::ui::state_words(self, i)
                )
            })
            .collect();
        if active.len() > SAID {
            parts.push(format!("+{} more", active.len() - SAID));
        }
        let idle_kept = active.iter().any(|i| i.state == InstanceState::Ready);
        let hint = if idle_kept {
            format!(
                " (capacity pane: select one, {} releases it)",
                self.keymap.label(Action::ReleaseInstance)
            )
        } else {
            String::new()
        };
        Some(format!(
            "nothing is due for release: {}{hint}",
            parts.join("; ")
        ))
    }

    /// The operation whose agent `F`, `O` and `D` show, with `top` the
    /// topmost overlay; why none, for people. Viewing only: a replay and a
    /// read-only console may, and a finished run's logs still say it all.
    fn agent_target(&self, a: Action, top: Option<&Overlay>) -> Result<u32, Unavailable> {
        if a == Action::FollowAgent
            && let Some(Overlay::Follow(f)) = top
        {
            return Err(format!(
                "already following {}: {} goes back, {} follows the newest line again",
                self.vm.node(f.node).name(),
                self.keymap.label_in(Mode::Follow, Action::Close),
                self.keymap.label_in(Mode::Follow, Action::Bottom)
            )
            .into());
        }
        let Some(ix) = self.target_under(top) else {
            let what = match a {
                Action::FollowAgent => "to follow its agent",
                Action::PageOutput => "to page its output",
                _ => "to see its worktree's diff",
            };
            return Err(if top.is_none() && self.focus != Pane::Lanes {
                format!(
                    "select an operation in the lanes {what} ({} goes back to them)",
                    self.keymap.label(Action::FocusNext)
                )
            } else {
                format!("select an operation in the lanes {what}")
            }
            .into());
        };
        let n = self.vm.node(ix);
        if self.hooks.run_dir.is_none() {
            return Err(format!(
                "{}'s logs and worktree are on the run's machine (this console is attached from another one): run playdeck there to see them",
                n.name()
            )
            .into());
        }
        if n.attempt == 0 && a != Action::FollowAgent {
            return Err(format!(
                "{} has not started an attempt yet: {}",
                n.name(),
                if a == Action::PageOutput {
                    "no output to page"
                } else {
                    "no workspace to diff"
                }
            )
            .into());
        }
        Ok(ix)
    }

    /// Run control needs a live run that has not finished.
    /// The raise `$` offers: the first reached cap (the run's, then a
    /// role's) up by half, and what it says.
    pub fn raise_offer(&self) -> Option<(crate::kernel::spend::CapChange, String)> {
        use crate::kernel::spend::{CapChange, Measure};
        let s = &self.vm.spend;
        s.held.as_ref()?;
        let b = s.budget.as_ref()?;
        let spent = |role: Option<&str>, m: Measure| {
            let (u, t) = match role {
                None => (s.usd, s.tokens),
                Some(r) => s.roles.get(r).copied().unwrap_or_default(),
            };
            if m == Measure::Usd { u } else { t }
        };
        let scopes = std::iter::once(None).chain(b.roles.keys().map(|r| Some(r.as_str())));
        for role in scopes {
            for m in [Measure::Usd, Measure::Tokens] {
                let Some(cap) = b.cap(role, m) else {
                    continue;
                };
                let now = spent(role, m);
                if now < cap {
                    continue;
                }
                // What is spent, and half the cap again as headroom: a
                // raise that leaves room to work, never one that is
                // reached again at once because more than half was
                // spent past the cap already.
                let headroom = cap / 2.0;
                let to = now + headroom;
                let by = if m == Measure::Usd {
                    ((to - cap) * 100.0).ceil() / 100.0
                } else {
                    (to - cap).ceil()
                };
                let who = role
                    .map(|r| format!("{r}'s "))
                    .unwrap_or_else(|| "the run's ".into());
                let words = format!(
                    "Raise {who}{} cap from {} to {}? ({} spent; leaves {})",
                    m.as_str(),
                    m.amount(cap),
                    m.amount(cap + by),
                    m.show(now, cap),
                    m.amount(cap + by - now)
                );
                let change = CapChange {
                    role: role.map(str::to_string),
                    measure: m,
                    amount: by,
                    relative: true,
                };
                return Some((change, words));
            }
        }
        None
    }

    fn live_run(&self, a: Action) -> Result<(), Unavailable> {
        self.not_replay(a)?;
        if self.vm.run.finished.is_some() {
            return Err("the run has finished; only viewing works now".into());
        }
        if self.quitting {
            return Err("the run is being cancelled".into());
        }
        Ok(())
    }

    /// A finished run takes no decisions.
    fn still_running(&self) -> Result<(), Unavailable> {
        if self.vm.run.finished.is_some() {
            return Err("the run has finished; only viewing works now".into());
        }
        Ok(())
    }

    fn not_replay(&self, a: Action) -> Result<(), Unavailable> {
        if self.hooks.read_only {
            return Err(format!(
                "read-only console (attached with --read-only): it watches, it cannot {}; `playdeck attach {}` can",
                info(a).label,
                self.resume_name()
            )
            .into());
        }
        let Some(bar) = &self.replay else {
            return Ok(());
        };
        let name = info(a).name;
        if bar.follow == Follow::Following {
            // The run is live: its owner takes commands, through ctl.
            let run = self.resume_name();
            let op = self
                .selected_node()
                .map(|ix| format!(" {}", self.vm.node(ix).name()))
                .unwrap_or_default();
            let cmd = match a {
                Action::Approve | Action::Deny | Action::Hold | Action::Retry => {
                    format!("playdeck ctl {run} {}{op}", info(a).name)
                }
                Action::Release => format!("playdeck ctl {run} release"),
                Action::ReleaseInstance => match self.selected_instance() {
                    Some(i) => format!("playdeck ctl {run} release --name {}", i.name),
                    None => format!("playdeck ctl {run} release --name INSTANCE"),
                },
                _ => format!("playdeck ctl {run} {name}"),
            };
            return Err(format!(
                "{name} is disabled in a replay; this run is live: `{cmd}` does it from here"
            )
            .into());
        }
        Err(format!(
            "{name} is disabled in a replay: this is a recorded run (`playdeck resume` continues a stopped one)"
        )
        .into())
    }

    /// The operation `a` would act on, as the footer names it before the
    /// operation keys (`gate-b: a approve  d deny`): no key acts on an
    /// operation the footer did not name.
    pub fn named_target(&self, a: Action) -> Option<String> {
        let ix = match a {
            Action::Approve if !self.marks.is_empty() && self.overlays.is_empty() => {
                return Some(format!("{} marked", self.marks.len()));
            }
            // From anywhere on the main screen: the gate it would ask about.
            Action::Approve | Action::Deny => self.gate_under(self.overlays.last()),
            Action::Hold | Action::Retry | Action::Mark => self.target(),
            Action::Step => self.target().filter(|&ix| {
                let n = self.vm.node(ix);
                n.lane == Lane::Paused && !n.held
            }),
            // The capacity pane's keys act on the instance under its
            // cursor: named like an operation.
            Action::ReleaseInstance | Action::Open
                if self.focus == Pane::Capacity && self.overlays.is_empty() =>
            {
                let i = self.selected_instance()?;
                return Some(super::text::fit_middle(
                    short_instance(&i.name, &self.vm.run.run_id),
                    TARGET_WIDTH,
                ));
            }
            _ => None,
        }?;
        Some(super::text::fit_middle(&self.vm.label(ix), TARGET_WIDTH))
    }

    /// The footer's word for `a` now (the table's label, or what it would
    /// do to the selection).
    pub fn action_label(&self, a: Action) -> &'static str {
        match a {
            Action::Hold if self.target().is_some_and(|ix| self.vm.node(ix).held) => "unhold",
            Action::Open => match self.focus {
                Pane::Ledger => "details",
                Pane::Budgets => "palette",
                Pane::Capacity => "its operation",
                _ => "inspect",
            },
            Action::Toggle => {
                if self.palette_leaf_selected() {
                    "details"
                } else {
                    "open/close"
                }
            }
            Action::GoTo => "go to the operation",
            Action::Help if matches!(self.overlays.last(), Some(Overlay::Help { .. })) => {
                "close help"
            }
            Action::ShowAll
                if matches!(
                    self.overlays.last(),
                    Some(Overlay::Inspector { all: true, .. })
                ) =>
            {
                "collapse"
            }
            Action::Submit => match self.overlays.last() {
                Some(Overlay::Deny { .. }) => "deny",
                Some(Overlay::Add(_)) => "add",
                Some(Overlay::Jump { .. }) => "jump",
                _ => "done",
            },
            _ => info(a).label,
        }
    }

    // ----- input -----------------------------------------------------------

    pub fn on_key(&mut self, e: KeyEvent) -> Vec<Effect> {
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
        let control = |r| vec![Effect::Control(r)];
        let replay = |c| vec![Effect::Replay(c)];
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
            Action::RaiseBudget => {
                if let Some((change, words)) = self.raise_offer() {
                    self.overlays.push(Overlay::ConfirmRaise { change, words });
                }
                Vec::new()
            }
            Action::Release => {
                if let Some(preview) = &self.hooks.release_preview {
                    let preview = preview();
                    self.offer_release(preview);
                } else if self.hooks.attached {
                    // The run answers what a release would do; the
                    // confirmation opens with its answer.
                    return vec![Effect::PreviewRelease];
                }
                Vec::new()
            }
            Action::ReleaseInstance => {
                if let Some(i) = self.selected_instance() {
                    let name = i.name.clone();
                    self.overlays.push(Overlay::ConfirmReleaseInstance { name });
                }
                Vec::new()
            }
            Action::AddWork => {
                let after = self.target().map(|ix| self.vm.node(ix).name().to_string());
                self.overlays
                    .push(Overlay::Add(AddForm::after(after.as_deref())));
                Vec::new()
            }
            Action::Mark => {
                if let Some(ix) = self.target() {
                    match self.marks.iter().position(|&m| m == ix) {
                        Some(i) => {
                            self.marks.remove(i);
                        }
                        None => self.marks.push(ix),
                    }
                    let name = self.vm.node(ix).name().to_string();
                    let done = if self.marks.contains(&ix) {
                        "marked"
                    } else {
                        "unmarked"
                    };
                    let key = self.keymap.label(Action::Approve);
                    self.info(match self.marks.len() {
                        0 => format!("{done} {name}; none marked"),
                        n => {
                            format!("{done} {name} · {n} marked: {key} approves them (asking once)")
                        }
                    });
                }
                Vec::new()
            }
            Action::Approve if !self.marks.is_empty() && self.overlays.is_empty() => {
                let ops = self
                    .marks
                    .iter()
                    .map(|&ix| self.vm.node(ix).name().to_string())
                    .collect();
                self.overlays
                    .push(Overlay::ConfirmApprove { ops, oldest: false });
                Vec::new()
            }
            Action::Approve => {
                let under = self.target();
                match self.gate_under(self.overlays.last()) {
                    // The gate under the cursor: as the footer named it.
                    Some(ix) if Some(ix) == under => control(Request::Approve {
                        op: self.vm.node(ix).name().to_string(),
                    }),
                    // Another one (the oldest): asked by name first.
                    Some(ix) => {
                        let ops = vec![self.vm.node(ix).name().to_string()];
                        self.overlays
                            .push(Overlay::ConfirmApprove { ops, oldest: true });
                        Vec::new()
                    }
                    None => Vec::new(),
                }
            }
            Action::Deny => {
                let Some(ix) = self.gate_under(self.overlays.last()) else {
                    return Vec::new();
                };
                let op = self.vm.node(ix).name().to_string();
                self.overlays.push(Overlay::Deny {
                    op,
                    reason: String::new(),
                });
                Vec::new()
            }
            Action::Hold => {
                let op = self.target_name();
                let held = self.target().is_some_and(|ix| self.vm.node(ix).held);
                control(if held {
                    Request::Unhold { op }
                } else {
                    Request::Hold { op }
                })
            }
            Action::Retry => {
                let op = self.target_name();
                if self.vm.run.finished.is_some() {
                    // The kernel that could retry it has stopped: a new
                    // process takes the run up again.
                    self.warn(format!(
                        "the run has finished; to retry {op}: playdeck resume {} --retry {op} (shown again when you quit)",
                        self.resume_name()
                    ));
                    self.retry_offer = Some(op);
                    return Vec::new();
                }
                control(Request::Retry { op })
            }
            Action::FollowAgent => {
                if let Some(ix) = self.target() {
                    self.overlays
                        .push(Overlay::Follow(Box::new(FollowView::new(ix))));
                }
                Vec::new()
            }
            Action::PageOutput | Action::WorktreeDiff => {
                let (Some(ix), Some(run_dir)) = (self.target(), self.hooks.run_dir.clone()) else {
                    return Vec::new();
                };
                let n = self.vm.node(ix);
                let op = n.name().to_string();
                let attempt = n.attempt;
                let page = if a == Action::PageOutput {
                    Page::Output {
                        op,
                        attempt,
                        logs: run_dir.join("logs"),
                    }
                } else {
                    let instance = n
                        .current()
                        .and_then(|at| at.instance.as_deref())
                        .map(str::to_string);
                    // A reused instance's worktree holds what it does now:
                    // another operation's work is not shown under this name.
                    if let Some(now) = instance
                        .as_deref()
                        .and_then(|i| self.vm.capacity.instances.get(i))
                        .and_then(|i| i.op.as_deref())
                        .filter(|now| **now != *op)
                    {
                        self.warn(format!(
                            "{op}'s instance {} now runs {now}: its worktree holds {now}'s work, not {op}'s",
                            short_instance(instance.as_deref().unwrap_or_default(), &self.vm.run.run_id)
                        ));
                        return Vec::new();
                    }
                    Page::Diff {
                        op,
                        attempt,
                        instance,
                        run_dir,
                    }
                };
                vec![Effect::Page(page)]
            }
            Action::Open => {
                match self.focus {
                    Pane::Ledger => {
                        if let Some(row) = self.selected_ledger_row() {
                            self.overlays.push(Overlay::LedgerRow {
                                row,
                                scroll: ScrollList::text(),
                            });
                        }
                    }
                    Pane::Budgets => self.open_palette(),
                    Pane::Capacity => self.go_to_instance_op(),
                    _ => {
                        if let Some(node) = self.selected_node() {
                            self.inspect(node);
                        }
                    }
                }
                Vec::new()
            }
            Action::PaletteInspector => {
                self.open_palette();
                Vec::new()
            }
            Action::NextProblem => {
                self.to_problem(true);
                Vec::new()
            }
            Action::PrevProblem => {
                self.to_problem(false);
                Vec::new()
            }
            Action::OldestGate => {
                self.to_oldest_gate();
                Vec::new()
            }
            Action::Warnings => {
                self.overlays.push(Overlay::Warnings {
                    scroll: ScrollList::text(),
                });
                Vec::new()
            }
            Action::Runs if self.hooks.attached && self.hooks.run_dir.is_none() => {
                self.info(format!(
                    "the runs screen lists this machine's runs; the other machine's: playdeck runs --dir {}",
                    self.resume_name().split('#').next().unwrap_or_default()
                ));
                Vec::new()
            }
            Action::Runs => vec![Effect::ListRuns],
            Action::Filter => {
                self.overlays.push(Overlay::Filter);
                Vec::new()
            }
            Action::LedgerFilter => {
                self.ledger_filter = match self.ledger_filter {
                    LedgerFilter::All => LedgerFilter::Accepted,
                    LedgerFilter::Accepted => LedgerFilter::Dropped,
                    LedgerFilter::Dropped => LedgerFilter::All,
                };
                self.clamp();
                self.ledger.select(0);
                let label = self.ledger_filter.label();
                self.info(format!("ledger: {label}"));
                Vec::new()
            }
            Action::Back => {
                if !self.filter.is_empty() {
                    self.set_filter(String::clear);
                    self.info("filter cleared");
                } else {
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
            Action::Report => vec![Effect::Report],
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
                if self.focus == Pane::Capacity {
                    self.capacity_to_instance();
                    self.say_instance();
                }
                Vec::new()
            }
            Action::Messages => {
                self.overlays.push(Overlay::Messages {
                    scroll: ScrollList::text(),
                });
                Vec::new()
            }
            Action::Problems => {
                self.open_problems();
                Vec::new()
            }
            Action::Zoom => {
                self.zoomed = !self.zoomed;
                self.focus = Pane::Lanes;
                Vec::new()
            }
            Action::Left | Action::Right => {
                use super::model::{COLS, SKIPPED_COL};
                let step = |c: usize| {
                    if a == Action::Left {
                        (c + COLS - 1) % COLS
                    } else {
                        (c + 1) % COLS
                    }
                };
                let mut col = step(self.lane_col);
                // The skipped column is there only when something was.
                if col == SKIPPED_COL && self.lane_len(SKIPPED_COL) == 0 {
                    col = step(col);
                }
                self.lane_col = col;
                Vec::new()
            }
            Action::Up => self.motion(Motion::Up),
            Action::Down => self.motion(Motion::Down),
            Action::PageUp => self.motion(Motion::PageUp),
            Action::PageDown => self.motion(Motion::PageDown),
            Action::Top => self.motion(Motion::Top),
            Action::Bottom => self.motion(Motion::Bottom),
            Action::Help => {
                if matches!(self.overlays.last(), Some(Overlay::Help { .. })) {
                    self.overlays.pop();
                } else {
                    let of = self.mode();
                    self.overlays.push(Overlay::Help {
                        of,
                        scroll: ScrollList::text(),
                    });
                }
                Vec::new()
            }
            Action::Quit => self.quit(),
            Action::CancelRun => self.cancel_run(),
            Action::PlayPause => replay(ReplayCmd::PlayPause),
            Action::Faster => replay(ReplayCmd::Faster),
            Action::Slower => replay(ReplayCmd::Slower),
            Action::EventBack => replay(ReplayCmd::Events(-1)),
            Action::EventForward => replay(ReplayCmd::Events(1)),
            Action::Back10 => replay(ReplayCmd::Seconds(-10.0)),
            Action::Forward10 => replay(ReplayCmd::Seconds(10.0)),
            Action::Start => replay(ReplayCmd::Start),
            Action::End => replay(ReplayCmd::End),
            Action::Jump => {
                self.overlays.push(Overlay::Jump {
                    text: String::new(),
                });
                Vec::new()
            }
            Action::Close | Action::No => {
                self.overlays.pop();
                Vec::new()
            }
            Action::Collapse | Action::Expand | Action::Toggle => {
                self.tree_key(a);
                Vec::new()
            }
            Action::ShowAll => {
                if let Some(Overlay::Inspector { all, .. }) = self.overlays.last_mut() {
                    *all = !*all;
                }
                Vec::new()
            }
            Action::GoTo => {
                if matches!(self.overlays.last(), Some(Overlay::Runs { .. })) {
                    self.pick_run();
                    return Vec::new();
                }
                if let Some(ix) = self
                    .target()
                    .filter(|_| matches!(self.overlays.last(), Some(Overlay::Problems { .. })))
                {
                    self.overlays.clear();
                    self.go_to(ix);
                    return Vec::new();
                }
                let Some(Overlay::LedgerRow { row, .. }) = self.overlays.last() else {
                    return Vec::new();
                };
                if let Some(ix) = self.ledger_op(*row) {
                    self.overlays.clear();
                    self.go_to(ix);
                    self.inspect(ix);
                }
                Vec::new()
            }
            Action::Yes => self.confirm(),
            Action::Submit => self.submit(),
            Action::Cancel => {
                if matches!(self.overlays.last(), Some(Overlay::Filter)) {
                    self.set_filter(String::clear);
                }
                self.overlays.pop();
                Vec::new()
            }
            Action::NextField | Action::PrevField => {
                if let Some(Overlay::Add(form)) = self.overlays.last_mut() {
                    form.next(a == Action::NextField);
                }
                Vec::new()
            }
        }
    }

    /// Opens the release question with what the run says a release
    /// would do; when it would release nothing, the status line says why
    /// instead (a question whose only answer is "nothing" asks nothing).
    pub fn offer_release(&mut self, preview: ReleaseResult) {
        if !preview.released.is_empty() {
            self.overlays.push(Overlay::ConfirmRelease { preview });
            return;
        }
        let why = self.nothing_due().unwrap_or_else(|| {
            // The run knows better than the view: say what it keeps.
            let kept: Vec<String> = preview
                .retained
                .iter()
                .map(|k| {
                    format!(
                        "{} {}",
                        short_instance(&k.name, &self.vm.run.run_id),
                        k.words()
                    )
                })
                .collect();
            if kept.is_empty() {
                "nothing is due for release now".into()
            } else {
                format!("nothing is due for release: {}", kept.join("; "))
            }
        });
        self.info(why);
    }

    /// `enter` in the capacity pane: the operation on the selected row —
    /// the one a busy instance runs, or one waiting for capacity —
    /// selected in the lanes, which take the focus.
    fn go_to_instance_op(&mut self) {
        let (ix, what) = match self.capacity_row() {
            Some(CapRow::Waiting(ix)) => {
                let why = self.vm.node(ix).capacity_wait.clone().unwrap_or_default();
                (Some(ix), format!("waits for {why}"))
            }
            Some(CapRow::Instance(_)) => {
                let Some(i) = self.selected_instance() else {
                    return;
                };
                let Some(op) = i.op.clone() else {
                    return;
                };
                let inst = short_instance(&i.name, &self.vm.run.run_id).to_string();
                let ix = self.vm.by_name(&op).and_then(|n| self.vm.ix(&n.op.op_id));
                if ix.is_none() {
                    self.warn(format!("{inst} runs {op}, which this view does not have"));
                    return;
                }
                (ix, format!("runs on {inst}"))
            }
            _ => (None, String::new()),
        };
        if let Some(ix) = ix {
            self.go_to(ix);
            let n = self.vm.node(ix);
            let lane = n.lane.title();
            self.info(format!("{} {what} ({lane})", n.name()));
        }
    }

    fn target_name(&self) -> String {
        self.target()
            .map(|ix| self.vm.node(ix).name().to_string())
            .unwrap_or_default()
    }

    /// The operation a ledger row accepted, when the view knows it.
    pub fn ledger_op(&self, row: usize) -> Option<u32> {
        match &self.vm.ledger.get(row)?.outcome {
            LedgerOutcome::Accepted { op_id, .. } => self.vm.ix(op_id),
            LedgerOutcome::Dropped { op_id, .. } => op_id.as_ref().and_then(|o| self.vm.ix(o)),
        }
    }

    fn inspect(&mut self, node: u32) {
        self.overlays.push(Overlay::Inspector {
            node,
            scroll: ScrollList::text(),
            all: false,
        });
    }

    fn open_palette(&mut self) {
        let mut state = TreeState::default();
        for id in PALETTE_BRANCHES {
            state.open(vec![id.to_string()]);
        }
        state.select(vec!["initial".to_string()]);
        self.overlays.push(Overlay::Palette {
            state: RefCell::new(state),
        });
    }

    fn palette_leaf_selected(&self) -> bool {
        match self.overlays.last() {
            Some(Overlay::Palette { state }) => state
                .borrow()
                .selected()
                .last()
                .is_some_and(|id| id.contains(':')),
            _ => false,
        }
    }

    fn tree_key(&mut self, a: Action) {
        let leaf = self.palette_leaf_selected();
        let Some(Overlay::Palette { state }) = self.overlays.last_mut() else {
            return;
        };
        let state = state.get_mut();
        match a {
            Action::Collapse => {
                state.key_left();
            }
            Action::Expand => {
                state.key_right();
            }
            _ if leaf => {
                // A leaf's line is cut to the window; its detail has it all.
                let id = state.selected().last().cloned().unwrap_or_default();
                self.overlays.push(Overlay::PaletteEntry {
                    id,
                    scroll: ScrollList::text(),
                });
            }
            _ => {
                state.toggle_selected();
            }
        }
    }

    /// Moves whatever list has the keys: the open window's, else the
    /// focused pane's.
    fn motion(&mut self, m: Motion) -> Vec<Effect> {
        match self.overlays.last_mut() {
            Some(Overlay::Follow(f)) => f.apply(m),
            Some(Overlay::Palette { .. }) => {
                // Moved over the rows the tree shows now, not the ones its
                // widget saw at the last frame: keys can come faster than
                // frames.
                let items = super::ui::palette_items(self);
                let Some(Overlay::Palette { state }) = self.overlays.last_mut() else {
                    return Vec::new();
                };
                let state = state.get_mut();
                let rows: Vec<Vec<String>> = state
                    .flatten(&items)
                    .into_iter()
                    .map(|f| f.identifier)
                    .collect();
                let last = rows.len().saturating_sub(1);
                let at = rows.iter().position(|r| r.as_slice() == state.selected());
                let to = match (m, at) {
                    (Motion::Top, _) | (_, None) => 0,
                    (Motion::Bottom, _) => last,
                    (Motion::Up, Some(i)) => i.saturating_sub(1),
                    (Motion::Down, Some(i)) => (i + 1).min(last),
                    (Motion::PageUp, Some(i)) => i.saturating_sub(10),
                    (Motion::PageDown, Some(i)) => (i + 10).min(last),
                };
                if let Some(id) = rows.get(to) {
                    state.select(id.clone());
                }
            }
            Some(o) => {
                let runs = matches!(o, Overlay::Runs { .. } | Overlay::Problems { .. });
                if let Some(s) = o.scroll_mut() {
                    s.apply(m);
                    // The runs screen's first row is its columns' titles.
                    if runs && s.selected() == Some(0) {
                        s.select(1);
                    }
                }
            }
            None => match self.focus {
                Pane::Lanes => self.lanes[self.lane_col].apply(m),
                Pane::Ledger => self.ledger.apply(m),
                Pane::Capacity => {
                    self.capacity.apply(m);
                    self.say_instance();
                }
                Pane::Budgets => self.budgets.apply(m),
            },
        }
        Vec::new()
    }

    /// The instance the capacity cursor came to, in full on the status
    /// line (the pane cuts its row to its width), with what the keys do.
    pub fn say_instance(&mut self) {
        let Some(i) = self.selected_instance() else {
            return;
        };
        let mut words = format!(
            "{} · {} ({}) · {}",
            short_instance(&i.name, &self.vm.run.run_id),
            i.profile,
            i.role,
            super::ui::state_words(self, i)
        );
        if i.state != InstanceState::Ready {
            words.push_str(&format!(" · {}", i.lifetime));
        }
        if self.available(Action::ReleaseInstance).is_ok() {
            words.push_str(&format!(
                "; {} releases it",
                self.keymap.label(Action::ReleaseInstance)
            ));
        } else if self.available(Action::Open).is_ok()
            && let Some(op) = &i.op
        {
            words.push_str(&format!(
                "; {} selects {op}",
                self.keymap.label(Action::Open)
            ));
        }
        self.info(words);
    }

    fn quit(&mut self) -> Vec<Effect> {
        // An attached console leaves the run going: nothing to ask when
        // it cannot act, the run has ended, or the terminal is too small.
        if self.hooks.attached
            && (self.hooks.read_only || self.too_small || self.vm.run.finished.is_some())
        {
            self.should_exit = true;
            return Vec::new();
        }
        // Too small to ask: quitting is the one thing that works, at once.
        if self.too_small
            || self.replay.is_some()
            || self.vm.run.finished.is_some()
            || self.quitting
        {
            // A run still going is cancelled as the console leaves.
            self.quit_cancelled |= self.vm.run.finished.is_none() && self.replay.is_none();
            self.quitting = true;
            self.should_exit = true;
            return Vec::new();
        }
        if matches!(self.overlays.last(), Some(Overlay::ConfirmQuit)) {
            // A second ctrl-c (or q) answers the question.
            return self.confirm();
        }
        self.overlays.push(Overlay::ConfirmQuit);
        Vec::new()
    }

    /// `c` in an attached console's quit question: cancel the run, then
    /// leave once it has ended.
    fn cancel_run(&mut self) -> Vec<Effect> {
        if !(self.hooks.attached && matches!(self.overlays.last(), Some(Overlay::ConfirmQuit))) {
            return Vec::new();
        }
        self.overlays.clear();
        self.quitting = true;
        self.quit_cancelled = true;
        self.info("cancelling the run…");
        vec![Effect::Control(Request::Cancel)]
    }

    fn confirm(&mut self) -> Vec<Effect> {
        match self.overlays.pop() {
            // Detach: the default answer of an attached console.
            Some(Overlay::ConfirmQuit) if self.hooks.attached => {
                self.overlays.clear();
                self.should_exit = true;
                Vec::new()
            }
            Some(Overlay::ConfirmQuit) => {
                self.overlays.clear();
                self.quitting = true;
                self.quit_cancelled = true;
                self.info("cancelling the run…");
                vec![Effect::Control(Request::Cancel)]
            }
            Some(Overlay::ConfirmApprove { ops, .. }) => {
                self.marks.clear();
                // Each by name: one decided meanwhile is refused by the
                // run, named, as a second console's approval would be.
                ops.into_iter()
                    .map(|op| Effect::Control(Request::Approve { op }))
                    .collect()
            }
            Some(Overlay::ConfirmRelease { .. }) => {
                vec![Effect::Control(Request::Release(Default::default()))]
            }
            Some(Overlay::ConfirmReleaseInstance { name }) => {
                // It may have taken work while the question was open: the
                // run would keep it anyway (idle-only), but marked retained;
                // nothing is asked of the run for an instance that is busy.
                let now = self.vm.capacity.instances.get(&name);
                if let Some(Err(why)) = now.map(|i| self.releasable(i)) {
                    self.warn(format!("nothing released: {why}"));
                    return Vec::new();
                }
                vec![Effect::Control(Request::Release(ReleaseSelect {
                    name: vec![name.to_string()],
                    ..Default::default()
                }))]
            }
            Some(Overlay::ConfirmRaise { change, .. }) => {
                vec![Effect::Control(Request::Budget {
                    raise: vec![change.clone()],
                })]
            }
            _ => Vec::new(),
        }
    }

    fn submit(&mut self) -> Vec<Effect> {
        match self.overlays.pop() {
            Some(Overlay::Filter) => {
                self.info(if self.filter.is_empty() {
                    "filter cleared".to_string()
                } else {
                    format!("filter: {}", self.filter)
                });
                Vec::new()
            }
            Some(Overlay::Jump { text }) => vec![Effect::Replay(ReplayCmd::JumpTo(text))],
            Some(Overlay::Deny { op, reason }) => {
                let reason = reason.trim().to_string();
                vec![Effect::Control(Request::Deny {
                    op,
                    reason: if reason.is_empty() {
                        Vec::new()
                    } else {
                        vec![reason]
                    },
                })]
            }
            Some(Overlay::Add(mut form)) => match self.check_add(&form) {
                Ok(req) => vec![Effect::Control(req)],
                // Refused here, before the run sees it: the form stays
                // with what was typed, on the field to fix.
                Err((field, why)) => {
                    form.focus = field;
                    form.error = Some(why);
                    self.overlays.push(Overlay::Add(form));
                    Vec::new()
                }
            },
            Some(other) => {
                self.overlays.push(other);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// The roles an added operation may have: the palette's, recruited
    /// ones included.
    pub fn addable_roles(&self) -> Vec<&str> {
        let p = &self.vm.palette;
        p.initial
            .iter()
            .chain(p.expanded.iter())
            .map(|r| &*r.role)
            .collect()
    }

    /// What the kernel would refuse, said in the form: the field to fix
    /// and why. The run's own checks still apply after.
    fn check_add(&self, form: &AddForm) -> Result<Request, (usize, String)> {
        let req = form.request();
        let Request::Add {
            after,
            role,
            instruction,
            name,
        } = &req
        else {
            return Ok(req);
        };
        if let Some(a) = after.iter().find(|a| self.vm.by_name(a).is_none()) {
            return Err((0, format!("no operation {a:?} in this run")));
        }
        if let Some(n) = name
            && self.vm.by_name(n).is_some()
        {
            if role.is_some() || instruction.is_some() {
                return Err((
                    3,
                    format!(
                        "{n} exists: leave role and instruction empty to add dependencies to it"
                    ),
                ));
            }
            if after.is_empty() {
                return Err((0, format!("{n} exists: name what it should also wait for")));
            }
            return Ok(req);
        }
        let roles = self.addable_roles();
        match role {
            None => return Err((1, format!("a role is needed; roles: {}", roles.join(", ")))),
            Some(r) if !roles.contains(&r.as_str()) => {
                return Err((
                    1,
                    format!(
                        "{r:?} is not a role of this run; roles: {}",
                        roles.join(", ")
                    ),
                ));
            }
            _ => {}
        }
        if instruction.is_none() {
            return Err((2, "say what to do".into()));
        }
        if let Some(n) = name
            && (!crate::vocab::is_valid_name(n) || crate::vocab::is_spawn_name(n))
        {
            return Err((
                3,
                format!(
                    "{n:?} is not a name for a new operation: letters, digits, '.', '_' and '-', starting with a letter or digit, and not spawn-N"
                ),
            ));
        }
        Ok(req)
    }

    /// A key typed into the text being edited.
    fn type_key(&mut self, e: KeyEvent) {
        let ch = match e.code {
            KeyCode::Char(c) if !e.modifiers.contains(KeyModifiers::CONTROL) => Some(c),
            KeyCode::Backspace => None,
            _ => return,
        };
        let edit = |s: &mut String| match ch {
            Some(c) => s.push(c),
            None => {
                s.pop();
            }
        };
        match self.overlays.last_mut() {
            Some(Overlay::Filter) => self.set_filter(edit),
            Some(Overlay::Jump { text }) => edit(text),
            Some(Overlay::Deny { reason, .. }) => edit(reason),
            Some(Overlay::Add(form)) => {
                form.error = None;
                edit(form.field_mut());
            }
            _ => {}
        }
    }

    pub fn on_mouse(&mut self, m: MouseEvent) {
        self.click(m);
        self.pick();
    }

    fn click(&mut self, m: MouseEvent) {
        if self.too_small {
            return;
        }
        let at = Position::new(m.column, m.row);
        let g = self.geometry;
        let wheel = match m.kind {
            MouseEventKind::ScrollUp => Some(Motion::Up),
            MouseEventKind::ScrollDown => Some(Motion::Down),
            _ => None,
        };
        if !self.overlays.is_empty() {
            if let Some(w) = wheel {
                self.motion(w);
            }
            return;
        }
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if let Some(col) = g.lane_cols.iter().position(|r| r.contains(at)) {
                    self.focus = Pane::Lanes;
                    self.lane_col = col;
                    let row = m.row.saturating_sub(g.lane_cols[col].y + 1) as usize;
                    let off = self.lanes[col].offset();
                    self.lanes[col].select(off + row);
                } else if g.ledger.contains(at) {
                    self.focus = Pane::Ledger;
                    self.bottom = Pane::Ledger;
                    let row = m.row.saturating_sub(g.ledger.y + 2) as usize;
                    let off = self.ledger.offset();
                    self.ledger.select(off + row);
                } else if g.capacity.contains(at) {
                    self.focus = Pane::Capacity;
                    self.bottom = Pane::Capacity;
                    // Below the border and the gauge line.
                    let top = g.capacity.y + 1 + super::ui::capacity_gauge_rows(self);
                    if let Some(row) = m.row.checked_sub(top) {
                        let off = self.capacity.offset();
                        self.capacity.select(off + row as usize);
                    }
                } else if g.budgets.contains(at) {
                    self.focus = Pane::Budgets;
                    self.bottom = Pane::Budgets;
                }
            }
            _ => {
                if let Some(w) = wheel {
                    if let Some(col) = g.lane_cols.iter().position(|r| r.contains(at)) {
                        self.focus = Pane::Lanes;
                        self.lane_col = col;
                    }
                    self.motion(w);
                }
            }
        }
    }
}
