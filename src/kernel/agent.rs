//! The seam between the kernel and whatever performs an operation. The
//! kernel knows agents only through this trait: an operation is invoked,
//! it returns a result, and meanwhile it may emit requests on its stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, mpsc};

use super::graph::OpId;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Why an invocation failed. `category` is a short machine word
/// (`simulated`, `rate_limit`, `agent_crash`, ...: the causes are in
/// [`super::retry::cause`]), `message` is for people.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFailure {
    pub category: Arc<str>,
    pub message: String,
    /// How long the provider asked to wait before trying again (a rate
    /// limit's reset), when it said.
    pub wait: Option<std::time::Duration>,
}

impl AgentFailure {
    pub fn new(category: &str, message: impl Into<String>) -> Self {
        AgentFailure {
            category: Arc::from(category),
            message: message.into(),
            wait: None,
        }
    }

    pub fn with_wait(mut self, wait: Option<std::time::Duration>) -> Self {
        self.wait = wait;
        self
    }
}

pub type AgentOutcome = Result<Value, AgentFailure>;

/// What an agent is doing, as far as its stream tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityState {
    Thinking,
    Writing,
    /// Running a tool (named alongside).
    Tool,
    /// Started, nothing seen yet.
    Waiting,
    /// A job on the cluster that no worker has taken yet: its run time
    /// counts from the take.
    WaitingForWorker,
}

impl ActivityState {
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityState::Thinking => "thinking",
            ActivityState::Writing => "writing",
            ActivityState::Tool => "tool",
            ActivityState::Waiting => "waiting",
            ActivityState::WaitingForWorker => "waiting for a worker",
        }
    }
}

/// Cost and token totals of one attempt so far, with one meaning for every
/// stream format (each parser translates its CLI's own counts into it):
/// `input_tokens` is everything sent to the model, cached input included;
/// `cached_input_tokens` is the part of it read from a prompt cache;
/// `output_tokens` is everything generated, reasoning included where the
/// CLI reports it; `cost_usd` is what the CLI says the attempt cost.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
}

impl Usage {
    /// Each field the higher of this report's and `before`'s: an
    /// attempt's totals so far never go down.
    pub fn at_least(&self, before: &Usage) -> Usage {
        fn hi<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(if y > x { y } else { x }),
                (x, y) => x.or(y),
            }
        }
        Usage {
            cost_usd: hi(self.cost_usd, before.cost_usd),
            input_tokens: hi(self.input_tokens, before.input_tokens),
            cached_input_tokens: hi(self.cached_input_tokens, before.cached_input_tokens),
            output_tokens: hi(self.output_tokens, before.output_tokens),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.cost_usd.is_none()
            && self.input_tokens.is_none()
            && self.cached_input_tokens.is_none()
            && self.output_tokens.is_none()
    }
}

/// What an agent reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A value seen on the agent's stream (the signal bus of the spec); the
    /// kernel extracts spawn and escalation requests from it, deduplicated
    /// against the final result.
    Emitted(Value),
    /// The agent's live state changed.
    Activity {
        state: ActivityState,
        tool: Option<Arc<str>>,
    },
    /// New cost and token totals.
    Usage(Usage),
    /// Something the operator should see (an unknown flag profile, a
    /// dropped flag, a stall).
    Warning(Arc<str>),
    /// The attempt's process group started (its id, for the record: a
    /// resume ends what a crashed process left running).
    Process { pgid: i32 },
    /// The agent CLI named the conversation this attempt is in (its own
    /// session id), for the record.
    Session(Arc<str>),
    /// The attempt reads what the operator says while it runs (claude's
    /// stream-json input): messages go to it here, not by stopping it.
    Listening(Inbox),
    /// The agent asks the operator whether it may make a call its ToolSet
    /// leaves to them; the answer goes back through the question.
    Asking(Question),
    /// A question ended without an answer (its time ran out, or the
    /// agent stopped asking): it was denied.
    AskEnded { id: u32, why: Arc<str> },
    /// The operation's work went into the run's branch.
    Landed(Arc<LandedWork>),
    /// The attempt's work is about to be offered for review or landed:
    /// may it be? No while a message from the operator waits for the
    /// attempt — what they said disputes the answer it gave. Once yes, a
    /// message comes after the work lands and is for the next attempt.
    MayLand(Replier<bool>),
    /// The result this attempt returns is its stream's last answer (an
    /// agent CLI's final message, which the CLI also echoes): requests in
    /// it are the ones the stream already carried, one emission, not a
    /// second sighting to record as a duplicate.
    ResultRestatesStream,
}

/// What landed of one operation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LandedWork {
    /// `merge` or `rebase`.
    pub mode: crate::vocab::LandMode,
    /// The run's branch (`playdeck/<run-id>`).
    pub branch: Arc<str>,
    /// The branch's tip after it landed (the merge commit, or the last
    /// rebased commit); `None` when there was nothing to land.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<Arc<str>>,
    /// The operation's commits, oldest first: `<short sha> <subject>`.
    #[serde(default)]
    pub commits: Vec<Arc<str>>,
    /// The paths they change.
    #[serde(default)]
    pub files: Vec<Arc<str>>,
}

/// Where the operator's messages reach a running attempt that reads them
/// live. Sending fails once the attempt no longer reads (its CLI's input
/// was closed, or the attempt ended).
#[derive(Debug, Clone)]
pub struct Inbox(pub tokio::sync::mpsc::UnboundedSender<Arc<str>>);

impl PartialEq for Inbox {
    fn eq(&self, other: &Inbox) -> bool {
        self.0.same_channel(&other.0)
    }
}

impl Inbox {
    /// Hands `text` to the attempt; `false` when it no longer reads.
    pub fn say(&self, text: Arc<str>) -> bool {
        self.0.send(text).is_ok()
    }
}

/// A permission question of a running attempt: which call (`Bash(rm -rf
/// build)`), and where its one answer goes. The side that asks cannot
/// answer it: only the kernel holds the reply, for an operator's command.
#[derive(Debug, Clone)]
pub struct Question {
    pub id: u32,
    /// What is asked about: the call (`Bash(rm -rf build)`), or for a
    /// review or a conflict, what would land or what clashed.
    pub tool: Arc<str>,
    pub kind: QuestionKind,
    /// What an answer binds to, beyond the question itself: a call's tool
    /// and input digest (`Write:0011…`), a review's commits
    /// (`base..tip`), a conflict's commits. Part of the decision's basis.
    pub on: Option<Arc<str>>,
    /// What answering allows, whole (bounded): a Write's content, an
    /// Edit's diff, a Bash command; a review's commits and files.
    pub detail: Option<Arc<str>>,
    pub reply: Replier,
}

impl PartialEq for Question {
    fn eq(&self, other: &Question) -> bool {
        self.id == other.id
            && self.tool == other.tool
            && self.kind == other.kind
            && self.on == other.on
            && self.detail == other.detail
    }
}

/// What an operation waiting on its operator asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    /// May the agent make this call (a ToolSet's `ask`)?
    #[default]
    Permission,
    /// The work succeeded: may it land on the run's branch (`review`)?
    Review,
    /// Its work clashes with what landed before it: the operator resolves
    /// it in the worktree (allow: try again), or it does not land (deny).
    Conflict,
}

impl QuestionKind {
    pub fn is_permission(&self) -> bool {
        *self == QuestionKind::Permission
    }

    /// The lane's mark for it.
    pub fn mark(self) -> &'static str {
        match self {
            QuestionKind::Permission => "⚿",
            QuestionKind::Review => "◧",
            QuestionKind::Conflict => "✕",
        }
    }

    /// `⚿ asks permission for Bash(x)`, `◧ awaiting review: 2 files
    /// changed, …`, `✕ merge conflict: a.txt clash with …`.
    pub fn say(self, what: &str) -> String {
        match self {
            QuestionKind::Permission => format!("⚿ asks permission for {what}"),
            k => format!("{} {}: {what}", k.mark(), k.words()),
        }
    }

    /// How a lane, a dialog and a log line name the wait.
    pub fn words(self) -> &'static str {
        match self {
            QuestionKind::Permission => "asks permission",
            QuestionKind::Review => "awaiting review",
            QuestionKind::Conflict => "merge conflict",
        }
    }
}

/// An operator's answer to a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub allow: bool,
    /// Who, and why (for a denial, what the agent is told).
    pub why: Arc<str>,
}

/// Where a question's answer goes, once.
#[derive(Debug)]
pub struct Replier<T = Answer>(Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<T>>>>);

impl<T> Clone for Replier<T> {
    fn clone(&self) -> Self {
        Replier(self.0.clone())
    }
}

impl<T> PartialEq for Replier<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> Replier<T> {
    pub fn new(tx: tokio::sync::oneshot::Sender<T>) -> Replier<T> {
        Replier(Arc::new(std::sync::Mutex::new(Some(tx))))
    }

    /// Answers; `false` when it was answered already or nobody waits.
    pub fn answer(&self, a: T) -> bool {
        let tx = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        tx.is_some_and(|tx| tx.send(a).is_ok())
    }
}

#[derive(Debug)]
pub(crate) struct AgentMsg {
    pub(crate) node: u32,
    pub(crate) attempt: u32,
    pub(crate) event: AgentEvent,
}

/// Events agents have sent that the kernel has not taken yet, shared by
/// every invocation of a run: readers wait while it is full, so an agent
/// that prints faster than the kernel reads is slowed, not buffered.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    queued: AtomicUsize,
    space: Notify,
}

/// Events queued before readers wait.
pub const BACKLOG_MAX: usize = 4096;

impl Backlog {
    /// The kernel took one event.
    pub(crate) fn took(&self) {
        let before = self.queued.fetch_sub(1, Ordering::AcqRel);
        if before <= BACKLOG_MAX / 2 + 1 {
            self.space.notify_waiters();
        }
    }
}

/// The sending side of an invocation's stream. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AgentEvents {
    node: u32,
    attempt: u32,
    tx: Option<mpsc::UnboundedSender<AgentMsg>>,
    backlog: Option<Arc<Backlog>>,
}

impl AgentEvents {
    pub(crate) fn new(
        node: u32,
        attempt: u32,
        tx: mpsc::UnboundedSender<AgentMsg>,
        backlog: Arc<Backlog>,
    ) -> Self {
        AgentEvents {
            node,
            attempt,
            tx: Some(tx),
            backlog: Some(backlog),
        }
    }

    /// A stream a test reads back.
    #[cfg(test)]
    pub(crate) fn for_test() -> (Self, mpsc::UnboundedReceiver<AgentMsg>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (AgentEvents::new(0, 1, tx, Arc::default()), rx)
    }

    /// A stream nobody listens to, for invoking an agent outside a run.
    pub fn detached() -> Self {
        AgentEvents {
            node: 0,
            attempt: 0,
            tx: None,
            backlog: None,
        }
    }

    pub fn emit(&self, event: AgentEvent) {
        if let Some(tx) = &self.tx {
            if let Some(b) = &self.backlog {
                b.queued.fetch_add(1, Ordering::AcqRel);
            }
            // A closed channel means the run is over; nothing to tell.
            if tx
                .send(AgentMsg {
                    node: self.node,
                    attempt: self.attempt,
                    event,
                })
                .is_err()
                && let Some(b) = &self.backlog
            {
                b.queued.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Whether the kernel has [`BACKLOG_MAX`] events to take already.
    pub fn backed_up(&self) -> bool {
        self.backlog
            .as_ref()
            .is_some_and(|b| b.queued.load(Ordering::Acquire) >= BACKLOG_MAX)
    }

    /// Waits while the kernel has [`BACKLOG_MAX`] events to take: a reader
    /// calls this before reading more of an agent's output
    /// (back-pressure on the agent's pipe).
    pub async fn ready(&self) {
        let Some(b) = &self.backlog else {
            return;
        };
        loop {
            let space = b.space.notified();
            if b.queued.load(Ordering::Acquire) < BACKLOG_MAX
                || self.tx.as_ref().is_none_or(|t| t.is_closed())
            {
                return;
            }
            space.await;
        }
    }
}

/// The conversation a new attempt continues: the session an earlier attempt
/// of the operation had with its CLI, and what ended that attempt. The
/// agent decides whether it can continue it (its CLI, its `continue`
/// setting, whether the session is still there).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CarryOn {
    pub session: Arc<str>,
    /// What ended the attempt before, in words for the agent
    /// (`rate_limit: …`, "the run stopped while this attempt ran…").
    pub ended: Arc<str>,
    /// What the operator said to it, when they sent it back or talked to
    /// it while it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<Arc<str>>,
    /// Who said it (`ctl (ana, pid 5678)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Arc<str>>,
}

/// Everything an agent gets to perform one attempt of an operation.
#[derive(Debug)]
pub struct Invocation {
    pub op_id: OpId,
    pub name: Arc<str>,
    pub role: Option<Arc<str>>,
    pub instruction: Arc<str>,
    pub params: Arc<Value>,
    /// `<pred_op_id>_result` for every predecessor with a result, then the
    /// flow context merged in (ADR-0033 D4).
    pub context: Map<String, Value>,
    pub attempt: u32,
    pub events: AgentEvents,
    /// The capacity instance the operation runs on, if any.
    pub instance: Option<Arc<str>>,
    /// Its working directory (the instance's workspace), if any.
    pub workspace: Option<std::path::PathBuf>,
    /// The role profile of that instance, if any.
    pub profile: Option<Arc<str>>,
    /// USD left under the caps that cover it (the run's and its role's),
    /// when one is set: a CLI that can stop itself at a spend is told
    /// (claude's `--max-budget-usd`), as a backstop to the run's own cap.
    pub usd_headroom: Option<f64>,
    /// The conversation this attempt continues, when an earlier attempt of
    /// the same series had one and ended before the work was done.
    pub carry_on: Option<CarryOn>,
    /// The operator resolved by hand the merge conflict its last attempt
    /// failed on: its work lands from its worktree, and its agent is not
    /// invoked again (agents that land nothing do nothing different).
    pub land_only: bool,
}

pub trait Agent: Send + Sync {
    /// Performs one attempt. Dropping the future cancels it; an agent that
    /// owns processes must kill them on drop.
    fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome>;

    /// Whether the agent reads `Invocation::context`; when false the kernel
    /// does not build it.
    fn wants_context(&self) -> bool {
        true
    }
}

/// Resolves an agent name from an operation to an agent.
pub trait AgentResolver: Send + Sync {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Agent>>;
}

/// Where spawn budgets stand when an operation starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnBudget {
    pub accepted: usize,
    pub max: usize,
}

/// Rewrites the instruction an agent receives when an operation starts
/// (the palette installs its delegation clause here). The kernel stores
/// instructions as authored; decoration happens per attempt, so the clause
/// states the budgets at the moment the turn is built.
pub trait InstructionDecorator: Send + Sync {
    fn decorate(&self, role: Option<&str>, instruction: &Arc<str>, spawns: SpawnBudget)
    -> Arc<str>;
}
