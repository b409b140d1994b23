//! `playdeck report RUN`: what a run did, from its event log — outcome,
//! timings and the critical path, approvals, dropped spawns by reason,
//! palette expansions and refusals, capacity busy time, warnings.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use crate::kernel::{OpId, Signal, SignalKind};

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
    #[serde(skip)]
    deps: Vec<OpId>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Approval {
    pub name: Arc<str>,
    pub decision: &'static str,
    pub by: Arc<str>,
    pub at: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Dropped {
    pub emitter: Option<Arc<str>>,
    pub assignee: Option<Arc<str>>,
    pub detail: Arc<str>,
    pub at: f64,
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
    #[serde(skip)]
    busy_since: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct UsageTotal {
    pub cost_usd: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    /// `running` when the log ends before the run did.
    pub outcome: String,
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
}

impl Report {
    /// Folds a run's signals.
    pub fn from_signals(signals: &[Signal]) -> Report {
        let mut r = Report {
            run_id: Arc::from(""),
            play: Arc::from(""),
            outcome: "running".into(),
            duration_secs: 0.0,
            resumes: 0,
            events: signals.len() as u64,
            lanes: BTreeMap::new(),
            critical_path: Vec::new(),
            operations: Vec::new(),
            approvals: Vec::new(),
            dropped_spawns: BTreeMap::new(),
            spawns_accepted: 0,
            expansions: Vec::new(),
            rejections: Vec::new(),
            instances: Vec::new(),
            warnings: Vec::new(),
            usage: None,
        };
        let mut index: HashMap<OpId, usize> = HashMap::new();
        // Totals per attempt: each attempt's agent reports its own.
        let mut usage: HashMap<(OpId, u32), crate::kernel::Usage> = HashMap::new();
        for s in signals {
            let at = s.elapsed;
            r.duration_secs = r.duration_secs.max(at);
            if let Some(node) = s.kind.node()
                && !index.contains_key(&node.op_id)
            {
                let spawned_by = node
                    .parent_id
                    .and_then(|p| index.get(&p))
                    .map(|&i| r.operations[i].name.clone());
                index.insert(node.op_id, r.operations.len());
                r.operations.push(OpTiming {
                    name: node.name.clone(),
                    role: None,
                    outcome: "queued".into(),
                    queued_at: at,
                    started_at: None,
                    finished_at: None,
                    waited: None,
                    ran: None,
                    attempts: 0,
                    error: None,
                    instance: None,
                    spawned_by,
                    deps: node
                        .depends_on
                        .iter()
                        .copied()
                        .chain(node.parent_id)
                        .collect(),
                });
            }
            match &s.kind {
                SignalKind::RunStarted { run_id, play, .. } => {
                    r.run_id = run_id.clone();
                    r.play = play.clone();
                }
                SignalKind::Resumed { .. } => r.resumes += 1,
                SignalKind::Queued { node, role, .. } => {
                    if let Some(o) = op(&mut r, &index, &node.op_id) {
                        o.role = role.clone();
                        if o.started_at.is_none() {
                            o.queued_at = at;
                        }
                        o.outcome = "queued".into();
                    }
                }
                SignalKind::Started {
                    node,
                    attempt,
                    instance,
                    ..
                } => {
                    if let Some(o) = op(&mut r, &index, &node.op_id) {
                        o.started_at = Some(at);
                        o.waited = Some(at - o.queued_at);
                        o.attempts = *attempt;
                        o.instance = instance.clone();
                        o.outcome = "running".into();
                    }
                }
                SignalKind::Completed { node, .. } => {
                    settle(op(&mut r, &index, &node.op_id), "succeeded", at, None)
                }
                SignalKind::Escalated { node, .. } => {
                    settle(op(&mut r, &index, &node.op_id), "escalated", at, None)
                }
                SignalKind::Failed { node, error, .. } => settle(
                    op(&mut r, &index, &node.op_id),
                    "failed",
                    at,
                    Some(error.clone()),
                ),
                SignalKind::Skipped { node, .. } => {
                    settle(op(&mut r, &index, &node.op_id), "skipped", at, None)
                }
                SignalKind::AwaitingApproval { node } => {
                    if let Some(o) = op(&mut r, &index, &node.op_id) {
                        o.outcome = "awaiting approval".into();
                    }
                }
                SignalKind::Approved { node, by } => r.approvals.push(Approval {
                    name: node.name.clone(),
                    decision: "approved",
                    by: by.clone(),
                    at,
                    reason: None,
                }),
                SignalKind::Denied { node, by, reason } => r.approvals.push(Approval {
                    name: node.name.clone(),
                    decision: "denied",
                    by: by.clone(),
                    at,
                    reason: Some(reason.clone()),
                }),
                SignalKind::Spawned { .. } => r.spawns_accepted += 1,
                SignalKind::SpawnDropped {
                    reason,
                    assignee,
                    emitter_id,
                    detail,
                    ..
                } => {
                    let emitter = emitter_id
                        .and_then(|e| index.get(&e))
                        .map(|&i| r.operations[i].name.clone());
                    r.dropped_spawns
                        .entry(reason.as_str())
                        .or_default()
                        .push(Dropped {
                            emitter,
                            assignee: assignee.clone(),
                            detail: detail.clone(),
                            at,
                        });
                }
                SignalKind::RoleProvisioned {
                    role,
                    origin: crate::kernel::RoleOrigin::Expanded,
                    by,
                    ..
                } => r.expansions.push(RoleEvent {
                    role: role.clone(),
                    by: by.clone(),
                    at,
                    reason: None,
                    detail: None,
                }),
                SignalKind::ExpansionRejected {
                    role,
                    reason,
                    detail,
                    by,
                } => r.rejections.push(RoleEvent {
                    role: role.clone(),
                    by: by.clone(),
                    at,
                    reason: Some(reason.as_str()),
                    detail: Some(detail.clone()),
                }),
                SignalKind::Instance {
                    name,
                    profile,
                    state,
                    lifetime,
                    op: running,
                    ..
                } => {
                    let i = match r.instances.iter().position(|x| x.name == *name) {
                        Some(i) => i,
                        None => {
                            r.instances.push(InstanceUse {
                                name: name.clone(),
                                profile: profile.clone(),
                                lifetime: lifetime.clone(),
                                state: state.clone(),
                                busy_secs: 0.0,
                                operations: Vec::new(),
                                busy_since: None,
                            });
                            r.instances.len() - 1
                        }
                    };
                    let x = &mut r.instances[i];
                    if let Some(since) = x.busy_since.take() {
                        x.busy_secs += (at - since).max(0.0);
                    }
                    if &**state == "busy" {
                        x.busy_since = Some(at);
                        if let Some(o) = running {
                            x.operations.push(o.clone());
                        }
                    }
                    x.state = state.clone();
                }
                SignalKind::AgentUsage {
                    op_id,
                    attempt,
                    usage: u,
                    ..
                } => {
                    usage.insert((*op_id, *attempt), *u);
                }
                SignalKind::Retried { node, .. } => {
                    // Waiting starts again with the new attempt.
                    if let Some(o) = op(&mut r, &index, &node.op_id) {
                        o.queued_at = at;
                        o.outcome = "queued".into();
                        o.error = None;
                    }
                }
                SignalKind::Warning { message, .. } => r.warnings.push(message.clone()),
                SignalKind::RunFinished { outcome, counts } => {
                    r.outcome = outcome.as_str().to_string();
                    r.lanes = serde_json::to_value(counts)
                        .ok()
                        .and_then(|v| serde_json::from_value(v).ok())
                        .unwrap_or_default();
                }
                _ => {}
            }
        }
        let end = r.duration_secs;
        for x in &mut r.instances {
            if let Some(since) = x.busy_since.take() {
                x.busy_secs += (end - since).max(0.0);
            }
        }
        if r.lanes.is_empty() {
            for o in &r.operations {
                *r.lanes.entry(o.outcome.replace(' ', "_")).or_default() += 1;
            }
        }
        if !usage.is_empty() {
            let mut t = UsageTotal::default();
            for u in usage.values() {
                t.cost_usd += u.cost_usd.unwrap_or(0.0);
                t.input_tokens += u.input_tokens.unwrap_or(0);
                t.output_tokens += u.output_tokens.unwrap_or(0);
            }
            r.usage = Some(t);
        }
        r.critical_path = critical_path(&r.operations, &index);
        r
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
            "**Outcome:** {} after {:.1}s · {} events{}\n",
            self.outcome,
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
                "**Agent usage:** ${:.4} · {} tokens in · {} out\n",
                u.cost_usd, u.input_tokens, u.output_tokens
            );
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
                "- {} **{}** by {} at {:.1}s{}",
                a.name,
                a.decision,
                a.by,
                a.at,
                a.reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            );
        }
        let dropped: usize = self.dropped_spawns.values().map(Vec::len).sum();
        let _ = writeln!(
            s,
            "\n## Spawns\n\n{} accepted, {dropped} dropped.\n",
            self.spawns_accepted
        );
        for (reason, rows) in &self.dropped_spawns {
            let _ = writeln!(s, "### {reason} ({})\n", rows.len());
            for d in rows {
                let _ = writeln!(
                    s,
                    "- {:.1}s {} → {}: {}",
                    d.at,
                    d.emitter.as_deref().unwrap_or("—"),
                    d.assignee.as_deref().unwrap_or("—"),
                    d.detail
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

fn op<'a>(r: &'a mut Report, index: &HashMap<OpId, usize>, id: &OpId) -> Option<&'a mut OpTiming> {
    index.get(id).map(|&i| &mut r.operations[i])
}

fn settle(o: Option<&mut OpTiming>, outcome: &str, at: f64, error: Option<Arc<str>>) {
    if let Some(o) = o {
        o.outcome = outcome.into();
        o.finished_at = Some(at);
        o.ran = o.started_at.map(|s| at - s);
        o.error = error;
    }
}

/// From the operation that finished last, back through the dependency
/// that released each one (the latest to finish before it started).
fn critical_path(ops: &[OpTiming], index: &HashMap<OpId, usize>) -> Vec<OpTiming> {
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
        let prev = ops[cur]
            .deps
            .iter()
            .filter_map(|d| index.get(d).copied())
            .filter(|&i| ops[i].finished_at.is_some_and(|f| f <= start + 1e-9))
            .max_by(|&a, &b| {
                ops[a]
                    .finished_at
                    .partial_cmp(&ops[b].finished_at)
                    .expect("finite")
            });
        match prev {
            Some(p) if p != cur && path.len() < ops.len() => {
                path.push(ops[p].clone());
                cur = p;
            }
            _ => break,
        }
    }
    path.reverse();
    path
}

/// Writes `report.md` into a run directory (what the log says so far).
pub fn write_for(dir: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let signals = super::resume::read_log(&dir.join("events.jsonl"))?;
    let md = Report::from_signals(&signals).to_markdown();
    let path = dir.join("report.md");
    super::write_atomic(&path, md.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}
