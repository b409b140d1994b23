//! Lifecycle signals as lines for people (`--format human`).

use super::*;
use crate::kernel::agent::QuestionKind;

/// Formats lifecycle signals for people.
#[derive(Default)]
pub struct HumanPrinter {
    /// The workers last printed, and which were silent or draining: a
    /// line when one joins, leaves, goes silent or drains, not each time
    /// their load moves.
    pub(super) workers: Option<Vec<(Arc<str>, bool, bool)>>,
}

impl HumanPrinter {
    pub fn line(&mut self, s: &Signal) -> Option<String> {
        let t = format!("{:>7.2}s", s.elapsed);
        match &s.kind {
            SignalKind::RunStarted { .. }
            | SignalKind::OperatorAction { .. }
            | SignalKind::Resumed { .. }
            | SignalKind::StorageFailed { .. }
            | SignalKind::StorageRecovered
            | SignalKind::RunPaused { .. }
            | SignalKind::Breakpoints { .. }
            | SignalKind::RunResumed
            | SignalKind::Stepped { .. }
            | SignalKind::RoundEnded { .. }
            | SignalKind::Warning { .. }
            | SignalKind::RunFinished { .. } => self.run_line(s, &t),
            SignalKind::ProviderHeld { .. }
            | SignalKind::ProviderReleased { .. }
            | SignalKind::SpendWarning { .. }
            | SignalKind::SpendCapReached { .. }
            | SignalKind::SpendCapRaised { .. } => self.spend_line(s, &t),
            SignalKind::Spawned { .. }
            | SignalKind::SpawnDropped { .. }
            | SignalKind::RoleProvisioned { .. }
            | SignalKind::RoleReserved { .. }
            | SignalKind::ExpansionRejected { .. }
            | SignalKind::Budget { .. } => self.growth_line(s, &t),
            SignalKind::CapacityWait { .. }
            | SignalKind::Instance { .. }
            | SignalKind::CapacityReleased { .. }
            | SignalKind::AgentActivity { .. }
            | SignalKind::Workers { .. } => self.capacity_line(s, &t),
            _ => self.op_line(s, &t),
        }
    }

    /// The run: started, resumed, paused, stepped, rounds, storage, warnings, the end, and who acted.
    fn run_line(&self, s: &Signal, t: &str) -> Option<String> {
        Some(match &s.kind {
            SignalKind::RunStarted {
                play,
                run_id,
                operations,
                ..
            } => {
                format!("{t}  run {run_id} started: \"{play}\", {operations} operations")
            }
            SignalKind::OperatorAction { by, action, .. } => {
                format!("{t}  {:<18} {action} — by {by}", "· operator")
            }
            SignalKind::Resumed {
                from_seq,
                reattempted,
                ..
            } => {
                let again = if reattempted.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = reattempted.iter().map(|s| &**s).collect();
                    format!("; new attempt of {}", names.join(", "))
                };
                format!("{t}  run resumed after event {from_seq}{again}")
            }
            SignalKind::StorageFailed { error } => format!(
                "{t}  storage: {error} — nothing new starts until the event log can be written"
            ),
            SignalKind::StorageRecovered => {
                format!("{t}  storage: the event log is written again; the run goes on")
            }
            SignalKind::RunPaused { cause: None } => format!("{t}  run paused"),
            SignalKind::RunPaused { cause: Some(c) } => {
                format!("{t}  run paused: {c} — type `step` or `resume`")
            }
            SignalKind::Breakpoints { set } if set.is_empty() => {
                format!("{t}  breakpoints: none")
            }
            SignalKind::Breakpoints { set } => format!("{t}  breakpoints: {}", set.join(", ")),
            SignalKind::RunResumed => format!("{t}  run resumed"),
            SignalKind::Stepped { .. } => format!("{t}  step"),
            SignalKind::RoundEnded { round } => format!("{t}  round {round} drained"),
            SignalKind::Warning { message, .. } => format!("{t}  warning: {message}"),
            SignalKind::Workspace {
                branch,
                base,
                uncommitted,
            } => {
                let left_out = crate::projection::left_out(base, uncommitted);
                let base = &base[..base.len().min(12)];
                match left_out {
                    Some(w) => format!("{t}  work lands on {branch}, made from {base}; {w}"),
                    None => format!("{t}  work lands on {branch}, made from {base}"),
                }
            }
            SignalKind::RunFinished { outcome, .. } => {
                format!("{t}  run finished: {}", outcome.as_str())
            }
            // Another family's (see `line`).
            _ => return None,
        })
    }

    /// Spend and providers: warnings and caps, raises, holds and releases.
    fn spend_line(&self, s: &Signal, t: &str) -> Option<String> {
        Some(match &s.kind {
            SignalKind::ProviderHeld {
                agent,
                category,
                until,
                message,
            } => format!(
                "{t}  {:<18} {agent}: {}{} — {message}",
                "‖ provider held",
                crate::kernel::retry::cause::words(category),
                match until {
                    Some(u) if **category == *crate::kernel::retry::cause::AUTH => format!(
                        " until resumed (fix it, then `resume`), at most until {}",
                        crate::kernel::retry::clock(*u)
                    ),
                    Some(u) => format!(" until {}", crate::kernel::retry::clock(*u)),
                    None => " until resumed (fix it, then `resume`)".into(),
                }
            ),
            SignalKind::ProviderReleased { agent } => {
                format!("{t}  {:<18} {agent}: work starts again", "▶ provider")
            }
            SignalKind::SpendWarning {
                role,
                measure,
                spent,
                cap,
                level,
            } => format!(
                "{t}  {:<18} {}past {:.0}% of the cap: {}",
                "! spend",
                role.as_deref().map(|r| format!("{r} ")).unwrap_or_default(),
                level * 100.0,
                measure.show(*spent, *cap)
            ),
            SignalKind::SpendCapReached {
                role,
                measure,
                spent,
                cap,
            } => format!(
                "{t}  {:<18} paused — {}; raise it: playdeck ctl <run> budget --raise {}{}=+N",
                "‖ spend cap",
                crate::kernel::spend::held_words(role.as_deref(), *measure, *spent, *cap),
                role.as_deref().map(|r| format!("{r}.")).unwrap_or_default(),
                measure.as_str()
            ),
            SignalKind::SpendCapRaised {
                role,
                measure,
                cap,
                by,
            } => format!(
                "{t}  {:<18} {}{} cap now {} — by {by}",
                "▲ spend cap",
                role.as_deref().map(|r| format!("{r} ")).unwrap_or_default(),
                measure.as_str(),
                match measure {
                    crate::kernel::spend::Measure::Usd => format!("{cap:.2} USD"),
                    crate::kernel::spend::Measure::Tokens => format!("{}", cap.round() as u64),
                }
            ),
            // Another family's (see `line`).
            _ => return None,
        })
    }

    /// Growth: spawns accepted and dropped, roles provisioned, reserved and refused.
    fn growth_line(&self, s: &Signal, t: &str) -> Option<String> {
        let node = |verb: &str, name: &str, extra: &str| node_line(t, verb, name, extra);
        Some(match &s.kind {
            SignalKind::Spawned { name, assignee, .. } => {
                node("+ spawned", name, &role_suffix(assignee))
            }
            SignalKind::SpawnDropped {
                reason, assignee, ..
            } => node(
                "- spawn dropped",
                reason.as_str(),
                &assignee
                    .as_ref()
                    .map(|a| format!(" (assignee {a})"))
                    .unwrap_or_default(),
            ),
            SignalKind::RoleProvisioned {
                role, origin, by, ..
            } => match origin {
                crate::kernel::RoleOrigin::Initial => return None,
                crate::kernel::RoleOrigin::Expanded => node(
                    "+ role expanded",
                    role,
                    &by.as_ref()
                        .map(|b| format!(" (recruited by {b})"))
                        .unwrap_or_default(),
                ),
            },
            SignalKind::RoleReserved { role, .. } => node("… role reserved", role, ""),
            SignalKind::ExpansionRejected { role, reason, .. } => {
                node("- role refused", role, &format!(" ({})", reason.as_str()))
            }
            SignalKind::Budget { .. } => return None,
            // Another family's (see `line`).
            _ => return None,
        })
    }

    /// Capacity and workers: waits, instances, releases, the workers of a `[cluster]` run, and what running agents do.
    fn capacity_line(&mut self, s: &Signal, t: &str) -> Option<String> {
        let node = |verb: &str, name: &str, extra: &str| node_line(t, verb, name, extra);
        Some(match &s.kind {
            SignalKind::CapacityWait { node: n, reason } => {
                node("… waits", &n.name, &format!(" — {reason}"))
            }
            SignalKind::Instance {
                name, state, op, ..
            } => node(
                "◆ instance",
                name,
                &format!(
                    " {}{}",
                    state.as_str(),
                    op.as_ref().map(|o| format!(" ({o})")).unwrap_or_default()
                ),
            ),
            SignalKind::CapacityReleased {
                trigger,
                released,
                retained,
            } => format!(
                "{t}  capacity released ({trigger}): {} released, {} retained",
                released.len(),
                retained.len()
            ),
            // Tool use is what a reader follows; the rest is in the log.
            SignalKind::AgentActivity {
                name,
                state: crate::kernel::ActivityState::Tool,
                tool,
                ..
            } => node(
                "· tool",
                name,
                &format!(" {}", tool.as_deref().unwrap_or("?")),
            ),
            SignalKind::AgentActivity { .. }
            | SignalKind::AgentUsage { .. }
            | SignalKind::AgentProcess { .. } => return None,
            SignalKind::Workers { workers } => {
                let now: Vec<(Arc<str>, bool, bool)> = workers
                    .iter()
                    .map(|w| (w.id.clone(), w.silent(), w.draining))
                    .collect();
                if self.workers.as_ref() == Some(&now) {
                    return None;
                }
                self.workers = Some(now);
                let each: Vec<String> = workers
                    .iter()
                    .map(|w| {
                        let mut x = format!("{} {}/{}", w.id, w.busy, w.slots);
                        if w.silent() || w.draining {
                            x.push_str(&format!(
                                " ({})",
                                crate::cluster::roster::beat_words(w, 0.0)
                            ));
                        }
                        x
                    })
                    .collect();
                format!(
                    "{t}  {:<18} {}{}{}",
                    "workers",
                    crate::cluster::roster::load_words(workers),
                    if each.is_empty() { "" } else { ": " },
                    each.join(", ")
                )
            }
            // Another family's (see `line`).
            _ => return None,
        })
    }

    /// An operation's lifecycle: queued to settled, with gates, holds and retries.
    fn op_line(&self, s: &Signal, t: &str) -> Option<String> {
        let node = |verb: &str, name: &str, extra: &str| node_line(t, verb, name, extra);
        Some(match &s.kind {
            SignalKind::Queued { .. } | SignalKind::Unpaused { .. } => return None,
            SignalKind::Started { node: n, role, .. } => {
                node("▶ started", &n.name, &role_suffix(role))
            }
            SignalKind::Completed { node: n, .. } => node("✓ succeeded", &n.name, ""),
            SignalKind::Failed { node: n, error, .. } => {
                node("✗ failed", &n.name, &format!(" — {error}"))
            }
            SignalKind::RetryScheduled {
                node: n,
                category,
                error,
                wait_ms,
                until,
                next,
                of,
                ..
            } => node(
                "↻ will retry",
                &n.name,
                &format!(
                    " — {} (in {}): {error}",
                    crate::kernel::retry::waiting_words(category, *until, *next, *of),
                    humantime::format_duration(std::time::Duration::from_secs(
                        wait_ms.div_ceil(1000)
                    ))
                ),
            ),
            SignalKind::Skipped {
                node: n,
                reason,
                because,
            } => node(
                "↷ skipped",
                &n.name,
                &format!(" — {}", because.as_deref().unwrap_or(reason.describe())),
            ),
            SignalKind::Paused { node: n, .. } => node("‖ paused", &n.name, ""),
            SignalKind::AwaitingApproval { node: n } => node(
                "? awaiting approval",
                &n.name,
                &format!(" — type `approve {0}` or `deny {0}`", n.name),
            ),
            SignalKind::Approved { node: n, by, on } => node(
                "✓ approved",
                &n.name,
                &match on {
                    Some(on) => format!(" by {by}, on: {on}"),
                    None => format!(" by {by}"),
                },
            ),
            SignalKind::PermissionAsked {
                node: n,
                tool,
                kind,
                detail,
                ..
            } => match kind {
                QuestionKind::Permission => node(
                    "⚿ asks permission",
                    &n.name,
                    &format!(
                        " for {tool} — type `permit {0}` or `deny {0}`{1}",
                        n.name,
                        detail
                            .as_deref()
                            .map(|d| format!("\n    {}", d.replace('\n', "\n    ")))
                            .unwrap_or_default()
                    ),
                ),
                QuestionKind::Review => node(
                    "◧ awaiting review",
                    &n.name,
                    &format!(
                        " — {tool}; type `approve {0}` to land it, `deny {0}` to reject it, or `say {0} …` to send it back",
                        n.name
                    ),
                ),
                QuestionKind::Conflict => node(
                    "✕ merge conflict",
                    &n.name,
                    &format!(
                        " — {tool}; resolve it in its worktree and type `resolve {0}`, or `deny {0}` to leave it unlanded, or `say {0} …` to send it back",
                        n.name
                    ),
                ),
            },
            SignalKind::PermissionAnswered {
                node: n,
                tool,
                allowed,
                by,
                kind,
                ..
            } => node(
                match (kind, *allowed) {
                    (QuestionKind::Permission, true) => "⚿ allowed",
                    (QuestionKind::Permission, false) => "⚿ denied",
                    (QuestionKind::Review, true) => "◧ approved",
                    (QuestionKind::Review, false) => "◧ rejected",
                    (QuestionKind::Conflict, true) => "✕ resolved",
                    (QuestionKind::Conflict, false) => "✕ not landed",
                },
                &n.name,
                &format!(" {tool} — {by}"),
            ),
            SignalKind::Landed { node: n, work, .. } => node(
                "⇢ landed",
                &n.name,
                &format!(
                    " on {} at {} — {} commit(s), {} file(s)",
                    work.branch,
                    work.commit.as_deref().unwrap_or("-"),
                    work.commits.len(),
                    work.files.len()
                ),
            ),
            SignalKind::Denied {
                node: n,
                by,
                reason,
                ..
            } => node("✗ denied", &n.name, &format!(" by {by}: {reason}")),
            SignalKind::Escalated {
                node: n, reason, ..
            } => node("! escalated", &n.name, &format!(" — {reason}")),
            SignalKind::Retried {
                node: n,
                attempt,
                because: None,
                note: Some(note),
                by: Some(by),
                ..
            } => node(
                "↻ sent back",
                &n.name,
                &format!(" by {by} — attempt {attempt}, told: {note}"),
            ),
            SignalKind::Retried {
                node: n,
                attempt,
                because: None,
                by,
                ..
            } => node(
                "↻ retried",
                &n.name,
                &match by {
                    Some(by) => format!(" by {by} — attempt {attempt}"),
                    None => format!(" — attempt {attempt}"),
                },
            ),
            SignalKind::Retried {
                node: n,
                because: Some(b),
                ..
            } if &**b == crate::store::resume::RESUMED_CANCEL => {
                node("↻ reopened", &n.name, " — the cancelled run is resumed")
            }
            SignalKind::Retried {
                node: n,
                because: Some(b),
                ..
            } => node("↻ reopened", &n.name, &format!(" — {b} is retried")),
            SignalKind::Held { node: n } => node("‖ held", &n.name, ""),
            SignalKind::DependenciesAdded { node: n, edges, .. } => node(
                "+ waits also for",
                &n.name,
                &format!(" {} more", edges.len()),
            ),
            SignalKind::Unheld { node: n } => node("▷ unheld", &n.name, ""),
            // Another family's (see `line`).
            _ => return None,
        })
    }
}

pub(super) fn role_suffix(role: &Option<Arc<str>>) -> String {
    role.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
}

/// An operation's line: the time, the verb in its column, the name.
fn node_line(t: &str, verb: &str, name: &str, extra: &str) -> String {
    format!("{t}  {verb:<18} {name}{extra}")
}
