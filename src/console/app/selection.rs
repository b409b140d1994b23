//! The selection: which row of each pane is selected, kept on the
//! operation the operator chose while the run moves it, the rows each
//! pane shows (through the filter), and the target an action acts on.

use super::*;

impl App {
    /// Remembers the operation under each lane's cursor: after every
    /// operator key and click.
    pub fn pick(&mut self) {
        for col in 0..COLS {
            self.picked[col] = self.lanes[col]
                .selected()
                .and_then(|row| self.lane_window(col, row, 1).first().copied());
        }
        self.capacity_pick = self.selected_instance().map(|i| i.name.clone());
    }

    /// After the run moved: the capacity cursor goes back to the instance
    /// it was on. One that was released is no longer listed; the cursor
    /// goes to the nearest instance still listed (the one that took its
    /// row, else the one above), never to a title where its keys do
    /// nothing.
    pub(super) fn follow_capacity_pick(&mut self) {
        let rows = self.capacity_rows();
        self.capacity.set_len(rows.len());
        let Some(name) = &self.capacity_pick else {
            return;
        };
        let at = self
            .vm
            .capacity
            .instances
            .get_index_of(name)
            .and_then(|ix| rows.iter().position(|r| *r == CapRow::Instance(ix)));
        if let Some(row) = at {
            self.capacity.select(row);
            return;
        }
        let here = self.capacity.selected().unwrap_or(0);
        let is_instance = |r: &&CapRow| matches!(r, CapRow::Instance(_));
        let near = rows
            .iter()
            .enumerate()
            .skip(here)
            .find(|(_, r)| is_instance(r))
            .or_else(|| {
                rows.iter()
                    .enumerate()
                    .take(here)
                    .rev()
                    .find(|(_, r)| is_instance(r))
            });
        if let Some((row, CapRow::Instance(ix))) = near {
            self.capacity.select(row);
            self.capacity_pick = self
                .vm
                .capacity
                .instances
                .get_index(*ix)
                .map(|(n, _)| n.clone());
        }
    }

    /// What the capacity cursor is on.
    pub fn capacity_row(&self) -> Option<CapRow> {
        let row = self.capacity.selected()?;
        self.capacity_rows().get(row).copied()
    }

    /// The instance under the capacity cursor.
    pub fn selected_instance(&self) -> Option<&Instance> {
        match self.capacity_row()? {
            CapRow::Instance(ix) => self.vm.capacity.instances.get_index(ix).map(|(_, i)| i),
            _ => None,
        }
    }

    /// Focus came to the capacity pane with the cursor on a title: it
    /// moves to the first instance, the row keys act on.
    pub fn capacity_to_instance(&mut self) {
        if matches!(
            self.capacity_row(),
            Some(CapRow::Instance(_) | CapRow::Waiting(_))
        ) {
            return;
        }
        let rows = self.capacity_rows();
        self.capacity.set_len(rows.len());
        if let Some(row) = rows.iter().position(|r| matches!(r, CapRow::Instance(_))) {
            self.capacity.select(row);
        }
    }

    /// After the run moved: each lane's cursor goes back to the operation
    /// it was on; when that operation left its lane, the cursor stays at
    /// the same row (its neighbour now) and the focused lane says so.
    pub(super) fn follow_picks(&mut self) {
        for col in 0..COLS {
            let Some(ix) = self.picked[col] else {
                continue;
            };
            match self.lane_row_of(ix) {
                Some((c, row)) if c == col => self.lanes[col].select(row),
                _ => {
                    let now_on = self.lanes[col]
                        .selected()
                        .and_then(|row| self.lane_window(col, row, 1).first().copied());
                    self.picked[col] = now_on;
                    let own = self.vm.acted(ix).is_some_and(|(by, _)| *by == *self.me);
                    if col == self.lane_col && self.focus == Pane::Lanes && self.replay.is_none() {
                        if own {
                            // The operator's own decision moved it: their
                            // answer is in the status line already, but the
                            // row that slid under the cursor is not chosen
                            // (a held `a` would approve the next gate).
                            if self.overlays.is_empty() {
                                self.drift = Some(Drift::new(ix, now_on, false));
                            }
                        } else {
                            self.drifted(ix, now_on);
                        }
                    }
                }
            }
        }
    }

    pub(super) fn drifted(&mut self, left: u32, now_on: Option<u32>) {
        let n = self.vm.node(left);
        let was = col_lane(self.lane_col);
        let mut text = format!("{} left {}", n.name(), was.title());
        if n.lane != was || n.skipped() {
            text.push_str(&format!(" for {}", n.place()));
        }
        if let Some((by, action)) = self.vm.acted(left) {
            text.push_str(&format!(" ({action} by {by})"));
        }
        match now_on {
            Some(c) => text.push_str(&format!("; the cursor moved to {}", self.vm.node(c).name())),
            None => text.push_str("; the lane is empty"),
        }
        self.drift = Some(Drift::new(left, now_on, false));
        // A move someone's command caused is news, with who did it.
        // Otherwise it is said where the operator acts (a lane of
        // decisions) or when the work went wrong; in a lane the run carries
        // along (queued to running to succeeded) rows leave all the time,
        // and the guard above still keeps a key from landing on the row
        // that slid in.
        let acting = matches!(
            was,
            Lane::AwaitingApproval | Lane::Paused | Lane::Failed | Lane::Escalated
        );
        let went_wrong = n.skipped() || matches!(n.lane, Lane::Failed | Lane::Escalated);
        if self.vm.acted(left).is_some() {
            self.info(text);
        } else if acting || went_wrong {
            self.notice("cursor moved", text);
        }
    }

    pub(super) fn matches(&self, ix: u32) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let n = self.vm.node(ix);
        let f = self.filter.to_lowercase();
        self.vm.label(ix).to_lowercase().contains(&f)
            || n.name().to_lowercase().contains(&f)
            || n.role().is_some_and(|r| r.to_lowercase().contains(&f))
    }

    /// The marked operations now in `lane` (a marked gate decided
    /// meanwhile, or a failure retried, is no longer one), in mark order.
    pub fn marked(&self, lane: Lane) -> Vec<u32> {
        self.marks
            .iter()
            .filter(|&&(ix, marked_in)| {
                let n = self.vm.node(ix);
                marked_in == lane && n.lane == lane && !n.skipped()
            })
            .map(|&(ix, _)| ix)
            .collect()
    }

    /// Whether `ix` carries a mark (in the lane it is in).
    pub fn is_marked(&self, ix: u32) -> bool {
        let lane = self.vm.node(ix).lane;
        self.marks.contains(&(ix, lane))
    }

    /// Every gate the approval lane shows (filter applied), in its order.
    pub fn shown_gates(&self) -> Vec<u32> {
        let col = crate::operator::model::lane_index(Lane::AwaitingApproval);
        self.lane_window(col, 0, self.lane_len(col))
    }

    /// How many operations the lanes show (filter applied): one pass.
    pub fn shown_count(&self) -> usize {
        (0..COLS).map(|c| self.lane_len(c)).sum()
    }

    /// The number of rows a lane shows (filter applied).
    pub fn lane_len(&self, col: usize) -> usize {
        let lane = &self.vm.lanes[col];
        if self.filter.is_empty() {
            lane.len()
        } else {
            lane.iter().filter(|&ix| self.matches(ix)).count()
        }
    }

    /// Rows `[from, from + n)` of a lane (filter applied): only these are
    /// built.
    pub fn lane_window(&self, col: usize, from: usize, n: usize) -> Vec<u32> {
        let lane = &self.vm.lanes[col];
        if self.filter.is_empty() {
            lane.window(from, n)
        } else {
            lane.iter()
                .filter(|&ix| self.matches(ix))
                .skip(from)
                .take(n)
                .collect()
        }
    }

    /// Where an operation is in its lane's rows (filter applied).
    pub fn lane_row_of(&self, ix: u32) -> Option<(usize, usize)> {
        let col = self.vm.col(ix);
        if self.filter.is_empty() {
            return Some((col, self.vm.lane_pos(ix)?));
        }
        let row = self.vm.lanes[col]
            .iter()
            .filter(|&i| self.matches(i))
            .position(|i| i == ix)?;
        Some((col, row))
    }

    pub fn selected_node(&self) -> Option<u32> {
        let col = self.lane_col;
        let row = self.lanes[col].selected()?;
        self.lane_window(col, row, 1).first().copied()
    }

    /// The operation the operation keys act on: the inspected one, else the
    /// one selected in the lanes.
    pub fn target(&self) -> Option<u32> {
        self.target_under(self.overlays.last())
    }

    /// The operation the operation keys would act on with `top` the
    /// topmost overlay.
    pub fn target_under(&self, top: Option<&Overlay>) -> Option<u32> {
        match top {
            Some(Overlay::Inspector { node, .. }) => Some(*node),
            Some(Overlay::Problems { rows, scroll }) => scroll
                .selected()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| rows.get(i))
                .copied(),
            Some(Overlay::Follow(f)) => Some(f.node),
            Some(Overlay::Diff(v)) => Some(v.node),
            None if self.focus == Pane::Lanes => self.selected_node(),
            _ => None,
        }
    }

    /// Every node index the console holds, as operation ids: a
    /// resynchronisation rebuilds the nodes in the snapshot's order, so
    /// indices are carried across it by id ([`App::remap`]).
    pub fn held_ids(&self) -> Vec<Option<crate::kernel::OpId>> {
        let id = |ix: u32| self.vm.nodes.get(ix as usize).map(|n| n.op.op_id);
        let mut v: Vec<Option<crate::kernel::OpId>> =
            self.marks.iter().map(|&(ix, _)| id(ix)).collect();
        v.extend(self.picked.iter().map(|p| p.and_then(id)));
        for o in &self.overlays {
            match o {
                Overlay::Inspector { node, .. } => v.push(id(*node)),
                Overlay::Follow(f) => v.push(id(f.node)),
                Overlay::Diff(d) => v.push(id(d.node)),
                Overlay::Problems { rows, .. } => v.extend(rows.iter().map(|&ix| id(ix))),
                _ => {}
            }
        }
        v
    }

    /// After a resynchronisation: each held index again names the
    /// operation it named before. A window whose operation is gone closes.
    pub fn remap(&mut self, ids: Vec<Option<crate::kernel::OpId>>) {
        let vm = &self.vm;
        let mut it = ids.into_iter().map(|id| id.and_then(|id| vm.ix(&id)));
        let marks: Vec<(u32, Lane)> = self
            .marks
            .iter()
            .filter_map(|&(_, lane)| it.next().flatten().map(|ix| (ix, lane)))
            .collect();
        self.marks = marks;
        for p in self.picked.iter_mut() {
            *p = it.next().flatten();
        }
        self.overlays.retain_mut(|o| match o {
            Overlay::Inspector { node, .. } => it.next().flatten().map(|ix| *node = ix).is_some(),
            Overlay::Follow(f) => it.next().flatten().map(|ix| f.node = ix).is_some(),
            Overlay::Diff(d) => it.next().flatten().map(|ix| d.node = ix).is_some(),
            Overlay::Problems { rows, .. } => {
                let n = rows.len();
                *rows = it.by_ref().take(n).flatten().collect();
                true
            }
            _ => true,
        });
    }

    /// Selects an operation in its lane, focusing the lanes; a filter that
    /// hides it is cleared.
    pub fn go_to(&mut self, ix: u32) {
        if self.lane_row_of(ix).is_none() {
            self.filter.clear();
            self.clamp();
        }
        if let Some((col, row)) = self.lane_row_of(ix) {
            self.focus = Pane::Lanes;
            self.lane_col = col;
            self.lanes[col].select(row);
        }
    }

    /// Changes the filter, keeping the selected operation selected when it
    /// still shows.
    pub fn set_filter(&mut self, f: impl FnOnce(&mut String)) {
        let keep = self.selected_node();
        f(&mut self.filter);
        self.clamp();
        match keep.and_then(|ix| self.lane_row_of(ix)) {
            Some((col, row)) if col == self.lane_col => self.lanes[col].select(row),
            _ => self.lanes[self.lane_col].select(0),
        }
    }

    pub(super) fn ledger_keeps(&self, i: usize) -> bool {
        let r = &self.vm.ledger[i];
        match self.ledger_filter {
            LedgerFilter::All => true,
            LedgerFilter::Accepted => matches!(r.outcome, LedgerOutcome::Accepted { .. }),
            LedgerFilter::Dropped => matches!(r.outcome, LedgerOutcome::Dropped { .. }),
        }
    }

    /// Rows the ledger shows (newest first, filter applied).
    pub fn ledger_len(&self) -> usize {
        match self.ledger_filter {
            LedgerFilter::All => self.vm.ledger.len(),
            _ => (0..self.vm.ledger.len())
                .filter(|&i| self.ledger_keeps(i))
                .count(),
        }
    }

    /// Ledger indices of rows `[from, from + n)`, newest first; without a
    /// filter only those rows are touched.
    pub fn ledger_window(&self, from: usize, n: usize) -> Vec<usize> {
        (0..self.vm.ledger.len())
            .rev()
            .filter(|&i| self.ledger_keeps(i))
            .skip(from)
            .take(n)
            .collect()
    }

    /// The ledger row selected in the ledger pane.
    pub fn selected_ledger_row(&self) -> Option<usize> {
        let row = self.ledger.selected()?;
        self.ledger_window(row, 1).first().copied()
    }

    /// Keeps every list's length current, and so its cursor inside it.
    pub fn clamp(&mut self) {
        for col in 0..COLS {
            let len = self.lane_len(col);
            self.lanes[col].set_len(len);
        }
        let len = self.ledger_len();
        self.ledger.set_len(len);
    }
}
