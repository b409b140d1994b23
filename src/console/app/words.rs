//! The app's words for the header and rows: the run's state, an
//! operation's time, what it waits for, the run's name to resume it by.

use super::*;
use crate::kernel::agent::QuestionKind;

impl App {
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
            } else if let Some(c) = &r.paused_by {
                format!("paused at a breakpoint — {c}")
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

    /// `held by ana (ctl) since 12s` — who held it and when, where the log
    /// says; `held by the operator` for a hold older than what was read.
    pub fn held_words(&self, ix: u32) -> String {
        match self.vm.held_by(ix) {
            Some((by, at)) => format!(
                "held by {by} at {} ({} ago)",
                crate::operator::words::duration(at),
                crate::operator::words::short_time((self.clock - at).max(0.0))
            ),
            None => "held by the operator".into(),
        }
    }

    /// The exact blocker of an operation that has not started.
    pub fn waiting_for(&self, ix: u32) -> Option<String> {
        let n = self.vm.node(ix);
        if n.held && !n.lane.is_terminal() && n.lane != Lane::Running {
            return Some(format!("{} (o releases the hold)", self.held_words(ix)));
        }
        match n.lane {
            Lane::AwaitingApproval if n.asking.is_some() => {
                let what = n.asking.as_deref().unwrap_or_default();
                Some(match n.asked {
                    QuestionKind::Permission => {
                        format!("an operator's answer: its agent asks permission for {what}")
                    }
                    QuestionKind::Review => format!(
                        "an operator's review of its work before it lands ({what}): D shows the diff"
                    ),
                    QuestionKind::Conflict => format!(
                        "an operator to resolve its merge conflict ({what}): S opens a shell in its worktree"
                    ),
                })
            }
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
                        format!(" (+{} more)", crate::console::text::group(n - 5))
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

pub(crate) fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
