//! One job in a worker's hands: verified, performed with the play's own
//! agents (in a worktree when its profile asks), cancelled when its run no
//! longer wants it, and its result sent back.

use super::shipper::Shipper;
use super::*;

/// An attempt's worktree on the worker.
pub(super) struct JobWorktree {
    repo: PathBuf,
    path: PathBuf,
    branch: String,
}

impl JobWorktree {
    /// Removes it when nothing in it would be lost (git refuses a tree with
    /// changes; a branch with commits stays): what stays, in words.
    pub(super) fn remove(self) -> Option<String> {
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
pub(super) struct Busy(Arc<std::sync::atomic::AtomicUsize>);

impl Busy {
    pub(super) fn new(n: &Arc<std::sync::atomic::AtomicUsize>) -> Busy {
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
    pub(super) fn cancel(&self, subject: &str) {
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
    pub(super) async fn send(&self, subject: &str, frame: &Frame, sure: bool) {
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

    pub(super) async fn take(
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
            carry_on: job.carry_on.clone(),
            land_only: false,
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
    pub(super) async fn worktree_for(
        &self,
        job: &Job,
    ) -> Result<Option<JobWorktree>, AgentFailure> {
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

    pub(super) fn agent_for(
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
    pub(super) async fn finish(
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
