//! Streams on the control socket. `{"cmd":"events","from":N,"follow":true}`
//! answers with the event log's own lines from sequence N, then each new
//! one as it is written; `{"cmd":"attach",…}` does the same and also takes
//! request lines on the same connection, answering each in order with a
//! line of its own (`{"ok":…}`), so a console needs one connection — the
//! one an ssh bridge carries.
//!
//! Watchers read the log file, never the kernel: a slow or stopped watcher
//! only stops reading (its socket fills, its task waits), and the run never
//! waits for it. A watcher that falls behind is simply further back in the
//! file; what it holds in memory is bounded by [`CHUNK`] × [`QUEUE`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::client::encode;
use super::{Failure, apply};
use crate::capacity::Reconciler;
use crate::kernel::{ErrorCode, Request, RunHandle};

/// How often a follower looks for new lines at the end of the log.
const POLL: Duration = Duration::from_millis(25);
/// Lines are sent in chunks of about this size.
const CHUNK: usize = 64 * 1024;
/// Chunks queued for one watcher's socket.
const QUEUE: usize = 16;
/// Watchers served at once; each holds a connection for as long as it
/// watches, apart from the request connections.
pub const MAX_WATCHERS: usize = 32;

/// The first line of a stream.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Subscribe {
    /// The log's lines from `from` (default: all), and with `follow` the
    /// new ones until the run ends.
    Events {
        #[serde(default)]
        from: u64,
        #[serde(default)]
        follow: bool,
    },
    /// A console: the events, followed, and requests on the same line.
    Attach {
        #[serde(default)]
        from: u64,
        #[serde(default)]
        read_only: bool,
    },
}

/// What a stream needs from the run.
#[derive(Clone)]
pub struct StreamCtx {
    pub events: PathBuf,
    /// True once the run has written its last line.
    pub over: watch::Receiver<bool>,
    pub handle: RunHandle,
    pub capacity: Option<Arc<Reconciler>>,
    /// Attached consoles, counted.
    pub consoles: Arc<Consoles>,
}

/// How many consoles are attached.
#[derive(Default)]
pub struct Consoles(std::sync::atomic::AtomicUsize);

impl Consoles {
    fn enter(self: &Arc<Self>) -> ConsoleGuard {
        self.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        ConsoleGuard(self.clone())
    }

    pub fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }
}

pub struct ConsoleGuard(Arc<Consoles>);

impl Drop for ConsoleGuard {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// An answer to an attached console's request, and how long the log was
/// when it was given: it goes out after the lines the command caused, as
/// an embedded console sees them.
pub struct Answer {
    pub line: Vec<u8>,
    pub after: u64,
}

/// Reads the log from sequence `from` and sends its whole lines in chunks;
/// with `follow`, waits at its end for more until the run is over. Answers
/// (of an attached console) are sent once the log has been read past them.
pub async fn pump(
    ctx: &StreamCtx,
    from: u64,
    follow: bool,
    tx: &mpsc::Sender<Vec<u8>>,
    mut answers: Option<&mut mpsc::Receiver<Answer>>,
) -> std::io::Result<()> {
    let file = tokio::fs::File::open(&ctx.events).await?;
    let mut r = BufReader::with_capacity(CHUNK, file);
    let mut over = ctx.over.clone();
    let mut line = Vec::new();
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut last_pass = false;
    // Bytes of the log read as whole lines.
    let mut offset = 0u64;
    let mut owed: std::collections::VecDeque<Answer> = Default::default();
    loop {
        let n = r.read_until(b'\n', &mut line).await?;
        if n > 0 && line.ends_with(b"\n") {
            offset += line.len() as u64;
            if seq_of(&line).is_none_or(|s| s >= from) {
                chunk.extend_from_slice(&line);
            }
            line.clear();
            if chunk.len() >= CHUNK && tx.send(std::mem::take(&mut chunk)).await.is_err() {
                return Ok(());
            }
            continue;
        }
        // At the end of what is written (a cut line waits for its rest).
        if !chunk.is_empty() && tx.send(std::mem::take(&mut chunk)).await.is_err() {
            return Ok(());
        }
        while owed.front().is_some_and(|a| a.after <= offset) {
            let a = owed.pop_front().expect("a front");
            if tx.send(a.line).await.is_err() {
                return Ok(());
            }
        }
        if !follow || last_pass {
            return Ok(());
        }
        // Once the run is over, one more read takes what it wrote last.
        if *over.borrow() {
            last_pass = true;
            continue;
        }
        let wait = !owed.is_empty();
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = over.changed() => {}
            Some(a) = async {
                match answers.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            }, if !wait => owed.push_back(a),
        }
    }
}

/// The sequence number of a log line (`{"v":1,"seq":N,…`), read without
/// decoding the line.
pub fn seq_of(line: &[u8]) -> Option<u64> {
    let at = line.windows(6).take(64).position(|w| w == b"\"seq\":")? + 6;
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// Serves a stream after its first line: writes the log's lines, and for
/// an attached console answers its requests between them.
#[allow(clippy::too_many_arguments)]
pub async fn serve<R, W>(
    sub: Subscribe,
    ctx: StreamCtx,
    mut requests: R,
    mut write: W,
    by: Arc<str>,
    agent: Option<(i32, String)>,
) where
    R: AsyncBufReadExt + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(QUEUE);
    let writer = tokio::spawn(async move {
        while let Some(chunk) = rx.recv().await {
            if write.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = write.shutdown().await;
    });
    match sub {
        Subscribe::Events { from, follow } => {
            let _ = pump(&ctx, from, follow, &tx, None).await;
        }
        Subscribe::Attach { from, read_only } => {
            // First the welcome: what a console needs besides the signals.
            let dir = ctx
                .events
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default();
            let play = tokio::fs::read_to_string(dir.join("play.toml"))
                .await
                .unwrap_or_default();
            let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
            let welcome = serde_json::json!({"attached": {
                "play": play,
                "run_dir": dir.display().to_string(),
                "by": &*by,
                "read_only": read_only || agent.is_some(),
            }});
            if tx.send(format!("{welcome}\n").into_bytes()).await.is_err() {
                return;
            }
            let (answers, answered) = mpsc::channel::<Answer>(QUEUE);
            let read_only = read_only || agent.is_some();
            let asked = {
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let mut line = Vec::new();
                    loop {
                        line.clear();
                        match read_line(&mut requests, &mut line).await {
                            Ok(true) => {}
                            _ => return,
                        }
                        let answer = answer(&ctx, &line, read_only, &agent, &by).await;
                        let after = tokio::fs::metadata(&ctx.events)
                            .await
                            .map_or(0, |m| m.len());
                        let a = Answer {
                            line: encode(&answer).into_bytes(),
                            after,
                        };
                        if answers.send(a).await.is_err() {
                            return;
                        }
                    }
                })
            };
            let _console = ctx.consoles.enter();
            let mut answered = answered;
            let _ = pump(&ctx, from, true, &tx, Some(&mut answered)).await;
            // The run is over and its last line sent; the console still
            // asks (status, the report) until it leaves, and the run's
            // host waits for it (see `ControlServer::finish`).
            while let Some(a) = answered.recv().await {
                if tx.send(a.line).await.is_err() {
                    break;
                }
            }
            asked.abort();
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// One request line, at most [`super::MAX_REQUEST`] bytes; false at the end.
async fn read_line<R: AsyncBufReadExt + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(false);
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > super::MAX_REQUEST {
            return Err(std::io::Error::other("request too long"));
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            return Ok(true);
        }
    }
}

/// Whether a request only reads (a read-only console may send it).
fn reads_only(req: &Request) -> bool {
    match req {
        Request::Status | Request::Capacity => true,
        Request::Release(sel) => sel.dry_run,
        _ => false,
    }
}

async fn answer(
    ctx: &StreamCtx,
    line: &[u8],
    read_only: bool,
    agent: &Option<(i32, String)>,
    by: &Arc<str>,
) -> Result<super::Reply, Failure> {
    let text = std::str::from_utf8(line).map_err(|e| {
        Failure::new(
            ErrorCode::BadRequest,
            format!("the request is not UTF-8 ({e})"),
        )
    })?;
    let req: Request = serde_json::from_str(text.trim())
        .map_err(|e| Failure::new(ErrorCode::BadRequest, format!("not a control request: {e}")))?;
    if read_only && !reads_only(&req) {
        let why = match agent {
            Some((pid, why)) => format!(
                "the connection comes from pid {pid}, one of this run's agent processes ({why}); it may watch, not act"
            ),
            None => "this console is attached read-only (`playdeck attach --read-only`); attach without it to act".into(),
        };
        let code = if agent.is_some() {
            ErrorCode::PeerIsAgent
        } else {
            ErrorCode::ReadOnly
        };
        return Err(Failure::new(code, format!("refused {}: {why}", req.name())));
    }
    apply(&ctx.handle, ctx.capacity.as_deref(), req, by.clone()).await
}

/// Copies a stream's bytes both ways between the local socket and another
/// pair (an ssh session's stdio), until either side ends.
pub async fn bridge<R, W>(
    socket: &std::path::Path,
    mut input: R,
    mut output: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let stream = tokio::net::UnixStream::connect(socket).await?;
    let (mut sr, mut sw) = stream.into_split();
    let up = async {
        let r = tokio::io::copy(&mut input, &mut sw).await;
        let _ = sw.shutdown().await;
        r
    };
    let down = async {
        let r = tokio::io::copy(&mut sr, &mut output).await;
        let _ = output.flush().await;
        r
    };
    // The run's side ending ends the bridge; the client's side ending
    // only closes the way up (its answers still come down).
    tokio::select! {
        r = down => r.map(|_| ()),
        _ = async { let _ = up.await; std::future::pending::<()>().await } => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_number_is_read_from_the_line_head() {
        assert_eq!(seq_of(br#"{"v":1,"seq":42,"elapsed":0.0}"#), Some(42));
        assert_eq!(seq_of(b"garbage"), None);
    }
}
