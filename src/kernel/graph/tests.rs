use super::*;

fn op(name: &str) -> Operation {
    Operation::new(name, format!("do {name}"))
}

#[test]
fn counted_ids_stay_version_4_and_distinct() {
    let base = Uuid::new_v4().as_u128();
    let ids: Vec<OpId> = [0, 1, 2, (1 << 48) - 1]
        .into_iter()
        .map(|n| counted_id(base, n))
        .collect();
    for id in &ids {
        assert_eq!(id.get_version_num(), 4, "{id}");
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}");
    }
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len());
    assert_eq!(ids[0].as_u128() >> 48, ids[3].as_u128() >> 48);
}

#[test]
fn counted_ids_hash_to_neighbouring_buckets_with_different_tags() {
    use std::hash::BuildHasher;
    let base = Uuid::new_v4().as_u128();
    let h = OpIdBuildHasher::default();
    let hashes: Vec<u64> = (0..128).map(|n| h.hash_one(counted_id(base, n))).collect();
    // The low bits (the bucket) are the id's own: 128 ids in a block of
    // 128 buckets; the top 7 (the tag) differ between all of them.
    let buckets: std::collections::BTreeSet<u64> = hashes.iter().map(|h| h & 0xffff).collect();
    assert_eq!(buckets.len(), 128);
    assert!(buckets.last().unwrap() - buckets.first().unwrap() < 128);
    let tags: std::collections::BTreeSet<u64> = hashes.iter().map(|h| h >> 57).collect();
    assert_eq!(tags.len(), 128);
    // Any id is found again, random or counted.
    let mut m = OpIdMap::default();
    let random: Vec<OpId> = (0..1000).map(|_| Uuid::new_v4()).collect();
    for (i, id) in random.iter().chain(&[counted_id(base, 7)]).enumerate() {
        m.insert(*id, i);
    }
    assert_eq!(m[&random[500]], 500);
    assert_eq!(m[&counted_id(base, 7)], 1000);
    assert!(!m.contains_key(&counted_id(base, 8)));
}

fn names_of_preds(g: &Graph, id: OpId) -> Vec<String> {
    g.predecessors(id)
        .into_iter()
        .map(|(p, _)| g.get(p).unwrap().reference_id.to_string())
        .collect()
}

#[test]
fn after_heads_chains_but_roots_stay_independent() {
    let mut b = GraphBuilder::new();
    let a = b.add_after_heads(op("a"));
    let r1 = b.add_root(op("r1"));
    let r2 = b.add_root(op("r2"));
    let c = b.add_after_heads(op("c"));
    let g = b.build().unwrap();
    assert!(g.predecessors(a).is_empty());
    assert!(g.predecessors(r1).is_empty());
    assert!(g.predecessors(r2).is_empty());
    assert_eq!(names_of_preds(&g, c), vec!["a", "r1", "r2"]);
}

#[test]
fn after_these_takes_exactly_the_named_dependencies() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a"));
    let _x = b.add_root(op("x"));
    let c = b.add_after(op("c"), [(a, Condition::Failed)]);
    let g = b.build().unwrap();
    let preds = g.predecessors(c);
    assert_eq!(preds.len(), 1);
    assert_eq!(preds[0].1.condition, Condition::Failed);
}

#[test]
fn forward_references_resolve_at_build() {
    let mut b = GraphBuilder::new();
    let later = new_op_id();
    let a = b.add_after(op("a"), [(later, Condition::Succeeded)]);
    let mut l = op("later");
    l.op_id = later;
    // `later` has an outgoing edge already, so it is not a head.
    b.add_root(l);
    assert_eq!(b.heads(), vec![a]);
    let g = b.build().unwrap();
    assert_eq!(names_of_preds(&g, a), vec!["later"]);
}

#[test]
fn cycle_is_rejected_with_its_path() {
    let mut b = GraphBuilder::new();
    let (ia, ib, ic) = (new_op_id(), new_op_id(), new_op_id());
    let mut a = op("a");
    a.op_id = ia;
    let mut bb = op("b");
    bb.op_id = ib;
    let mut c = op("c");
    c.op_id = ic;
    b.add_after(a, [(ic, Condition::Succeeded)]);
    b.add_after(bb, [(ia, Condition::Succeeded)]);
    b.add_after(c, [(ib, Condition::Succeeded)]);
    let err = b.build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "Graph must be acyclic for flow execution: cycle a -> b -> c -> a"
    );
}

#[test]
fn self_edge_and_unknown_endpoint_are_rejected() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a"));
    b.add_edge(a, a, Edge::dependency(Condition::Always));
    assert!(matches!(b.build(), Err(GraphError::SelfDependency(_))));

    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a"));
    b.add_edge(new_op_id(), a, Edge::dependency(Condition::Always));
    assert!(matches!(
        b.build(),
        Err(GraphError::UnknownOperation { .. })
    ));
}

#[test]
fn invalid_pointer_condition_is_rejected_before_work() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a"));
    b.add_after(
        op("b"),
        [(a, Condition::pointer("verdict", Value::Bool(true)))],
    );
    let err = b.build().unwrap_err();
    assert!(err.to_string().contains("must be empty or start with '/'"));
}

#[test]
fn json_pointer_escapes() {
    assert!(validate_json_pointer("").is_ok());
    assert!(validate_json_pointer("/a~0b/c~1d/0").is_ok());
    assert_eq!(
        validate_json_pointer("/a~2").unwrap_err().to_string(),
        r#"JSON pointer "/a~2" has a '~' not followed by 0 or 1 (write ~0 for '~' and ~1 for '/')"#
    );
    assert_eq!(
        validate_json_pointer("verdict").unwrap_err().to_string(),
        r#"JSON pointer "verdict" must be empty or start with '/' (for example "/verdict")"#
    );
    assert!(validate_json_pointer("/a~").is_err());
}

#[test]
fn long_chain_cycle_check_does_not_recurse() {
    // Each operation after the one added after it: every edge points
    // back in insertion order, so the search for a cycle runs in full.
    const N: usize = 200_000;
    let mut b = GraphBuilder::with_capacity(N);
    for i in 0..N - 1 {
        b.add_after_at(op(&i.to_string()), [(i + 1, Condition::Succeeded)]);
    }
    b.add_root(op("last"));
    assert_eq!(b.build().unwrap().len(), N);

    let mut b = GraphBuilder::with_capacity(N);
    for i in 0..N {
        b.add_after_at(op(&i.to_string()), [((i + 1) % N, Condition::Succeeded)]);
    }
    let Err(GraphError::Cycle { path }) = b.build() else {
        panic!("a ring of {N} is a cycle");
    };
    assert_eq!(path.len(), N);
}

#[test]
fn positions_name_dependencies_added_before_or_after() {
    let mut b = GraphBuilder::new();
    // 0 waits for 2, which is not added yet; 1 is a root.
    let a = b.add_after_at(op("a"), [(2, Condition::Failed)]);
    let r = b.add_root(op("r"));
    let later = b.add_root(op("later"));
    // `later` has an outgoing edge, so it is no head.
    assert_eq!(b.heads(), vec![a, r]);
    let c = b.add_after_heads(op("c"));
    b.add_edge_at(1, 3, Edge::dependency(Condition::Always));
    let g = b.build().unwrap();
    assert_eq!(names_of_preds(&g, a), vec!["later"]);
    assert_eq!(g.predecessors(a)[0].1.condition, Condition::Failed);
    assert!(g.predecessors(later).is_empty());
    assert_eq!(names_of_preds(&g, c), vec!["a", "r", "r"]);
    let positions: std::collections::BTreeMap<u32, OpId> =
        g.positions().map(|(id, at)| (at, id)).collect();
    assert_eq!(
        positions.into_values().collect::<Vec<_>>(),
        vec![a, r, later, c]
    );
}

#[test]
fn a_position_never_added_or_a_cycle_through_positions_is_refused() {
    let mut b = GraphBuilder::new();
    let a = b.add_after_at(op("a"), [(5, Condition::Succeeded)]);
    assert_eq!(
        b.build().unwrap_err(),
        GraphError::UnknownOperation {
            from: OpId::nil(),
            to: a
        }
    );

    let mut b = GraphBuilder::new();
    b.add_after_at(op("a"), [(1, Condition::Succeeded)]);
    b.add_after_at(op("b"), [(0, Condition::Succeeded)]);
    assert_eq!(
        b.build().unwrap_err().to_string(),
        "Graph must be acyclic for flow execution: cycle a -> b -> a"
    );

    let mut b = GraphBuilder::new();
    b.add_after_at(op("a"), [(0, Condition::Succeeded)]);
    assert!(matches!(b.build(), Err(GraphError::SelfDependency(_))));
}
