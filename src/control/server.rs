//! The control socket: every live run listens on a Unix socket in its run
//! directory, so scripts drive it (`playdeck ctl`, `playdeck capacity`).
//! One JSON request per connection, one JSON answer.
//!
//! The socket lives in `<run>/ctl/`, a directory only the owner may enter,
//! and is itself mode 0600. The server outlives its clients' mistakes: an
//! `accept` error (descriptors exhausted) is logged and retried after a
//! pause, connections are capped, a client that sends nothing or too much
//! is answered or dropped after a timeout, and bytes that are not a UTF-8
//! request line get an error answer. A request from one of the run's own
//! agent processes is refused (`peer_is_agent`, see [`super::peer`]).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use super::ErrorCode;
use super::client::encode;
use super::stream::{Consoles, MAX_WATCHERS, StreamCtx, Subscribe};
use super::{Failure, apply};
use crate::capacity::Reconciler;
use crate::kernel::{Request, RunHandle};

pub const SOCKET_DIR: &str = "ctl";
pub const SOCKET_NAME: &str = "control.sock";
/// Longest request line accepted.
pub const MAX_REQUEST: usize = 64 * 1024;
/// Connections served at once. When all are taken, the one that has waited
/// longest for its request line is dropped to make room: idle or
/// half-written clients cannot keep an operator's `ctl` waiting.
const MAX_CONNECTIONS: usize = 64;
/// A client has this long to send its request (`playdeck ctl` sends it at
/// once).
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// And this long to take the answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub fn socket_path(run_dir: &Path) -> PathBuf {
    run_dir.join(SOCKET_DIR).join(SOCKET_NAME)
}

/// Listens for control requests while the run lives; removes the socket
/// when dropped.
pub struct ControlServer {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
    /// Tells watchers the log has its last line.
    over: tokio::sync::watch::Sender<bool>,
    watchers: Arc<Semaphore>,
    consoles: Arc<Consoles>,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ControlServer {
    pub fn start(
        run_dir: &Path,
        handle: RunHandle,
        capacity: Option<Arc<Reconciler>>,
        welcome: Arc<super::stream::WelcomeParts>,
    ) -> std::io::Result<Self> {
        let dir = run_dir.join(SOCKET_DIR);
        let path = dir.join(SOCKET_NAME);
        let listener = bind(&dir, &path)?;
        // As agents get it in PLAYDECK_RUN_DIR.
        let tag: Arc<str> = Arc::from(
            std::fs::canonicalize(run_dir)
                .unwrap_or_else(|_| run_dir.to_path_buf())
                .display()
                .to_string(),
        );
        let (over, over_rx) = tokio::sync::watch::channel(false);
        let watchers = Arc::new(Semaphore::new(MAX_WATCHERS));
        let consoles = Arc::new(Consoles::default());
        let ctx = StreamCtx {
            events: run_dir.join("events.jsonl"),
            over: over_rx,
            handle: handle.clone(),
            capacity: capacity.clone(),
            consoles: consoles.clone(),
            welcome,
        };
        let task = tokio::spawn(serve(
            listener,
            path.clone(),
            handle,
            capacity,
            tag,
            ctx,
            watchers.clone(),
        ));
        Ok(ControlServer {
            path,
            task,
            over,
            watchers,
            consoles,
        })
    }

    /// The run has written its last line (and its result): watchers get
    /// the rest of the log and their streams end. A console still attached
    /// keeps the run's socket answering until it leaves, as a tmux server
    /// stays while a client is attached (at most [`LINGER`]); other
    /// watchers get a moment to take the last lines.
    pub async fn finish(&self, wait_for_consoles: bool) {
        let _ = self.over.send(true);
        let consoles = async {
            if !wait_for_consoles {
                return;
            }
            while self.consoles.count() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        if tokio::time::timeout(LINGER, consoles).await.is_err() {
            tracing::warn!("consoles still attached after {LINGER:?}: the run's host ends");
        }
        let drained = async {
            while self.watchers.available_permits() < MAX_WATCHERS {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), drained).await;
    }
}

/// Of the [`MAX_WATCHERS`] places, the most the run's own agents hold.
pub const MAX_AGENT_WATCHERS: usize = 8;

/// The places agents hold (one run per process: one control server).
static AGENT_WATCHERS: Semaphore = Semaphore::const_new(MAX_AGENT_WATCHERS);

/// How long a finished run's host waits for its consoles to leave.
pub const LINGER: Duration = Duration::from_secs(3600);

/// A watcher refused for want of a place: told why, within the write
/// timeout.
async fn too_many_watchers(write: &mut tokio::net::unix::OwnedWriteHalf, why: String) {
    let f = Failure::new(ErrorCode::TooManyWatchers, why);
    let _ = tokio::time::timeout(WRITE_TIMEOUT, write.write_all(encode(&Err(f)).as_bytes())).await;
}

/// The socket at `path` in its private directory `dir` (made 0700, the
/// socket 0600), replacing whatever was there.
fn bind(dir: &Path, path: &Path) -> std::io::Result<UnixListener> {
    // A link or a file put in the socket directory's place is the run's
    // own name taken: removed (never followed, never chmod-ed through),
    // and the directory made again.
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        tracing::warn!(
            "{} was a link or a file, not the run's socket directory: removed",
            dir.display()
        );
        std::fs::remove_file(dir)?;
    }
    crate::files::private_dir(dir)?;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// How often the server checks that its socket is still where clients
/// look for it.
const SOCKET_CHECK: Duration = Duration::from_secs(2);

async fn serve(
    mut listener: UnixListener,
    path: std::path::PathBuf,
    handle: RunHandle,
    capacity: Option<Arc<Reconciler>>,
    tag: Arc<str>,
    ctx: StreamCtx,
    watchers: Arc<Semaphore>,
) {
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let readers = Arc::new(Readers::default());
    let mut backoff = Duration::from_millis(10);
    let mut check = tokio::time::interval(SOCKET_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = check.tick() => {
                // `rm -rf <run>/ctl` left a live run unreachable (and
                // listed as crashed): its socket is made again.
                use std::os::unix::fs::FileTypeExt;
                // Its directory too: a link in its place could lead
                // clients to another process's socket.
                let there = std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| m.file_type().is_socket())
                    && path
                        .parent()
                        .and_then(|d| std::fs::symlink_metadata(d).ok())
                        .is_some_and(|m| m.is_dir());
                if !there {
                    match path.parent().map(|dir| bind(dir, &path)) {
                        Some(Ok(l)) => {
                            tracing::warn!("control socket {} was removed: made again", path.display());
                            listener = l;
                        }
                        Some(Err(e)) => tracing::warn!("control socket {}: cannot make it again: {e}", path.display()),
                        None => {}
                    }
                }
                continue;
            }
        };
        match accepted {
            Ok((stream, _)) => {
                backoff = Duration::from_millis(10);
                let place = match places.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => {
                        // Full: the client waiting longest for its own
                        // request line goes, and its place with it.
                        readers.evict_oldest();
                        let Ok(p) = places.clone().acquire_owned().await else {
                            return;
                        };
                        p
                    }
                };
                let (id, evicted) = readers.add();
                let (handle, capacity, tag, readers, ctx, watchers) = (
                    handle.clone(),
                    capacity.clone(),
                    tag.clone(),
                    readers.clone(),
                    ctx.clone(),
                    watchers.clone(),
                );
                tokio::spawn(async move {
                    let read = Reading {
                        id,
                        evicted,
                        readers: &readers,
                    };
                    let streams = Streams {
                        ctx,
                        watchers,
                        place,
                    };
                    connection(stream, &handle, capacity.as_deref(), &tag, read, streams).await;
                });
            }
            Err(e) => {
                // EMFILE and friends pass: wait, then accept again.
                tracing::warn!("control socket: accept failed ({e}); retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Connections still waiting for their request line, oldest first.
#[derive(Default)]
struct Readers {
    next: std::sync::atomic::AtomicU64,
    waiting: std::sync::Mutex<std::collections::VecDeque<(u64, tokio::sync::oneshot::Sender<()>)>>,
}

impl Readers {
    fn add(&self) -> (u64, tokio::sync::oneshot::Receiver<()>) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.lock().push_back((id, tx));
        (id, rx)
    }

    fn done(&self, id: u64) {
        self.lock().retain(|(i, _)| *i != id);
    }

    fn evict_oldest(&self) {
        if let Some((_, tx)) = self.lock().pop_front() {
            let _ = tx.send(());
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::VecDeque<(u64, tokio::sync::oneshot::Sender<()>)>,
    > {
        // A panic while holding it leaves a list that is still a list.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection's place among the readers.
struct Reading<'a> {
    id: u64,
    evicted: tokio::sync::oneshot::Receiver<()>,
    readers: &'a Readers,
}

/// What a connection that turns into a stream needs.
struct Streams {
    ctx: StreamCtx,
    watchers: Arc<Semaphore>,
    /// The connection's place among request connections, given back when
    /// it becomes a watcher.
    place: tokio::sync::OwnedSemaphorePermit,
}

async fn connection(
    stream: UnixStream,
    handle: &RunHandle,
    capacity: Option<&Reconciler>,
    tag: &str,
    read_slot: Reading<'_>,
    streams: Streams,
) {
    // Who asks, before what: the peer's pid is the kernel's word (it
    // cannot be forged by the client).
    let accepted = super::peer::uptime_now();
    let cred = stream.peer_cred().ok();
    let (agent, by) = match cred.as_ref().and_then(|c| c.pid()) {
        Some(pid) => {
            let uid = cred.as_ref().map_or(0, |c| c.uid());
            tokio::task::spawn_blocking({
                let tag = tag.to_string();
                move || {
                    let agent =
                        super::peer::agent_of_this_run(pid, &tag, accepted).map(|why| (pid, why));
                    (agent, super::peer::actor_of(pid, uid))
                }
            })
            .await
            .unwrap_or_else(|_| {
                (
                    Some((
                        pid,
                        "the peer could not be identified; refused as in doubt".into(),
                    )),
                    "the control socket".to_string(),
                )
            })
        }
        // No pid from the kernel: nobody to vouch for.
        None => (
            Some((0, "the kernel gave no peer pid; refused as in doubt".into())),
            "the control socket".to_string(),
        ),
    };
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = tokio::io::BufReader::new(read).take(MAX_REQUEST as u64 + 1);
    let Reading {
        id,
        evicted,
        readers,
    } = read_slot;
    let read = tokio::select! {
        r = tokio::time::timeout(READ_TIMEOUT, reader.read_until(b'\n', &mut line)) => r,
        // Dropped for a newer client while it still had not asked.
        _ = evicted => return,
    };
    readers.done(id);
    // A stream (`events`, `attach`) instead of one request.
    if let Ok(Ok(_)) = read
        && let Ok(sub) = serde_json::from_slice::<Subscribe>(&line)
    {
        let Streams {
            ctx,
            watchers,
            place,
        } = streams;
        drop(place);
        // The run's own agents may watch, but never take every place: the
        // operator can always attach.
        let agent_place = match &agent {
            Some(_) => match AGENT_WATCHERS.try_acquire() {
                Ok(p) => Some(p),
                Err(_) => {
                    let why = format!(
                        "this run's agents watch it {MAX_AGENT_WATCHERS} times at once already; the other places are kept for its operators"
                    );
                    return too_many_watchers(&mut write, why).await;
                }
            },
            None => None,
        };
        let Ok(_watching) = watchers.try_acquire_owned() else {
            let why = format!(
                "the run serves {MAX_WATCHERS} watchers at once, and has them; try again when one leaves"
            );
            return too_many_watchers(&mut write, why).await;
        };
        let by = match &agent {
            Some((pid, _)) => Arc::from(format!("agent (pid {pid})")),
            None => Arc::from(by),
        };
        super::stream::serve(sub, ctx, reader.into_inner(), write, by, agent).await;
        drop(agent_place);
        return;
    }
    drop(streams);
    let answer = match read {
        Err(_) => Err(Failure::new(
            ErrorCode::BadRequest,
            format!("no request line within {READ_TIMEOUT:?}"),
        )),
        Ok(Err(e)) => Err(Failure::new(ErrorCode::Io, e.to_string())),
        Ok(Ok(_)) if line.len() > MAX_REQUEST => Err(Failure::new(
            ErrorCode::BadRequest,
            format!("the request is longer than {MAX_REQUEST} bytes"),
        )),
        Ok(Ok(_)) => match std::str::from_utf8(&line) {
            Err(e) => Err(Failure::new(
                ErrorCode::BadRequest,
                format!("the request is not UTF-8 ({e})"),
            )),
            Ok(text) => match serde_json::from_str::<Request>(text.trim()) {
                Ok(req) => match super::via::on_behalf(text, &by, agent.is_some()) {
                    Err(f) => Err(f),
                    Ok(Some(person)) => apply(handle, capacity, req, Arc::from(person)).await,
                    Ok(None) => match &agent {
                        // Reading the run's state is anyone's (the operator's
                        // own `[notify]` command descends from playdeck too);
                        // acting on it is not.
                        Some(_) if super::stream::reads_only(&req) => {
                            apply(handle, capacity, req, Arc::from(by)).await
                        }
                        Some((pid, why)) => {
                            tracing::warn!(
                                pid,
                                "control socket: refused {} from an agent of this run: {why}",
                                req.name()
                            );
                            Err(Failure::new(
                                ErrorCode::PeerIsAgent,
                                format!(
                                    "refused: the request comes from pid {pid}, one of this run's agent processes ({why}); agents may not drive their own run — an operator's `playdeck ctl` or `playdeck capacity` can"
                                ),
                            ))
                        }
                        None => apply(handle, capacity, req, Arc::from(by)).await,
                    },
                },
                Err(e) => Err(Failure::new(
                    ErrorCode::BadRequest,
                    format!("not a control request: {e}"),
                )),
            },
        },
    };
    let body = encode(&answer);
    let _ = tokio::time::timeout(WRITE_TIMEOUT, write.write_all(body.as_bytes())).await;
}
