//! Run control through a cloneable handle. Every surface (console, headless
//! stdin, control socket) drives a run only through this.

use std::sync::{Arc, OnceLock};

use tokio::sync::{broadcast, mpsc, oneshot};

use super::graph::{Condition, OpId, Operation};
use super::signal::Signal;
use super::snapshot::Snapshot;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ControlError {
    #[error("no operation named {0:?} in this run")]
    UnknownOperation(String),
    #[error("{name} has no approval gate")]
    NoApprovalGate { name: String },
    #[error("{name} was already {decision}")]
    AlreadyDecided {
        name: String,
        decision: &'static str,
    },
    #[error("{name} is {state}; only an operation that has not started can be held")]
    CannotHold { name: String, state: &'static str },
    #[error("{name} is not held")]
    NotHeld { name: String },
    #[error("the run is not paused; pause it first (step works only while paused)")]
    NotPaused,
    #[error("the run has finished")]
    RunFinished,
    #[error("{name} is {state}; only a failed or denied operation can be retried")]
    CannotRetry { name: String, state: &'static str },
}

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

pub(crate) type Reply = oneshot::Sender<Result<(), ControlError>>;

pub(crate) enum Command {
    Pause(Reply),
    Resume(Reply),
    Step(Reply),
    Approve {
        op: String,
        by: Arc<str>,
        reply: Reply,
    },
    Deny {
        op: String,
        by: Arc<str>,
        reason: Arc<str>,
        reply: Reply,
    },
    Hold {
        op: String,
        reply: Reply,
    },
    Retry {
        op: String,
        reply: Reply,
    },
    Unhold {
        op: String,
        reply: Reply,
    },
    SetApprovalPolicy(ApprovalPolicy, Reply),
    Cancel(Reply),
    Inject {
        op: Box<NewOperation>,
        reply: oneshot::Sender<bool>,
    },
    Snapshot(oneshot::Sender<Snapshot>),
}

pub(crate) trait FinalState: Send + Sync {
    fn snapshot(&self) -> Snapshot;
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

    async fn ask(&self, make: impl FnOnce(Reply) -> Command) -> Result<(), ControlError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .map_err(|_| ControlError::RunFinished)?;
        rx.await.unwrap_or(Err(ControlError::RunFinished))
    }

    /// Soft pause: running operations finish; operations about to start wait.
    pub async fn pause(&self) -> Result<(), ControlError> {
        self.ask(Command::Pause).await
    }

    pub async fn resume(&self) -> Result<(), ControlError> {
        self.ask(Command::Resume).await
    }

    /// While paused, lets exactly one waiting operation start. With none
    /// waiting, the next operation to become ready starts.
    pub async fn step(&self) -> Result<(), ControlError> {
        self.ask(Command::Step).await
    }

    /// `op` is an authored id, a `spawn-N` name or an op_id.
    pub async fn approve(&self, op: &str, by: &str) -> Result<(), ControlError> {
        let (op, by) = (op.to_string(), Arc::from(by));
        self.ask(|reply| Command::Approve { op, by, reply }).await
    }

    pub async fn deny(&self, op: &str, by: &str, reason: &str) -> Result<(), ControlError> {
        let (op, by, reason) = (op.to_string(), Arc::from(by), Arc::from(reason));
        self.ask(|reply| Command::Deny {
            op,
            by,
            reason,
            reply,
        })
        .await
    }

    pub async fn hold(&self, op: &str) -> Result<(), ControlError> {
        let op = op.to_string();
        self.ask(|reply| Command::Hold { op, reply }).await
    }

    /// Starts a new attempt of a failed or denied operation and re-opens
    /// what was skipped only because of it.
    pub async fn retry(&self, op: &str) -> Result<(), ControlError> {
        let op = op.to_string();
        self.ask(|reply| Command::Retry { op, reply }).await
    }

    pub async fn unhold(&self, op: &str) -> Result<(), ControlError> {
        let op = op.to_string();
        self.ask(|reply| Command::Unhold { op, reply }).await
    }

    /// Changes who decides approvals from now on; `DenyAll` also denies what
    /// is waiting now.
    pub async fn set_approval_policy(&self, policy: ApprovalPolicy) -> Result<(), ControlError> {
        self.ask(|reply| Command::SetApprovalPolicy(policy, reply))
            .await
    }

    /// Stops the run: running work is cancelled and reported as failed, work
    /// that never started is skipped.
    pub async fn cancel(&self) -> Result<(), ControlError> {
        self.ask(Command::Cancel).await
    }

    /// Trusted injection; false outside an active run.
    pub async fn inject(&self, op: NewOperation) -> bool {
        let (tx, rx) = oneshot::channel();
        if self
            .tx
            .send(Command::Inject {
                op: Box::new(op),
                reply: tx,
            })
            .is_err()
        {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// A consistent snapshot of the run (the final one once it is over).
    pub async fn snapshot(&self) -> Option<Snapshot> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Snapshot(tx)).is_ok()
            && let Ok(s) = rx.await
        {
            return Some(s);
        }
        self.final_state.get().map(|f| f.snapshot())
    }
}
