//! Runs the page is watching: one view model per run, folded from the
//! run's own event log as it grows (the file every surface can read; the
//! run's host sends the page nothing and never waits for it), shared by
//! every page and stream open on that run. A stream learns that the run
//! moved through a `watch` channel carrying the log's last seq — the
//! `id:` of its server-sent events.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use crate::operator::log::LogTail;
use crate::operator::model::{PlayFacts, ViewModel};

/// How often a watched log is looked at for new lines.
pub const POLL: Duration = Duration::from_millis(20);
/// A run nobody has looked at for this long is let go.
const IDLE: Duration = Duration::from_secs(30);

/// One watched run.
pub struct Watched {
    pub id: String,
    pub dir: PathBuf,
    view: RwLock<ViewModel>,
    seq: watch::Sender<u64>,
    /// The last events, said in a line each, for a stream's feed.
    recent: Mutex<std::collections::VecDeque<(u64, Arc<str>)>>,
    /// The run's view as last rendered, by scope: 100 pages on one run
    /// render it once a change.
    pub rendered: Mutex<Vec<(u64, crate::web::devices::Scope, Arc<str>)>>,
}

/// Events kept for a stream that reconnects; one further back reads the log.
pub const RECENT: usize = 4096;

/// An event in a line: `12.4s started build`.
pub fn said(s: &crate::kernel::Signal) -> String {
    let what = s.kind.type_name().replace('_', " ");
    let op = s
        .kind
        .node()
        .map(|h| format!(" {}", h.name))
        .or_else(|| match &s.kind {
            crate::kernel::SignalKind::OperatorAction { by, action, .. } => {
                Some(format!(": {action} — {by}"))
            }
            _ => None,
        })
        .unwrap_or_default();
    format!("{} {what}{op}", crate::operator::words::duration(s.elapsed))
}

impl Watched {
    /// Reads the view (a short read lock: render, then let go).
    pub fn view<R>(&self, f: impl FnOnce(&ViewModel) -> R) -> R {
        f(&self.view.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The log's last seq, changing as the run moves.
    pub fn seq(&self) -> watch::Receiver<u64> {
        self.seq.subscribe()
    }

    /// The events after `after`, said: from those kept, else from the log
    /// (a stream that was away long).
    pub fn events_after(&self, after: u64) -> Vec<(u64, Arc<str>)> {
        {
            let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            if recent.front().is_none_or(|(first, _)| *first <= after + 1) {
                return recent.iter().filter(|(s, _)| *s > after).cloned().collect();
            }
        }
        let mut t = LogTail::new(&self.dir.join("events.jsonl"), 0, &[]);
        let got = t.poll();
        let now = *self.seq.borrow();
        got.iter()
            .filter(|s| s.seq > after && s.seq <= now)
            .map(|s| (s.seq, Arc::from(said(s))))
            .collect()
    }

    /// Reads the log's new lines into the view; whether any came.
    fn catch_up(&self, tail: &mut LogTail) -> bool {
        let got = tail.poll();
        if got.is_empty() {
            return false;
        }
        let mut v = self.view.write().unwrap_or_else(|e| e.into_inner());
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        for s in &got {
            v.fold(s);
            if recent.len() >= RECENT {
                recent.pop_front();
            }
            recent.push_back((s.seq, Arc::from(said(s))));
        }
        drop(recent);
        v.settle();
        let seq = v.seq;
        drop(v);
        self.seq.send_replace(seq);
        true
    }
}

/// The runs watched now, by id.
#[derive(Default, Clone)]
pub struct Watches {
    runs: Arc<Mutex<HashMap<String, Arc<Watched>>>>,
}

/// What the view model needs from the run's copy of its play.
fn facts_of(dir: &Path) -> PlayFacts {
    let copy = dir.join("play.toml");
    std::fs::read_to_string(&copy)
        .ok()
        .and_then(|text| {
            crate::play::Play::from_str_in(&copy.display().to_string(), &text, dir).ok()
        })
        .map(|p| PlayFacts::of(&p))
        .unwrap_or_default()
}

impl Watches {
    /// The run `id` in `dir`, watched from now on (read to its end first).
    pub async fn get(&self, id: &str, dir: &Path) -> Arc<Watched> {
        if let Some(w) = self.runs.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            return w.clone();
        }
        let facts = {
            let dir = dir.to_path_buf();
            tokio::task::spawn_blocking(move || facts_of(&dir))
                .await
                .unwrap_or_default()
        };
        let w = Arc::new(Watched {
            id: id.to_string(),
            dir: dir.to_path_buf(),
            view: RwLock::new(ViewModel::new(&facts)),
            seq: watch::channel(0).0,
            recent: Mutex::default(),
            rendered: Mutex::default(),
        });
        // The first read can be a large log: off the async threads.
        let log = dir.join("events.jsonl");
        let tail = tokio::task::spawn_blocking({
            let (w, log) = (w.clone(), log.clone());
            move || {
                let mut t = LogTail::new(&log, 0, &[]);
                w.catch_up(&mut t);
                t
            }
        })
        .await
        .unwrap_or_else(|_| LogTail::new(&log, 0, &[]));
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(other) = runs.get(id) {
            return other.clone();
        }
        runs.insert(id.to_string(), w.clone());
        drop(runs);
        tokio::spawn(follow(self.clone(), w.clone(), tail));
        w
    }
}

/// Keeps `w` up with its log until nobody has held it for [`IDLE`] or
/// the run has finished and nobody holds it.
async fn follow(all: Watches, w: Arc<Watched>, mut tail: LogTail) {
    let mut idle = Duration::ZERO;
    loop {
        tokio::time::sleep(POLL).await;
        w.catch_up(&mut tail);
        // Held by the map and this task only: nobody looks.
        if Arc::strong_count(&w) <= 2 {
            idle += POLL;
            if idle >= IDLE {
                let mut runs = all.runs.lock().unwrap_or_else(|e| e.into_inner());
                if Arc::strong_count(&w) <= 2 {
                    runs.remove(&w.id);
                    return;
                }
            }
        } else {
            idle = Duration::ZERO;
        }
    }
}
