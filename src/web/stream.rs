//! Live updates as server-sent events. A run's stream sends each event of
//! its log as a `log` event whose `id:` is the event's seq, then the run's
//! view as it now is (`view`, replacing `#view`). A browser that loses the
//! connection reconnects with `Last-Event-ID` and gets the events after
//! that one: none missed, none twice. An operation's stream adds its
//! conversation (`turns`). A stream ends when its device is revoked.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::sync::mpsc;

use super::Web;
use super::devices::Device;
use super::pages;

/// Views are sent at most this often to one stream: changes between are
/// one view.
const VIEW_EVERY: Duration = Duration::from_millis(100);
/// How often an operation's stream looks at its conversation's log.
const TURNS_EVERY: Duration = Duration::from_millis(100);
/// How often a stream checks that its device is still paired.
const RECHECK: Duration = Duration::from_secs(1);
/// How often the runs list and needs page are read again.
const LIST_EVERY: Duration = Duration::from_secs(1);

#[derive(serde::Deserialize, Default)]
pub struct After {
    /// The seq the page was rendered at (its first connection; a
    /// reconnection says `Last-Event-ID`).
    #[serde(default)]
    after: Option<u64>,
    #[serde(default)]
    view: Option<String>,
}

fn last_event_id(h: &HeaderMap) -> Option<u64> {
    h.get("last-event-id")?.to_str().ok()?.trim().parse().ok()
}

type Tx = mpsc::Sender<Result<Event, Infallible>>;

fn sse(rx: mpsc::Receiver<Result<Event, Infallible>>) -> Response {
    let s: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|e| (e, rx))
        }));
    Sse::new(s)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Whether `device` is still paired.
async fn still_paired(web: &Web, device: &Device) -> bool {
    let store = web.store.clone();
    let id = device.id.clone();
    tokio::task::spawn_blocking(move || {
        store
            .devices()
            .is_ok_and(|ds| ds.iter().any(|d| d.id == id))
    })
    .await
    .unwrap_or(false)
}

/// The run `id` watched, and the seq its stream starts after (the
/// browser's `Last-Event-ID` on a reconnection, else the page's `after`).
async fn opened(
    web: &Web,
    id: &str,
    q: &After,
    headers: &HeaderMap,
) -> Option<(Arc<super::watch::Watched>, u64)> {
    let dir = web.run_dir(id)?;
    let w = web.watches.get(id, &dir).await;
    Some((w, last_event_id(headers).or(q.after).unwrap_or(0)))
}

/// `GET /runs/{id}/events`.
pub async fn run_events(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
    Path(id): Path<String>,
    Query(q): Query<After>,
    headers: HeaderMap,
) -> Response {
    let Some((w, after)) = opened(&web, &id, &q, &headers).await else {
        return pages::not_found(Some(Extension(device))).await;
    };
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let render = |w: &super::watch::Watched| render_run(w, &device);
        follow_run(&web, &w, &device, after, &tx, render, None).await;
    });
    sse(rx)
}

/// The run's view for a device's scope, rendered once a change for all
/// the streams of that scope.
fn render_run(w: &super::watch::Watched, device: &Device) -> Arc<str> {
    let seq = *w.seq().borrow();
    {
        let cache = w.rendered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, html)) = cache
            .iter()
            .find(|(s, sc, _)| *s == seq && *sc == device.scope)
        {
            return html.clone();
        }
    }
    let html: Arc<str> = Arc::from(
        w.view(|v| pages::run_view(&w.id, &w.dir, v, device))
            .into_string(),
    );
    let mut cache = w.rendered.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|(s, sc, _)| *s == seq && *sc != device.scope);
    cache.push((seq, device.scope, html.clone()));
    html
}

/// Sends the run's events after `after` and its view at each change,
/// until the device is revoked or the page goes; `turns`, when given, is
/// called at each tick to send an operation's new turns.
async fn follow_run<F>(
    web: &Web,
    w: &super::watch::Watched,
    device: &Device,
    mut after: u64,
    tx: &Tx,
    render: F,
    mut turns: Option<&mut (dyn FnMut() -> Option<Event> + Send)>,
) where
    F: Fn(&super::watch::Watched) -> Arc<str>,
{
    let mut seq = w.seq();
    let mut check = tokio::time::interval(RECHECK);
    check.tick().await;
    // Events go out as they come; the view, which costs a render, at most
    // every VIEW_EVERY (the changes between are one view).
    let mut last_view: Option<tokio::time::Instant> = None;
    let mut view_due = true;
    loop {
        let now = *seq.borrow_and_update();
        if now > after {
            for (s, line) in w.events_after(after) {
                if s > now {
                    break;
                }
                let e = Event::default().event("log").id(s.to_string()).data(&*line);
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
            // A seq that is there but said nothing (the log was read past
            // it) still moves the stream on.
            after = now;
            view_due = true;
        }
        let wait = last_view.map_or(Duration::ZERO, |t| VIEW_EVERY.saturating_sub(t.elapsed()));
        if view_due && wait.is_zero() {
            let html = render(w);
            if tx
                .send(Ok(Event::default().event("view").data(&*html)))
                .await
                .is_err()
            {
                return;
            }
            last_view = Some(tokio::time::Instant::now());
            view_due = false;
        }
        if let Some(t) = turns.as_deref_mut()
            && let Some(e) = t()
            && tx.send(Ok(e)).await.is_err()
        {
            return;
        }
        tokio::select! {
            r = seq.changed() => if r.is_err() { return },
            () = tokio::time::sleep(wait), if view_due => {}
            () = tokio::time::sleep(TURNS_EVERY), if turns.is_some() => {}
            _ = check.tick() => {
                if !still_paired(web, device).await {
                    let e = Event::default().event("revoked").data("this device was unpaired");
                    let _ = tx.send(Ok(e)).await;
                    return;
                }
            }
            () = tx.closed() => return,
        }
    }
}

/// `GET /runs/{id}/ops/{op}/events`: the run's events, the operation's
/// part of the view, and its conversation's turns as they come.
pub async fn op_events(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
    Path((id, op)): Path<(String, String)>,
    Query(q): Query<After>,
    headers: HeaderMap,
) -> Response {
    let Some((w, after)) = opened(&web, &id, &q, &headers).await else {
        return pages::not_found(Some(Extension(device))).await;
    };
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let logs = w.dir.join("logs");
        let mut conv = Conversation::new(logs, op.clone());
        let render = |w: &super::watch::Watched| -> Arc<str> {
            Arc::from(
                w.view(|v| {
                    let ix = v.by_name(&op).and_then(|n| v.ix(&n.op.op_id));
                    ix.map(|ix| pages::op_view(&w.id, &w.dir, v, ix, &device).into_string())
                })
                .unwrap_or_default(),
            )
        };
        let attempt = {
            let w = w.clone();
            let op = conv.op.clone();
            move || w.view(|v| v.by_name(&op).map_or(0, |n| n.attempt))
        };
        let mut next = move || conv.next(attempt());
        follow_run(&web, &w, &device, after, &tx, render, Some(&mut next)).await;
    });
    sse(rx)
}

/// An operation's conversation, read as its log grows.
struct Conversation {
    logs: std::path::PathBuf,
    op: String,
    attempt: u32,
    len: u64,
    sent: usize,
}

impl Conversation {
    fn new(logs: std::path::PathBuf, op: String) -> Conversation {
        Conversation {
            logs,
            op,
            attempt: 0,
            len: 0,
            sent: 0,
        }
    }

    /// The turns changed since the last call, as a `turns` event: its first
    /// line the index they start at, then their markup.
    fn next(&mut self, attempt: u32) -> Option<Event> {
        if attempt == 0 {
            return None;
        }
        let len = std::fs::metadata(self.logs.join(format!("{}.{attempt}.stdout.log", self.op)))
            .map_or(0, |m| m.len());
        if attempt == self.attempt && len == self.len {
            return None;
        }
        let fresh = attempt != self.attempt;
        self.attempt = attempt;
        self.len = len;
        let entries = pages::conversation(&self.logs, &self.op, attempt);
        // The last turn sent may have changed since (a call's result).
        let from = if fresh {
            0
        } else {
            self.sent.saturating_sub(1)
        };
        self.sent = entries.len();
        let html: String = entries
            .iter()
            .skip(from)
            .map(|e| pages::turn(e).into_string())
            .collect();
        Some(
            Event::default()
                .event("turns")
                .data(format!("{from}\n{html}")),
        )
    }
}

/// `GET /events?view=runs|needs`: the runs list or what needs you, sent
/// again when it changes.
pub async fn all_events(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
    Query(q): Query<After>,
) -> Response {
    let needs = q.view.as_deref() == Some("needs");
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        let mut last = String::new();
        let mut tick = tokio::time::interval(LIST_EVERY);
        let mut check = tokio::time::interval(RECHECK);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let html = if needs {
                        pages::needs_view(&web, &device).await
                    } else {
                        pages::runs_view(&web).await
                    }
                    .into_string();
                    if html != last {
                        if tx.send(Ok(Event::default().event("view").data(&html))).await.is_err() {
                            return;
                        }
                        last = html;
                    }
                }
                _ = check.tick() => {
                    if !still_paired(&web, &device).await {
                        let _ = tx.send(Ok(Event::default().event("revoked").data("this device was unpaired"))).await;
                        return;
                    }
                }
                _ = tx.closed() => return,
            }
        }
    });
    sse(rx)
}
