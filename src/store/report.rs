//! `playdeck report RUN`: what a run did, from its event log — outcome,
//! timings and the critical path, approvals, dropped spawns by reason,
//! palette expansions and refusals, capacity busy time, warnings.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use crate::kernel::{LedgerOutcome, NodeStatus, Signal};
use crate::projection::{Node, RunProjection};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpTiming {
    pub name: Arc<str>,
    pub role: Option<Arc<str>>,
    /// succeeded, failed, escalated, skipped, or the lane it was in when
    /// the log ends.
    pub outcome: String,
    pub queued_at: f64,
    pub started_at: Option<f64>,
    pub finished_at: Option<f64>,
    /// From queued to started.
    pub waited: Option<f64>,
    /// From (the last) started to finished.
    pub ran: Option<f64>,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<Arc<str>>,
    /// The agent CLI's conversation ids its attempts were in, oldest
    /// first, each once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<Arc<str>>,
}

/// One decision the run records: on a gate, a call, a review, a
/// conflict; a retry; a send-back.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Approval {
    pub name: Arc<str>,
    /// What was decided and how: `approved`, `call denied`, `review
    /// approved: landed`, `conflict resolved`, `retried`, `sent back`.
    pub decision: &'static str,
    pub by: Arc<str>,
    pub at: f64,
    /// The reason given, or what was said sending it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
    /// What it was decided on: a gate's dependencies' outcomes, a review's
    /// commits, the call, the failure retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on: Option<Arc<str>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Dropped {
    pub emitter: Option<Arc<str>>,
    pub assignee: Option<Arc<str>>,
    pub detail: Arc<str>,
    pub at: f64,
    /// Requests this row stands for: identical drops one after another are
    /// folded into one ledger row.
    pub count: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoleEvent {
    pub role: Arc<str>,
    pub by: Option<Arc<str>>,
    pub at: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Arc<str>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InstanceUse {
    pub name: Arc<str>,
    pub profile: Arc<str>,
    pub lifetime: Arc<str>,
    pub state: Arc<str>,
    pub busy_secs: f64,
    pub operations: Vec<Arc<str>>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct UsageTotal {
    pub cost_usd: f64,
    /// Everything sent, cached input included (the `agent_usage` meaning).
    pub input_tokens: u64,
    /// The part of `input_tokens` read from a prompt cache.
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
}

impl UsageTotal {
    /// Adds one attempt's usage: the last totals its stream reported. Every
    /// format's parser already speaks the one meaning, so the sum is the
    /// same arithmetic for all of them.
    pub fn add(&mut self, u: &crate::kernel::Usage) {
        self.cost_usd += u.cost_usd.unwrap_or(0.0);
        self.input_tokens += u.input_tokens.unwrap_or(0);
        self.cached_input_tokens += u.cached_input_tokens.unwrap_or(0);
        self.output_tokens += u.output_tokens.unwrap_or(0);
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    /// `running` when the log ends before the run did.
    pub outcome: String,
    /// Why a failed run failed: `1 escalated: security-review`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    pub duration_secs: f64,
    pub resumes: u32,
    pub events: u64,
    pub lanes: BTreeMap<String, usize>,
    /// The chain of operations that decided when the run ended.
    pub critical_path: Vec<OpTiming>,
    pub operations: Vec<OpTiming>,
    pub approvals: Vec<Approval>,
    pub dropped_spawns: BTreeMap<&'static str, Vec<Dropped>>,
    pub spawns_accepted: usize,
    pub expansions: Vec<RoleEvent>,
    pub rejections: Vec<RoleEvent>,
    pub instances: Vec<InstanceUse>,
    pub warnings: Vec<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageTotal>,
    /// The spend against the caps in force at the end (raises included):
    /// `4.20/5.00 USD (84%) · 2 200/400 000 tok (1%)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// Each cap reached and each raise, in order, with who raised it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spend_caps: Vec<crate::projection::CapEvent>,
    /// The last turns of every operation that did not succeed, from its
    /// last attempt's log (filled by [`Report::with_turns`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub last_turns: Vec<OpTurns>,
    /// What each operation landed on the run's branch (`[workspace]
    /// isolation = "worktree"`), in the order they joined the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub landed: Vec<OpLanded>,
}

/// One operation's landed work.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpLanded {
    pub name: Arc<str>,
    #[serde(flatten)]
    pub work: Arc<crate::kernel::agent::LandedWork>,
}

/// What an operation's agent said last, one entry a line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpTurns {
    pub name: Arc<str>,
    pub attempt: u32,
    pub outcome: String,
    pub turns: Vec<String>,
}

/// Turns the report keeps of an operation, and operations it keeps them of.
const REPORT_TURNS: usize = 6;
const REPORT_TURN_OPS: usize = 50;
/// Characters of one turn in the report.
const TURN_CHARS: usize = 300;

impl Report {
    /// Folds a run's signals.
    pub fn from_signals(signals: &[Signal]) -> Report {
        let mut p = RunProjection::default();
        for s in signals {
            p.apply(s);
        }
        Report::from_projection(&p)
    }

    /// What the projection of a run's signals says, for people.
    pub fn from_projection(p: &RunProjection) -> Report {
        let end = p.run.elapsed;
        let operations: Vec<OpTiming> = p.nodes.iter().map(|n| timing(p, n)).collect();
        let mut approvals: Vec<Approval> = p
            .nodes
            .iter()
            .flat_map(|n| {
                n.decisions.iter().map(|d| Approval {
                    name: n.name().clone(),
                    decision: d.kind.words(d.approved),
                    by: d.by.clone(),
                    at: d.at,
                    reason: d.reason.clone(),
                    on: d.on.clone(),
                })
            })
            .collect();
        approvals.sort_by(|a, b| a.at.total_cmp(&b.at));
        let mut dropped_spawns: BTreeMap<&'static str, Vec<Dropped>> = BTreeMap::new();
        for e in &p.ledger {
            if let LedgerOutcome::Dropped { reason, detail, .. } = &e.outcome {
                dropped_spawns
                    .entry(reason.as_str())
                    .or_default()
                    .push(Dropped {
                        emitter: e.emitter_name.clone(),
                        assignee: e.assignee.clone(),
                        detail: detail.clone(),
                        at: e.elapsed,
                        count: 1 + e.repeats,
                    });
            }
        }
        let role_event = |role: &Arc<str>, by: &Option<Arc<str>>, at: f64| RoleEvent {
            role: role.clone(),
            by: by.clone(),
            at,
            reason: None,
            detail: None,
        };
        let usage = p
            .nodes
            .iter()
            .flat_map(|n| {
                n.attempts
                    .iter()
                    .filter_map(|a| a.usage.as_deref().copied())
            })
            .fold(None, |t: Option<UsageTotal>, u| {
                let mut t = t.unwrap_or_default();
                t.add(&u);
                Some(t)
            });
        let lanes = serde_json::to_value(&p.counts)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let critical_path = critical_path(p, &operations);
        Report {
            run_id: p.run.run_id.clone(),
            play: p.run.play.clone(),
            outcome: p
                .run
                .finished
                .map_or_else(|| "running".to_string(), |o| o.as_str().to_string()),
            cause: p.cause(),
            duration_secs: end,
            resumes: p.run.resumes,
            events: p.events,
            lanes,
            critical_path,
            operations,
            approvals,
            dropped_spawns,
            spawns_accepted: p.spawn_accepted,
            expansions: p
                .palette
                .expanded
                .iter()
                .map(|r| role_event(&r.role, &r.by, r.at))
                .collect(),
            rejections: p
                .palette
                .rejections
                .iter()
                .map(|r| RoleEvent {
                    reason: Some(r.reason.as_str()),
                    detail: Some(r.detail.clone()),
                    ..role_event(&r.role, &r.by, r.at)
                })
                .collect(),
            instances: p
                .capacity
                .instances
                .values()
                .map(|x| InstanceUse {
                    name: x.name.clone(),
                    profile: x.profile.clone(),
                    lifetime: Arc::from(x.lifetime.as_str()),
                    state: Arc::from(x.state.as_str()),
                    busy_secs: x.busy_until(end),
                    operations: x.operations.clone(),
                })
                .collect(),
            warnings: p.warnings.iter().map(|(_, w)| w.clone()).collect(),
            usage,
            budget: p.spend.budget.as_ref().and_then(|b| {
                crate::kernel::spend::spend_words((p.spend.usd, p.spend.tokens), Some(b))
            }),
            spend_caps: p.spend.caps.clone(),
            last_turns: Vec::new(),
            landed: p
                .nodes
                .iter()
                .flat_map(|n| {
                    n.landed.iter().map(|w| OpLanded {
                        name: n.name().clone(),
                        work: w.clone(),
                    })
                })
                .collect(),
        }
    }

    /// Adds the last turns of each operation that ran an agent and did not
    /// succeed (at most [`REPORT_TURN_OPS`] of them), read from the run's
    /// `logs`.
    pub fn with_turns(mut self, logs: &std::path::Path) -> Report {
        let mut shown = 0;
        for o in &self.operations {
            if o.attempts == 0 || matches!(o.outcome.as_str(), "succeeded" | "skipped") {
                continue;
            }
            if shown == REPORT_TURN_OPS {
                break;
            }
            let Some((entries, _)) =
                crate::agents::transcript::last_turns(logs, &o.name, o.attempts, REPORT_TURNS)
            else {
                continue;
            };
            if entries.is_empty() {
                continue;
            }
            shown += 1;
            self.last_turns.push(OpTurns {
                name: o.name.clone(),
                attempt: o.attempts,
                outcome: o.outcome.clone(),
                turns: entries.iter().map(|e| e.one_line(TURN_CHARS)).collect(),
            });
        }
        self
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report serialises")
    }

    /// The report for people.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let t = |x: Option<f64>| x.map_or("—".to_string(), |v| format!("{v:.1}s"));
        let _ = writeln!(s, "# Run {} — {}\n", self.run_id, self.play);
        let _ = writeln!(
            s,
            "**Outcome:** {}{} after {:.1}s · {} events{}\n",
            self.outcome,
            self.cause
                .as_ref()
                .map(|c| format!(" — {c}"))
                .unwrap_or_default(),
            self.duration_secs,
            self.events,
            match self.resumes {
                0 => String::new(),
                1 => " · resumed once".into(),
                n => format!(" · resumed {n} times"),
            }
        );
        let lanes: Vec<String> = self
            .lanes
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(l, n)| format!("{} {n}", l.replace('_', " ")))
            .collect();
        let _ = writeln!(s, "**Lanes:** {}\n", lanes.join(" · "));
        if let Some(u) = &self.usage {
            let _ = writeln!(
                s,
                "**Agent usage:** ${:.4} · {} tokens in ({} of them cached) · {} out\n",
                u.cost_usd, u.input_tokens, u.cached_input_tokens, u.output_tokens
            );
        }
        if let Some(b) = &self.budget {
            let _ = writeln!(s, "**Budget:** {b}\n");
        }
        if !self.spend_caps.is_empty() {
            let _ = writeln!(s, "**Spend caps:**\n");
            for c in &self.spend_caps {
                let by =
                    c.by.as_deref()
                        .map(|b| format!(" by {}", crate::printable::printable(b)))
                        .unwrap_or_default();
                let _ = writeln!(s, "- {:.1}s {}: {}{by}", c.at, c.event, c.words);
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "## Critical path\n");
        if self.critical_path.is_empty() {
            let _ = writeln!(s, "No operation ran.\n");
        } else {
            let _ = writeln!(
                s,
                "| operation | role | started | finished | ran |\n| --- | --- | --- | --- | --- |"
            );
            for o in &self.critical_path {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    o.name,
                    o.role.as_deref().unwrap_or("—"),
                    t(o.started_at),
                    t(o.finished_at),
                    t(o.ran)
                );
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "## Operations\n");
        let _ = writeln!(
            s,
            "| operation | role | outcome | queued | waited | ran | attempts | instance |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for o in &self.operations {
            let outcome = match &o.error {
                Some(e) => format!("{} ({})", o.outcome, e.replace('|', "/")),
                None => o.outcome.clone(),
            };
            let name = match &o.spawned_by {
                Some(p) => format!("{} ↳ {p}", o.name),
                None => o.name.to_string(),
            };
            let _ = writeln!(
                s,
                "| {name} | {} | {outcome} | {:.1}s | {} | {} | {} | {} |",
                o.role.as_deref().unwrap_or("—"),
                o.queued_at,
                t(o.waited),
                t(o.ran),
                o.attempts,
                o.instance.as_deref().unwrap_or("—")
            );
        }
        let _ = writeln!(s, "\n## Approvals\n");
        if self.approvals.is_empty() {
            let _ = writeln!(s, "None.");
        }
        for a in &self.approvals {
            let _ = writeln!(
                s,
                "- {} **{}** by {} at {:.1}s{}{}",
                a.name,
                a.decision,
                a.by,
                a.at,
                a.on.as_ref()
                    .map(|o| format!(" — on {}", md_line(o)))
                    .unwrap_or_default(),
                a.reason
                    .as_ref()
                    .map(|r| format!(": {}", md_line(r)))
                    .unwrap_or_default()
            );
        }
        let count = |rows: &[Dropped]| rows.iter().map(|d| d.count as usize).sum::<usize>();
        let dropped: usize = self.dropped_spawns.values().map(|r| count(r)).sum();
        let _ = writeln!(
            s,
            "\n## Spawns\n\n{} accepted, {dropped} dropped.\n",
            self.spawns_accepted
        );
        for (reason, rows) in &self.dropped_spawns {
            let _ = writeln!(s, "### {reason} ({})\n", count(rows));
            for d in rows {
                let _ = writeln!(
                    s,
                    "- {:.1}s {} → {}: {}{}",
                    d.at,
                    d.emitter.as_deref().unwrap_or("—"),
                    d.assignee.as_deref().unwrap_or("—"),
                    d.detail,
                    if d.count > 1 {
                        format!(" (×{})", d.count)
                    } else {
                        String::new()
                    }
                );
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "## Palette\n");
        if self.expansions.is_empty() && self.rejections.is_empty() {
            let _ = writeln!(s, "No expansions or refusals.");
        }
        for e in &self.expansions {
            let _ = writeln!(
                s,
                "- expanded **{}** at {:.1}s{}",
                e.role,
                e.at,
                e.by.as_ref()
                    .map(|b| format!(", recruited by {b}"))
                    .unwrap_or_default()
            );
        }
        for e in &self.rejections {
            let _ = writeln!(
                s,
                "- refused **{}** ({}) at {:.1}s: {}",
                e.role,
                e.reason.unwrap_or(""),
                e.at,
                e.detail.as_deref().unwrap_or("")
            );
        }
        let _ = writeln!(s, "\n## Capacity\n");
        if self.instances.is_empty() {
            let _ = writeln!(s, "No capacity instances.");
        } else {
            let _ = writeln!(
                s,
                "| instance | profile | lifetime | busy | operations | last state |\n| --- | --- | --- | --- | --- | --- |"
            );
            for x in &self.instances {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.1}s | {} | {} |",
                    x.name,
                    x.profile,
                    x.lifetime,
                    x.busy_secs,
                    x.operations.join(", "),
                    x.state
                );
            }
        }
        if !self.last_turns.is_empty() {
            let _ = writeln!(
                s,
                "\n## Last turns\n\nWhat the agent of each operation that did not succeed said last (`playdeck ctl RUN follow OP` has all of it).\n"
            );
            for o in &self.last_turns {
                let _ = writeln!(s, "### {} (attempt {}, {})\n", o.name, o.attempt, o.outcome);
                for t in &o.turns {
                    let _ = writeln!(s, "- {t}");
                }
                let _ = writeln!(s);
            }
        }
        if !self.landed.is_empty() {
            let branch = &self.landed[0].work.branch;
            let _ = writeln!(
                s,
                "\n## Landed\n\nWhat each operation's work brought to the run's branch {branch} (`playdeck land {} --into BRANCH` brings it into yours).\n",
                self.run_id
            );
            for l in &self.landed {
                let w = &l.work;
                let _ = writeln!(
                    s,
                    "### {} ({} at {})\n",
                    l.name,
                    w.mode.as_str(),
                    w.commit.as_deref().unwrap_or("-")
                );
                for c in &w.commits {
                    let _ = writeln!(s, "- commit {c}");
                }
                if !w.files.is_empty() {
                    let _ = writeln!(s, "- files: {}", w.files.join(", "));
                }
                let _ = writeln!(s);
            }
        }
        let _ = writeln!(s, "\n## Warnings\n");
        if self.warnings.is_empty() {
            let _ = writeln!(s, "None.");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "- {w}");
        }
        s
    }
}

/// Text on one Markdown line: its lines joined, an agent's escapes gone.
fn md_line(s: &str) -> String {
    crate::printable::printable(s).into_owned()
}

/// An operation's timings as the report shows them.
fn timing(p: &RunProjection, n: &Node) -> OpTiming {
    let outcome = match n.status {
        NodeStatus::Succeeded => "succeeded",
        NodeStatus::Failed => "failed",
        NodeStatus::Escalated => "escalated",
        NodeStatus::Skipped => "skipped",
        NodeStatus::Running => "running",
        NodeStatus::AwaitingApproval => "awaiting approval",
        NodeStatus::Pending | NodeStatus::Ready => "queued",
    };
    let settled = n.status.is_terminal();
    OpTiming {
        name: n.name().clone(),
        role: n.role().cloned(),
        outcome: outcome.into(),
        queued_at: n.queued_at,
        started_at: n.started_at,
        finished_at: n.finished_at.filter(|_| settled),
        waited: n.started_at.map(|s| s - n.queued_at),
        ran: match (n.started_at, n.finished_at) {
            (Some(s), Some(f)) if settled && n.status != NodeStatus::Skipped => Some(f - s),
            _ => None,
        },
        attempts: n.attempt,
        error: n.error.clone(),
        instance: n.current().and_then(|a| a.instance.clone()),
        spawned_by: n.parent().and_then(|id| p.name_of(&id)),
        sessions: {
            let mut ids: Vec<Arc<str>> = Vec::new();
            for id in n.attempts.iter().filter_map(|a| a.session.as_ref()) {
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
            ids
        },
    }
}

/// From the operation that finished last, back through the dependency
/// that released each one (the latest to finish before it started).
fn critical_path(p: &RunProjection, ops: &[OpTiming]) -> Vec<OpTiming> {
    let Some(mut cur) = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.started_at.is_some() && o.finished_at.is_some())
        .max_by(|a, b| {
            a.1.finished_at
                .partial_cmp(&b.1.finished_at)
                .expect("finite")
        })
        .map(|(i, _)| i)
    else {
        return Vec::new();
    };
    let mut path = vec![ops[cur].clone()];
    loop {
        let start = ops[cur].started_at.unwrap_or(ops[cur].queued_at);
        let prev = p.nodes[cur]
            .predecessors()
            .filter_map(|d| p.ix(&d).map(|i| i as usize))
            .filter(|&i| ops[i].finished_at.is_some_and(|f| f <= start + 1e-9))
            .max_by(|&a, &b| {
                ops[a]
                    .finished_at
                    .partial_cmp(&ops[b].finished_at)
                    .expect("finite")
            });
        match prev {
            Some(prev) if prev != cur && path.len() < ops.len() => {
                path.push(ops[prev].clone());
                cur = prev;
            }
            _ => break,
        }
    }
    path.reverse();
    path
}

/// Why a report could not be written: the log could not be read, or the
/// report file not written (named, with the system's reason).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Log(#[from] super::resume::ResumeError),
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// Writes `report.md` into a run directory (what the log says so far).
pub fn write_for(dir: &std::path::Path) -> Result<std::path::PathBuf, ReportError> {
    let signals = super::resume::read_log(&dir.join("events.jsonl"))?;
    let md = Report::from_signals(&signals)
        .with_turns(&dir.join("logs"))
        .to_markdown();
    let path = dir.join("report.md");
    match crate::files::write_atomic(&path, md.as_bytes()) {
        Ok(()) => Ok(path),
        Err(source) => Err(ReportError::Write { path, source }),
    }
}

#[cfg(test)]
mod usage_tests {
    use super::UsageTotal;
    use crate::kernel::Usage;

    /// Attempts of different formats add up field by field: the parsers
    /// already gave every one the same meaning.
    #[test]
    fn usage_of_every_format_sums_the_same_way() {
        let claude = Usage {
            cost_usd: Some(0.5),
            input_tokens: Some(61_778),
            cached_input_tokens: Some(53_016),
            output_tokens: Some(377),
        };
        let copilot = Usage::default();
        let gemini_old = Usage {
            input_tokens: Some(11_068),
            output_tokens: Some(44),
            ..Usage::default()
        };
        let mut t = UsageTotal::default();
        for u in [claude, copilot, gemini_old] {
            t.add(&u);
        }
        assert_eq!(
            (t.input_tokens, t.cached_input_tokens, t.output_tokens),
            (72_846, 53_016, 421)
        );
        assert!((t.cost_usd - 0.5).abs() < 1e-12);
    }
}
