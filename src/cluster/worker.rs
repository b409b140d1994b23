//! `playdeck worker`: takes jobs of the plays it serves from the
//! work-queue stream and performs them with the agents of its own copy of
//! each play, in its own checkout, reporting back on the run's frames.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::pull, message::PublishMessage};
use futures_util::StreamExt;
use tokio::sync::{Semaphore, mpsc};

use super::wire::{self, Frame, Job, WireEvent, WireFailure, WorkerInfo};
use crate::agents::Tails;
use crate::kernel::{AgentEvents, AgentFailure, AgentResolver, Invocation};
use crate::play::Play;

/// How long a worker's jobs may go without an ack before the server hands
/// them to another worker, unless a stream's consumer says otherwise.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);

pub struct WorkerOptions {
    pub slots: usize,
    pub tags: Vec<String>,
    pub plays: Vec<PathBuf>,
    pub ack_wait: Duration,
    /// Where attempts' logs are kept on the worker.
    pub state_dir: PathBuf,
}

/// A play this worker serves: its agents, built from its own text.
struct Served {
    hash: String,
    play: Arc<Play>,
}

struct Worker {
    id: String,
    js: jetstream::Context,
    plays: HashMap<String, Served>,
    ack_wait: Duration,
    /// Each attempt's logs go under here while it runs.
    logs: PathBuf,
    /// Where git-worktree profiles' attempts get their worktrees.
    worktrees: PathBuf,
    /// Jobs their runs no longer want, newest last (bounded).
    cancelled: Mutex<(HashSet<String>, VecDeque<String>)>,
    running: Mutex<HashMap<String, tokio::sync::oneshot::Sender<()>>>,
    /// Jobs in hand now (a slot held while pulling is not busy).
    busy: Arc<std::sync::atomic::AtomicUsize>,
    /// Stopping: said in its heartbeats.
    draining: Arc<std::sync::atomic::AtomicBool>,
    /// Makes the next heartbeat now (it started draining).
    beat_now: Arc<tokio::sync::Notify>,
    signer: wire::Signer,
}

const CANCELS_KEPT: usize = 10_000;

/// Serves until `stop` resolves, then drains: takes no new job, says so,
/// and ends when the jobs in hand are done — or at once when `now`
/// resolves (a second signal).
pub async fn serve(
    conn: super::Connection,
    opts: WorkerOptions,
    stop: impl std::future::Future<Output = ()>,
    now: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let super::Connection {
        client,
        signer,
        mut connected,
    } = conn;
    if !signer.signs() {
        tracing::warn!(
            "jobs are not signed: this worker runs what anyone who may publish on pd.job.> writes; give it and its runs a signing_key_file (docs/cluster.md, Credentials)"
        );
    }
    let mut plays = HashMap::new();
    for path in &opts.plays {
        let play = Play::load(path).map_err(|e| e.to_string())?;
        let hash = wire::play_hash(&play.source);
        plays.insert(
            play.name.clone(),
            Served {
                hash,
                play: Arc::new(play),
            },
        );
    }
    let js = jetstream::new(client.clone());
    super::ensure_streams(&js)
        .await
        .map_err(|e| e.to_string())?;
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let id = format!("{host}-{}", std::process::id());
    let (mut consumers, ack_wait) = consumers_of(&js, &plays, &opts.tags, opts.ack_wait)
        .await
        .map_err(|e| e.to_string())?;
    let worker = Arc::new(Worker {
        id: id.clone(),
        js: js.clone(),
        plays,
        ack_wait,
        logs: opts.state_dir.join("logs"),
        worktrees: opts.state_dir.join("worktrees"),
        cancelled: Mutex::default(),
        running: Mutex::default(),
        busy: Arc::default(),
        draining: Arc::default(),
        beat_now: Arc::default(),
        signer,
    });
    let mut cancels = client
        .subscribe("pd.cancel.>")
        .await
        .map_err(|e| e.to_string())?;
    let w = worker.clone();
    tokio::spawn(async move {
        while let Some(m) = cancels.next().await {
            match w.signer.verify(&m.subject, m.headers.as_ref(), &m.payload) {
                Ok(()) => w.cancel(&m.subject),
                // Another run's on a shared bus, with its own key, is not
                // news: said only when asked for.
                Err(why) => tracing::debug!(
                    "a cancel on {} was not taken: {why}",
                    crate::printable::printable(&m.subject)
                ),
            }
        }
    });
    let slots = Arc::new(Semaphore::new(opts.slots.max(1)));
    let announcing = tokio::spawn(announce(
        js.clone(),
        id.clone(),
        WorkerInfo {
            host,
            slots: opts.slots.max(1),
            busy: 0,
            tags: opts.tags.clone(),
            plays: worker.plays.keys().cloned().collect(),
            texts: worker
                .plays
                .iter()
                .map(|(name, s)| (name.clone(), s.hash.clone()))
                .collect(),
            beat_ms: 0,
            draining: false,
        },
        worker.busy.clone(),
        worker.draining.clone(),
        worker.beat_now.clone(),
    ));
    tracing::info!(
        "worker {id} serving {:?} with {} slots",
        worker.plays.keys(),
        opts.slots
    );
    let take = async {
        loop {
            let first = slots.clone().acquire_owned().await.expect("never closed");
            let mut permits = vec![first];
            while let Ok(p) = slots.clone().try_acquire_owned() {
                permits.push(p);
            }
            let mut took = 0;
            let mut failed = false;
            for c in &consumers {
                if permits.is_empty() {
                    break;
                }
                // Wait for work only on the last (the broadest) consumer.
                let expires = if std::ptr::eq(c, consumers.last().unwrap()) {
                    Duration::from_millis(500)
                } else {
                    Duration::from_millis(50)
                };
                let batch = c
                    .batch()
                    .max_messages(permits.len())
                    .expires(expires)
                    .messages()
                    .await;
                let mut batch = match batch {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::debug!("pull: {e}");
                        failed = true;
                        continue;
                    }
                };
                while let Some(m) = batch.next().await {
                    let m = match m {
                        Ok(m) => m,
                        Err(e) => {
                            tracing::debug!("pull: {e}");
                            failed = true;
                            break;
                        }
                    };
                    let Some(permit) = permits.pop() else {
                        // More than asked for: leave it for its deadline.
                        break;
                    };
                    took += 1;
                    tokio::spawn(worker.clone().take(m, permit));
                }
            }
            drop(permits);
            // Back after an outage: a server that came back without its
            // store (a pod without a volume) has lost the work queue and
            // this worker's consumers, and a pull from a consumer that is
            // not there just finds nothing. They are made when missing; a
            // consumer made anew is the loss, said.
            if connected.has_changed().unwrap_or(false) && *connected.borrow_and_update() {
                match consumers_of(&js, &worker.plays, &opts.tags, opts.ack_wait).await {
                    Ok((again, _)) => {
                        let made = |c: &jetstream::consumer::PullConsumer| c.cached_info().created;
                        if again.iter().map(made).ne(consumers.iter().map(made)) {
                            tracing::warn!(
                                "the NATS server came back without its store (restarted without a volume?): the work queue and this worker's consumers are made again"
                            );
                        }
                        consumers = again;
                    }
                    Err(e) => {
                        tracing::warn!(
                            "the NATS server is back, but its work queue is not: {e}; trying again"
                        );
                        // Looked at again at the next turn.
                        connected.mark_changed();
                    }
                }
            }
            if failed {
                tokio::time::sleep(Duration::from_millis(250)).await;
            } else if took == 0 {
                tokio::task::yield_now().await;
            }
        }
    };
    tokio::select! {
        () = take => {}
        () = stop => {}
    }
    // A rollout's SIGTERM: what was taken is finished, not abandoned to
    // the ack deadline and a retry elsewhere.
    worker
        .draining
        .store(true, std::sync::atomic::Ordering::Relaxed);
    worker.beat_now.notify_one();
    let held = worker.busy.load(std::sync::atomic::Ordering::Relaxed);
    if held > 0 {
        tracing::info!(
            "worker {id} draining: {held} job(s) to finish; a second signal stops at once"
        );
        let drained = async {
            while worker.busy.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::select! {
            () = drained => {}
            () = now => {}
        }
    }
    // Runs watching the workers see this one leave now, not in a minute
    // (and no heartbeat puts it back).
    announcing.abort();
    let _ = announcing.await;
    let leave = async {
        if let Ok(kv) = super::workers_bucket(&js).await {
            let _ = kv.delete(&id).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), leave).await;
    Ok(())
}

/// The streams, and this worker's consumers of the job queue, made when
/// missing: most specific first (a job that needs this worker's tags goes
/// before one any worker could take), one per play and text it serves
/// (jobs of other plays, or other texts, never come to it). With the ack
/// deadline to beat by: whoever made a consumer first set it.
async fn consumers_of(
    js: &jetstream::Context,
    plays: &HashMap<String, Served>,
    tags: &[String],
    ack_wait: Duration,
) -> Result<(Vec<jetstream::consumer::PullConsumer>, Duration), async_nats::Error> {
    super::ensure_streams(js).await?;
    let stream = js.get_stream(wire::JOBS_STREAM).await?;
    let mut tokens = wire::served_tokens(tags);
    tokens.reverse();
    let mut consumers = Vec::new();
    let mut beat_by = ack_wait;
    for token in &tokens {
        for (play, served) in plays {
            let name = format!("jobs-{}-{token}", wire::play_token(play, &served.hash));
            let c: jetstream::consumer::PullConsumer = stream
                .get_or_create_consumer(
                    &name,
                    pull::Config {
                        durable_name: Some(name.clone()),
                        filter_subject: wire::jobs_filter(play, &served.hash, token),
                        ack_policy: jetstream::consumer::AckPolicy::Explicit,
                        // No inactive threshold: a worker busy with long
                        // attempts on every slot pulls nothing for hours,
                        // and its consumer must still be there after.
                        ack_wait,
                        max_deliver: -1,
                        ..Default::default()
                    },
                )
                .await?;
            beat_by = beat_by.min(c.cached_info().config.ack_wait);
            consumers.push(c);
        }
    }
    Ok((consumers, beat_by))
}

/// Puts this worker's row in the workers bucket every 2 s.
async fn announce(
    js: jetstream::Context,
    id: String,
    mut info: WorkerInfo,
    busy: Arc<std::sync::atomic::AtomicUsize>,
    draining: Arc<std::sync::atomic::AtomicBool>,
    beat_now: Arc<tokio::sync::Notify>,
) {
    let mut kv: Option<jetstream::kv::Store> = None;
    loop {
        if kv.is_none() {
            match super::workers_bucket(&js).await {
                Ok(b) => kv = Some(b),
                Err(e) => tracing::debug!("workers bucket: {e}"),
            }
        }
        info.busy = busy.load(std::sync::atomic::Ordering::Relaxed);
        info.draining = draining.load(std::sync::atomic::Ordering::Relaxed);
        info.beat_ms = super::unix_ms();
        if let (Some(b), Ok(v)) = (&kv, serde_json::to_vec(&info))
            && b.put(&id, v.into()).await.is_err()
        {
            // Away, or back without its store: the bucket is made again
            // at the next beat.
            kv = None;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
            () = beat_now.notified() => {}
        }
    }
}

/// An attempt's worktree on the worker.
struct JobWorktree {
    repo: PathBuf,
    path: PathBuf,
    branch: String,
}

impl JobWorktree {
    /// Removes it when nothing in it would be lost (git refuses a tree with
    /// changes; a branch with commits stays): what stays, in words.
    fn remove(self) -> Option<String> {
        match crate::capacity::workspace::remove_worktree(
            &self.repo,
            &self.path,
            Some(&self.branch),
        ) {
            Ok(r) if r.branch_kept => Some(format!(
                "the attempt's commits are on branch {} of {}",
                self.branch,
                self.repo.display()
            )),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        }
    }
}

/// Counts a job in hand for as long as it lives.
struct Busy(Arc<std::sync::atomic::AtomicUsize>);

impl Busy {
    fn new(n: &Arc<std::sync::atomic::AtomicUsize>) -> Busy {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Busy(n.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Worker {
    fn cancel(&self, subject: &str) {
        let key = if let Some(nonce) = wire::cancel_all_of(subject) {
            // A run's earlier process: everything it sent is unwanted.
            let prefix = format!("{nonce}.");
            let mut running = self.running.lock().unwrap();
            let theirs: Vec<String> = running
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect();
            for k in theirs {
                if let Some(stop) = running.remove(&k) {
                    let _ = stop.send(());
                }
            }
            nonce.to_string()
        } else if let Some((nonce, seq)) = wire::ids_of(subject) {
            let key = format!("{nonce}.{seq}");
            if let Some(stop) = self.running.lock().unwrap().remove(&key) {
                let _ = stop.send(());
            }
            key
        } else {
            return;
        };
        let mut c = self.cancelled.lock().unwrap();
        if c.0.insert(key.clone()) {
            c.1.push_back(key);
            if c.1.len() > CANCELS_KEPT
                && let Some(old) = c.1.pop_front()
            {
                c.0.remove(&old);
            }
        }
    }

    /// Publishes a frame; with `sure`, until the stream has it.
    async fn send(&self, subject: &str, frame: &Frame, sure: bool) {
        let payload: bytes::Bytes = serde_json::to_vec(frame).expect("plain JSON").into();
        let mut wait = Duration::from_millis(100);
        loop {
            let mut msg = PublishMessage::build().payload(payload.clone());
            if let Some(sig) = self.signer.signature(subject, &payload) {
                msg = msg.header(wire::SIG_HEADER, sig.as_str());
            }
            let sent = self.js.send_publish(subject.to_string(), msg).await;
            let done = match sent {
                Ok(ack) if sure => ack.await.is_ok(),
                Ok(_) => true,
                Err(_) => !sure,
            };
            if done {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    async fn take(
        self: Arc<Self>,
        m: jetstream::Message,
        _permit: tokio::sync::OwnedSemaphorePermit,
    ) {
        let _busy = Busy::new(&self.busy);
        // Before anything of it is read or answered: a forged job is not
        // the run's to hear about (a refusal sent to its subject would fail
        // the real attempt).
        if let Err(why) = self
            .signer
            .verify(&m.subject, m.headers.as_ref(), &m.payload)
        {
            tracing::warn!(
                "worker {} refused a job on {}: {why}",
                self.id,
                crate::printable::printable(&m.subject)
            );
            let _ = m.ack_with(AckKind::Term).await;
            return;
        }
        let Some((nonce, seq)) = wire::ids_of(&m.subject) else {
            let _ = m.ack_with(AckKind::Term).await;
            return;
        };
        let key = format!("{nonce}.{seq}");
        let out = wire::out_subject(nonce, seq);
        let delivered = m.info().map(|i| i.delivered).unwrap_or(1);
        if delivered > 1 {
            // Whoever had it went quiet: the run decides what comes next
            // (a new attempt, by its retry policy), not this worker.
            self.send(
                &out,
                &Frame::Redelivered {
                    worker: self.id.clone(),
                },
                true,
            )
            .await;
            let _ = m.ack_with(AckKind::Term).await;
            return;
        }
        let unwanted = {
            let c = self.cancelled.lock().unwrap();
            c.0.contains(&key) || c.0.contains(nonce)
        };
        if unwanted {
            let _ = m.ack_with(AckKind::Term).await;
            return;
        }
        let job: Job = match serde_json::from_slice::<Job>(&m.payload) {
            // Its name becomes file names under the worker's state: only
            // a name an operation can have.
            Ok(j) if !wire::is_op_name(&j.name) => {
                let f = AgentFailure::new(
                    "worker_refused",
                    format!(
                        "worker {} refused a job named {:?}: not an operation's name",
                        self.id,
                        crate::printable::printable(&j.name)
                    ),
                );
                self.finish(&m, &out, Err(f)).await;
                return;
            }
            Ok(j) => j,
            Err(e) => {
                let f = AgentFailure::new(
                    "worker_refused",
                    format!("worker {} could not read the job: {e}", self.id),
                );
                self.finish(&m, &out, Err(f)).await;
                return;
            }
        };
        let logs = self.logs.join(&key);
        let agent = match self.agent_for(&job, &logs) {
            Ok(a) => a,
            Err(f) => {
                self.finish(&m, &out, Err(f)).await;
                return;
            }
        };
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel();
        self.running.lock().unwrap().insert(key.clone(), stop_tx);
        self.send(
            &out,
            &Frame::Beat {
                worker: self.id.clone(),
                ack_wait_ms: self.ack_wait.as_millis() as u64,
            },
            false,
        )
        .await;
        let worktree = match self.worktree_for(&job).await {
            Ok(w) => w,
            Err(f) => {
                self.running.lock().unwrap().remove(&key);
                self.finish(&m, &out, Err(f)).await;
                return;
            }
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let inv = Invocation {
            op_id: job.op_id,
            name: Arc::from(job.name.as_str()),
            role: job.role.as_deref().map(Arc::from),
            instruction: Arc::from(job.instruction.as_str()),
            params: Arc::new(job.params),
            context: job.context,
            attempt: job.attempt,
            events: AgentEvents::new(0, job.attempt, tx, Arc::default()),
            instance: job.instance.as_deref().map(Arc::from),
            workspace: worktree.as_ref().map(|w| w.path.clone()),
            profile: job.profile.as_deref().map(Arc::from),
            usd_headroom: job.usd_headroom,
        };
        let mut attempt = agent.invoke(inv);
        let mut beat = tokio::time::interval(self.ack_wait / 3);
        beat.tick().await;
        let mut shipper = Shipper::new(&logs, &job.name, job.attempt);
        let mut ship = tokio::time::interval(Duration::from_millis(200));
        let outcome = loop {
            tokio::select! {
                outcome = &mut attempt => break Some(outcome),
                _ = &mut stop_rx => break None,
                Some(msg) = rx.recv() => {
                    if let Some(e) = WireEvent::of(&msg.event) {
                        self.send(&out, &Frame::Event(e), false).await;
                    }
                }
                _ = ship.tick() => shipper.ship(&self, &out, false).await,
                _ = beat.tick() => {
                    let _ = m.ack_with(AckKind::Progress).await;
                    self.send(&out, &Frame::Beat { worker: self.id.clone(), ack_wait_ms: self.ack_wait.as_millis() as u64 }, false).await;
                }
            }
        };
        drop(attempt);
        self.running.lock().unwrap().remove(&key);
        if let Some(w) = worktree
            && let Some(said) = tokio::task::spawn_blocking(move || w.remove())
                .await
                .ok()
                .flatten()
        {
            let e = WireEvent::of(&crate::kernel::AgentEvent::Warning(Arc::from(format!(
                "worker {}: {said}",
                self.id
            ))));
            if let Some(e) = e {
                self.send(&out, &Frame::Event(e), false).await;
            }
        }
        shipper.ship(&self, &out, true).await;
        let _ = std::fs::remove_dir_all(&logs);
        while let Ok(msg) = rx.try_recv() {
            if let Some(e) = WireEvent::of(&msg.event) {
                self.send(&out, &Frame::Event(e), false).await;
            }
        }
        match outcome {
            Some(o) => self.finish(&m, &out, o).await,
            // Cancelled by its run: nobody waits for a result.
            None => {
                let _ = m.ack_with(AckKind::Term).await;
            }
        }
    }

    /// A job of a `git-worktree` role profile gets a worktree of this
    /// worker's checkout on a branch of its own (its slots must not write
    /// into one tree at once); other jobs run in the checkout.
    async fn worktree_for(&self, job: &Job) -> Result<Option<JobWorktree>, AgentFailure> {
        let Some(served) = self.plays.get(&job.play) else {
            return Ok(None);
        };
        let profile = job
            .profile
            .as_deref()
            .and_then(|p| served.play.capacity.as_ref()?.profiles.get(p));
        if profile
            .is_none_or(|p| p.workspace_mode != crate::capacity::config::WorkspaceMode::GitWorktree)
        {
            return Ok(None);
        }
        let safe = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '-'
                    }
                })
                .collect()
        };
        let leaf = format!("{}.{}", safe(&job.name), job.attempt);
        let w = JobWorktree {
            repo: served.play.dir.clone(),
            path: self.worktrees.join(safe(&job.run)).join(&leaf),
            branch: format!("playdeck/{}/{leaf}", safe(&job.run)),
        };
        crate::capacity::workspace::create_worktree(&w.repo, &w.path, &w.branch)
            .await
            .map_err(|e| {
                AgentFailure::new(
                    "os_error",
                    format!("worker {}: no worktree for {}: {e}", self.id, job.name),
                )
            })?;
        Ok(Some(w))
    }

    fn agent_for(
        &self,
        job: &Job,
        logs: &std::path::Path,
    ) -> Result<Arc<dyn crate::kernel::Agent>, AgentFailure> {
        let Some(served) = self.plays.get(&job.play) else {
            let mut names: Vec<&str> = self.plays.keys().map(String::as_str).collect();
            names.sort_unstable();
            return Err(AgentFailure::new(
                "worker_refused",
                format!(
                    "worker {} does not serve play {:?} (it serves {})",
                    self.id,
                    job.play,
                    names.join(", ")
                ),
            ));
        };
        if served.hash != job.play_hash {
            return Err(AgentFailure::new(
                "worker_refused",
                format!(
                    "worker {} has another text of play {:?} (hash {}, the run's {}): update the worker's checkout",
                    self.id, job.play, served.hash, job.play_hash
                ),
            ));
        }
        let play = &served.play;
        let ctx = crate::session::wiring::run_context(
            play,
            &job.run,
            Some(logs.to_path_buf()),
            Tails::new(),
        );
        let agents = crate::session::wiring::agent_registry(play, play.speed, ctx);
        agents.resolve(&job.agent).ok_or_else(|| {
            AgentFailure::new(
                "worker_refused",
                format!("play {:?} defines no agent {:?}", job.play, job.agent),
            )
        })
    }

    /// Reports the outcome until the stream has it, then acks the job.
    async fn finish(
        &self,
        m: &jetstream::Message,
        out: &str,
        outcome: Result<serde_json::Value, AgentFailure>,
    ) {
        let frame = Frame::Result {
            worker: self.id.clone(),
            outcome: outcome.map_err(|f| WireFailure::from(&f)),
        };
        self.send(out, &frame, true).await;
        for _ in 0..5 {
            if m.double_ack().await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Sends what an attempt writes to its logs, as it grows: whole lines
/// while it runs, the rest at the end.
struct Shipper {
    command: PathBuf,
    sent_command: bool,
    files: [(PathBuf, u64); 2],
}

impl Shipper {
    fn new(dir: &std::path::Path, name: &str, attempt: u32) -> Self {
        let base = format!("{name}.{attempt}");
        Shipper {
            command: dir.join(format!("{base}.command.json")),
            sent_command: false,
            files: [
                (dir.join(format!("{base}.stdout.log")), 0),
                (dir.join(format!("{base}.stderr.log")), 0),
            ],
        }
    }

    async fn ship(&mut self, w: &Worker, out: &str, last: bool) {
        if !self.sent_command
            && let Ok(text) = std::fs::read(&self.command)
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text)
        {
            self.sent_command = true;
            let argv = v["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            w.send(out, &Frame::Command { argv }, false).await;
        }
        for (i, (path, at)) in self.files.iter_mut().enumerate() {
            let Some(chunk) = read_from(path, *at, last) else {
                continue;
            };
            *at += chunk.len() as u64;
            // Frames stay well under the server's 1 MiB message limit.
            for piece in chunk.chunks(256 << 10) {
                let text = String::from_utf8_lossy(piece).into_owned();
                w.send(
                    out,
                    &Frame::Output {
                        stderr: i == 1,
                        text,
                    },
                    false,
                )
                .await;
            }
        }
    }
}

/// What `path` holds past `at`: up to its last newline, or all of it when
/// `last`.
fn read_from(path: &std::path::Path, at: u64, last: bool) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    f.seek(SeekFrom::Start(at)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    if !last {
        let end = buf.iter().rposition(|&b| b == b'\n')? + 1;
        buf.truncate(end);
    }
    (!buf.is_empty()).then_some(buf)
}
