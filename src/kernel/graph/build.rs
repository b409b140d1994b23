//! Building a graph: the three ways of placing an operation, and
//! dependencies resolved when the graph is built (by position, or by id).

use super::*;

/// An edge's end while building: a position (node `i` is the `i`-th added,
/// maybe not added yet) or an id resolved by [`GraphBuilder::build`].
#[derive(Debug, Clone, Copy)]
pub(super) enum End {
    At(usize),
    Id(OpId),
}

/// Builds a [`Graph`]. Dependencies may name operations added later (they
/// are resolved by [`GraphBuilder::build`]), so a file can list operations in
/// any order. A caller that knows where its operations go (the play: the
/// `i`-th definition is the `i`-th operation) names dependencies by
/// position, so a million edges cost no lookups of random op ids.
#[derive(Default)]
pub struct GraphBuilder {
    /// Operations go straight into the graph (node `i` is the `i`-th
    /// added); edges wait for [`GraphBuilder::build`].
    pub(super) inner: StableDiGraph<Arc<Operation>, Edge>,
    pub(super) index: OpIdMap<NodeIndex>,
    pub(super) edges: Vec<(End, End, Edge)>,
    /// Operations (by position) that have at least one outgoing edge.
    pub(super) has_out: Vec<bool>,
    /// Sources of edges whose source has not been added yet, by id and by
    /// position.
    pub(super) pending_sources: rustc_hash::FxHashSet<OpId>,
    pub(super) pending_positions: Vec<bool>,
    /// Positions that may still be heads (no outgoing edge), oldest first;
    /// ones that gained an edge are dropped lazily, so sequential authoring
    /// costs O(1) per operation, not a scan of everything before it.
    pub(super) head_candidates: Vec<usize>,
    pub(super) duplicate: Option<OpId>,
}

impl GraphBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        GraphBuilder {
            inner: StableDiGraph::with_capacity(n, 0),
            index: OpIdMap::with_capacity_and_hasher(n, Default::default()),
            edges: Vec::with_capacity(n),
            has_out: Vec::with_capacity(n),
            ..Default::default()
        }
    }

    pub(super) fn push(&mut self, op: Operation) -> OpId {
        use std::collections::hash_map::Entry;
        let id = op.op_id;
        let pos = self.has_out.len();
        // One probe of the index, not a lookup and then an insert.
        match self.index.entry(id) {
            Entry::Occupied(_) => {
                self.duplicate.get_or_insert(id);
                return id;
            }
            Entry::Vacant(v) => {
                v.insert(NodeIndex::new(pos));
            }
        }
        let out = (!self.pending_sources.is_empty() && self.pending_sources.remove(&id))
            | self.pending_positions.get(pos).copied().unwrap_or(false);
        self.has_out.push(out);
        if !out {
            self.head_candidates.push(pos);
        }
        let ix = self.inner.add_node(Arc::new(op));
        debug_assert_eq!(ix.index(), pos);
        id
    }

    pub(super) fn mark_source(&mut self, from: OpId) -> End {
        match self.index.get(&from) {
            Some(&ix) => self.mark_position(ix.index()),
            None => {
                self.pending_sources.insert(from);
                End::Id(from)
            }
        }
    }

    pub(super) fn mark_position(&mut self, pos: usize) -> End {
        match self.has_out.get_mut(pos) {
            Some(out) => *out = true,
            None => {
                if self.pending_positions.len() <= pos {
                    self.pending_positions.resize(pos + 1, false);
                }
                self.pending_positions[pos] = true;
            }
        }
        End::At(pos)
    }

    /// The current heads: operations added so far with no outgoing edge.
    pub fn heads(&self) -> Vec<OpId> {
        self.head_candidates
            .iter()
            .filter(|&&p| !self.has_out[p])
            .map(|&p| self.inner[NodeIndex::new(p)].op_id)
            .collect()
    }

    /// Adds `op` after every current head (sequential authoring). The first
    /// operation of an empty builder is a root.
    pub fn add_after_heads(&mut self, op: Operation) -> OpId {
        let heads: Vec<usize> = self
            .head_candidates
            .iter()
            .copied()
            .filter(|&p| !self.has_out[p])
            .collect();
        // Every head gains an edge now: none of them is a head any more.
        self.head_candidates.clear();
        self.add_after_at(op, heads.into_iter().map(|h| (h, Condition::Succeeded)))
    }

    /// Adds `op` after exactly these operations, each edge with its condition.
    pub fn add_after(
        &mut self,
        op: Operation,
        deps: impl IntoIterator<Item = (OpId, Condition)>,
    ) -> OpId {
        let id = self.push(op);
        for (dep, cond) in deps {
            self.add_edge(dep, id, Edge::dependency(cond));
        }
        id
    }

    /// [`GraphBuilder::add_after`] with the dependencies named by position:
    /// the `i`-th operation added (or to be added) is position `i`.
    pub fn add_after_at(
        &mut self,
        op: Operation,
        deps: impl IntoIterator<Item = (usize, Condition)>,
    ) -> OpId {
        let id = self.push(op);
        let to = End::At(self.has_out.len() - 1);
        for (dep, cond) in deps {
            let from = self.mark_position(dep);
            self.edges.push((from, to, Edge::dependency(cond)));
        }
        id
    }

    /// Adds `op` as an independent root, whatever the current heads are.
    pub fn add_root(&mut self, op: Operation) -> OpId {
        self.push(op)
    }

    pub fn add_edge(&mut self, from: OpId, to: OpId, edge: Edge) {
        let from = self.mark_source(from);
        let to = match self.index.get(&to) {
            Some(ix) => End::At(ix.index()),
            None => End::Id(to),
        };
        self.edges.push((from, to, edge));
    }

    /// [`GraphBuilder::add_edge`] between positions.
    pub fn add_edge_at(&mut self, from: usize, to: usize, edge: Edge) {
        let from = self.mark_position(from);
        self.edges.push((from, End::At(to), edge));
    }

    pub fn len(&self) -> usize {
        self.has_out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.has_out.is_empty()
    }

    /// Resolves edges and validates: every endpoint exists, no self edge, the
    /// conditions are well formed, and the graph is acyclic.
    pub fn build(self) -> Result<Graph, GraphError> {
        if let Some(dup) = self.duplicate {
            return Err(GraphError::DuplicateOperation(dup));
        }
        let (mut inner, index) = (self.inner, self.index);
        inner.reserve_edges(self.edges.len());
        let count = inner.node_count();
        let resolve = |end: End| match end {
            End::At(p) if p < count => Some(NodeIndex::new(p)),
            End::At(_) => None,
            End::Id(id) => index.get(&id).copied(),
        };
        for (from, to, edge) in self.edges {
            let (Some(a), Some(b)) = (resolve(from), resolve(to)) else {
                let id = |end: End| match end {
                    End::Id(id) => id,
                    End::At(p) if p < count => inner[NodeIndex::new(p)].op_id,
                    End::At(_) => OpId::nil(),
                };
                return Err(GraphError::UnknownOperation {
                    from: id(from),
                    to: id(to),
                });
            };
            if a == b {
                return Err(GraphError::SelfDependency(inner[a].reference_id.clone()));
            }
            inner.add_edge(a, b, edge);
        }
        let graph = Graph { inner, index };
        graph.validate()?;
        Ok(graph)
    }
}
