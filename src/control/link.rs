//! The client side of a stream (see [`super::stream`]): an attached
//! console's one connection, to the local socket or through an ssh
//! bridge. Event lines become [`Signal`]s on a bounded channel; requests
//! go out on the same connection and their answers, which the run writes
//! in order, are matched to them in order.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::sync::{mpsc, oneshot};

use super::ErrorCode;
use super::client::{connect_failure, decode};
use super::{Failure, Reply, socket_path};
use crate::kernel::{Request, Signal};

/// Signals queued for a console that is busy drawing: when full, the
/// connection stops being read and the run's side waits in its file, not
/// in memory.
const QUEUE: usize = 4096;
/// Longest line taken from a stream (larger results are stored apart).
const MAX_LINE: usize = 128 << 20;

/// How long a run's host has to welcome a console. A host that does not
/// (stopped with SIGSTOP, wedged) still accepts the connection — the kernel
/// does that — so without a bound the console waits on a blank screen.
pub const WELCOME_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// What arrives on a stream.
#[derive(Debug)]
pub enum Arrived {
    Signal(Box<Signal>),
    /// The stream ended: the run is over, or the connection was lost
    /// (with why).
    Closed(Option<String>),
}

type Pending = Arc<Mutex<VecDeque<oneshot::Sender<Result<Reply, Failure>>>>>;

/// Sends requests on a stream's connection; cheap to clone.
#[derive(Clone)]
pub struct Requester {
    tx: mpsc::Sender<(Request, oneshot::Sender<Result<Reply, Failure>>)>,
}

impl Requester {
    pub async fn send(&self, req: Request) -> Result<Reply, Failure> {
        let lost = || Failure::new(ErrorCode::NotLive, "the connection to the run is closed");
        let (tx, rx) = oneshot::channel();
        self.tx.send((req, tx)).await.map_err(|_| lost())?;
        rx.await.map_err(|_| lost())?
    }
}

/// What the run says first to a console that attaches.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Welcome {
    /// The run's copy of its play (`play.toml`).
    pub play: String,
    /// The run directory, on the run's machine.
    pub run_dir: String,
    /// Who the run records this console as.
    pub by: String,
    pub read_only: bool,
    /// How the authored operations without `depends_on` were placed (the
    /// console reads the play's other sections, not its operations).
    #[serde(default)]
    pub placed: std::collections::HashMap<String, crate::play::Placed>,
    /// The run's time when it welcomed the console (none: a run that had
    /// not begun, or an older playdeck).
    #[serde(default)]
    pub elapsed: Option<f64>,
    /// The log's last sequence number when it welcomed the console (none:
    /// an older playdeck, or a log not read).
    #[serde(default)]
    pub seq: Option<u64>,
    /// When the welcome arrived: with `elapsed`, the run's clock here.
    #[serde(skip, default = "tokio::time::Instant::now")]
    pub at: tokio::time::Instant,
}

impl Welcome {
    /// The run's time now, by its own clock as the welcome gave it.
    pub fn run_clock(&self) -> Option<f64> {
        self.elapsed.map(|e| e + self.at.elapsed().as_secs_f64())
    }
}

/// An open stream: its signals, its requester, and what keeps it alive.
pub struct Link {
    pub welcome: Welcome,
    pub events: mpsc::Receiver<Arrived>,
    pub requester: Requester,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The ssh process of a remote link, ended with it.
    _child: Option<tokio::process::Child>,
}

impl Drop for Link {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// How a welcome that did not come begins.
const NO_WELCOME: &str = "the run's host did not answer";

/// The hello line of an attached console.
fn attach_line(from: u64, read_only: bool) -> String {
    format!(
        "{}\n",
        serde_json::json!({"cmd": "attach", "from": from, "read_only": read_only})
    )
}

impl Link {
    /// Attaches to the live run in `run_dir`.
    pub async fn local(run_dir: &Path, from: u64, read_only: bool) -> Result<Link, Failure> {
        let s = tokio::net::UnixStream::connect(socket_path(run_dir))
            .await
            .map_err(|e| connect_failure(run_dir, &e))?;
        let (r, w) = s.into_split();
        Link::over(r, w, from, read_only, None)
            .await
            .map_err(|mut f| {
                // Silent: what the host is doing, when this machine can say.
                if f.message.starts_with(NO_WELCOME)
                    && let Some((pid, cmd)) = crate::store::lock::owner_of(run_dir)
                {
                    let state = crate::store::lock::state_of(pid);
                    f.message = match state {
                        Some('T') => format!(
                            "{f}: its host (pid {pid}, {cmd}) is stopped (SIGSTOP or ctrl-z); `kill -CONT {pid}` lets it go on",
                            f = f.message
                        ),
                        _ => format!("{}: its host is pid {pid}, {cmd}", f.message),
                    };
                }
                f
            })
    }

    /// Attaches over any byte pipe (an ssh session's stdio).
    pub async fn over<R, W>(
        r: R,
        mut w: W,
        from: u64,
        read_only: bool,
        child: Option<tokio::process::Child>,
    ) -> Result<Link, Failure>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let lost = |why: String| Failure::new(ErrorCode::NotLive, why);
        w.write_all(attach_line(from, read_only).as_bytes())
            .await
            .map_err(|e| lost(format!("cannot reach the run: {e}")))?;
        let mut r = BufReader::with_capacity(64 * 1024, r);
        let mut first = Vec::new();
        // Bounded on a local socket only: through ssh the wait holds the
        // operator's own password or host-key prompt (the bridge at the
        // other end reads a local socket of its own).
        let within = if child.is_none() {
            WELCOME_WITHIN
        } else {
            std::time::Duration::MAX
        };
        tokio::time::timeout(
            within,
            (&mut r).take(MAX_LINE as u64).read_until(b'\n', &mut first),
        )
        .await
        .map_err(|_| lost(format!("{NO_WELCOME} in {} s", WELCOME_WITHIN.as_secs())))?
        .map_err(|e| lost(format!("no answer from the run: {e}")))?;
        if first.is_empty() {
            return Err(lost("the run closed the connection without a word".into()));
        }
        #[derive(serde::Deserialize)]
        struct Hello {
            attached: Welcome,
            #[serde(default)]
            placed: std::collections::HashMap<String, crate::play::Placed>,
        }
        let welcome = match serde_json::from_slice::<Hello>(&first) {
            Ok(h) => Welcome {
                placed: h.placed,
                ..h.attached
            },
            // Refused: the answer says why (too many watchers).
            Err(_) => {
                return Err(decode(&String::from_utf8_lossy(&first))
                    .err()
                    .unwrap_or_else(|| {
                        lost("the run answered something else than a welcome".into())
                    }));
            }
        };
        let pending: Pending = Arc::default();
        let (req_tx, mut req_rx) =
            mpsc::channel::<(Request, oneshot::Sender<Result<Reply, Failure>>)>(64);
        let (ev_tx, ev_rx) = mpsc::channel(QUEUE);
        let writer = {
            let pending = pending.clone();
            tokio::spawn(async move {
                // A blank line now and then says this console is alive: a
                // finished run's host waits only for consoles that do.
                let mut beat = tokio::time::interval(super::stream::KEEPALIVE);
                beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        next = req_rx.recv() => {
                            let Some((req, answer)) = next else { return };
                            let line = format!(
                                "{}\n",
                                serde_json::to_string(&req).expect("a request serialises")
                            );
                            // Queued before it is written: its answer cannot
                            // come first.
                            lock(&pending).push_back(answer);
                            if w.write_all(line.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        _ = beat.tick() => {
                            if w.write_all(b"\n").await.is_err() {
                                return;
                            }
                        }
                    }
                }
            })
        };
        let reader = tokio::spawn(async move {
            let mut line = Vec::new();
            // The stream is the log's lines from its first: compact ones
            // are read with those before them.
            let mut lines = crate::kernel::log_line::LineDecoder::new();
            let why = loop {
                line.clear();
                match (&mut r)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) => break None,
                    Ok(_) if !line.ends_with(b"\n") => {
                        break Some("the run's stream ended inside a line".to_string());
                    }
                    Ok(_) => {}
                    Err(e) => break Some(e.to_string()),
                }
                if line.starts_with(b"{\"ok\"") {
                    let answer = decode(&String::from_utf8_lossy(&line));
                    match lock(&pending).pop_front() {
                        Some(tx) => {
                            let _ = tx.send(answer);
                        }
                        // Refused before any request (too many watchers).
                        None => {
                            break Some(answer.err().map_or_else(
                                || "an answer nobody asked for".to_string(),
                                |f| f.message,
                            ));
                        }
                    }
                    continue;
                }
                match lines.decode(&line) {
                    Ok(s) => {
                        if ev_tx.send(Arrived::Signal(Box::new(s))).await.is_err() {
                            return;
                        }
                    }
                    // A line from a newer playdeck: left out, as replay does.
                    Err(e) => tracing::debug!("stream: a line that is not a signal: {e}"),
                }
            };
            let _ = ev_tx.send(Arrived::Closed(why)).await;
        });
        Ok(Link {
            welcome,
            events: ev_rx,
            requester: Requester { tx: req_tx },
            tasks: vec![writer, reader],
            _child: child,
        })
    }
}

fn lock(
    p: &Pending,
) -> std::sync::MutexGuard<'_, VecDeque<oneshot::Sender<Result<Reply, Failure>>>> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::Welcome;

    /// Attached 36 s into the run, 36 s later the console says 72 s (it
    /// said 36 s, counting from its own start).
    #[tokio::test(start_paused = true)]
    async fn an_attached_consoles_clock_is_the_runs() {
        let w: Welcome = serde_json::from_str(
            r#"{"play":"","run_dir":"/r","by":"console","read_only":false,"elapsed":36.0}"#,
        )
        .unwrap();
        tokio::time::advance(std::time::Duration::from_secs(36)).await;
        assert_eq!(w.run_clock(), Some(72.0));
        let old: Welcome =
            serde_json::from_str(r#"{"play":"","run_dir":"/r","by":"c","read_only":false}"#)
                .unwrap();
        assert_eq!(old.run_clock(), None, "an older run's welcome has no clock");
    }
}
