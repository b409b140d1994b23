//! The operations as a graph: duplicate ids, unknown and self
//! dependencies, cycles (named along their path), and `when` targets
//! that are not dependencies.

use super::*;

/// Duplicate ids, unknown and self dependencies; the positions the
/// dependencies resolve to (see `Play::dep_at`).
pub(super) fn check_graph(r: &mut Reader, source: &str, ops: &[Shape]) -> Vec<u32> {
    // Where each id is first defined: one map for every check here.
    let mut pos: HashMap<&str, usize> =
        HashMap::with_capacity_and_hasher(ops.len(), Default::default());
    for (i, op) in ops.iter().enumerate() {
        match pos.entry(op.id.as_str()) {
            std::collections::hash_map::Entry::Occupied(first) => {
                let (line, _) =
                    crate::play::diag::line_col(source, ops[*first.get()].id_span.start);
                r.push(
                    Diagnostic::new(
                        op.id_span.clone(),
                        format!("duplicate operation id {:?}", op.id),
                        "defined again here",
                    )
                    .help(format!(
                        "ids must be unique; {:?} is first defined on line {line}",
                        op.id
                    )),
                );
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(i);
            }
        }
    }
    // Whether every dependency is on an operation written above it (the
    // usual file): then no cycle is possible, and none is searched for.
    let mut backward_only = true;
    // For the help of an unknown dependency: made once, when needed.
    let mut ids: Option<Vec<&str>> = None;
    let mut at = Vec::with_capacity(ops.iter().map(|o| o.deps.len()).sum());
    for (i, op) in ops.iter().enumerate() {
        for (dep, span) in &op.deps {
            if dep == &op.id {
                r.push(
                    Diagnostic::new(
                        span.clone(),
                        format!("operation {:?} depends on itself", op.id),
                        "self dependency",
                    )
                    .help("remove it from depends_on"),
                );
            } else if let Some(&j) = pos.get(dep.as_str()) {
                backward_only &= j < i;
                at.push(j as u32);
            } else {
                let ids = ids.get_or_insert_with(|| ops.iter().map(|o| o.id.as_str()).collect());
                let mut help = format!("known ids: {}", list(ids, 12));
                if let Some(s) = did_you_mean(dep, ids.iter().copied()) {
                    help = format!("did you mean {s:?}? {help}");
                }
                r.push(
                    Diagnostic::new(
                        span.clone(),
                        format!("operation {:?} depends on unknown operation {dep:?}", op.id),
                        "no operation has this id",
                    )
                    .help(help),
                );
            }
        }
    }
    // Edges made for operations without depends_on always come from above.
    if !backward_only && let Some(d) = find_cycle(ops, &pos) {
        r.push(d);
    }
    at
}

/// The edges the graph builder will make, by position: explicit
/// dependencies, and for an operation without `depends_on` one from every
/// operation before it that nothing depends on yet. Unknown and duplicate
/// ids are left out (they are reported on their own). `pos`: where each id
/// is first defined.
pub(super) fn shape_edges(ops: &[Shape], pos: &HashMap<&str, usize>) -> Vec<Vec<usize>> {
    let mut preds = vec![Vec::new(); ops.len()];
    // Which operations are sources of an edge so far (a dependency on a
    // later operation counts from the moment that one is placed), and the
    // ones that may still be heads (dropped lazily: linear overall).
    let mut has_out = vec![false; ops.len()];
    let mut candidates: Vec<usize> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if pos.get(op.id.as_str()) != Some(&i) {
            continue;
        }
        match op.placement {
            ShapePlacement::After => {
                for (d, _) in &op.deps {
                    if let Some(&j) = pos.get(d.as_str())
                        && j != i
                    {
                        preds[i].push(j);
                        has_out[j] = true;
                    }
                }
            }
            ShapePlacement::Root => {}
            ShapePlacement::AfterHeads => {
                for j in candidates.drain(..) {
                    if !has_out[j] {
                        preds[i].push(j);
                        has_out[j] = true;
                    }
                }
            }
        }
        if !has_out[i] {
            candidates.push(i);
        }
    }
    preds
}

/// A dependency cycle among the operations, reported at the first one in
/// it with the whole path, together with every other problem of the file.
pub(super) fn find_cycle(ops: &[Shape], pos: &HashMap<&str, usize>) -> Option<Diagnostic> {
    let preds = shape_edges(ops, pos);
    // Iterative DFS over predecessors; a back edge closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; ops.len()];
    for start in 0..ops.len() {
        if mark[start] != Mark::New {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::Open;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&p) = preds[node].get(*next) {
                *next += 1;
                match mark[p] {
                    Mark::New => {
                        mark[p] = Mark::Open;
                        stack.push((p, 0));
                    }
                    Mark::Open => {
                        // The path from p back to p along the stack, in
                        // dependency order.
                        let at = stack.iter().position(|(n, _)| *n == p).unwrap_or(0);
                        let mut path: Vec<usize> = stack[at..].iter().map(|(n, _)| *n).collect();
                        path.reverse();
                        return Some(cycle_diagnostic(ops, &path));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}

pub(super) fn cycle_diagnostic(ops: &[Shape], path: &[usize]) -> Diagnostic {
    // Start at the operation written first.
    let mut path = path.to_vec();
    if let Some(k) = path
        .iter()
        .enumerate()
        .min_by_key(|(_, i)| **i)
        .map(|(k, _)| k)
    {
        path.rotate_left(k);
    }
    let path = &path[..];
    let mut shown = String::new();
    let mut implicit = false;
    for (k, &i) in path.iter().enumerate() {
        let next = path[(k + 1) % path.len()];
        shown.push_str(&ops[i].id);
        shown.push_str(" -> ");
        if ops[next].placement == ShapePlacement::AfterHeads {
            shown.push_str("(after heads) ");
            implicit = true;
        }
    }
    shown.push_str(&ops[path[0]].id);
    let first = path[0];
    let mut help = String::from(
        "an operation cannot wait, directly or not, for itself; remove one of these dependencies",
    );
    if implicit {
        help.push_str(
            "; \"(after heads)\" marks an operation without depends_on, which runs after the operations above it that nothing depends on yet",
        );
    }
    Diagnostic::new(
        ops[first].id_span.clone(),
        format!("dependency cycle: {shown}"),
        "this operation waits for itself",
    )
    .help(help)
}

/// A `when` pointer tests what the operations an operation depends on
/// returned. One that matches the operation's own simulated result and
/// none of its dependencies' can never hold: it was meant for the wrong
/// result, and the operation would always be skipped.
pub(super) fn check_when_targets(r: &mut Reader, play: &Play) {
    let result_of = |op: &OpDef| -> Option<Value> {
        if play.runs_on(op) != "sim" {
            return None;
        }
        let spec = op
            .sim
            .as_deref()
            .cloned()
            .unwrap_or_else(|| crate::agents::SimSpec::default_for(&op.instruction));
        let attempts = spec.fail_attempts.map_or(1, |n| n + 1);
        crate::agents::sim::outcome(&spec, &op.id, attempts).ok()
    };
    for op in &play.operations {
        let (Condition::Pointer(p), Placement::After(deps), Some(span)) =
            (&op.when, &op.placement, &op.when_span)
        else {
            continue;
        };
        let matches = |v: &Value| v.pointer(&p.pointer) == Some(&p.equals);
        let own = result_of(op).is_some_and(|v| matches(&v));
        let deps_match = deps.iter().any(|(d, _)| {
            play.op(d)
                .is_none_or(|d| result_of(d).is_none_or(|v| matches(&v)))
        });
        if own && !deps_match {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!(
                        "`when` of {} tests its own result: {} = {} is what {} returns, not what it depends on returns",
                        op.id, p.pointer, p.equals, op.id
                    ),
                    "never holds",
                )
                .help("when tests the results of the operations in depends_on, to decide whether this one runs; point it at what they return"),
            );
        }
    }
}
