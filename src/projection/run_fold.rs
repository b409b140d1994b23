//! Folding the signals about the run rather than one operation, one
//! function per family: the run's lifecycle, its agents' processes and
//! usage, spend and providers, and growth (spawns and the ledger). The
//! palette's and capacity's signals go to their own states.

use super::*;

impl RunProjection {
    /// Signals about the run, the ledger, the palette and capacity.
    pub(super) fn run_signal(&mut self, s: &Signal) {
        match &s.kind {
            SignalKind::AgentActivity { .. }
            | SignalKind::AgentProcess { .. }
            | SignalKind::AgentSession { .. }
            | SignalKind::AgentUsage { .. } => self.agent_signal(s),
            SignalKind::ProviderHeld { .. }
            | SignalKind::ProviderReleased { .. }
            | SignalKind::SpendCapReached { .. }
            | SignalKind::SpendCapRaised { .. } => self.spend_signal(s),
            SignalKind::Spawned { .. } | SignalKind::SpawnDropped { .. } => self.growth_signal(s),
            SignalKind::RoleProvisioned { .. }
            | SignalKind::RoleReserved { .. }
            | SignalKind::ExpansionRejected { .. }
            | SignalKind::Budget { .. } => self.palette.apply(&s.kind, s.elapsed),
            SignalKind::Instance { .. }
            | SignalKind::CapacityReleased { .. }
            | SignalKind::Workers { .. } => {
                self.capacity.apply(&s.kind, s.elapsed);
            }
            _ => self.lifecycle_signal(s),
        }
    }

    /// The run starts, resumes, pauses, steps, ends a round, finishes, warns.
    pub(super) fn lifecycle_signal(&mut self, s: &Signal) {
        let at = s.elapsed;
        match &s.kind {
            SignalKind::RunStarted {
                run_id,
                play,
                max_concurrent,
                reactive,
                max_spawn,
                paused,
                budget,
                ..
            } => {
                self.spend.budget = budget.clone();
                self.run.run_id = run_id.clone();
                self.run.play = play.clone();
                self.run.started = true;
                self.run.max_concurrent = *max_concurrent;
                self.run.reactive = *reactive;
                self.run.max_spawn = *max_spawn;
                self.run.paused = *paused;
                self.run.round = self.run.round.max(1);
            }
            SignalKind::Resumed { resumes, .. } => {
                // Taken up again: whatever ended it before is over.
                self.run.resumes = *resumes;
                self.run.started = true;
                self.run.finished = None;
                self.run.paused = false;
                self.run.stepping = false;
            }
            SignalKind::StorageFailed { error } => self.run.storage = Some(error.clone()),
            SignalKind::StorageRecovered => self.run.storage = None,
            SignalKind::RunPaused { cause } => {
                self.run.paused = true;
                self.run.paused_by.clone_from(cause);
            }
            SignalKind::Breakpoints { set } => self.run.breakpoints = set.to_vec(),
            SignalKind::RunResumed => {
                self.run.paused = false;
                self.run.paused_by = None;
                self.run.stepping = false;
                self.run.stepped = None;
            }
            SignalKind::Stepped { op_id } => {
                self.run.stepping = op_id.is_none();
                if op_id.is_some() {
                    self.run.stepped = *op_id;
                }
            }
            SignalKind::RoundEnded { round } => self.run.round = round + 1,
            SignalKind::RunFinished { outcome, .. } => {
                self.run.finished = Some(*outcome);
                self.run.stepping = false;
            }
            SignalKind::Workspace {
                branch,
                base,
                uncommitted,
            } => {
                self.run.workspace = Some(Arc::new(Workspace {
                    branch: branch.clone(),
                    base: base.clone(),
                    uncommitted: uncommitted.clone(),
                }));
            }
            SignalKind::Warning { message, op_id } => {
                // A warning about an operation says which, unless its words
                // already do.
                let message = match op_id.and_then(|id| self.name_of(&id)) {
                    Some(name) if !message.contains(&*name) => {
                        Arc::from(format!("{name}: {message}"))
                    }
                    _ => message.clone(),
                };
                self.warnings.push((at, message));
            }
            _ => {}
        }
    }

    /// What a running agent's process is doing and what it has used.
    pub(super) fn agent_signal(&mut self, s: &Signal) {
        let at = s.elapsed;
        match &s.kind {
            SignalKind::AgentActivity {
                op_id,
                attempt,
                state,
                tool,
                ..
            } => {
                if let Some(n) = self.node_mut(op_id)
                    && n.attempt == *attempt
                {
                    // Taken by a worker: its run time counts from here,
                    // not from when the job was put on the queue.
                    if matches!(n.activity, Some((ActivityState::WaitingForWorker, _)))
                        && *state != ActivityState::WaitingForWorker
                    {
                        n.started_at = Some(at);
                    }
                    n.activity = Some((*state, tool.clone()));
                }
            }
            SignalKind::AgentProcess {
                op_id,
                attempt,
                pgid,
                ..
            } => {
                if let Some(n) = self.node_mut(op_id)
                    && let Some(a) = n.attempts.iter_mut().rev().find(|a| a.attempt == *attempt)
                {
                    a.pgid = std::num::NonZeroI32::new(*pgid);
                }
            }
            SignalKind::AgentSession {
                op_id,
                attempt,
                session,
                ..
            } => {
                if let Some(n) = self.node_mut(op_id)
                    && let Some(a) = n.attempts.iter_mut().rev().find(|a| a.attempt == *attempt)
                {
                    a.session = Some(session.clone());
                }
            }
            SignalKind::AgentUsage {
                op_id,
                attempt,
                usage,
                ..
            } => {
                let tokens = crate::kernel::spend::tokens_of(usage);
                let usd = usage.cost_usd.unwrap_or(0.0);
                let mut grew = None;
                if let Some(n) = self.node_mut(op_id) {
                    let role = n.op.assignee.clone();
                    if let Some(a) = n.attempts.iter_mut().rev().find(|a| a.attempt == *attempt) {
                        let (pu, pt) = a.usage.as_deref().map_or((0.0, 0.0), |p| {
                            (
                                p.cost_usd.unwrap_or(0.0),
                                crate::kernel::spend::tokens_of(p),
                            )
                        });
                        a.usage = Some(Box::new(*usage));
                        grew = Some((role, (usd - pu).max(0.0), (tokens - pt).max(0.0)));
                    }
                }
                // Totals so far per attempt: only the growth is spent.
                if let Some((role, du, dt)) = grew {
                    self.spend.usd += du;
                    self.spend.tokens += dt;
                    if let Some(r) = role {
                        let e = self.spend.roles.entry(r).or_default();
                        e.0 += du;
                        e.1 += dt;
                    }
                    self.spend.refresh_held();
                }
            }
            _ => {}
        }
    }

    /// Providers held and released; spend caps reached and raised.
    pub(super) fn spend_signal(&mut self, s: &Signal) {
        match &s.kind {
            SignalKind::ProviderHeld {
                agent,
                category,
                until,
                ..
            } => {
                let words = crate::kernel::retry::cause::words(category);
                let when = match until {
                    // A refused key waits for the operator, and ends at
                    // max_wait so an unattended run ends.
                    Some(u) if **category == *crate::kernel::retry::cause::AUTH => format!(
                        "until resumed (r), at most until {}",
                        crate::kernel::retry::clock(*u)
                    ),
                    Some(u) => format!("until {}", crate::kernel::retry::clock(*u)),
                    None => "until resumed (r)".into(),
                };
                self.provider_holds
                    .insert(agent.clone(), format!("{words} {when}"));
            }
            SignalKind::ProviderReleased { agent } => {
                self.provider_holds.remove(agent);
            }
            SignalKind::SpendCapReached {
                role,
                measure,
                spent,
                cap,
            } => {
                let words =
                    crate::kernel::spend::held_words(role.as_deref(), *measure, *spent, *cap);
                self.spend.caps.push(CapEvent {
                    at: s.elapsed,
                    event: "reached".into(),
                    words: words.clone(),
                    by: None,
                });
                self.spend.held = Some(words);
                self.spend.held_cap = Some((role.clone(), *measure, *cap));
                self.spend.refresh_held();
            }
            SignalKind::SpendCapRaised {
                role,
                measure,
                cap,
                by,
            } => {
                self.spend.caps.push(CapEvent {
                    at: s.elapsed,
                    event: "raised".into(),
                    words: format!(
                        "{}{} cap → {}",
                        role.as_deref().map(|r| format!("{r} ")).unwrap_or_default(),
                        measure.as_str(),
                        measure.amount(*cap)
                    ),
                    by: Some(by.clone()),
                });
                let b = self
                    .spend
                    .budget
                    .get_or_insert_with(|| crate::kernel::spend::Budget {
                        warn_at: crate::kernel::spend::default_warn_at(),
                        ..Default::default()
                    });
                b.apply(&crate::kernel::spend::CapChange {
                    role: role.as_deref().map(str::to_string),
                    measure: *measure,
                    amount: *cap,
                    relative: false,
                });
                self.spend.held = None;
                self.spend.held_cap = None;
            }
            _ => {}
        }
    }

    /// Spawns accepted and dropped, into the ledger.
    pub(super) fn growth_signal(&mut self, s: &Signal) {
        let at = s.elapsed;
        match &s.kind {
            SignalKind::Spawned {
                op_id,
                name,
                parent_id,
                assignee,
                instruction,
                record,
                ..
            } => {
                let op = Operation {
                    op_id: *op_id,
                    reference_id: name.clone(),
                    instruction: instruction.clone(),
                    assignee: assignee.clone(),
                    operation: record.kind,
                    metadata: OpMetadata {
                        requester_role: record.requester_role.clone(),
                        spawned_from: *parent_id,
                        approval: false,
                        agent: record.agent.clone(),
                        params: record.params.clone(),
                        spawn_reason: record.reason.clone(),
                        profile: record.profile.clone(),
                    },
                };
                if self.ix(op_id).is_some() {
                    // Already known (a replayed overlap): keep what is there.
                } else {
                    let mut n = Node::new(op);
                    n.deps = thin_vec::ThinVec::from(record.edges.as_slice());
                    n.queued_at = at;
                    self.insert(n);
                }
                // Only generated names take a number (a named injection
                // does not).
                self.note_spawn_number(name);
                // The operator's own add is not counted against max_spawn.
                if record.operator {
                    self.operator_added += 1;
                } else {
                    self.spawn_accepted += 1;
                }
                if let (Some(p), Some(id)) = (parent_id, &record.identity) {
                    self.see(p, s.seq, *id, false);
                }
                self.ledger_row(
                    s,
                    *parent_id,
                    assignee,
                    LedgerOutcome::Accepted {
                        op_id: *op_id,
                        name: name.clone(),
                    },
                );
            }
            SignalKind::SpawnDropped {
                reason,
                assignee,
                emitter_id,
                detail,
                op_id,
                identity,
                request,
            } => {
                // Admission numbers a candidate before the cap refuses it
                // ("spawn-N refused: ...").
                if *reason == DropReason::MaxSpawnExceeded {
                    let name = detail.split_whitespace().next().unwrap_or("");
                    self.note_spawn_number(name);
                }
                if let (Some(e), Some(id)) = (emitter_id, identity) {
                    self.see(e, s.seq, *id, *reason == DropReason::Duplicate);
                }
                let by = emitter_id.and_then(|e| self.name_of(&e));
                self.palette
                    .dropped(*reason, assignee.as_ref(), detail, by, at);
                self.ledger_row(
                    s,
                    *emitter_id,
                    assignee,
                    LedgerOutcome::Dropped {
                        reason: *reason,
                        detail: detail.clone(),
                        op_id: *op_id,
                        request: request.clone(),
                    },
                );
            }
            _ => {}
        }
    }

    /// A ledger row as the kernel keeps it, from the signal that recorded it.
    pub(super) fn ledger_row(
        &mut self,
        s: &Signal,
        emitter: Option<OpId>,
        assignee: &Option<Arc<str>>,
        outcome: LedgerOutcome,
    ) {
        let emitter_name = emitter.and_then(|e| self.name_of(&e));
        crate::kernel::ledger::record(
            &mut self.ledger,
            LedgerEntry {
                seq: s.seq,
                elapsed: s.elapsed,
                emitter_id: emitter,
                emitter_name,
                assignee: assignee.clone(),
                outcome,
                repeats: 0,
            },
        );
    }

    pub(super) fn note_spawn_number(&mut self, name: &str) {
        if let Some(n) = name
            .strip_prefix("spawn-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            self.spawn_seq = self.spawn_seq.max(n);
        }
    }

    pub(super) fn see(
        &mut self,
        emitter: &OpId,
        seq: u64,
        identity: crate::kernel::request::RequestId,
        duplicate: bool,
    ) {
        if let Some(n) = self.node_mut(emitter) {
            n.sightings.push((seq, identity, duplicate));
        }
    }
}
