//! What can be used now, and why not: [`App::available`] is the one place
//! that decides, so the footer, help and [`App::act`] agree.

use super::*;
use crate::kernel::agent::QuestionKind;

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
                    Some(n) if n.lane == Lane::Failed && !n.skipped() => Ok(()),
                    Some(n) => Err(format!(
                        "{} is neither awaiting approval nor failed; gates are marked to approve several at once, failures to retry them",
                        n.name()
                    )
                    .into()),
                    None => Err("select a gate or a failed operation to mark it".into()),
                }
            }
            Acknowledge => match self.target_under(top).map(|ix| (ix, self.vm.node(ix))) {
                Some((_, n)) if matches!(n.lane, Lane::Failed | Lane::Escalated) && !n.skipped() => {
                    Ok(())
                }
                Some((_, n)) => Err(format!(
                    "{} has not failed or escalated; only those are acknowledged (a gate waits for a decision)",
                    n.name()
                )
                .into()),
                None => Err("select a failed or escalated operation to acknowledge it".into()),
            },
            MarkAll => {
                self.not_replay(a)?;
                if self.shown_gates().is_empty() {
                    return Err(if self.filter.is_empty() {
                        "no gate is awaiting approval".into()
                    } else {
                        format!("no gate awaiting approval matches /{}", self.filter).into()
                    });
                }
                Ok(())
            }
            // Marked gates, or the oldest from anywhere on the main screen:
            // asked by name first.
            // Marked failures, retried together.
            Retry if !self.marked(Lane::Failed).is_empty() && top.is_none() => {
                self.not_replay(a)?;
                self.still_running()
            }
            Approve if !self.marked(Lane::AwaitingApproval).is_empty() && top.is_none() => {
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
            // From a review's diff view: the run judges what it showed,
            // whatever the lanes show by now.
            Approve
                if matches!(top, Some(crate::console::overlay::Overlay::Diff(v)) if v.basis.is_some()) =>
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
                    // An escalation is retried in the live run (its
                    // dependants must not have begun: the run says so).
                    Retry if n.lane == Lane::Escalated && finished => Err(format!(
                        "{name} escalated in a run that has finished; an escalation is retried while its run is live"
                    )
                    .into()),
                    Retry
                        if (n.lane != Lane::Failed || n.skipped())
                            && n.lane != Lane::Escalated =>
                    {
                        Err(format!(
                            "{name} has not failed; only failed, denied or escalated operations can be retried"
                        )
                        .into())
                    }
                    _ => Ok(()),
                }
            }
            Talk => {
                self.not_replay(a)?;
                self.still_running()?;
                let Some(ix) = self.target_under(top) else {
                    return Err("select a running or failed operation to talk to its agent".into());
                };
                let n = self.vm.node(ix);
                match n.lane {
                    Lane::Running | Lane::Succeeded => Ok(()),
                    Lane::Failed if !n.skipped() => Ok(()),
                    // Work waiting for review or clashing: sent back.
                    Lane::AwaitingApproval if n.waits_with_work() => Ok(()),
                    _ => Err(format!(
                        "{} is not running, failed, succeeded or waiting for review: only a running agent can be talked to, and finished or reviewed work sent back",
                        n.name()
                    )
                    .into()),
                }
            }
            FollowAgent | PageOutput | WorktreeDiff | Shell => {
                self.agent_target(a, top).map(|_| ())
            }
            Breakpoint | RunToHere => {
                self.not_replay(a)?;
                self.still_running()?;
                let Some(ix) = self.target_under(top) else {
                    return Err("select an operation to break before".into());
                };
                let n = self.vm.node(ix);
                if a == RunToHere && n.lane != Lane::Queued {
                    return Err(format!(
                        "{} is not queued: the run runs to an operation that has not started",
                        n.name()
                    )
                    .into());
                }
                Ok(())
            }
            ClearBreak => match top {
                Some(Overlay::Breakpoints { scroll }) if scroll.selected().is_some() => {
                    self.not_replay(a)?;
                    self.still_running()
                }
                Some(Overlay::Breakpoints { .. }) => Err("no breakpoint to clear".into()),
                _ => Err("x clears a breakpoint in the breakpoints list (B)".into()),
            },
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
                                self.state_age(i)
                            )
                            .into()),
                            _ => Err(format!(
                                "{name} runs no operation: it is {}",
                                self.state_words(i)
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
                    if *all || self.inspector_collapsible(*node) =>
                {
                    Ok(())
                }
                _ => Err("nothing here is collapsed".into()),
            },
            NextField | PrevField if !matches!(top, Some(Overlay::Add(_))) => {
                Err("one field only".into())
            }
            SendBack => match top {
                Some(Overlay::Deny { op, .. }) if self.sends_back(op) => Ok(()),
                _ => Err(
                    "send back is for work waiting for review or clashing as it landed: it goes back to its agent with what was typed"
                        .into(),
                ),
            },
            _ => Ok(()),
        }
    }

    /// Whether the operation named `op` waits with its work for review or
    /// with a conflict: denying it may instead send it back.
    pub fn sends_back(&self, op: &str) -> bool {
        self.vm.by_name(op).is_some_and(|n| n.waits_with_work())
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
            .any(|i| i.state == InstanceState::Ready && self.kept_by(i).is_none())
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
                    self.state_words(i)
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
    pub(super) fn agent_target(
        &self,
        a: Action,
        top: Option<&Overlay>,
    ) -> Result<u32, Unavailable> {
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

    pub(super) fn live_run(&self, a: Action) -> Result<(), Unavailable> {
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
    pub(super) fn still_running(&self) -> Result<(), Unavailable> {
        if self.vm.run.finished.is_some() {
            return Err("the run has finished; only viewing works now".into());
        }
        Ok(())
    }

    pub(super) fn not_replay(&self, a: Action) -> Result<(), Unavailable> {
        if self.hooks.read_only {
            return Err(format!(
                "read-only console (attached with --read-only): it watches, it cannot {}; `playdeck attach {}` can",
                info(a).label,
                self.resume_name()
            )
            .into());
        }
        if let Some((at, of)) = self.catching_up() {
            return Err(format!(
                "catching up with the run ({} of {} events): {} acts once the console shows the present",
                crate::console::text::group(at as usize),
                crate::console::text::group(of as usize),
                info(a).label
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
                Action::Talk => format!("playdeck ctl {run} say{op} TEXT"),
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
            Action::Approve
                if self.overlays.is_empty() && !self.marked(Lane::AwaitingApproval).is_empty() =>
            {
                return Some(format!(
                    "{} marked",
                    self.marked(Lane::AwaitingApproval).len()
                ));
            }
            Action::Retry if self.overlays.is_empty() && !self.marked(Lane::Failed).is_empty() => {
                return Some(format!("{} marked", self.marked(Lane::Failed).len()));
            }
            // From anywhere on the main screen: the gate it would ask about.
            Action::Approve | Action::Deny => self.gate_under(self.overlays.last()),
            Action::Hold | Action::Retry | Action::Mark | Action::Talk | Action::Acknowledge => {
                self.target()
            }
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
                return Some(crate::console::text::fit_middle(
                    short_instance(&i.name, &self.vm.run.run_id),
                    TARGET_WIDTH,
                ));
            }
            _ => None,
        }?;
        Some(crate::console::text::fit_middle(
            &self.vm.label(ix),
            TARGET_WIDTH,
        ))
    }

    /// The footer's word for `a` now (the table's label, or what it would
    /// do to the selection).
    pub fn action_label(&self, a: Action) -> &'static str {
        // What a review or a conflict waits for, said on its keys.
        let asked = self
            .target()
            .map(|ix| self.vm.node(ix))
            .filter(|n| n.asking.is_some())
            .map(|n| n.asked);
        match a {
            Action::Approve if asked == Some(QuestionKind::Review) => "land",
            Action::Approve if asked == Some(QuestionKind::Conflict) => "land (resolved)",
            Action::Deny if asked == Some(QuestionKind::Review) => "reject",
            Action::Deny if asked == Some(QuestionKind::Conflict) => "leave unlanded",
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
            Action::RawLines if matches!(self.overlays.last(), Some(Overlay::Follow(f)) if f.raw) => {
                "conversation"
            }
            Action::Submit => match self.overlays.last() {
                Some(Overlay::Deny { op, .. }) if self.sends_back(op) => "reject",
                Some(Overlay::Deny { .. }) => "deny",
                Some(Overlay::Say { .. }) => "say",
                Some(Overlay::DiffNote { .. }) => "note",
                Some(Overlay::Add(_)) => "add",
                Some(Overlay::Jump { .. }) => "jump",
                _ => "done",
            },
            _ => info(a).label,
        }
    }
}
