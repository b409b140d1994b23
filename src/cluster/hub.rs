//! The run's side of scale-out: every agent invocation becomes a job on
//! the work-queue stream, and what workers report comes back to the
//! invocation that waits for it. The kernel sees an ordinary [`Agent`].

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, message::PublishMessage};
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::wire::{self, Frame, Job};
use crate::agents::Tails;
use crate::kernel::{
    ActivityState, Agent, AgentEvent, AgentFailure, AgentOutcome, BoxFuture, External,
    ExternalSender, Invocation, SignalKind,
};

/// The cause of an attempt whose worker went quiet past the ack deadline
/// (killed, stopped, cut off): retried by default, on another worker.
pub const WORKER_LOST: &str = crate::kernel::retry::cause::WORKER_LOST;

/// A job no worker has taken for this long gets a warning (once).
const NO_WORKER_WARNING: Duration = Duration::from_secs(10);

/// What a run tells its workers about itself.
#[derive(Debug, Clone)]
pub struct HubSettings {
    pub run_id: String,
    pub play: String,
    pub play_hash: String,
    /// Worker tags each role profile needs.
    pub needs: HashMap<String, Vec<String>>,
    pub log_dir: Option<PathBuf>,
}

/// One run's connection to the cluster.
pub struct Hub {
    client: async_nats::Client,
    js: jetstream::Context,
    nonce: String,
    seq: AtomicU64,
    settings: HubSettings,
    tails: Arc<Tails>,
    /// Invocations waiting for their worker's frames, by seq.
    waiting: Mutex<HashMap<u64, mpsc::UnboundedSender<Routed>>>,
    /// Attempts counted lost, by seq: a result that comes later is
    /// recorded against them and ignored.
    lost: Mutex<HashMap<u64, (String, u32)>>,
    connected: watch::Receiver<bool>,
    external: Mutex<Option<ExternalSender>>,
    roster: Arc<super::roster::Roster>,
    signer: wire::Signer,
    /// Frames not taken (they did not verify) since the last warning.
    refused: Mutex<Refused>,
}

/// Frames refused, said at most every [`REFUSED_EVERY`]: a flood of forged
/// frames must not flood the log.
#[derive(Default)]
struct Refused {
    said: Option<Instant>,
    since: u64,
}

const REFUSED_EVERY: Duration = Duration::from_secs(10);

impl Hub {
    /// Connects, makes sure the streams exist and starts reading this
    /// run's frames.
    pub async fn start(
        c: super::Connection,
        settings: HubSettings,
        tails: Arc<Tails>,
    ) -> Result<Arc<Hub>, async_nats::Error> {
        let super::Connection {
            client,
            connected,
            signer,
        } = c;
        let js = jetstream::new(client.clone());
        super::ensure_streams(&js).await?;
        let nonce = format!("{:016x}", uuid::Uuid::new_v4().as_u128() as u64);
        // The run directory keeps the hub's nonce: a resumed run takes
        // back what its earlier process left on the cluster.
        if let Some(dir) = settings.log_dir.as_deref().and_then(Path::parent) {
            let kept = dir.join(NONCE_FILE);
            if let Ok(old) = std::fs::read_to_string(&kept) {
                forget(&js, &client, &signer, old.trim()).await;
            }
            if let Err(e) = std::fs::write(&kept, format!("{nonce}\n")) {
                tracing::warn!("{}: {e}", kept.display());
            }
        }
        let roster = Arc::new(super::roster::Roster::new(
            &settings.play,
            &settings.play_hash,
        ));
        let hub = Arc::new(Hub {
            client,
            js,
            nonce,
            seq: AtomicU64::new(1),
            settings,
            tails,
            waiting: Mutex::default(),
            lost: Mutex::default(),
            connected,
            external: Mutex::default(),
            roster,
            signer,
            refused: Mutex::default(),
        });
        tokio::spawn(super::roster::keep(
            Arc::downgrade(&hub),
            hub.js.clone(),
            hub.roster.clone(),
            |hub: &Hub, kind| hub.say(kind),
        ));
        let stream = hub.js.get_stream(wire::OUT_STREAM).await?;
        let consumer: jetstream::consumer::PullConsumer = stream
            .get_or_create_consumer(&format!("out-{}", hub.nonce), out_consumer(&hub.nonce))
            .await?;
        let made = consumer.cached_info().created.unix_timestamp_nanos();
        tokio::spawn(read_frames(Arc::downgrade(&hub), consumer));
        tokio::spawn(watch_store(
            Arc::downgrade(&hub),
            hub.connected.clone(),
            made,
        ));
        Ok(hub)
    }

    /// Run-level warnings (a late result) go to the run's log through this.
    pub fn attach(&self, external: ExternalSender) {
        *self.external.lock().unwrap() = Some(external);
        if !self.signer.signs() {
            self.warn(
                "jobs on NATS are not signed: anyone who may publish on pd.job.> can have a worker run what they write; give the run and its workers a signing_key_file (docs/scale-out.md, Credentials)".into(),
            );
        }
    }

    /// A frame that did not verify: not taken, and said (at most every
    /// few seconds, with how many since).
    fn refuse(&self, subject: &str, why: wire::Unverified) {
        let mut r = self.refused.lock().unwrap();
        r.since += 1;
        if r.said.is_some_and(|t| t.elapsed() < REFUSED_EVERY) {
            return;
        }
        let more = match r.since {
            1 => String::new(),
            n => format!(" ({} more since the last said)", n - 1),
        };
        r.said = Some(Instant::now());
        r.since = 0;
        drop(r);
        self.warn(format!(
            "a frame on {} was not taken: {why}{more}; a worker without this run's signing key, or someone else publishing",
            crate::printable::printable(subject)
        ));
    }

    /// Says a signal to the run, once it is attached.
    fn say(&self, kind: SignalKind) -> bool {
        match &*self.external.lock().unwrap() {
            Some(x) => x.send(External::Signal(kind)).is_ok(),
            None => false,
        }
    }

    fn warn(&self, message: String) {
        tracing::warn!("{message}");
        self.say(SignalKind::Warning {
            message: Arc::from(message),
            op_id: None,
        });
    }

    fn route(&self, seq: u64, frame: Frame) {
        let tx = self.waiting.lock().unwrap().get(&seq).cloned();
        match tx {
            Some(tx) => {
                let _ = tx.send(Routed::Frame(frame));
            }
            None => {
                if let Frame::Result { worker, outcome } = frame {
                    let lost = self.lost.lock().unwrap().remove(&seq);
                    if let Some((name, attempt)) = lost {
                        let how = match &outcome {
                            Ok(_) => "succeeded".to_string(),
                            Err(f) => format!("failed ({})", f.category),
                        };
                        self.warn(format!(
                            "{name} attempt {attempt}: a late result from worker {worker} ({how}) came after the attempt was counted lost; recorded, not applied"
                        ));
                    }
                }
            }
        }
    }

    async fn perform(self: Arc<Self>, agent: String, inv: Invocation) -> AgentOutcome {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.waiting.lock().unwrap().insert(seq, tx);
        let mut guard = Pending {
            hub: self.clone(),
            seq,
            name: inv.name.to_string(),
            attempt: inv.attempt,
            state: PendingState::Open,
        };
        let needs = inv
            .profile
            .as_deref()
            .and_then(|p| self.settings.needs.get(p))
            .cloned()
            .unwrap_or_default();
        let needs = wire::needs_token(&needs);
        let job = Job {
            run: self.settings.run_id.clone(),
            play: self.settings.play.clone(),
            play_hash: self.settings.play_hash.clone(),
            agent,
            op_id: inv.op_id,
            name: inv.name.to_string(),
            role: inv.role.as_deref().map(String::from),
            instruction: inv.instruction.to_string(),
            params: serde_json::Value::clone(&inv.params),
            context: inv.context.clone(),
            attempt: inv.attempt,
            instance: inv.instance.as_deref().map(String::from),
            profile: inv.profile.as_deref().map(String::from),
            usd_headroom: inv.usd_headroom,
            carry_on: inv.carry_on.clone(),
        };
        let payload = serde_json::to_vec(&job).expect("a job is plain JSON");
        // Not running yet: the console says so until a worker takes it.
        inv.events.emit(AgentEvent::Activity {
            state: ActivityState::WaitingForWorker,
            tool: None,
        });
        self.publish_job(&needs, seq, payload).await;
        let mut logs = RemoteLogs::new(self.settings.log_dir.clone(), &inv.name, inv.attempt);
        let since = Instant::now();
        let mut warned = false;
        // Set by the first beat: from then on silence counts.
        let mut beat: Option<(Instant, Duration, String)> = None;
        loop {
            // The one moment that matters next: the no-worker warning, or
            // the beat that is overdue. A sleep to it, not a periodic tick:
            // a big run has thousands of attempts waiting at once.
            let due = match &beat {
                None if !warned => Some(since + NO_WORKER_WARNING),
                None => None,
                Some((last, ack_wait, _)) => Some(*last + *ack_wait + *ack_wait / 2),
            };
            tokio::select! {
                frame = rx.recv() => {
                    let frame = match frame {
                        Some(Routed::Frame(f)) => f,
                        Some(Routed::Gone(why)) => {
                            guard.state = PendingState::Lost;
                            return Err(AgentFailure::new(WORKER_LOST, why));
                        }
                        None => return Err(AgentFailure::new(WORKER_LOST, "the run's connection to the cluster closed")),
                    };
                    match frame {
                        Frame::Beat { worker, ack_wait_ms } => {
                            if beat.is_none() {
                                // Where it runs, for the operator and `report`.
                                logs.command(&[], &worker);
                                // Taken: it runs from now.
                                inv.events.emit(AgentEvent::Activity {
                                    state: ActivityState::Waiting,
                                    tool: None,
                                });
                            }
                            beat = Some((Instant::now(), Duration::from_millis(ack_wait_ms.max(1)), worker));
                        }
                        Frame::Command { argv } => {
                            if let Some((_, _, w)) = &beat {
                                logs.command(&argv, w);
                            }
                            self.tails.start(inv.op_id, inv.attempt, argv, logs.stdout_path());
                        }
                        Frame::Event(e) => inv.events.emit(e.into_event()),
                        Frame::Output { stderr, text } => {
                            logs.write(stderr, &text);
                            for line in text.lines() {
                                self.tails.push(inv.op_id, stderr, line);
                            }
                        }
                        Frame::Redelivered { worker } => {
                            let had = beat.as_ref().map_or("a worker".to_string(), |(_, _, w)| format!("worker {w}"));
                            guard.state = PendingState::Lost;
                            return Err(AgentFailure::new(WORKER_LOST, format!(
                                "{had} went quiet past the ack deadline; the job came again to worker {worker}, which left it for a new attempt"
                            )));
                        }
                        Frame::Result { outcome, .. } => {
                            guard.state = PendingState::Done;
                            return outcome.map_err(AgentFailure::from);
                        }
                    }
                    if let Some(b) = &mut beat {
                        b.0 = Instant::now();
                    }
                }
                () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    // Silence while the run itself is cut off is not the
                    // worker's: the clock starts again on reconnection.
                    if !*self.connected.borrow() {
                        if let Some(b) = &mut beat {
                            b.0 = Instant::now();
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        continue;
                    }
                    match &beat {
                        None if !warned && since.elapsed() >= NO_WORKER_WARNING => {
                            warned = true;
                            let serving = if needs == "any" { String::new() } else { format!(" with tags {}", needs.replace('_', ", ")) };
                            let stale = self.roster.stale(Instant::now());
                            let stale = match stale.len() {
                                0 => String::new(),
                                1 => format!("; worker {} serves another text of the play: update its checkout", stale[0]),
                                _ => format!("; workers {} serve another text of the play: update their checkouts", stale.join(", ")),
                            };
                            inv.events.emit(AgentEvent::Warning(Arc::from(format!(
                                "no worker{serving} has taken {} for {} s; it waits for one (`playdeck worker` serving play {:?} at this text, with this run's signing key: a worker with another refuses the job and says so on its stderr){stale}",
                                inv.name, NO_WORKER_WARNING.as_secs(), self.settings.play
                            ))));
                        }
                        Some((last, ack_wait, worker)) if last.elapsed() >= *ack_wait + *ack_wait / 2 => {
                            guard.state = PendingState::Lost;
                            return Err(AgentFailure::new(WORKER_LOST, format!(
                                "worker {worker} sent nothing for {:.1} s (its ack deadline is {:.1} s): killed, stopped or cut off",
                                last.elapsed().as_secs_f64(), ack_wait.as_secs_f64()
                            )));
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    /// Publishes until the stream has it: the server may be restarting.
    /// The message id makes a second copy of the same job nothing.
    async fn publish_job(&self, needs: &str, seq: u64, payload: Vec<u8>) {
        let subject = wire::job_subject(
            &self.settings.play,
            &self.settings.play_hash,
            needs,
            &self.nonce,
            seq,
        );
        let id = format!("{}.{seq}", self.nonce);
        let mut wait = Duration::from_millis(100);
        loop {
            let mut msg = PublishMessage::build()
                .payload(payload.clone().into())
                .message_id(id.clone());
            if let Some(sig) = self.signer.signature(&subject, &payload) {
                msg = msg.header(wire::SIG_HEADER, sig.as_str());
            }
            let sent = self.js.send_publish(subject.clone(), msg).await;
            let acked = match sent {
                Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match acked {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!("publishing job {id}: {e}; trying again in {wait:?}");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

/// What reaches a waiting invocation: a frame of its worker's, or word
/// that its job is gone (the server lost its store).
enum Routed {
    Frame(Frame),
    Gone(String),
}

enum PendingState {
    Open,
    Done,
    Lost,
}

/// Unregisters an invocation however its future ends; one the kernel
/// dropped (a cancel) is told to the workers, one counted lost is kept to
/// recognise its late result.
struct Pending {
    hub: Arc<Hub>,
    seq: u64,
    name: String,
    attempt: u32,
    state: PendingState,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.hub.waiting.lock().unwrap().remove(&self.seq);
        match self.state {
            PendingState::Done => {}
            PendingState::Lost => {
                self.hub
                    .lost
                    .lock()
                    .unwrap()
                    .insert(self.seq, (self.name.clone(), self.attempt));
            }
            PendingState::Open => {
                let client = self.hub.client.clone();
                let signer = self.hub.signer.clone();
                let subject = wire::cancel_subject(&self.hub.nonce, self.seq);
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        let _ = cancel(&client, &signer, subject).await;
                    });
                }
            }
        }
    }
}

/// Where the run directory keeps its hub's nonce.
pub const NONCE_FILE: &str = "cluster.nonce";

/// What a run's earlier process (crashed, killed) left on the cluster: its
/// jobs not yet taken are purged, the workers stop those they perform (the
/// resumed run attempts them again), and its frames go with their reader.
/// Tells the workers an attempt (or a whole hub's) is unwanted, signed.
async fn cancel(
    client: &async_nats::Client,
    signer: &wire::Signer,
    subject: String,
) -> Result<(), async_nats::PublishError> {
    let payload = bytes::Bytes::from_static(b"cancel");
    match signer.headers(&subject, &payload) {
        Some(h) => client.publish_with_headers(subject, h, payload).await,
        None => client.publish(subject, payload).await,
    }
}

async fn forget(
    js: &jetstream::Context,
    client: &async_nats::Client,
    signer: &wire::Signer,
    old: &str,
) {
    if old.is_empty() || !old.bytes().all(|b| b.is_ascii_hexdigit()) {
        return;
    }
    if let Ok(s) = js.get_stream(wire::JOBS_STREAM).await
        && let Err(e) = s.purge().filter(format!("pd.job.*.*.{old}.>")).await
    {
        tracing::warn!("taking back the earlier process's jobs: {e}");
    }
    let _ = cancel(client, signer, wire::cancel_all_subject(old)).await;
    let _ = client.flush().await;
    if let Ok(s) = js.get_stream(wire::OUT_STREAM).await {
        let _ = s.delete_consumer(&format!("out-{old}")).await;
        let _ = s.purge().filter(format!("pd.out.{old}.>")).await;
    }
}

/// After each reconnection: whether the server still has this run's
/// frames. One restarted without its store (a pod without a volume) has
/// lost every job not yet done, this run's frames and its consumer of them.
/// The run's consumer is made when missing (a worker or another run may
/// have made the streams again first, so the stream's presence says
/// nothing): one made anew is the loss. Then it is said, and every attempt
/// in flight is counted lost (its job is gone; the retry policy attempts it
/// again) and cancelled on the workers, so one that still runs it, or a
/// job published again after the loss, is not run twice.
async fn watch_store(
    hub: std::sync::Weak<Hub>,
    mut connected: watch::Receiver<bool>,
    mut made: i128,
) {
    loop {
        if connected.changed().await.is_err() {
            return;
        }
        if !*connected.borrow_and_update() {
            continue;
        }
        // Until the consumer is there: a failure with the connection up
        // would otherwise leave every publish waiting for a stream.
        let mut wait = Duration::from_millis(250);
        let created = loop {
            let Some(hub) = hub.upgrade() else { return };
            match out_consumer_made(&hub).await {
                Ok(c) => break Some(c),
                Err(e) => {
                    tracing::warn!(
                        "making the run's frame stream again: {e}; trying again in {wait:?}"
                    );
                }
            }
            drop(hub);
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
            if !*connected.borrow() {
                break None;
            }
        };
        let Some(created) = created else { continue };
        if created == made {
            continue;
        }
        made = created;
        let Some(hub) = hub.upgrade() else { return };
        let lost: Vec<_> = hub.waiting.lock().unwrap().drain().collect();
        let why = "the NATS server came back without its store (restarted without a volume?): the job is gone; attempted again";
        for (seq, tx) in &lost {
            let _ = tx.send(Routed::Gone(why.to_string()));
            let _ = cancel(
                &hub.client,
                &hub.signer,
                wire::cancel_subject(&hub.nonce, *seq),
            )
            .await;
        }
        hub.warn(format!(
            "the NATS server came back without its store (restarted without a volume?): {} attempt(s) in flight lost and attempted again; its streams are made again",
            lost.len()
        ));
    }
}

/// The streams and the run's consumer of its frames, made when missing:
/// when that consumer was made (its own clock's nanoseconds).
async fn out_consumer_made(hub: &Hub) -> Result<i128, async_nats::Error> {
    super::ensure_streams(&hub.js).await?;
    let c: jetstream::consumer::PullConsumer = hub
        .js
        .get_stream(wire::OUT_STREAM)
        .await?
        .get_or_create_consumer(&format!("out-{}", hub.nonce), out_consumer(&hub.nonce))
        .await?;
    Ok(c.cached_info().created.unix_timestamp_nanos())
}

/// The run's durable consumer of its frames.
fn out_consumer(nonce: &str) -> pull::Config {
    pull::Config {
        durable_name: Some(format!("out-{nonce}")),
        filter_subject: format!("pd.out.{nonce}.>"),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        // Nobody reads a finished run's frames: the server drops its
        // consumer after a day without it.
        inactive_threshold: Duration::from_secs(24 * 3600),
        ..Default::default()
    }
}

/// Reads this run's frames for as long as the hub lives, through server
/// restarts (the durable consumer keeps its place).
async fn read_frames(hub: std::sync::Weak<Hub>, consumer: jetstream::consumer::PullConsumer) {
    loop {
        if hub.strong_count() == 0 {
            return;
        }
        let mut messages = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!("frames: {e}; reading again shortly");
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
        };
        while let Some(m) = messages.next().await {
            let Some(hub) = hub.upgrade() else { return };
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!("frames: {e}; reading again");
                    break;
                }
            };
            match hub
                .signer
                .verify(&m.subject, m.headers.as_ref(), &m.payload)
            {
                Err(why) => hub.refuse(&m.subject, why),
                Ok(()) => {
                    if let (Some((_, seq)), Ok(frame)) = (
                        wire::ids_of(&m.subject),
                        serde_json::from_slice::<Frame>(&m.payload),
                    ) {
                        hub.route(seq, frame);
                    }
                }
            }
            let _ = m.ack().await;
        }
    }
}

/// The run's copy of a remote attempt's logs, as a local attempt's are
/// laid out, so the console's follow view and `report` read them alike.
struct RemoteLogs {
    dir: Option<PathBuf>,
    base: String,
    files: [Option<std::fs::File>; 2],
}

impl RemoteLogs {
    fn new(dir: Option<PathBuf>, name: &str, attempt: u32) -> Self {
        RemoteLogs {
            dir,
            base: format!("{name}.{attempt}"),
            files: [None, None],
        }
    }

    fn stdout_path(&self) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.stdout.log", self.base)))
    }

    fn command(&self, argv: &[String], worker: &str) {
        let Some(dir) = &self.dir else { return };
        let _ = crate::files::private_dir(dir);
        let v = serde_json::json!({ "argv": argv, "worker": worker });
        let _ = std::fs::write(
            dir.join(format!("{}.command.json", self.base)),
            serde_json::to_vec_pretty(&v).unwrap_or_default(),
        );
    }

    fn write(&mut self, stderr: bool, text: &str) {
        let Some(dir) = &self.dir else { return };
        let slot = &mut self.files[usize::from(stderr)];
        if slot.is_none() {
            let _ = crate::files::private_dir(dir);
            let which = if stderr { "stderr" } else { "stdout" };
            *slot = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(format!("{}.{which}.log", self.base)))
                .ok();
        }
        if let Some(f) = slot {
            let _ = f.write_all(text.as_bytes());
        }
    }
}

/// An agent of the play, performed on the cluster.
pub struct RemoteAgent {
    pub hub: Arc<Hub>,
    pub agent: String,
    pub wants_context: bool,
}

impl Agent for RemoteAgent {
    fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome> {
        Box::pin(self.hub.clone().perform(self.agent.clone(), inv))
    }

    fn wants_context(&self) -> bool {
        self.wants_context
    }
}
