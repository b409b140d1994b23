//! Signal emission: numbering, the run clock, the sinks that must see every
//! signal in order (the event log, the checkpoint), and the broadcast that
//! observers may fall behind on.

use std::sync::Arc;

use tokio::sync::broadcast;
use tokio::time::Instant;

use super::super::signal::{SIGNAL_SCHEMA_VERSION, Signal, SignalKind, SignalSink, SinkError};
use super::node::Ms;

pub(super) struct Bus {
    pub seq: u64,
    pub t0: Instant,
    /// Run time before this process (a resumed run goes on from it).
    pub offset: f64,
    /// The time of the step being processed: every signal of one step of
    /// the event loop carries the same `elapsed`, read once.
    pub clock: f64,
    /// `clock` in a node's whole milliseconds, converted once per step
    /// rather than at every moment a node records.
    pub clock_ms: Ms,
    pub tx: broadcast::Sender<Arc<Signal>>,
    pub sinks: Vec<Box<dyn SignalSink>>,
}

impl Bus {
    pub fn new(tx: broadcast::Sender<Arc<Signal>>) -> Bus {
        Bus {
            seq: 0,
            t0: Instant::now(),
            offset: 0.0,
            clock: 0.0,
            clock_ms: Ms::at(0.0),
            tx,
            sinks: Vec::new(),
        }
    }

    /// Reads the clock; microsecond resolution keeps the stream readable
    /// and exact under the paused clock.
    pub fn tick(&mut self) -> f64 {
        // Whole microseconds in a u64 (as_micros' u128 would be converted
        // to f64 in software, at every step); the same value below 2^53 µs.
        let d = self.t0.elapsed();
        let micros = d
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(d.subsec_micros()));
        self.clock = self.offset + (micros as f64) / 1e6;
        self.clock_ms = Ms::at(self.clock);
        self.clock
    }

    /// Emits one signal; returns its seq and time.
    pub fn emit(&mut self, kind: SignalKind) -> (u64, f64) {
        self.seq += 1;
        let elapsed = self.clock;
        let sig = Arc::new(Signal {
            v: SIGNAL_SCHEMA_VERSION,
            seq: self.seq,
            elapsed,
            kind,
        });
        for sink in &mut self.sinks {
            sink.write(&sig);
        }
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(sig);
        }
        (self.seq, elapsed)
    }

    /// A commit point: sinks make what they have durable. Every sink is
    /// flushed; the first failure is returned.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        let mut first = Ok(());
        for sink in &mut self.sinks {
            if let Err(e) = sink.flush()
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    /// Ends the streams: sinks are dropped (their last state written) and
    /// observers see the broadcast close.
    pub fn close(&mut self) {
        self.sinks.clear();
        self.tx = broadcast::channel(1).0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<(Vec<u64>, usize)>>);

    impl SignalSink for Recorder {
        fn write(&mut self, s: &Arc<Signal>) {
            self.0.lock().unwrap().0.push(s.seq);
        }
        fn flush(&mut self) -> Result<(), SinkError> {
            self.0.lock().unwrap().1 += 1;
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn every_signal_is_numbered_without_gaps_and_reaches_sinks_and_observers() {
        let (tx, mut rx) = broadcast::channel(16);
        let mut bus = Bus::new(tx);
        let rec = Recorder::default();
        bus.sinks.push(Box::new(rec.clone()));
        tokio::time::advance(std::time::Duration::from_millis(1500)).await;
        bus.tick();
        let (a, t) = bus.emit(SignalKind::RunPaused { cause: None });
        let (b, t2) = bus.emit(SignalKind::RunResumed);
        // One step of the loop: one time for all its signals.
        assert_eq!((a, b, t, t2), (1, 2, 1.5, 1.5));
        bus.flush().unwrap();
        assert_eq!(*rec.0.lock().unwrap(), (vec![1, 2], 1));
        assert_eq!(rx.recv().await.unwrap().seq, 1);
        assert_eq!(rx.recv().await.unwrap().seq, 2);
        bus.close();
        assert!(rx.recv().await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_resumed_clock_goes_on_from_its_offset() {
        let (tx, _) = broadcast::channel(4);
        let mut bus = Bus::new(tx);
        bus.offset = 10.0;
        bus.t0 = Instant::now();
        tokio::time::advance(std::time::Duration::from_millis(250)).await;
        assert_eq!(bus.tick(), 10.25);
        assert_eq!(
            bus.clock_ms,
            Ms::at(10.25),
            "the step's time as nodes record it"
        );
    }
}
