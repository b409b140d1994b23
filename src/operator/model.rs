//! The console's view model: the run's [`RunProjection`] (the same fold the
//! checkpoint and the report use, so a replay folds to the same picture)
//! plus what only a screen needs: each lane's members in the order they
//! entered, a short lane history per operation, and facts from the play
//! the signals do not repeat. Folding is O(1) per signal; lanes keep their
//! members in entry order, so a pane renders only the rows it shows.

use std::ops::Deref;
use std::sync::Arc;

use crate::kernel::{Lane, OpId, Signal, Snapshot};
use crate::projection::{Moved, Node, RunProjection};

/// A node's lane history stays short; longer ones keep the latest.
const HISTORY_MAX: usize = 16;
const TOMB: u32 = u32::MAX;

/// One lane's members in the order they entered. Leaving leaves a
/// tombstone; `compact` removes them — before each frame, and between
/// batches once they are a quarter of the lane (compacting a 100 000-row
/// lane after every small batch was the largest cost of a console keeping
/// up with a fast run). Readers give the same answers either way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaneList {
    entries: Vec<u32>,
    dead: usize,
}

impl LaneList {
    pub fn len(&self) -> usize {
        self.entries.len() - self.dead
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Members `[from, from + n)`.
    pub fn window(&self, from: usize, n: usize) -> Vec<u32> {
        if self.dead > 0 {
            return self.iter().skip(from).take(n).collect();
        }
        let from = from.min(self.entries.len());
        let to = (from + n).min(self.entries.len());
        self.entries[from..to].to_vec()
    }

    /// The row of the member at entry `pos`.
    fn row_of(&self, pos: usize) -> usize {
        if self.dead == 0 {
            return pos;
        }
        self.entries[..pos.min(self.entries.len())]
            .iter()
            .filter(|&&e| e != TOMB)
            .count()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.iter().copied().filter(|&e| e != TOMB)
    }

    fn push(&mut self, node: u32) -> u32 {
        self.entries.push(node);
        (self.entries.len() - 1) as u32
    }

    fn remove(&mut self, pos: u32) {
        if let Some(e) = self.entries.get_mut(pos as usize)
            && *e != TOMB
        {
            *e = TOMB;
            self.dead += 1;
        }
    }

    /// Drops tombstones; true when positions moved.
    fn compact(&mut self) -> bool {
        if self.dead == 0 {
            return false;
        }
        self.entries.retain(|&e| e != TOMB);
        self.dead = 0;
        true
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProfileView {
    pub name: Arc<str>,
    pub role: Arc<str>,
    pub max_instances: u32,
    /// `reuse = "pinned"`: its instances are long-lived, and the default
    /// release (`x`) leaves them.
    pub pinned: bool,
    /// `workspace_mode = "git-worktree"`: a release removes a worktree,
    /// which it keeps when it holds uncommitted work.
    pub worktree: bool,
}

/// Static facts from the play the signals do not repeat.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlayFacts {
    /// Catalog roles a request could still recruit.
    pub expansion_only: Vec<Arc<str>>,
    pub orchestrator_may_expand: bool,
    pub max_nodes: u32,
    pub profiles: Vec<ProfileView>,
    /// The play has `[capacity]`.
    pub capacity: bool,
    /// How authored operations without `depends_on` were placed (by
    /// name): a root, or after the operations above them (sequential
    /// authoring), which is easy to miss. Absent: placed by `depends_on`,
    /// spawned or added.
    pub placed: rustc_hash::FxHashMap<Arc<str>, crate::play::Placed>,
}

/// The console's lane columns: the seven lifecycle lanes, then the
/// skipped operations, apart from the failed ones: a skip is a
/// consequence of a failure (or of a condition), not one itself.
pub const COLS: usize = 8;
pub const SKIPPED_COL: usize = 7;

impl PlayFacts {
    /// What the view model needs from the play that signals do not carry.
    pub fn of(play: &crate::play::Play) -> PlayFacts {
        let cfg = &play.palette;
        PlayFacts {
            expansion_only: cfg
                .expansion_only_roles()
                .into_iter()
                .map(Arc::from)
                .collect(),
            orchestrator_may_expand: cfg.palette.expansion.orchestrator_may_expand,
            capacity: play.capacity.as_ref().is_some_and(|c| c.enabled),
            max_nodes: play.capacity.as_ref().map_or(0, |c| c.max_nodes),
            profiles: play
                .capacity
                .as_ref()
                .map(|c| {
                    c.profiles
                        .values()
                        .map(|p| ProfileView {
                            name: Arc::from(p.name.as_str()),
                            role: Arc::from(p.role.as_str()),
                            max_instances: p.max_instances,
                            pinned: c.reuse_of(p) == crate::capacity::Reuse::Pinned,
                            worktree: p.workspace_mode
                                == crate::capacity::WorkspaceMode::GitWorktree,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            placed: play
                .placed()
                .into_iter()
                .map(|(id, how)| (Arc::from(id), how))
                .collect(),
        }
    }
}

/// The column an operation shows in.
pub fn col_of(n: &Node) -> usize {
    if n.skipped() {
        SKIPPED_COL
    } else {
        lane_index(n.lane)
    }
}

/// The lifecycle lane a column shows (the skipped column shows failed
/// operations that were skipped).
pub fn col_lane(col: usize) -> Lane {
    Lane::ALL.get(col).copied().unwrap_or(Lane::Failed)
}

/// The first words of an instruction, for a label: at most five words and
/// 32 columns, from its first line that says something; none when it has
/// no words.
pub fn instruction_words(instruction: &str) -> Option<String> {
    const WORDS: usize = 5;
    const MAX: usize = 32;
    let line = instruction
        .lines()
        .find(|l| l.chars().any(char::is_alphanumeric))?;
    let mut out = String::new();
    for w in line.split_whitespace().take(WORDS) {
        // Punctuation at a word's ends is noise in a lane row.
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        if w.is_empty() {
            continue;
        }
        let next = if out.is_empty() {
            w.len()
        } else {
            out.len() + 1 + w.len()
        };
        if next > MAX && !out.is_empty() {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    let out = crate::printable::fit::fit(&out, MAX);
    (!out.is_empty()).then(|| out.to_lowercase())
}

pub fn lane_index(l: Lane) -> usize {
    match l {
        Lane::Queued => 0,
        Lane::Running => 1,
        Lane::AwaitingApproval => 2,
        Lane::Paused => 3,
        Lane::Succeeded => 4,
        Lane::Failed => 5,
        Lane::Escalated => 6,
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewModel {
    proj: RunProjection,
    pub facts: PlayFacts,
    /// One list per column ([`COLS`]).
    pub lanes: [LaneList; COLS],
    /// Each node's position in its column's entry list.
    lane_pos: Vec<u32>,
    /// Each node's column.
    col: Vec<u8>,
    /// Each node's lane entries, in order: (lane, when).
    history: Vec<Vec<(Lane, f64)>>,
    /// The last operator command that named a node: (who, what, when).
    /// Few nodes have one, so a map.
    acted: rustc_hash::FxHashMap<u32, (Arc<str>, Arc<str>, f64)>,
    /// Who put a hold on an operation, and when (run time).
    held_by: rustc_hash::FxHashMap<u32, (Arc<str>, f64)>,
}

impl Deref for ViewModel {
    type Target = RunProjection;
    fn deref(&self) -> &RunProjection {
        &self.proj
    }
}

impl ViewModel {
    pub fn new(facts: &PlayFacts) -> Self {
        ViewModel {
            facts: facts.clone(),
            ..ViewModel::default()
        }
    }

    /// Where an operation stands in its lane's rows.
    pub fn lane_pos(&self, ix: u32) -> Option<usize> {
        let pos = *self.lane_pos.get(ix as usize)?;
        if pos == TOMB {
            return None;
        }
        let lane = &self.lanes[self.col[ix as usize] as usize];
        Some(lane.row_of(pos as usize))
    }

    /// The column an operation is in.
    pub fn col(&self, ix: u32) -> usize {
        self.col
            .get(ix as usize)
            .map_or_else(|| col_of(self.proj.node(ix)), |&c| c as usize)
    }

    pub fn lane(&self, l: Lane) -> &LaneList {
        &self.lanes[lane_index(l)]
    }

    pub fn count(&self, l: Lane) -> usize {
        self.lane(l).len()
    }

    pub fn approvals_waiting(&self) -> usize {
        self.count(Lane::AwaitingApproval)
    }

    /// How the console names an operation: its name, but a spawned one
    /// (`spawn-N`, a name that says nothing) by the first words of its
    /// instruction and its number: `fix the login timeout #3`. Commands
    /// still take the name; the inspector shows both.
    pub fn label(&self, ix: u32) -> std::borrow::Cow<'_, str> {
        let n = self.proj.node(ix);
        let name = n.name();
        match name.strip_prefix("spawn-") {
            Some(num) if crate::vocab::is_spawn_name(name) => {
                match instruction_words(&n.op.instruction) {
                    Some(words) => std::borrow::Cow::Owned(format!("{words} #{num}")),
                    None => std::borrow::Cow::Borrowed(&**name),
                }
            }
            _ => std::borrow::Cow::Borrowed(&**name),
        }
    }

    /// Whether operations are still in flight (quitting would cancel them).
    pub fn work_in_progress(&self) -> bool {
        self.run.finished.is_none()
    }

    /// Operations held by the operator that have not started.
    pub fn held(&self) -> usize {
        self.proj
            .held()
            .filter(|&ix| {
                matches!(
                    self.node(ix).lane,
                    Lane::Queued | Lane::Paused | Lane::AwaitingApproval
                )
            })
            .count()
    }

    /// Why a finished run failed, for the header and the exit line: the
    /// projection's one wording, shared with `ctl status`, the report and
    /// the headless summary.
    pub fn cause(&self) -> Option<String> {
        self.proj.cause()
    }

    /// Failed (not skipped) operations a retry could take up, first ones
    /// first.
    pub fn retryable(&self, n: usize) -> Vec<String> {
        self.lane(Lane::Failed)
            .iter()
            .map(|ix| self.node(ix))
            .filter(|n| !n.skipped())
            .take(n)
            .map(|n| n.name().to_string())
            .collect()
    }

    /// Catalog roles a request could still recruit: the play's, less those
    /// expanded since.
    pub fn expansion_only(&self) -> impl Iterator<Item = &Arc<str>> {
        self.facts
            .expansion_only
            .iter()
            .filter(|r| !self.palette.expanded.iter().any(|e| &e.role == *r))
    }

    /// The lanes an operation entered, in order.
    pub fn history(&self, ix: u32) -> &[(Lane, f64)] {
        self.history.get(ix as usize).map_or(&[], Vec::as_slice)
    }

    pub fn find(&self, id: &OpId) -> Option<&Node> {
        self.proj.find(id)
    }

    /// Folds one signal (signals at or below the last folded seq, a
    /// resynchronisation overlap, are ignored).
    pub fn fold(&mut self, s: &Signal) {
        match self.proj.apply(s) {
            Some(m) => self.moved(m, s.elapsed),
            // Skipped without a lane move (failed, then skipped): the
            // column changes all the same.
            None => {
                if let Some(ix) = s.kind.node().and_then(|h| self.proj.ix(&h.op_id))
                    && self.lane_pos.get(ix as usize).is_some_and(|&p| p != TOMB)
                    && self.col[ix as usize] as usize != col_of(self.proj.node(ix))
                {
                    let lane = self.proj.node(ix).lane;
                    self.moved(
                        Moved {
                            node: ix,
                            from: Some(lane),
                            to: lane,
                        },
                        s.elapsed,
                    );
                }
            }
        }
        if let crate::kernel::SignalKind::OperatorAction {
            by,
            action,
            op_id: Some(id),
        } = &s.kind
            && let Some(ix) = self.proj.ix(id)
        {
            if action.starts_with("hold ") {
                self.held_by.insert(ix, (by.clone(), s.elapsed));
            } else if action.starts_with("unhold ") {
                self.held_by.remove(&ix);
            }
            self.acted
                .insert(ix, (by.clone(), action.clone(), s.elapsed));
        }
    }

    /// Who last named `ix` in a command, and the command.
    pub fn acted(&self, ix: u32) -> Option<(&str, &str)> {
        self.acted.get(&ix).map(|(b, a, _)| (&**b, &**a))
    }

    /// Who held `ix` and when, while it is held.
    pub fn held_by(&self, ix: u32) -> Option<(&str, f64)> {
        self.held_by
            .get(&ix)
            .filter(|_| self.node(ix).held)
            .map(|(by, at)| (&**by, *at))
    }

    /// The same, with when (for the inspector).
    pub fn acted_at(&self, ix: u32) -> Option<&(Arc<str>, Arc<str>, f64)> {
        self.acted.get(&ix)
    }

    fn moved(&mut self, m: Moved, at: f64) {
        let ix = m.node as usize;
        if self.lane_pos.len() <= ix {
            self.lane_pos.resize(ix + 1, TOMB);
            self.col.resize(ix + 1, 0);
            self.history.resize_with(ix + 1, Vec::new);
        }
        if m.from.is_some() && self.lane_pos[ix] != TOMB {
            self.lanes[self.col[ix] as usize].remove(self.lane_pos[ix]);
        }
        let to = col_of(self.proj.node(m.node));
        self.col[ix] = to as u8;
        self.lane_pos[ix] = self.lanes[to].push(m.node);
        if m.from == Some(m.to) {
            return;
        }
        let h = &mut self.history[ix];
        if h.len() >= HISTORY_MAX {
            h.remove(0);
        }
        h.push((m.to, at));
    }

    /// Before a frame: drops every lane's tombstones, so panes slice
    /// windows directly.
    pub fn settle(&mut self) {
        self.compact_where(|_| true);
    }

    /// Between batches: drops the tombstones of lanes they have come to
    /// crowd (amortised O(1) per move).
    pub fn settle_some(&mut self) {
        self.compact_where(|l| l.dead * 4 >= l.entries.len());
    }

    fn compact_where(&mut self, due: impl Fn(&LaneList) -> bool) {
        for l in 0..COLS {
            if due(&self.lanes[l]) && self.lanes[l].compact() {
                for (pos, &ix) in self.lanes[l].entries.iter().enumerate() {
                    self.lane_pos[ix as usize] = pos as u32;
                }
            }
        }
    }

    /// Rebuilds from a kernel snapshot (after the console fell behind).
    /// Palette and capacity are kept: their owners are asked separately.
    pub fn resync(&mut self, snap: &Snapshot) {
        self.proj.resync(snap);
        self.lanes = Default::default();
        self.lane_pos.clear();
        self.col.clear();
        self.history.clear();
        for ix in 0..self.proj.nodes.len() as u32 {
            let n = self.proj.node(ix);
            let (lane, since) = (n.lane, n.lane_since);
            self.moved(
                Moved {
                    node: ix,
                    from: None,
                    to: lane,
                },
                since,
            );
        }
    }

    /// The projection, for the few owners that update it outside signals
    /// (a resynchronisation asks the palette and capacity owners).
    pub fn projection_mut(&mut self) -> &mut RunProjection {
        &mut self.proj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{NodeHeader, SignalKind};

    fn sig(seq: u64, kind: SignalKind) -> Signal {
        Signal {
            v: 1,
            seq,
            elapsed: seq as f64 / 10.0,
            kind,
        }
    }

    fn header(n: u128) -> NodeHeader {
        NodeHeader {
            op_id: uuid::Uuid::from_u128(n),
            name: Arc::from(format!("op{n}")),
            parent_id: None,
            depends_on: Arc::from(Vec::new()),
            pos: crate::kernel::log_line::NO_POS,
        }
    }

    #[test]
    fn a_spawned_operation_is_labelled_by_its_first_words() {
        assert_eq!(
            instruction_words("Fix the login timeout, then rerun the suite.").as_deref(),
            Some("fix the login timeout then")
        );
        // The first line that says something; punctuation at word ends goes.
        assert_eq!(
            instruction_words("\n---\n**Benchmark** the refund path").as_deref(),
            Some("benchmark the refund path")
        );
        assert_eq!(instruction_words("   \n ... "), None);
        let long =
            instruction_words("Instrumentation-heavy-refactoring-of-everything-everywhere now")
                .unwrap();
        assert!(crate::printable::fit::width(&long) <= 32, "{long}");
    }

    #[test]
    fn lanes_keep_entry_order_and_move_nodes() {
        let mut vm = ViewModel::default();
        let q = |n| SignalKind::Queued {
            node: header(n),
            role: None,
            instruction: "x".into(),
            approval: false,
        };
        let st = |n| SignalKind::Started {
            node: header(n),
            attempt: 1,
            role: None,
            instance: None,
        };
        vm.fold(&sig(1, q(1)));
        vm.fold(&sig(2, q(2)));
        vm.fold(&sig(3, q(3)));
        vm.fold(&sig(4, st(2)));
        vm.settle();
        let names = |vm: &ViewModel, l| {
            vm.lane(l)
                .window(0, 10)
                .iter()
                .map(|&i| vm.node(i).name().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&vm, Lane::Queued), ["op1", "op3"]);
        assert_eq!(names(&vm, Lane::Running), ["op2"]);
        vm.fold(&sig(5, st(1)));
        vm.settle();
        assert_eq!(names(&vm, Lane::Running), ["op2", "op1"]);
        assert_eq!(
            vm.history(0).iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            [Lane::Queued, Lane::Running]
        );
        assert_eq!((vm.counts.queued, vm.counts.running), (1, 2));
        // An old signal (seq <= last) is ignored.
        vm.fold(&sig(3, q(9)));
        assert!(vm.find(&uuid::Uuid::from_u128(9)).is_none());
    }

    #[test]
    fn rows_are_the_same_before_and_after_tombstones_are_dropped() {
        let mut vm = ViewModel::default();
        for n in 1..=8u64 {
            let q = SignalKind::Queued {
                node: header(n.into()),
                role: None,
                instruction: "x".into(),
                approval: false,
            };
            vm.fold(&sig(n, q));
        }
        let st = |n: u64| SignalKind::Started {
            node: header(n.into()),
            attempt: 1,
            role: None,
            instance: None,
        };
        // Two of eight leave: under a quarter, so a batch's settle keeps
        // their tombstones.
        vm.fold(&sig(9, st(2)));
        vm.fold(&sig(10, st(5)));
        vm.settle_some();
        let before = vm.lane(Lane::Queued).window(1, 3);
        let rows: Vec<_> = (0..8).map(|ix| vm.lane_pos(ix)).collect();
        assert_eq!(before.len(), 3);
        assert_eq!(rows[1], Some(0), "op2 is first in running");
        assert_eq!(rows[4], Some(1), "op5 is second");
        assert_eq!(
            rows[2],
            Some(1),
            "op3 is second in queued, past op2's tombstone"
        );
        assert_eq!(rows[7], Some(5));
        vm.settle();
        assert_eq!(vm.lane(Lane::Queued).window(1, 3), before);
        assert_eq!((0..8).map(|ix| vm.lane_pos(ix)).collect::<Vec<_>>(), rows);
    }
}
