//! Problems and gates: the operations that need the operator (failed,
//! escalated, waiting for approval), oldest first, and moving to them.

use super::*;

impl App {
    /// What needs the operator, oldest first: failures (not what was
    /// skipped by design), escalations and gates waiting for approval, by
    /// when they got there.
    pub fn problems(&self) -> Vec<u32> {
        let mut v: Vec<(f64, u32)> = [Lane::Failed, Lane::Escalated, Lane::AwaitingApproval]
            .into_iter()
            .flat_map(|l| self.vm.lane(l).iter())
            .filter(|&ix| !self.vm.node(ix).skipped() && !self.is_acknowledged(ix))
            .map(|ix| (self.entered(ix), ix))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, ix)| ix).collect()
    }

    /// Whether the operator acknowledged this failure or escalation (a
    /// retried one that fails again is news again: it is no longer in the
    /// lane it was acknowledged in).
    pub fn is_acknowledged(&self, ix: u32) -> bool {
        self.acknowledged.contains(&ix)
            && matches!(self.vm.node(ix).lane, Lane::Failed | Lane::Escalated)
    }

    /// How many problems are acknowledged, and so hidden.
    pub fn acknowledged_count(&self) -> usize {
        self.acknowledged
            .iter()
            .filter(|&&ix| self.is_acknowledged(ix))
            .count()
    }

    /// `K`: acknowledges the selected failure or escalation, or takes the
    /// acknowledgement back.
    pub fn toggle_acknowledged(&mut self, ix: u32) {
        let name = self.vm.label(ix).to_string();
        let key = self
            .keymap
            .label(crate::console::keymap::Action::NextProblem);
        if self.is_acknowledged(ix) {
            self.acknowledged.remove(&ix);
            self.info(format!(
                "{name} is a problem again: {key} and the problems list show it"
            ));
        } else {
            self.acknowledged.insert(ix);
            self.info(format!(
                "acknowledged {name}: {key} and the problems list pass it by ({} acknowledged)",
                self.acknowledged_count()
            ));
        }
    }

    /// When an operation came into the lane it is in.
    pub(super) fn entered(&self, ix: u32) -> f64 {
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
            match self.acknowledged_count() {
                0 => self.info("no failures, escalations or waiting gates"),
                n => self.info(format!(
                    "no problems but the {n} acknowledged (P lists how many; K on one in its lane shows it again)"
                )),
            }
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
            Lane::AwaitingApproval if n.asking.is_some() => format!(
                "{} ({} so far)",
                self.asked_words(ix),
                crate::operator::words::duration(self.clock - self.entered(ix)),
            ),
            Lane::AwaitingApproval => format!(
                "waits for approval ({} so far){}",
                crate::operator::words::duration(self.clock - self.entered(ix)),
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

    /// What a waiting question asks, in a line: the call as it would run
    /// (`⚿ asks permission: $ rm -rf build`), what a review would land.
    pub fn asked_words(&self, ix: u32) -> String {
        let n = self.vm.node(ix);
        let head = n.asking.as_deref().unwrap_or_default();
        let detail = self
            .vm
            .asked
            .get(&ix)
            .and_then(|a| a.detail.as_deref())
            .and_then(|d| {
                d.lines()
                    .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
            });
        match (n.asked, detail) {
            (crate::kernel::agent::QuestionKind::Permission, Some(d)) => {
                format!("{} {}: {d}", n.asked.mark(), n.asked.words())
            }
            _ => n.asked.say(head),
        }
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
    pub(super) fn refresh_problems(&mut self) {
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
                let waited = crate::operator::words::duration(self.clock - self.entered(ix));
                let n = self.vm.lane(Lane::AwaitingApproval).len();
                self.info(format!(
                    "{} has waited {waited} for approval (the oldest of {n}): a approves, d denies",
                    self.vm.node(ix).name()
                ));
            }
            None => self.info("no operation waits for approval"),
        }
    }
}
