//! What each emitter has shown, the spawn counters and the ledger: the
//! state admission owns. Pure bookkeeping, no graph: an agent's stream and
//! its result are matched up here (ADR-0033 D3 dedup), attempt by attempt.

use std::collections::HashSet;
use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;
use rustc_hash::FxHashMap as HashMap;

use super::super::ledger::LedgerEntry;

/// What an operation has emitted so far. Kept beside the graph, for the few
/// operations that emit anything, so nodes stay small.
#[derive(Default)]
struct Emissions {
    /// The attempt the counts below are of.
    attempt: u32,
    /// Requests read in that attempt, for the flood cap.
    read: usize,
    /// Spawn requests that attempt put on its stream (identity -> how many
    /// times): their repeat in its result is a duplicate (ADR-0033 D3).
    /// Identical requests on the stream, or in the result, are each a
    /// request of their own.
    streamed: HashMap<u64, u32>,
    /// Escalations that attempt showed (on its stream and in its result
    /// they are one).
    seen: HashSet<u64>,
    /// Sightings a resumed run already recorded: passed over once each.
    handled: Vec<u64>,
    /// Escalations that attempt put on its stream before its result: they
    /// are the attempt's, so a failed attempt's never reach a later one.
    escalations: Vec<Arc<str>>,
    /// Its result restates its stream (see `AgentEvent::ResultRestatesStream`).
    restated: bool,
}

/// The spawn counters, the ledger and what each emitter has shown.
#[derive(Default)]
pub(super) struct Admission {
    /// The last `spawn-N` number given.
    pub spawn_seq: u64,
    pub accepted: usize,
    /// The operator's own adds: spawned operations, but not counted
    /// against max_spawn.
    pub operator_added: usize,
    pub ledger: Vec<LedgerEntry>,
    emissions: HashMap<NodeIndex, Emissions>,
}

impl Admission {
    /// The emitter's record, reset when a new attempt begins.
    fn of(&mut self, ix: NodeIndex, attempt: u32) -> &mut Emissions {
        let e = self.emissions.entry(ix).or_default();
        if e.attempt != attempt {
            e.attempt = attempt;
            e.read = 0;
            e.streamed.clear();
            e.seen.clear();
            e.escalations.clear();
            e.restated = false;
        }
        e
    }

    /// True the first time `ix`'s attempt shows the escalation with
    /// identity `id`.
    pub fn first_sighting(&mut self, ix: NodeIndex, attempt: u32, id: u64) -> bool {
        self.of(ix, attempt).seen.insert(id)
    }

    /// A spawn request `ix`'s attempt put on its stream.
    pub fn streamed(&mut self, ix: NodeIndex, attempt: u32, id: u64) {
        *self.of(ix, attempt).streamed.entry(id).or_default() += 1;
    }

    /// Whether a request in `ix`'s result repeats one its stream carried
    /// (each stream sighting answers for one result sighting).
    pub fn repeats_stream(&mut self, ix: NodeIndex, attempt: u32, id: u64) -> bool {
        match self.of(ix, attempt).streamed.get_mut(&id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// `ix`'s attempt says its result restates its stream.
    pub fn restates(&mut self, ix: NodeIndex, attempt: u32) {
        self.of(ix, attempt).restated = true;
    }

    /// Whether `ix`'s attempt said so.
    pub fn restated(&mut self, ix: NodeIndex, attempt: u32) -> bool {
        self.of(ix, attempt).restated
    }

    /// A sighting a resumed run already recorded is passed over, once.
    pub fn already_handled(&mut self, ix: NodeIndex, id: u64) -> bool {
        let Some(e) = self.emissions.get_mut(&ix) else {
            return false;
        };
        let Some(pos) = e.handled.iter().position(|&h| h == id) else {
            return false;
        };
        e.handled.swap_remove(pos);
        true
    }

    /// What a resumed run's emitter had shown before it stopped: `streamed`
    /// the spawn requests its last attempt put on its stream, `handled` the
    /// sightings already in the ledger that it will make again.
    pub fn restore(&mut self, ix: NodeIndex, attempt: u32, streamed: &[u64], handled: &[u64]) {
        if streamed.is_empty() && handled.is_empty() {
            return;
        }
        for &id in streamed {
            self.streamed(ix, attempt, id);
        }
        let e = self.emissions.entry(ix).or_default();
        e.handled.extend(handled.iter().copied());
    }

    /// Counts `n` more requests read from `ix`'s attempt; returns the
    /// attempt's total.
    pub fn read(&mut self, ix: NodeIndex, attempt: u32, n: usize) -> usize {
        let e = self.of(ix, attempt);
        e.read += n;
        e.read
    }

    pub fn push_escalation(&mut self, ix: NodeIndex, attempt: u32, reason: Arc<str>) {
        self.of(ix, attempt).escalations.push(reason);
    }

    /// The escalations `ix`'s attempt streamed; an earlier attempt's are
    /// not its own.
    pub fn take_escalations(&mut self, ix: NodeIndex, attempt: u32) -> Vec<Arc<str>> {
        match self.emissions.get_mut(&ix) {
            Some(e) if e.attempt == attempt => std::mem::take(&mut e.escalations),
            _ => Vec::new(),
        }
    }

    /// The next generated name, `spawn-N`, in one allocation.
    pub fn next_name(&mut self) -> Arc<str> {
        self.spawn_seq += 1;
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(self.spawn_seq).as_bytes();
        let mut buf = [0u8; 26];
        buf[..6].copy_from_slice(b"spawn-");
        buf[6..6 + digits.len()].copy_from_slice(digits);
        Arc::from(std::str::from_utf8(&buf[..6 + digits.len()]).expect("ascii"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_count_up_from_one_and_survive_a_resume() {
        let mut a = Admission::default();
        assert_eq!(&*a.next_name(), "spawn-1");
        assert_eq!(&*a.next_name(), "spawn-2");
        a.spawn_seq = 41;
        assert_eq!(&*a.next_name(), "spawn-42");
    }

    #[test]
    fn a_result_repeats_each_stream_sighting_once_and_attempts_start_afresh() {
        let mut a = Admission::default();
        let (x, y) = (NodeIndex::new(0), NodeIndex::new(1));
        // Twice on purpose on the stream, once more in the result.
        a.streamed(x, 1, 7);
        a.streamed(x, 1, 7);
        assert!(a.repeats_stream(x, 1, 7));
        assert!(a.repeats_stream(x, 1, 7));
        assert!(
            !a.repeats_stream(x, 1, 7),
            "a third copy is a request of its own"
        );
        assert!(
            !a.repeats_stream(y, 1, 7),
            "another emitter's request is its own"
        );
        // A new attempt has a stream of its own.
        a.streamed(x, 1, 9);
        assert!(!a.repeats_stream(x, 2, 9));
    }

    #[test]
    fn escalations_are_one_whether_streamed_or_in_the_result() {
        let mut a = Admission::default();
        let x = NodeIndex::new(0);
        assert!(a.first_sighting(x, 1, 7));
        assert!(!a.first_sighting(x, 1, 7));
        assert!(a.first_sighting(x, 2, 7), "a new attempt escalates anew");
    }

    #[test]
    fn recorded_sightings_are_passed_over_once_each() {
        let mut a = Admission::default();
        let x = NodeIndex::new(3);
        a.restore(x, 2, &[6], &[5, 5]);
        assert!(a.already_handled(x, 5));
        assert!(a.already_handled(x, 5));
        assert!(!a.already_handled(x, 5), "only as often as recorded");
        assert!(!a.already_handled(NodeIndex::new(4), 5));
        assert!(
            a.repeats_stream(x, 2, 6),
            "what it streamed before is known"
        );
    }

    #[test]
    fn escalations_wait_for_the_result_and_are_taken_once() {
        let mut a = Admission::default();
        let x = NodeIndex::new(0);
        a.push_escalation(x, 1, Arc::from("security"));
        assert_eq!(a.take_escalations(x, 1), vec![Arc::<str>::from("security")]);
        assert!(a.take_escalations(x, 1).is_empty());
        // A failed attempt's escalation is not the next attempt's.
        a.push_escalation(x, 1, Arc::from("unsure"));
        assert!(a.take_escalations(x, 2).is_empty());
    }
}
