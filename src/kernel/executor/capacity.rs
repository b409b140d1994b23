//! The capacity gate: asks the lease seam before an operation takes a
//! slot, keeps operations that must wait in one FIFO queue per provider
//! queue (a profile) holding no slot, and remembers which leases running
//! operations hold. It knows nothing about the graph: callers pass node
//! indices and the request to make.

use std::collections::VecDeque;
use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;
use rustc_hash::FxHashMap as HashMap;

use super::super::lease::{Lease, LeaseAnswer, LeaseProvider, LeaseRequest};

/// Ready operations that wait for the same capacity.
struct Queue {
    name: Arc<str>,
    ops: VecDeque<NodeIndex>,
    /// Capacity changed since the head last had to wait: ask again.
    dirty: bool,
}

/// What asking for a lease gave.
pub(super) enum Ask {
    /// Go: with the lease, or unmanaged.
    Go(Option<Lease>),
    /// Wait in `queue`, for `reason`.
    Wait { queue: Arc<str>, reason: Arc<str> },
    /// Capacity can never serve it: fail it with this reason.
    Unavailable(Arc<str>),
}

#[derive(Default)]
pub(super) struct CapacityGate {
    provider: Option<Arc<dyn LeaseProvider>>,
    held: HashMap<NodeIndex, Lease>,
    queues: Vec<Queue>,
    reasons: HashMap<NodeIndex, Arc<str>>,
}

impl CapacityGate {
    pub fn set_provider(&mut self, p: Arc<dyn LeaseProvider>) {
        self.provider = Some(p);
    }

    pub fn ask(&self, req: &LeaseRequest<'_>) -> Ask {
        let Some(p) = &self.provider else {
            return Ask::Go(None);
        };
        match p.acquire(req) {
            LeaseAnswer::NotManaged => Ask::Go(None),
            LeaseAnswer::Granted(l) => Ask::Go(Some(l)),
            LeaseAnswer::Wait { queue, reason } => Ask::Wait { queue, reason },
            LeaseAnswer::Unavailable { reason } => Ask::Unavailable(reason),
        }
    }

    /// The head of a queue whose capacity changed since it last waited.
    pub fn retry_candidate(&self) -> Option<(usize, NodeIndex)> {
        self.queues
            .iter()
            .position(|q| q.dirty && !q.ops.is_empty())
            .map(|q| (q, self.queues[q].ops[0]))
    }

    /// The head of queue `q` got its lease, or was told it never will:
    /// either way it leaves the queue.
    pub fn granted(&mut self, q: usize) {
        if let Some(ix) = self.queues[q].ops.pop_front() {
            self.reasons.remove(&ix);
        }
        self.report_depth(q);
    }

    /// The head of queue `q` must wait on; returns the reason when it
    /// changed (to signal).
    pub fn still_waiting(&mut self, q: usize, reason: Arc<str>) -> Option<Arc<str>> {
        self.queues[q].dirty = false;
        let ix = *self.queues[q].ops.front()?;
        self.note(ix, reason)
    }

    /// `ix` waits at the back of `queue`; returns the reason to signal when
    /// it is new for it.
    pub fn wait(&mut self, ix: NodeIndex, queue: Arc<str>, reason: Arc<str>) -> Option<Arc<str>> {
        let q = match self.queues.iter().position(|q| q.name == queue) {
            Some(q) => q,
            None => {
                self.queues.push(Queue {
                    name: queue,
                    ops: VecDeque::new(),
                    dirty: false,
                });
                self.queues.len() - 1
            }
        };
        self.queues[q].ops.push_back(ix);
        self.report_depth(q);
        self.note(ix, reason)
    }

    fn note(&mut self, ix: NodeIndex, reason: Arc<str>) -> Option<Arc<str>> {
        if self.reasons.get(&ix) == Some(&reason) {
            return None;
        }
        self.reasons.insert(ix, reason.clone());
        Some(reason)
    }

    /// What `ix` waits for, if it waits for capacity.
    pub fn reason(&self, ix: NodeIndex) -> Option<&Arc<str>> {
        self.reasons.get(&ix)
    }

    /// Capacity changed: every queue asks again.
    pub fn changed(&mut self) {
        for q in &mut self.queues {
            q.dirty = true;
        }
    }

    /// Takes `ix` out of whichever queue holds it.
    pub fn leave(&mut self, ix: NodeIndex) -> bool {
        for q in 0..self.queues.len() {
            if let Some(pos) = self.queues[q].ops.iter().position(|&o| o == ix) {
                self.queues[q].ops.remove(pos);
                self.report_depth(q);
                self.reasons.remove(&ix);
                return true;
            }
        }
        false
    }

    /// Empties every queue (a pause parks them, a cancel skips them);
    /// returns what waited, queue by queue in order.
    pub fn drain(&mut self) -> Vec<NodeIndex> {
        let mut all = Vec::new();
        for q in 0..self.queues.len() {
            all.extend(self.queues[q].ops.drain(..));
            self.report_depth(q);
        }
        self.reasons.clear();
        all
    }

    pub fn hold(&mut self, ix: NodeIndex, lease: Lease) {
        self.held.insert(ix, lease);
    }

    /// `ix` settled: its lease goes back and waiting queues ask again.
    pub fn release(&mut self, ix: NodeIndex) {
        if let Some(lease) = self.held.remove(&ix)
            && let Some(p) = &self.provider
        {
            p.release(lease.id);
            self.changed();
        }
    }

    fn report_depth(&self, q: usize) {
        if let Some(p) = &self.provider {
            let queue = &self.queues[q];
            p.queue_depth(&queue.name, queue.ops.len());
        }
    }

    /// Work under way will change capacity by itself.
    pub fn pending(&self) -> bool {
        self.provider.as_ref().is_some_and(|p| p.pending())
    }

    pub fn round_ended(&mut self, round: u32) {
        if let Some(p) = &self.provider {
            p.round_ended(round);
            self.changed();
        }
    }

    pub fn run_finished(&self) {
        if let Some(p) = &self.provider {
            p.run_finished();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::OpId;
    use std::sync::Mutex;

    /// Grants while it has free instances; records what the gate tells it.
    #[derive(Default)]
    struct Fake {
        free: Mutex<u32>,
        released: Mutex<Vec<u64>>,
        depths: Mutex<Vec<(String, usize)>>,
        rounds: Mutex<Vec<u32>>,
    }

    impl LeaseProvider for Fake {
        fn acquire(&self, req: &LeaseRequest<'_>) -> LeaseAnswer {
            if req.role == Some("free") {
                return LeaseAnswer::NotManaged;
            }
            let mut free = self.free.lock().unwrap();
            if *free == 0 {
                return LeaseAnswer::Wait {
                    queue: Arc::from("coder"),
                    reason: Arc::from("capacity: profile coder at max_instances 1"),
                };
            }
            *free -= 1;
            LeaseAnswer::Granted(Lease {
                id: u64::from(*free) + 1,
                instance: Arc::from("i1"),
                workspace: None,
                agent: None,
                profile: None,
            })
        }
        fn release(&self, lease: u64) {
            *self.free.lock().unwrap() += 1;
            self.released.lock().unwrap().push(lease);
        }
        fn queue_depth(&self, queue: &str, depth: usize) {
            self.depths.lock().unwrap().push((queue.into(), depth));
        }
        fn round_ended(&self, round: u32) {
            self.rounds.lock().unwrap().push(round);
        }
    }

    fn req(role: &str) -> LeaseRequest<'_> {
        LeaseRequest {
            op_id: OpId::nil(),
            name: "op",
            role: Some(role),
            profile: None,
            queued: false,
        }
    }

    fn gate(free: u32) -> (CapacityGate, Arc<Fake>) {
        let fake = Arc::new(Fake::default());
        *fake.free.lock().unwrap() = free;
        let mut g = CapacityGate::default();
        g.set_provider(fake.clone());
        (g, fake)
    }

    #[test]
    fn without_a_provider_everything_goes_unmanaged() {
        let g = CapacityGate::default();
        assert!(matches!(g.ask(&req("x")), Ask::Go(None)));
        assert!(!g.pending());
    }

    #[test]
    fn waiters_queue_in_order_and_are_asked_again_only_after_a_change() {
        let (mut g, fake) = gate(1);
        let Ask::Go(Some(lease)) = g.ask(&req("coder")) else {
            panic!("the first gets the instance");
        };
        let (a, b) = (NodeIndex::new(1), NodeIndex::new(2));
        g.hold(NodeIndex::new(0), lease);
        for ix in [a, b] {
            let Ask::Wait { queue, reason } = g.ask(&req("coder")) else {
                panic!("full");
            };
            // The reason is signalled once per operation.
            assert!(g.wait(ix, queue, reason).is_some());
        }
        assert_eq!(
            g.reason(a).map(|r| &**r),
            Some("capacity: profile coder at max_instances 1")
        );
        // Nothing changed: nobody is asked again.
        assert_eq!(g.retry_candidate(), None);
        g.release(NodeIndex::new(0));
        assert_eq!(*fake.released.lock().unwrap(), vec![1]);
        assert_eq!(g.retry_candidate(), Some((0, a)));
        g.granted(0);
        assert_eq!(g.reason(a), None);
        // b is the head now, but capacity did not change for it since.
        assert_eq!(g.retry_candidate(), Some((0, b)));
        let same = Arc::from("capacity: profile coder at max_instances 1");
        assert_eq!(
            g.still_waiting(0, same),
            None,
            "an unchanged reason is not signalled again"
        );
        assert_eq!(g.retry_candidate(), None);
        let depths = fake.depths.lock().unwrap().clone();
        assert_eq!(depths.last(), Some(&("coder".to_string(), 1)));
    }

    #[test]
    fn leaving_and_draining_empty_the_queues_and_report_depth() {
        let (mut g, fake) = gate(0);
        for i in 0..3 {
            g.wait(NodeIndex::new(i), Arc::from("coder"), Arc::from("full"));
        }
        assert!(g.leave(NodeIndex::new(1)));
        assert!(!g.leave(NodeIndex::new(1)));
        assert_eq!(g.drain(), vec![NodeIndex::new(0), NodeIndex::new(2)]);
        assert_eq!(g.reason(NodeIndex::new(0)), None);
        assert_eq!(
            fake.depths.lock().unwrap().last(),
            Some(&("coder".to_string(), 0))
        );
    }

    #[test]
    fn unmanaged_roles_pass_and_round_ends_reach_the_provider() {
        let (mut g, fake) = gate(0);
        assert!(matches!(g.ask(&req("free")), Ask::Go(None)));
        g.wait(NodeIndex::new(5), Arc::from("coder"), Arc::from("full"));
        g.round_ended(3);
        assert_eq!(*fake.rounds.lock().unwrap(), vec![3]);
        // A round end frees capacity: waiters are asked again.
        assert_eq!(g.retry_candidate(), Some((0, NodeIndex::new(5))));
        // Releasing what nobody holds changes nothing.
        g.release(NodeIndex::new(9));
        assert!(fake.released.lock().unwrap().is_empty());
    }
}
