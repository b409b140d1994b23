//! Who serves the cluster, as a run sees it: the workers' heartbeats in
//! the `pd_workers` bucket, kept as rows and said to the run (a `workers`
//! signal) when something an operator would notice changes.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use tokio::time::Instant;

use super::wire::WorkerInfo;
use crate::kernel::{SignalKind, WorkerSeen};

/// A worker not heard from for this long is gone (the bucket forgets it
/// too).
const GONE: Duration = Duration::from_secs(60);

/// At most one `workers` signal in this long: busy counts move with every
/// job, and the log is not a metrics store.
const SAY_EVERY: Duration = Duration::from_secs(2);

/// How many workers and their load: `3 · busy 4/12`.
pub fn load_words(ws: &[WorkerSeen]) -> String {
    let busy: usize = ws.iter().map(|w| w.busy).sum();
    let slots: usize = ws.iter().map(|w| w.slots).sum();
    format!("{} · busy {busy}/{slots}", ws.len())
}

/// A worker's last heartbeat in words, `since` seconds after it was seen:
/// `beating` while beats come (a silent worker would have been said
/// again), else how long it has been silent.
pub fn beat_words(w: &WorkerSeen, since: f64) -> String {
    if w.silent() {
        format!("silent {:.0}s", w.beat_age + since.max(0.0))
    } else if w.draining {
        "draining".into()
    } else {
        "beating".into()
    }
}

/// The workers serving one play (a worker serving only others is no
/// capacity of this run's).
pub struct Roster {
    play: String,
    /// The hash of the run's text of the play.
    text: String,
    /// By worker id: what it last said and when that reached us.
    seen: std::sync::Mutex<BTreeMap<String, (WorkerInfo, Instant)>>,
    /// Workers serving another text of the play (they take none of this
    /// run's jobs), by id: when last heard.
    stale: std::sync::Mutex<BTreeMap<String, Instant>>,
}

impl Roster {
    pub fn new(play: &str, text: &str) -> Self {
        Roster {
            play: play.to_string(),
            text: text.to_string(),
            seen: Default::default(),
            stale: Default::default(),
        }
    }

    fn put(&self, id: &str, info: WorkerInfo, at: Instant) {
        let mut seen = self.seen.lock().unwrap();
        let mut stale = self.stale.lock().unwrap();
        // A worker of a build before texts were said serves by name.
        let other_text = info.texts.get(&self.play).is_some_and(|t| *t != self.text);
        if info.plays.contains(&self.play) && !other_text {
            seen.insert(id.to_string(), (info, at));
            stale.remove(id);
        } else {
            seen.remove(id);
            if info.plays.contains(&self.play) {
                stale.insert(id.to_string(), at);
            } else {
                stale.remove(id);
            }
        }
    }

    fn remove(&self, id: &str) {
        self.seen.lock().unwrap().remove(id);
        self.stale.lock().unwrap().remove(id);
    }

    /// The workers heard from in the last minute that serve another text
    /// of the play, as of `now`.
    pub fn stale(&self, now: Instant) -> Vec<String> {
        let mut stale = self.stale.lock().unwrap();
        stale.retain(|_, at| now.saturating_duration_since(*at) < GONE);
        stale.keys().cloned().collect()
    }

    /// The workers heard from in the last minute, by id, as of `now`.
    pub fn rows(&self, now: Instant) -> Vec<WorkerSeen> {
        let mut seen = self.seen.lock().unwrap();
        seen.retain(|_, (_, at)| now.saturating_duration_since(*at) < GONE);
        seen.iter()
            .map(|(id, (w, at))| WorkerSeen {
                id: Arc::from(id.as_str()),
                host: Arc::from(w.host.as_str()),
                slots: w.slots,
                busy: w.busy,
                tags: w.tags.iter().map(|t| Arc::from(t.as_str())).collect(),
                beat_age: now.saturating_duration_since(*at).as_secs_f64(),
                draining: w.draining,
            })
            .collect()
    }
}

/// What of the rows is worth saying again: everything but the age of a
/// worker that still beats.
/// Each worker's id, slots, busy, tags, whether it is silent and whether
/// it is draining.
type Shape = Vec<(Arc<str>, usize, usize, Vec<Arc<str>>, bool, bool)>;

fn shape(rows: &[WorkerSeen]) -> Shape {
    rows.iter()
        .map(|w| {
            let (id, tags) = (w.id.clone(), w.tags.clone());
            (id, w.slots, w.busy, tags, w.silent(), w.draining)
        })
        .collect()
}

/// When a heartbeat was made, as an instant here: the server stamps each
/// entry, so a beat read late (a dead worker's last row, read at start)
/// is not taken for a fresh one.
fn made_at(entry: &kv::Entry) -> Instant {
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let age_ns = (now_ns - entry.created.unix_timestamp_nanos()).clamp(0, GONE.as_nanos() as i128);
    Instant::now()
        .checked_sub(Duration::from_nanos(age_ns as u64))
        .unwrap_or_else(Instant::now)
}

/// Keeps `roster` from the bucket and says its changes through `say`, for
/// as long as `owner` lives; the watch is made again after a server
/// restart.
pub async fn keep<T: Send + Sync + 'static>(
    owner: Weak<T>,
    js: jetstream::Context,
    roster: Arc<Roster>,
    say: impl Fn(&T, SignalKind) -> bool + Send + 'static,
) {
    let mut said: Option<Vec<_>> = None;
    let mut last_said: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut watch = match super::workers_bucket(&js).await {
            Ok(kv) => kv.watch_with_history(">").await.ok(),
            Err(_) => None,
        };
        loop {
            tokio::select! {
                e = async { watch.as_mut()?.next().await }, if watch.is_some() => match e {
                    Some(Ok(e)) => match e.operation {
                        kv::Operation::Put => {
                            if let Ok(info) = serde_json::from_slice::<WorkerInfo>(&e.value) {
                                roster.put(&e.key, info, made_at(&e));
                            }
                        }
                        kv::Operation::Delete | kv::Operation::Purge => roster.remove(&e.key),
                    },
                    // The watch ended (the server went): make it again.
                    _ => break,
                },
                _ = tick.tick() => {
                    let Some(owner) = owner.upgrade() else { return };
                    let rows = roster.rows(Instant::now());
                    let now_shape = shape(&rows);
                    if said.as_ref() != Some(&now_shape)
                        && last_said.is_none_or(|t| t.elapsed() >= SAY_EVERY)
                        && say(&owner, SignalKind::Workers { workers: rows.into() })
                    {
                        said = Some(now_shape);
                        last_said = Some(Instant::now());
                    }
                    if watch.is_none() {
                        break;
                    }
                }
            }
        }
        if owner.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(busy: usize) -> WorkerInfo {
        WorkerInfo {
            host: "h".into(),
            slots: 4,
            busy,
            tags: vec!["gpu".into()],
            plays: vec!["p".into()],
            texts: [("p".to_string(), "t1".to_string())].into(),
            beat_ms: 0,
            draining: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_goes_silent_then_is_forgotten() {
        let r = Roster::new("p", "t1");
        r.put("w1", info(1), Instant::now());
        let first = r.rows(Instant::now());
        assert_eq!(first.len(), 1);
        assert!(!first[0].silent());
        tokio::time::advance(Duration::from_secs(7)).await;
        let later = r.rows(Instant::now());
        assert!(later[0].silent(), "{later:?}");
        assert_ne!(shape(&first), shape(&later), "going silent is news");
        assert_eq!(beat_words(&later[0], 3.0), "silent 10s");
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(r.rows(Instant::now()).is_empty());
    }

    #[test]
    fn a_worker_of_other_plays_is_not_listed() {
        let r = Roster::new("q", "t1");
        r.put("w1", info(0), Instant::now());
        assert!(r.rows(Instant::now()).is_empty());
        assert!(r.stale(Instant::now()).is_empty());
    }

    #[test]
    fn a_worker_of_another_text_is_no_capacity_and_is_named() {
        let r = Roster::new("p", "t2");
        r.put("w1", info(0), Instant::now());
        assert!(r.rows(Instant::now()).is_empty());
        assert_eq!(r.stale(Instant::now()), ["w1"]);
        // Updated: it serves this text now.
        let mut updated = info(0);
        updated.texts.insert("p".into(), "t2".into());
        r.put("w1", updated, Instant::now());
        assert_eq!(r.rows(Instant::now()).len(), 1);
        assert!(r.stale(Instant::now()).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn only_what_an_operator_notices_is_news() {
        let r = Roster::new("p", "t1");
        r.put("w1", info(1), Instant::now());
        let a = shape(&r.rows(Instant::now()));
        tokio::time::advance(Duration::from_secs(2)).await;
        r.put("w1", info(1), Instant::now());
        assert_eq!(
            a,
            shape(&r.rows(Instant::now())),
            "a beat alone is not news"
        );
        r.put("w1", info(2), Instant::now());
        assert_ne!(a, shape(&r.rows(Instant::now())), "its load moved");
        r.remove("w1");
        assert!(r.rows(Instant::now()).is_empty());
    }
}
