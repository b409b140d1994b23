//! Decisions: approvals, denials, holds, retries, raises, releases and
//! added work, with the confirmations and forms that ask first.

use super::*;
use crate::console::app::{Level, plural};

impl App {
    /// Decisions: approvals, denials, holds, retries, raises, releases, added work, and the confirmations and forms that ask first.
    pub(super) fn decide(&mut self, a: Action) -> Vec<Effect> {
        let control = |r| vec![Effect::Control(r)];
        match a {
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
                    let lane = self.vm.node(ix).lane;
                    match self.marks.iter().position(|&m| m == (ix, lane)) {
                        Some(i) => {
                            self.marks.remove(i);
                        }
                        None => self.marks.push((ix, lane)),
                    }
                    let name = self.vm.node(ix).name().to_string();
                    let done = if self.is_marked(ix) {
                        "marked"
                    } else {
                        "unmarked"
                    };
                    let (gates, failed) = (
                        self.marked(Lane::AwaitingApproval).len(),
                        self.marked(Lane::Failed).len(),
                    );
                    let approve = self.keymap.label(Action::Approve);
                    let retry = self.keymap.label(Action::Retry);
                    let mut said = Vec::new();
                    if gates > 0 {
                        said.push(format!(
                            "{} marked: {approve} approves them (asking once)",
                            plural(gates, "gate")
                        ));
                    }
                    if failed > 0 {
                        said.push(format!(
                            "{} marked: {retry} retries them",
                            plural(failed, "failure")
                        ));
                    }
                    self.info(if said.is_empty() {
                        format!("{done} {name}; none marked")
                    } else {
                        format!("{done} {name} · {}", said.join(" · "))
                    });
                }
                Vec::new()
            }
            Action::Acknowledge => {
                if let Some(ix) = self.target() {
                    self.toggle_acknowledged(ix);
                }
                Vec::new()
            }
            Action::MarkAll => {
                let gates = self.shown_gates();
                let key = self.keymap.label(Action::Approve);
                // Every one already marked: the same key takes them back.
                let gate = |ix: u32| (ix, Lane::AwaitingApproval);
                if gates.iter().all(|&ix| self.marks.contains(&gate(ix))) {
                    self.marks.retain(|(ix, _)| !gates.contains(ix));
                    self.info(format!(
                        "unmarked {} gates; {} marked",
                        gates.len(),
                        self.marks.len()
                    ));
                } else {
                    for ix in gates {
                        if !self.marks.contains(&gate(ix)) {
                            self.marks.push(gate(ix));
                        }
                    }
                    self.info(format!(
                        "{} marked: {key} approves them (asking once, every name listed)",
                        self.marks.len()
                    ));
                }
                Vec::new()
            }
            Action::Retry if self.overlays.is_empty() && !self.marked(Lane::Failed).is_empty() => {
                // Retrying is no loss: not asked, said in one line. Only
                // what was marked as a failure: a gate marked to approve
                // that another terminal denied is not retried by it.
                let marked = self.marked(Lane::Failed);
                self.marks.retain(|(ix, _)| !marked.contains(ix));
                let reqs = marked
                    .into_iter()
                    .map(|ix| Request::Retry {
                        op: self.vm.node(ix).name().to_string(),
                        on: self.vm.basis_of(ix),
                    })
                    .collect();
                vec![Effect::Controls(reqs)]
            }
            Action::Approve
                if self.overlays.is_empty() && !self.marked(Lane::AwaitingApproval).is_empty() =>
            {
                let ops = self
                    .marked(Lane::AwaitingApproval)
                    .into_iter()
                    .map(|ix| self.vm.node(ix).name().to_string())
                    .collect();
                self.overlays.push(Overlay::ConfirmApprove {
                    ops,
                    oldest: false,
                    scroll: ScrollList::text(),
                });
                Vec::new()
            }
            // From a review's diff view whose operation the lanes no longer
            // show waiting (sent back, its next review not seen here yet):
            // the approval is still of what the view showed, and the run
            // refuses it if that is not what waits — never a key that does
            // nothing.
            Action::Approve
                if self.gate_under(self.overlays.last()).is_none()
                    && matches!(self.overlays.last(), Some(Overlay::Diff(v)) if v.basis.is_some()) =>
            {
                let Some(Overlay::Diff(v)) = self.overlays.pop() else {
                    return Vec::new();
                };
                control(Request::Approve {
                    op: v.op.clone(),
                    on: v.basis.clone(),
                })
            }
            Action::Approve => {
                let under = self.target();
                match self.gate_under(self.overlays.last()) {
                    // A gate some of whose dependencies failed is asked by
                    // name, with what failed, as the bulk question does.
                    Some(ix)
                        if Some(ix) == under
                            && self.vm.node(ix).asking.is_none()
                            && self.vm.failed_deps(ix).is_some() =>
                    {
                        let ops = vec![self.vm.node(ix).name().to_string()];
                        self.overlays.push(Overlay::ConfirmApprove {
                            ops,
                            oldest: false,
                            scroll: ScrollList::text(),
                        });
                        Vec::new()
                    }
                    // The gate under the cursor: as the footer named it.
                    Some(ix) if Some(ix) == under => {
                        // From the diff view: the commits it showed are
                        // what lands (the run refuses if they are not
                        // what waits any more).
                        let on = match self.overlays.last() {
                            Some(Overlay::Diff(v)) => {
                                v.basis.clone().or_else(|| self.vm.basis_of(ix))
                            }
                            _ => self.vm.basis_of(ix),
                        };
                        if matches!(self.overlays.last(), Some(Overlay::Diff(_))) {
                            self.overlays.pop();
                        }
                        control(Request::Approve {
                            op: self.vm.node(ix).name().to_string(),
                            on,
                        })
                    }
                    // Another one (the oldest): asked by name first.
                    Some(ix) => {
                        let ops = vec![self.vm.node(ix).name().to_string()];
                        self.overlays.push(Overlay::ConfirmApprove {
                            ops,
                            oldest: true,
                            scroll: ScrollList::text(),
                        });
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
            Action::Talk => {
                let Some(ix) = self.target() else {
                    return Vec::new();
                };
                let n = self.vm.node(ix);
                // From the diff view: its notes, each naming its line; from
                // the lanes, the notes made on the diff it waits with.
                let notes = match self.overlays.last() {
                    Some(Overlay::Diff(v)) => v.notes_said(),
                    _ => self
                        .diff_notes
                        .get(&ix)
                        .filter(|(on, _)| on.is_some() && *on == self.vm.basis_of(ix))
                        .map(|(_, said)| said.clone())
                        .unwrap_or_default(),
                };
                let text = if notes.is_empty() {
                    String::new()
                } else {
                    format!("Notes on your diff: {}", notes.join("; "))
                };
                self.overlays.push(Overlay::Say {
                    op: n.name().to_string(),
                    text,
                    running: n.lane == Lane::Running,
                });
                Vec::new()
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
                let on = self.target().and_then(|ix| self.vm.basis_of(ix));
                control(Request::Retry { op, on })
            }
            Action::Breakpoint => {
                let op = self.target_name();
                let clear = self.vm.run.breakpoints.iter().any(|b| **b == *op);
                control(Request::Break { at: op, clear })
            }
            Action::RunToHere => control(Request::RunTo {
                op: self.target_name(),
            }),
            Action::ClearBreak => {
                let Some(Overlay::Breakpoints { scroll }) = self.overlays.last() else {
                    return Vec::new();
                };
                let Some(b) = scroll
                    .selected()
                    .and_then(|i| self.vm.run.breakpoints.get(i))
                else {
                    return Vec::new();
                };
                control(Request::Break {
                    at: b.to_string(),
                    clear: true,
                })
            }
            Action::Quit => self.quit(),
            Action::CancelRun => self.cancel_run(),
            Action::Yes => self.confirm(),
            Action::Submit => self.submit(),
            Action::SendBack => self.send_back(),
            // Dispatched to another seam by act_now.
            _ => Vec::new(),
        }
    }

    /// The run's answer to one command, on the status line. A decision
    /// refused because what it was made on changed meanwhile
    /// (`stale_decision`: another terminal decided, the review came back
    /// with other commits) says what changed and is asked again, on what
    /// is there now — unless the operator is in another window.
    pub fn answered(
        &mut self,
        req: Request,
        answer: Result<crate::control::Reply, crate::control::Failure>,
    ) {
        match answer {
            Ok(reply) => self.info(reply.one_line(&req)),
            Err(f) if f.code == crate::control::ErrorCode::StaleDecision => {
                self.warn(f.message);
                self.ask_again(req);
            }
            Err(f) => self.set_status(f.message, Level::Error),
        }
    }

    /// A decision refused as stale, asked again where it still waits.
    fn ask_again(&mut self, req: Request) {
        if !self.overlays.is_empty() {
            return;
        }
        let lane = |op: &str| self.vm.by_name(op).map(|n| n.lane);
        match req {
            Request::Approve { op, .. } if lane(&op) == Some(Lane::AwaitingApproval) => {
                self.overlays.push(Overlay::ConfirmApprove {
                    ops: vec![op],
                    oldest: false,
                    scroll: ScrollList::text(),
                });
            }
            // The run has moved on further than this view: asked once the
            // view shows it waiting.
            Request::Approve { op, .. } => self.reask = Some(op),
            Request::Deny { op, reason, .. } if lane(&op) == Some(Lane::AwaitingApproval) => {
                self.overlays.push(Overlay::Deny {
                    op,
                    reason: reason.join(" "),
                });
            }
            Request::Say { op, text, .. } => {
                let running = lane(&op) == Some(Lane::Running);
                self.overlays.push(Overlay::Say {
                    op,
                    text: text.join(" "),
                    running,
                });
            }
            _ => {}
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

    pub(super) fn quit(&mut self) -> Vec<Effect> {
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
    pub(super) fn cancel_run(&mut self) -> Vec<Effect> {
        if !(self.hooks.attached && matches!(self.overlays.last(), Some(Overlay::ConfirmQuit))) {
            return Vec::new();
        }
        self.overlays.clear();
        self.quitting = true;
        self.quit_cancelled = true;
        self.info("cancelling the run…");
        vec![Effect::Control(Request::Cancel)]
    }

    pub(super) fn confirm(&mut self) -> Vec<Effect> {
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
                // The gates' marks go; marked failures stay for R.
                self.marks.retain(|&(_, lane)| lane == Lane::Failed);
                // Each by name, on what the question showed: one decided
                // or changed meanwhile is refused by the run, named, as a
                // second console's approval would be.
                let reqs: Vec<Request> = ops
                    .into_iter()
                    .map(|op| {
                        let on = self
                            .vm
                            .by_name(&op)
                            .and_then(|n| self.vm.ix(&n.op.op_id))
                            .and_then(|ix| self.vm.basis_of(ix));
                        Request::Approve { op, on }
                    })
                    .collect();
                match reqs.len() {
                    1 => reqs.into_iter().map(Effect::Control).collect(),
                    _ => vec![Effect::Controls(reqs)],
                }
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

    pub(super) fn submit(&mut self) -> Vec<Effect> {
        match self.overlays.pop() {
            Some(Overlay::Filter) => {
                match self.shown_count() {
                    _ if self.filter.is_empty() => self.info("filter cleared"),
                    0 => self.warn(format!("filter: {} — no match (esc clears)", self.filter)),
                    n => self.info(format!(
                        "filter: {} — {} shown",
                        self.filter,
                        crate::console::text::group(n)
                    )),
                }
                Vec::new()
            }
            Some(Overlay::Jump { text }) => vec![Effect::Replay(ReplayCmd::JumpTo(text))],
            Some(Overlay::Deny { op, reason }) => {
                let reason = reason.trim().to_string();
                let on = self.basis_named(&op);
                vec![Effect::Control(Request::Deny {
                    op,
                    on,
                    reason: if reason.is_empty() {
                        Vec::new()
                    } else {
                        vec![reason]
                    },
                })]
            }
            Some(Overlay::DiffNote { text }) => {
                if let Some(Overlay::Diff(v)) = self.overlays.last_mut() {
                    v.note(&text);
                    // Kept past the view: T from the lanes sends them too,
                    // while the review they are about still waits.
                    self.diff_notes
                        .insert(v.node, (v.basis.clone(), v.notes_said()));
                    let n = v.notes.len();
                    let key = self.keymap.label(Action::Talk);
                    self.info(format!(
                        "{n} note(s) on the diff: {key} sends the work back with them"
                    ));
                }
                Vec::new()
            }
            Some(Overlay::Say { op, text, running }) => {
                let text = text.trim().to_string();
                if text.is_empty() {
                    // Nothing typed: the dialog stays, said why.
                    self.overlays.push(Overlay::Say { op, text, running });
                    self.warn("nothing to say: type the message first (esc cancels)");
                    return Vec::new();
                }
                // What it is sent back from, as shown: the diff's review,
                // or the failure or review the lanes show. A message to a
                // running agent decides nothing.
                let on = match self.overlays.last() {
                    Some(Overlay::Diff(v)) if v.basis.is_some() => v.basis.clone(),
                    _ => self.basis_named(&op).filter(|b| {
                        !matches!(
                            b.kind,
                            crate::kernel::BasisKind::Call | crate::kernel::BasisKind::Gate
                        )
                    }),
                };
                if let Some(Overlay::Diff(v)) = self.overlays.last()
                    && v.basis.is_some()
                {
                    // Sent back: the review it showed is over.
                    self.diff_notes.remove(&v.node);
                    self.overlays.pop();
                }
                vec![Effect::Control(Request::Say {
                    op,
                    on,
                    text: vec![text],
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

    /// What a decision on the operation named `op` answers, as this
    /// console shows it now.
    pub(super) fn basis_named(&self, op: &str) -> Option<crate::kernel::Basis> {
        let ix = self.vm.by_name(op).and_then(|n| self.vm.ix(&n.op.op_id))?;
        self.vm.basis_of(ix)
    }

    /// The deny dialog of a review or a conflict, sent back instead: what
    /// was typed goes to its agent now, in its conversation.
    fn send_back(&mut self) -> Vec<Effect> {
        let Some(Overlay::Deny { op, reason }) = self.overlays.pop() else {
            return Vec::new();
        };
        let text = reason.trim().to_string();
        if text.is_empty() {
            self.overlays.push(Overlay::Deny { op, reason });
            self.warn("nothing to send back: type what the agent should do first (esc cancels)");
            return Vec::new();
        }
        let on = self.basis_named(&op);
        vec![Effect::Control(Request::Say {
            op,
            on,
            text: vec![text],
        })]
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
    pub(super) fn check_add(&self, form: &AddForm) -> Result<Request, (usize, String)> {
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
    pub(super) fn type_key(&mut self, e: KeyEvent) {
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
            Some(Overlay::DiffNote { text }) => edit(text),
            Some(Overlay::Deny { reason, .. }) => edit(reason),
            Some(Overlay::Say { text, .. }) => edit(text),
            Some(Overlay::Add(form)) => {
                form.error = None;
                edit(form.field_mut());
            }
            _ => {}
        }
    }
}
