//! `playdeck worker`: takes jobs of the plays it serves from the
//! work-queue stream and performs them with the agents of its own copy of
//! each play, in its own checkout, reporting back on the run's frames.
//! A surface, beside `headless`: it builds each play's agents through
//! `session`, while `cluster` keeps the run's side (hub, wire, roster).
//! Taking and performing one job is `job`; sending its logs, `shipper`.

mod job;
mod shipper;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::pull, message::PublishMessage};
use futures_util::StreamExt;
use tokio::sync::{Semaphore, mpsc};

use crate::agents::Tails;
use crate::cluster::wire::{self, Frame, Job, WireEvent, WireFailure, WorkerInfo};
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
    conn: crate::cluster::Connection,
    opts: WorkerOptions,
    stop: impl std::future::Future<Output = ()>,
    now: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let crate::cluster::Connection {
        client,
        signer,
        mut connected,
    } = conn;
    if !signer.signs() {
        tracing::warn!(
            "jobs are not signed: this worker runs what anyone who may publish on pd.job.> writes; give it and its runs a signing_key_file (docs/scale-out.md, Credentials)"
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
    crate::cluster::ensure_streams(&js)
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
        if let Ok(kv) = crate::cluster::workers_bucket(&js).await {
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
    crate::cluster::ensure_streams(js).await?;
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
            match crate::cluster::workers_bucket(&js).await {
                Ok(b) => kv = Some(b),
                Err(e) => tracing::debug!("workers bucket: {e}"),
            }
        }
        info.busy = busy.load(std::sync::atomic::Ordering::Relaxed);
        info.draining = draining.load(std::sync::atomic::Ordering::Relaxed);
        info.beat_ms = crate::cluster::unix_ms();
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
