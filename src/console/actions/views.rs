//! Opening what the operator looks at: the inspectors, overlays, pagers
//! and the follow view.

use super::*;

impl App {
    /// Opening what the operator looks at: inspectors, overlays, pagers, the follow view.
    pub(super) fn views(&mut self, a: Action) -> Vec<Effect> {
        match a {
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
                    // Work waiting for review: the commits the question
                    // is of, which an approval from the view lands.
                    let review = self.vm.basis_of(ix).filter(|b| {
                        matches!(
                            b.kind,
                            crate::kernel::BasisKind::Review | crate::kernel::BasisKind::Conflict
                        )
                    });
                    Page::Diff {
                        node: ix,
                        op,
                        attempt,
                        instance,
                        run_dir,
                        review,
                    }
                };
                vec![Effect::Page(page)]
            }
            Action::Shell => {
                let (Some(ix), Some(run_dir)) = (self.target(), self.hooks.run_dir.clone()) else {
                    return Vec::new();
                };
                let op = self.vm.node(ix).name().to_string();
                vec![Effect::Page(Page::Shell { op, run_dir })]
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
            Action::Report => vec![Effect::Report],
            Action::Breakpoints => {
                let mut scroll = ScrollList::list();
                scroll.set_len(self.vm.run.breakpoints.len());
                self.overlays.push(Overlay::Breakpoints { scroll });
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
            Action::Jump => {
                self.overlays.push(Overlay::Jump {
                    text: String::new(),
                });
                Vec::new()
            }
            // Dispatched to another seam by act_now.
            _ => Vec::new(),
        }
    }

    /// `enter` in the capacity pane: the operation on the selected row —
    /// the one a busy instance runs, or one waiting for capacity —
    /// selected in the lanes, which take the focus.
    pub(super) fn go_to_instance_op(&mut self) {
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

    pub(super) fn inspect(&mut self, node: u32) {
        self.overlays.push(Overlay::Inspector {
            node,
            scroll: ScrollList::text(),
            all: false,
            turns: Default::default(),
        });
    }

    pub(super) fn open_palette(&mut self) {
        let mut state = TreeState::default();
        for id in PALETTE_BRANCHES {
            state.open(vec![id.to_string()]);
        }
        state.select(vec!["initial".to_string()]);
        self.overlays.push(Overlay::Palette {
            state: RefCell::new(state),
        });
    }

    /// The operation a ledger row accepted, when the view knows it.
    pub fn ledger_op(&self, row: usize) -> Option<u32> {
        match &self.vm.ledger.get(row)?.outcome {
            LedgerOutcome::Accepted { op_id, .. } => self.vm.ix(op_id),
            LedgerOutcome::Dropped { op_id, .. } => op_id.as_ref().and_then(|o| self.vm.ix(o)),
        }
    }
}
