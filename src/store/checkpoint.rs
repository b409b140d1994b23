//! `checkpoint.json`: the durable state of a run, the [`RunProjection`] of
//! its signals with what the signals do not repeat (the declared palette,
//! where the play file was).
//!
//! `events.jsonl` stays the source of truth: resume loads the checkpoint and
//! folds the log's lines after its `seq` over it, so the checkpoint may lag
//! the log, never lead it. That lets it be written rarely: a writer thread
//! owns its own projection, folds each batch after the event log has it,
//! and writes a snapshot only when the events since the last one are about
//! as large as it (a geometric schedule, so the total cost stays linear in the
//! run) and when the run ends. Before a snapshot is renamed into place the
//! log is fsynced, so power loss cannot leave a checkpoint ahead of its log;
//! while operations settle the log is also fsynced at least every
//! [`SYNC_INTERVAL`]. The kernel never waits for any of it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kernel::{Edge, Graph, RunConfig, Signal, SignalKind, SignalSink, SinkError};
use crate::projection::{Node, RunProjection};

pub const CHECKPOINT_FILE: &str = "checkpoint.json";
pub const CHECKPOINT_FORMAT: u32 = 2;
/// Events folded before the first snapshot after the seed.
const MIN_EVENTS: u64 = 512;
/// How long the writer lets batches gather between two folds.
const GATHER: Duration = Duration::from_millis(1);
/// The log is fsynced at least this often while operations settle.
pub const SYNC_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub format: u32,
    /// Where the play file was when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub play_path: Option<PathBuf>,
    /// `[palette]` as the play declared it (resume refuses a changed one).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub declared_palette: Value,
    /// The event log's part it covers, as a length and a running CRC-32:
    /// resume checks those bytes by their hash, without decoding them
    /// (absent in checkpoints written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogMark>,
    pub state: RunProjection,
}

/// How far the event log is written, and the CRC-32 of its bytes so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogMark {
    /// The seq of the last line in those bytes.
    #[serde(skip)]
    pub seq: u64,
    pub bytes: u64,
    pub crc32: u32,
}

/// Checkpoints of runs with more operations than this are written through
/// LZ4 (the same JSON, framed and compressed); smaller ones stay plain
/// text a person can read. [`Checkpoint::load`] reads either.
pub const COMPRESS_OVER: usize = 10_000;
/// The first bytes of an LZ4 frame.
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path}:{line}:{column}: the checkpoint is damaged ({message}); it is not used (nothing was changed)"
    )]
    Damaged {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{path}: checkpoint format {found} is not one this playdeck reads (it reads {CHECKPOINT_FORMAT})"
    )]
    Format { path: String, found: u32 },
}

impl Checkpoint {
    /// The state before the first signal: the initial graph and settings.
    pub fn seed(graph: &Graph, cfg: &RunConfig) -> Checkpoint {
        Checkpoint {
            format: CHECKPOINT_FORMAT,
            play_path: None,
            declared_palette: Value::Null,
            log: None,
            state: RunProjection::seed(graph, cfg),
        }
    }

    /// [`Checkpoint::seed`] from a run that has not started.
    pub fn seed_run(run: &crate::kernel::Run, cfg: &RunConfig) -> Checkpoint {
        let g = run.graph_parts();
        Checkpoint {
            format: CHECKPOINT_FORMAT,
            play_path: None,
            declared_palette: Value::Null,
            log: None,
            state: RunProjection::seed_from(cfg, g.len(), g.operations(), g.edges(), g.positions()),
        }
    }

    pub fn apply(&mut self, s: &Signal) {
        self.state.apply(s);
    }

    /// Writes it atomically (temporary file, fsync, rename, fsync of the
    /// directory), serialised straight into the file.
    /// Returns the JSON's length (before any compression: the writing's
    /// cost, which the snapshot schedule weighs).
    pub fn write(&self, path: &Path) -> std::io::Result<u64> {
        let compress = self.state.nodes.len() > COMPRESS_OVER;
        crate::files::write_atomic_with(path, |w| {
            if compress {
                // The frame's content checksum: a flipped bit anywhere is
                // refused when read, never taken as another state.
                let info = lz4_flex::frame::FrameInfo::new().content_checksum(true);
                let (n, z) =
                    self.json_into(lz4_flex::frame::FrameEncoder::with_frame_info(info, w))?;
                z.finish().map_err(std::io::Error::other)?;
                Ok(n)
            } else {
                self.json_into(w).map(|(n, _)| n)
            }
        })
    }

    /// Its JSON line into `w`: how many bytes, and `w` back.
    fn json_into<W: Write>(&self, w: W) -> std::io::Result<(u64, W)> {
        let mut counted = crate::files::Counted { inner: w, n: 0 };
        serde_json::to_writer(&mut counted, self).map_err(std::io::Error::other)?;
        counted.write_all(b"\n")?;
        Ok((counted.n, counted.inner))
    }

    /// Reads `checkpoint.json`; a cut or corrupt file is an error naming it.
    pub fn load(path: &Path) -> Result<Checkpoint, CheckpointError> {
        let shown = path.display().to_string();
        let bytes = plain_bytes(path)?;
        // The format first, so an older file is named as such rather than
        // as damaged.
        #[derive(Deserialize)]
        struct Head {
            format: u32,
        }
        if let Ok(h) = serde_json::from_slice::<Head>(&bytes)
            && h.format != CHECKPOINT_FORMAT
        {
            return Err(CheckpointError::Format {
                path: shown,
                found: h.format,
            });
        }
        let mut c: Checkpoint =
            serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Damaged {
                path: shown.clone(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })?;
        c.state.reindex();
        Ok(c)
    }
}

/// A checkpoint file's JSON: as it is, or out of its LZ4 frame.
pub fn plain_bytes(path: &Path) -> Result<Vec<u8>, CheckpointError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| CheckpointError::Read {
        path: shown.clone(),
        source,
    })?;
    if !bytes.starts_with(&LZ4_MAGIC) {
        return Ok(bytes);
    }
    let mut plain = Vec::with_capacity(bytes.len() * 8);
    std::io::Read::read_to_end(
        &mut lz4_flex::frame::FrameDecoder::new(&bytes[..]),
        &mut plain,
    )
    .map_err(|e| CheckpointError::Damaged {
        path: shown,
        line: 1,
        column: 1,
        message: format!("its LZ4 frame does not decompress: {e}"),
    })?;
    Ok(plain)
}

/// Whether a signal settles an operation (a point worth an fsync).
fn settles(kind: &SignalKind) -> bool {
    matches!(
        kind,
        SignalKind::Completed { .. }
            | SignalKind::Failed { .. }
            | SignalKind::Escalated { .. }
            | SignalKind::Skipped { .. }
            | SignalKind::Spawned { .. }
    )
}

/// What the writer did, for tests and benchmarks.
#[derive(Debug, Default)]
pub struct WriterStats {
    pub snapshots: AtomicU64,
    pub bytes: AtomicU64,
    pub log_syncs: AtomicU64,
    /// Why the last snapshot could not be written (cleared by one that
    /// was): said at the run's end, not only logged.
    pub failed: std::sync::Mutex<Option<String>>,
}

impl WriterStats {
    /// The last snapshot's failure, if the last one failed.
    pub fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_failed(&self, why: Option<String>) {
        *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }
}

enum Msg {
    /// Signals, and how far the event log is written now (`None`: there is
    /// no log): the checkpoint folds no further than that.
    Batch(Vec<Arc<Signal>>, Option<LogMark>),
}

/// Hands each committed batch of signals to the checkpoint writer thread.
pub struct CheckpointSink {
    pending: Vec<Arc<Signal>>,
    /// How far the event log is written.
    log_mark: Option<crate::store::SharedMark>,
    tx: Option<mpsc::Sender<Msg>>,
    writer: Option<std::thread::JoinHandle<()>>,
    stats: Arc<WriterStats>,
}

impl CheckpointSink {
    /// Writes the seed at once (a run that dies before its first signal can
    /// be resumed), then starts the writer. `log` is the event log, fsynced
    /// before each snapshot.
    /// `log_mark` is how far the event log is written (`None`: no log, fold
    /// everything).
    pub fn new(
        dir: &Path,
        seed: Checkpoint,
        log: Option<File>,
        log_mark: Option<crate::store::SharedMark>,
    ) -> std::io::Result<CheckpointSink> {
        let path = dir.join(CHECKPOINT_FILE);
        let stats = Arc::new(WriterStats::default());
        let size = seed.write(&path)?;
        stats.snapshots.fetch_add(1, Ordering::Relaxed);
        stats.bytes.fetch_add(size, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let shared = stats.clone();
        let log_at_start = log_mark
            .as_ref()
            .map_or(0, |m| m.lock().unwrap_or_else(|e| e.into_inner()).bytes);
        let writer = std::thread::Builder::new()
            .name("playdeck-checkpoint".into())
            .spawn(move || writer(seed, path, log, rx, shared, size, log_at_start))?;
        Ok(CheckpointSink {
            pending: Vec::new(),
            log_mark,
            tx: Some(tx),
            writer: Some(writer),
            stats,
        })
    }

    pub fn stats(&self) -> Arc<WriterStats> {
        self.stats.clone()
    }
}

fn writer(
    mut cp: Checkpoint,
    path: PathBuf,
    log: Option<File>,
    rx: mpsc::Receiver<Msg>,
    stats: Arc<WriterStats>,
    mut last_size: u64,
    // The log's length when the last snapshot was taken (the seed covers
    // what it held when the run began or was resumed).
    mut log_at_snapshot: u64,
) {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut since = 0u64;
    let mut last_sync = Instant::now();
    let mut unsynced_settle = false;
    // Signals the log has not written yet: folded once it has.
    let mut held: std::collections::VecDeque<Arc<Signal>> = Default::default();
    let sync_log = |stats: &WriterStats| {
        if let Some(f) = &log {
            if let Err(e) = f.sync_data() {
                tracing::error!("event log fsync failed: {e}");
            }
            stats.log_syncs.fetch_add(1, Ordering::Relaxed);
        }
    };
    let snapshot = |cp: &Checkpoint, stats: &WriterStats| -> u64 {
        let t = Instant::now();
        match cp.write(&path) {
            Ok(n) => {
                tracing::debug!(
                    seq = cp.state.seq,
                    bytes = n,
                    ms = t.elapsed().as_millis(),
                    "checkpoint written"
                );
                stats.snapshots.fetch_add(1, Ordering::Relaxed);
                stats.bytes.fetch_add(n, Ordering::Relaxed);
                stats.set_failed(None);
                n
            }
            Err(e) => {
                tracing::error!(path = %path.display(), "checkpoint write failed: {e}");
                stats.set_failed(Some(e.to_string()));
                0
            }
        }
    };
    while let Ok(Msg::Batch(batch, mut mark)) = rx.recv() {
        held.extend(batch);
        // Everything sent meanwhile, at once.
        while let Ok(Msg::Batch(batch, m)) = rx.try_recv() {
            held.extend(batch);
            mark = m;
        }
        let log_seq = mark.map_or(u64::MAX, |m| m.seq);
        let folded = !held.is_empty();
        while held.front().is_some_and(|s| s.seq <= log_seq) {
            let s = held.pop_front().expect("a front");
            unsynced_settle |= settles(&s.kind);
            cp.apply(&s);
            crate::store::results::keep_reference(&mut cp.state, &dir, &s);
            since += 1;
        }
        // What the checkpoint covers of the log, when it is exactly that.
        if folded {
            cp.log = mark.filter(|m| m.seq == cp.state.seq);
        }
        // Due once the log since the last snapshot is as large as it (its
        // JSON): snapshots then cost about as much as the log, and resume
        // reads at most a snapshot's worth of lines. Without a log to
        // measure, lines are taken as ~200 bytes.
        let log_since = match mark {
            Some(m) => m.bytes.saturating_sub(log_at_snapshot),
            None => since.saturating_mul(200),
        };
        let due = since >= MIN_EVENTS && log_since >= last_size;
        if due {
            sync_log(&stats);
            last_sync = Instant::now();
            unsynced_settle = false;
            let n = snapshot(&cp, &stats);
            if n > 0 {
                last_size = n;
                since = 0;
                log_at_snapshot = mark.map_or(0, |m| m.bytes);
            }
        } else if unsynced_settle && last_sync.elapsed() >= SYNC_INTERVAL {
            sync_log(&stats);
            last_sync = Instant::now();
            unsynced_settle = false;
        }
        // Batches gather while this sleeps: a run of one operation per
        // batch (a chain) wakes this thread a thousand times a second at
        // most, not once per operation.
        std::thread::sleep(GATHER);
    }
    // The run is over (or the process is stopping): the last state.
    if since > 0 {
        sync_log(&stats);
        snapshot(&cp, &stats);
    } else if unsynced_settle {
        sync_log(&stats);
    }
}

impl SignalSink for CheckpointSink {
    fn write(&mut self, s: &Arc<Signal>) {
        self.pending.push(s.clone());
    }

    /// Called after the event log's flush: the batch is on disk (in the
    /// page cache) before the checkpoint can cover it.
    fn flush(&mut self) -> Result<(), SinkError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        let mark = self
            .log_mark
            .as_ref()
            .map(|m| *m.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Batch(batch, mark));
        }
        Ok(())
    }
}

impl Drop for CheckpointSink {
    fn drop(&mut self) {
        // The last state reaches the disk before the run is reported done.
        let _ = self.flush();
        drop(self.tx.take());
        if let Some(w) = self.writer.take() {
            let t = Instant::now();
            let _ = w.join();
            tracing::debug!(
                ms = t.elapsed().as_millis(),
                "waited for the checkpoint writer"
            );
        }
    }
}

/// Edges of a node as the graph builder takes them.
pub fn edges_of(n: &Node) -> Vec<(crate::kernel::OpId, Edge)> {
    n.deps.iter().map(|d| (d.from, d.edge.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{GraphBuilder, NodeHeader, NodeStatus, Operation};

    fn warning(seq: u64) -> Arc<Signal> {
        Arc::new(Signal {
            v: 1,
            seq,
            elapsed: seq as f64 / 1000.0,
            kind: SignalKind::Warning {
                message: Arc::from("w"),
                op_id: None,
            },
        })
    }

    fn spawned(seq: u64) -> Arc<Signal> {
        let kind: SignalKind = serde_json::from_value(serde_json::json!({
            "type": "spawned", "op_id": uuid::Uuid::from_u128(u128::from(seq)),
            "name": format!("spawn-{seq}"), "parent_id": null, "independent": true,
            "assignee": "worker", "instruction": "do the thing", "agent": "sim"
        }))
        .unwrap();
        Arc::new(Signal {
            v: 1,
            seq,
            elapsed: 0.0,
            kind,
        })
    }

    #[test]
    fn a_burst_is_folded_and_the_last_state_written_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let g = GraphBuilder::new().build().unwrap();
        let mut sink = CheckpointSink::new(
            dir.path(),
            Checkpoint::seed(&g, &RunConfig::default()),
            None,
            None,
        )
        .unwrap();
        let stats = sink.stats();
        for seq in 1..=100 {
            sink.write(&warning(seq));
        }
        sink.flush().unwrap();
        drop(sink);
        // The seed, then the end (100 events are not due a snapshot).
        assert_eq!(stats.snapshots.load(Ordering::Relaxed), 2);
        let cp = Checkpoint::load(&dir.path().join(CHECKPOINT_FILE)).unwrap();
        assert_eq!((cp.state.seq, cp.state.warnings.len()), (100, 100));
    }

    /// Issue 28: a last snapshot that cannot be written is kept as the
    /// writer's failure, with the path, for the run's end to say.
    #[test]
    fn a_failed_last_snapshot_is_kept_for_the_end_to_say() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let g = GraphBuilder::new().build().unwrap();
        let mut sink = CheckpointSink::new(
            &run,
            Checkpoint::seed(&g, &RunConfig::default()),
            None,
            None,
        )
        .unwrap();
        let stats = sink.stats();
        assert_eq!(stats.failure(), None, "the seed was written");
        // The directory goes away under the run.
        std::fs::remove_dir_all(&run).unwrap();
        sink.write(&warning(1));
        sink.flush().unwrap();
        drop(sink);
        let why = stats.failure().expect("the failure is kept");
        assert!(
            why.starts_with(&format!(
                "cannot write {}: ",
                run.join(CHECKPOINT_FILE).display()
            )),
            "{why}"
        );
    }

    #[test]
    fn snapshots_of_a_growing_run_cost_a_bounded_multiple_of_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let g = GraphBuilder::new().build().unwrap();
        let mut sink = CheckpointSink::new(
            dir.path(),
            Checkpoint::seed(&g, &RunConfig::default()),
            None,
            None,
        )
        .unwrap();
        let stats = sink.stats();
        for seq in 1..=20_000 {
            sink.write(&spawned(seq));
            if seq % 50 == 0 {
                sink.flush().unwrap();
            }
        }
        drop(sink);
        let path = dir.path().join(CHECKPOINT_FILE);
        let on_disk = std::fs::read(&path).unwrap();
        // Over COMPRESS_OVER operations: an LZ4 frame, a fraction of its
        // JSON, read back whole.
        assert!(on_disk.starts_with(&LZ4_MAGIC));
        let cp = Checkpoint::load(&path).unwrap();
        let last = serde_json::to_vec(&cp).unwrap().len() as u64 + 1;
        assert!(
            on_disk.len() as u64 * 4 < last,
            "{} of {last}",
            on_disk.len()
        );
        let total = stats.bytes.load(Ordering::Relaxed);
        let snapshots = stats.snapshots.load(Ordering::Relaxed);
        // Geometric: the sum of all snapshots is a few times the last one,
        // not the number of snapshots times it.
        assert!(
            total < 5 * last,
            "{total} bytes in {snapshots} snapshots, last {last}"
        );
        assert!(snapshots < 20, "{snapshots} snapshots");
        assert_eq!((cp.state.seq, cp.state.nodes.len()), (20_000, 20_000));
        // A flipped bit anywhere in the frame is refused as damage, never
        // read as another state (2 of 12 were, before the checksum).
        for i in 0..24 {
            let mut bad = on_disk.clone();
            let at = 4 + (bad.len() - 5) * i / 23;
            bad[at] ^= 1 << (i % 8);
            std::fs::write(&path, &bad).unwrap();
            let err = Checkpoint::load(&path).map(|_| ()).unwrap_err().to_string();
            assert!(err.contains("is damaged"), "byte {at}: {err}");
        }
    }

    #[test]
    fn a_retry_reopens_the_operation_in_the_record() {
        let mut b = GraphBuilder::new();
        let id = b.add_root(Operation::new("flaky", "x"));
        let g = b.build().unwrap();
        let mut cp = Checkpoint::seed(&g, &RunConfig::default());
        let header = NodeHeader {
            op_id: id,
            name: Arc::from("flaky"),
            parent_id: None,
            depends_on: Arc::from(Vec::new()),
            pos: 0,
        };
        let sig = |seq, kind| Signal {
            v: 1,
            seq,
            elapsed: 0.0,
            kind,
        };
        cp.apply(&sig(
            1,
            SignalKind::Failed {
                node: header.clone(),
                error: Arc::from("boom"),
                category: Arc::from("simulated"),
            },
        ));
        assert_eq!(cp.state.nodes[0].status, NodeStatus::Failed);
        cp.apply(&sig(
            2,
            SignalKind::Retried {
                node: header,
                attempt: 2,
                because: None,
                by: None,
                note: None,
                on: None,
            },
        ));
        let n = &cp.state.nodes[0];
        assert_eq!(
            (n.status, n.error.is_none(), n.result.is_none()),
            (NodeStatus::Pending, true, true)
        );
    }

    #[test]
    fn a_cut_checkpoint_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CHECKPOINT_FILE);
        let g = GraphBuilder::new().build().unwrap();
        Checkpoint::seed(&g, &RunConfig::default())
            .write(&path)
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
        let err = Checkpoint::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("checkpoint.json:") && err.contains("damaged"),
            "{err}"
        );
    }
}
