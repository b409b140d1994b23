//! Spend caps in the run (`kernel::spend`): each usage report is metered;
//! a warning level crossed is signalled once; a cap reached holds back what
//! it covers as it becomes ready to start — running attempts finish — until
//! the operator raises the cap, when the held work goes on in its order.

use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;

use super::super::agent::Usage;
use super::super::signal::SignalKind;
use super::super::spend::{Budget, CapChange, Crossed, Measure, RaisedCap, default_warn_at};
use super::Executor;

impl Executor {
    /// Meters an attempt's new usage totals; returns them as counted (never
    /// below an earlier report of the attempt), the one figure the log and
    /// everything reading it carry.
    pub(super) fn metered(&mut self, ix: NodeIndex, attempt: u32, usage: &Usage) -> Usage {
        let role = self.graph[ix].op.assignee.clone();
        let (counted, crossed) = self.meter.record(
            (ix.index() as u32, attempt),
            role.as_ref(),
            usage,
            self.budget.as_ref(),
        );
        for Crossed::Warning {
            role,
            measure,
            spent,
            cap,
            level,
        } in crossed
        {
            self.bus.emit(SignalKind::SpendWarning {
                role,
                measure,
                spent,
                cap,
                level,
            });
        }
        // The run's caps are said as soon as they are reached, not only
        // when the next operation would start.
        if let Some(b) = &self.budget
            && let Some((None, m, spent, cap)) = self.meter.over(b, None)
        {
            self.cap_reached(None, m, spent, cap);
        }
        counted
    }

    fn cap_reached(&mut self, role: Option<String>, measure: Measure, spent: f64, cap: f64) {
        if self.caps_reached.insert((role.clone(), measure)) {
            self.bus.emit(SignalKind::SpendCapReached {
                role: role.map(Arc::from),
                measure,
                spent,
                cap,
            });
        }
    }

    /// Whether a cap holds `ix` back from starting; if so it waits for a
    /// raise.
    pub(super) fn held_by_cap(&mut self, ix: NodeIndex) -> bool {
        let Some(b) = &self.budget else {
            return false;
        };
        let role = self.graph[ix].op.assignee.clone();
        let Some((scope, m, spent, cap)) = self.meter.over(b, role.as_deref()) else {
            return false;
        };
        self.cap_reached(scope, m, spent, cap);
        self.spend_wait.push(ix);
        true
    }

    /// The operator's raise: each cap changed, then what the caps held
    /// back is ready again (ahead of what became ready since), and checked
    /// against the caps once more as it starts.
    /// Every change is checked first (the one place every surface goes
    /// through): one that is not a number, or leaves a cap at 0, below it
    /// or past [`super::super::spend::MAX_CAP`], refuses them all.
    pub(super) fn raise_caps(&mut self, changes: &[CapChange]) -> Result<Vec<RaisedCap>, String> {
        let empty = Budget {
            warn_at: default_warn_at(),
            ..Budget::default()
        };
        self.budget.as_ref().unwrap_or(&empty).check(changes)?;
        let budget = self.budget.get_or_insert(empty);
        let mut raised = Vec::new();
        let mut answer = Vec::new();
        for c in changes {
            let from = budget.cap(c.role.as_deref(), c.measure);
            let cap = budget.apply(c);
            raised.push((c.role.clone(), c.measure, cap));
            answer.push(RaisedCap {
                role: c.role.as_deref().map(str::to_string),
                measure: c.measure,
                from,
                to: cap,
                spent: self.meter.spent(c.role.as_deref(), c.measure),
            });
        }
        for (role, measure, cap) in raised {
            self.caps_reached.remove(&(role.clone(), measure));
            self.meter.forget_warnings(role.as_deref(), measure);
            self.bus.emit(SignalKind::SpendCapRaised {
                role: role.map(Arc::from),
                measure,
                cap,
                by: self.acting.clone(),
            });
        }
        for ix in std::mem::take(&mut self.spend_wait).into_iter().rev() {
            self.sched.ready.push_front(ix);
        }
        self.round_active = true;
        Ok(answer)
    }
}
