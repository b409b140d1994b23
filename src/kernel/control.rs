//! Run control through a cloneable handle. Every surface (console, headless
//! stdin, control socket) drives a run only through this.

use std::sync::{Arc, OnceLock};

use tokio::sync::{broadcast, mpsc, oneshot};

use super::command::{Answer, CommandError, Request};
use super::graph::{Condition, OpId, Operation};
use super::signal::Signal;
use super::snapshot::Snapshot;

/// Who decided an approval when no person did.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalPolicy {
    /// Wait for an operator.
    Ask,
    ApproveAll,
    DenyAll {
        reason: Arc<str>,
    },
}

/// An operation a trusted caller injects; it bypasses the node builder but
/// not admission (ADR-0033 D3/D5).
#[derive(Debug, Clone)]
pub struct NewOperation {
    pub op: Operation,
    pub depends_on: Vec<(OpId, Condition)>,
    /// The emitter to hang it under with a spawn edge (unless independent).
    pub parent: Option<OpId>,
    pub independent: bool,
}

pub(crate) enum Command {
    Request {
        req: Request,
        /// Who asks (`ctl (root, pid 5678)`), as the run records it.
        by: Arc<str>,
        reply: oneshot::Sender<Result<Answer, CommandError>>,
    },
    SetApprovalPolicy(ApprovalPolicy, oneshot::Sender<()>),
    /// A command carried out outside the kernel (a capacity release), to
    /// be recorded as an `operator_action`.
    Record {
        by: Arc<str>,
        action: Arc<str>,
    },
    /// Something outside the kernel went wrong that the run should show
    /// (a notification command failed), as a `warning`.
    Warn {
        message: Arc<str>,
    },
    Inject {
        op: Box<NewOperation>,
        reply: oneshot::Sender<Option<OpId>>,
    },
    /// `nodes`: whether the snapshot lists every operation (an overview
    /// has only the counts).
    Snapshot {
        nodes: bool,
        reply: oneshot::Sender<Snapshot>,
    },
}

pub(crate) trait FinalState: Send + Sync {
    fn snapshot(&self, nodes: bool) -> Snapshot;
}

/// A clonable handle on one run.
#[derive(Clone)]
pub struct RunHandle {
    pub(crate) tx: mpsc::UnboundedSender<Command>,
    /// Weak, so observers see the stream close when the run ends.
    pub(crate) signals: broadcast::WeakSender<Arc<Signal>>,
    /// The run's state once it has ended; snapshots are built from it on
    /// demand, so ending a run does not pay for a snapshot nobody asks for.
    pub(crate) final_state: Arc<OnceLock<Box<dyn FinalState>>>,
    /// When the run's clock started (and the run time before this
    /// process), once the run has begun: every surface reads the run's
    /// own time from it.
    pub(crate) clock: Arc<OnceLock<(tokio::time::Instant, f64)>>,
    pub run_id: Arc<str>,
}

/// What an observer gets next.
#[derive(Debug)]
pub enum Observed {
    Signal(Arc<Signal>),
    /// The observer fell behind and `missed` signals are gone; take
    /// [`RunHandle::snapshot`] and ignore signals with `seq <= snapshot.seq`.
    Lagged {
        missed: u64,
    },
    /// The run is over and every signal has been delivered.
    Closed,
}

/// A subscription to the run's signals. Slow subscribers never slow the
/// kernel; they are told they lagged instead.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<Signal>>,
}

impl Subscription {
    /// A subscription to any broadcast of signals (replays, benchmarks).
    pub fn from_broadcast(rx: broadcast::Receiver<Arc<Signal>>) -> Subscription {
        Subscription { rx }
    }

    pub async fn next(&mut self) -> Observed {
        match self.rx.recv().await {
            Ok(s) => Observed::Signal(s),
            Err(broadcast::error::RecvError::Lagged(n)) => Observed::Lagged { missed: n },
            Err(broadcast::error::RecvError::Closed) => Observed::Closed,
        }
    }

    /// Non-blocking variant for draining a burst.
    pub fn try_next(&mut self) -> Option<Observed> {
        match self.rx.try_recv() {
            Ok(s) => Some(Observed::Signal(s)),
            Err(broadcast::error::TryRecvError::Lagged(n)) => Some(Observed::Lagged { missed: n }),
            Err(broadcast::error::TryRecvError::Closed) => Some(Observed::Closed),
            Err(broadcast::error::TryRecvError::Empty) => None,
        }
    }
}

impl RunHandle {
    /// Signals from now on. After the run has ended the subscription is
    /// closed at once.
    pub fn subscribe(&self) -> Subscription {
        let rx = match self.signals.upgrade() {
            Some(tx) => tx.subscribe(),
            None => broadcast::channel(1).1,
        };
        Subscription { rx }
    }

    /// Carries out one operator command (the one way every surface drives
    /// a run), recorded as the operator's.
    pub async fn request(&self, req: Request) -> Result<Answer, CommandError> {
        self.request_by(req, Arc::from(super::command::OPERATOR))
            .await
    }

    /// Carries out one operator command for `by`, the surface and person
    /// that asked (see [`crate::paths::actor`]); the run records who.
    pub async fn request_by(&self, req: Request, by: Arc<str>) -> Result<Answer, CommandError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Request { req, by, reply })
            .map_err(|_| CommandError::RunFinished)?;
        rx.await.unwrap_or(Err(CommandError::RunFinished))
    }

    /// Records a command another component carried out (a capacity
    /// release) with who asked; nothing when the run has ended.
    pub fn record(&self, by: Arc<str>, action: Arc<str>) {
        let _ = self.tx.send(Command::Record { by, action });
    }

    /// A warning for the run's record, from outside the kernel; nothing
    /// when the run has ended.
    pub fn warn(&self, message: Arc<str>) {
        let _ = self.tx.send(Command::Warn { message });
    }

    /// Changes who decides approvals from now on; `DenyAll` also denies what
    /// is waiting now. False when the run has ended.
    pub async fn set_approval_policy(&self, policy: ApprovalPolicy) -> bool {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::SetApprovalPolicy(policy, reply))
            .is_ok()
            && rx.await.is_ok()
    }

    /// Trusted injection (ADR-0033 D3/D5): the operation bypasses the node
    /// builder (no palette authority or budget applies) but not admission
    /// (cap, cycle, the ledger). Returns the operation's id once it joined,
    /// `None` when admission dropped it (with a ledger row), and `None` with
    /// a warning outside an active reactive run: in a run with
    /// `reactive = false` (a `warning` signal, nothing in the ledger), and
    /// after a cancel or once the run has ended (a `warning` signal while
    /// the run still winds down, a log line after it).
    pub async fn inject(&self, op: NewOperation) -> Option<OpId> {
        let (reply, rx) = oneshot::channel();
        let name = op.op.reference_id.clone();
        let op = Box::new(op);
        if self.tx.send(Command::Inject { op, reply }).is_err() {
            tracing::warn!(operation = %name, "inject refused: the run has ended");
            return None;
        }
        rx.await.ok().flatten()
    }

    /// A consistent snapshot of the run (the final one once it is over).
    pub async fn snapshot(&self) -> Option<Snapshot> {
        self.snapshot_with(true).await
    }

    /// A snapshot whose `nodes` are only the failed and escalated
    /// operations (the lane counts, the run state and the ledger are all
    /// there): what a summary needs, without a view of every operation of
    /// a large run.
    pub async fn overview(&self) -> Option<Snapshot> {
        self.snapshot_with(false).await
    }

    async fn snapshot_with(&self, nodes: bool) -> Option<Snapshot> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::Snapshot { nodes, reply }).is_ok()
            && let Ok(s) = rx.await
        {
            return Some(s);
        }
        self.final_state.get().map(|f| f.snapshot(nodes))
    }

    /// The run's time now (the `elapsed` its next signal would carry), once
    /// it has begun; consoles attached later show this, not their own.
    pub fn elapsed(&self) -> Option<f64> {
        self.clock
            .get()
            .map(|(t0, offset)| offset + t0.elapsed().as_secs_f64())
    }
}
