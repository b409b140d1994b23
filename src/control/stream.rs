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
//! file; the log goes from the file to its socket by `sendfile`, so what
//! a watcher costs the run's process is a few system calls, not a copy.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use super::ErrorCode;
use super::client::encode;
use super::{Failure, apply};
use crate::capacity::Reconciler;
use crate::kernel::{Request, RunHandle};

/// How often a follower looks for new lines at the end of the log.
const POLL: Duration = Duration::from_millis(25);
/// Lines are sent in chunks of about this size.
const CHUNK: usize = 256 * 1024;
/// Answers queued for one console.
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
    /// What each console is welcomed with besides who it is.
    pub welcome: Arc<WelcomeParts>,
}

/// The run's part of a console's welcome, made once when the run starts
/// (as JSON text, so each console costs the run a write, not a copy of
/// the play encoded again): the play's sections without its operations
/// ([`crate::play::Play::sections_of`]) and how the operations without
/// `depends_on` were placed ([`crate::play::Play::placed_json`]).
#[derive(Debug, Clone, Default)]
pub struct WelcomeParts {
    pub play: String,
    pub placed: String,
}

impl WelcomeParts {
    pub fn of(play: &crate::play::Play) -> WelcomeParts {
        WelcomeParts {
            play: serde_json::to_string(&crate::play::Play::sections_of(&play.source))
                .unwrap_or_else(|_| "\"\"".into()),
            placed: play.placed_json(),
        }
    }
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

/// Where a stream's bytes go: the connection's write half. Log lines go
/// from the file to the socket by `sendfile` (no copy through this
/// process); answers and the welcome are written as they are.
pub struct Out {
    pub half: tokio::net::unix::OwnedWriteHalf,
}

impl Out {
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.half.write_all(bytes).await
    }

    /// `[*offset, end)` of `file`, as the socket takes it.
    async fn send_file(
        &mut self,
        file: &std::fs::File,
        offset: &mut u64,
        end: u64,
    ) -> std::io::Result<()> {
        let sock: &tokio::net::UnixStream = self.half.as_ref();
        while *offset < end {
            sock.writable().await?;
            let want = usize::try_from(end - *offset)
                .unwrap_or(usize::MAX)
                .min(CHUNK);
            match sock.try_io(tokio::io::Interest::WRITABLE, || {
                rustix::fs::sendfile(sock, file, Some(&mut *offset), want).map_err(Into::into)
            }) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The end of the last whole line of `file` before `len`, at or after
/// `from` (the log is written in whole lines; a line being written is
/// left for the next look).
fn whole_lines_end(file: &std::fs::File, from: u64, len: u64) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut back = 4096u64;
    loop {
        let start = len.saturating_sub(back).max(from);
        let mut buf = vec![0u8; (len - start) as usize];
        file.read_exact_at(&mut buf, start)?;
        if let Some(i) = buf.iter().rposition(|b| *b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        if start == from {
            return Ok(from);
        }
        back *= 4;
    }
}

/// Where the first line numbered `from` or later starts (whole lines only;
/// `None` when none is written yet), looking from `offset`.
fn first_at_or_after(
    file: &std::fs::File,
    mut offset: u64,
    end: u64,
    from: u64,
) -> std::io::Result<Option<u64>> {
    use std::os::unix::fs::FileExt;
    let mut carry = Vec::new();
    while offset < end {
        let n = ((end - offset) as usize).min(CHUNK);
        let mut buf = std::mem::take(&mut carry);
        let had = buf.len();
        buf.resize(had + n, 0);
        file.read_exact_at(&mut buf[had..], offset)?;
        let line_start = offset - had as u64;
        let mut at = 0usize;
        for line in buf.split_inclusive(|b| *b == b'\n') {
            if !line.ends_with(b"\n") {
                carry = line.to_vec();
                break;
            }
            if seq_of(line).is_none_or(|s| s >= from) {
                return Ok(Some(line_start + at as u64));
            }
            at += line.len();
        }
        offset += n as u64;
    }
    Ok(None)
}

/// Sends the log's lines from sequence `from`; with `follow`, waits at its
/// end for more until the run is over. Answers (of an attached console)
/// go out once the log has been sent past them.
pub async fn pump(
    ctx: &StreamCtx,
    from: u64,
    follow: bool,
    out: &mut Out,
    mut answers: Option<&mut mpsc::Receiver<Answer>>,
) -> std::io::Result<()> {
    let file = std::fs::File::open(&ctx.events)?;
    let mut over = ctx.over.clone();
    let mut last_pass = false;
    // Bytes of the log sent on (or skipped as before `from`).
    let mut offset = 0u64;
    let mut skipping = from > 1;
    let mut owed: std::collections::VecDeque<Answer> = Default::default();
    loop {
        let len = file.metadata()?.len();
        let end = whole_lines_end(&file, offset, len)?;
        if skipping && end > offset {
            match first_at_or_after(&file, offset, end, from)? {
                Some(at) => {
                    offset = at;
                    skipping = false;
                }
                None => offset = end,
            }
        }
        if !skipping && end > offset {
            let before = offset;
            out.send_file(&file, &mut offset, end).await?;
            // A backlog goes on at once. A log that is only growing is
            // looked at again after POLL: sending each few lines as they
            // come would keep the run's own threads busy for every
            // watcher (a noop run on two cores went 1.45× slower with
            // four followers).
            if end - before >= CHUNK as u64 {
                continue;
            }
        }
        // At the end of what is written (a cut line waits for its rest).
        while owed.front().is_some_and(|a| a.after <= offset) {
            let a = owed.pop_front().expect("a front");
            out.write(&a.line).await?;
        }
        if !follow || last_pass {
            return Ok(());
        }
        // Once the run is over, one more look takes what it wrote last.
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

/// The sequence number of the log's last whole line, from its last 64 KiB
/// (a longer line, a result stored apart, gives none).
pub fn last_seq(path: &std::path::Path) -> Option<u64> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(64 * 1024);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    // Only whole lines: the last may be half written.
    let end = tail.iter().rposition(|b| *b == b'\n')?;
    tail[..end].split(|b| *b == b'\n').rev().find_map(seq_of)
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
pub async fn serve<R>(
    sub: Subscribe,
    ctx: StreamCtx,
    mut requests: R,
    write: tokio::net::unix::OwnedWriteHalf,
    by: Arc<str>,
    agent: Option<(i32, String)>,
) where
    R: AsyncBufReadExt + Unpin + Send + 'static,
{
    let mut out = Out { half: write };
    match sub {
        Subscribe::Events { from, follow } => {
            let _ = pump(&ctx, from, follow, &mut out, None).await;
        }
        Subscribe::Attach { from, read_only } => {
            // First the welcome: what a console needs besides the signals.
            let dir = ctx
                .events
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default();
            let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
            let attached = serde_json::json!({
                "run_dir": dir.display().to_string(),
                "by": &*by,
                "read_only": read_only || agent.is_some(),
                // The run's own time now: the console's clock goes on from
                // it, not from when the console came.
                "elapsed": ctx.handle.elapsed(),
                // Where the log stands: until the console has folded this
                // far, it says it is catching up.
                "seq": last_seq(&ctx.events),
            });
            // The run's parts are JSON already: written as they are.
            let attached = attached.to_string();
            let welcome = format!(
                "{{\"attached\":{{\"play\":{},{}}},\"placed\":{}}}\n",
                ctx.welcome.play,
                &attached[1..attached.len() - 1],
                ctx.welcome.placed
            );
            if out.write(welcome.as_bytes()).await.is_err() {
                return;
            }
            let (answers, mut answered) = mpsc::channel::<Answer>(QUEUE);
            let read_only = read_only || agent.is_some();
            // When the console last said anything (a request, or the blank
            // keep-alive line it sends every KEEPALIVE).
            let heard = Arc::new(std::sync::Mutex::new(tokio::time::Instant::now()));
            let asked = {
                let ctx = ctx.clone();
                let heard = heard.clone();
                tokio::spawn(async move {
                    let mut line = Vec::new();
                    loop {
                        line.clear();
                        match read_line(&mut requests, &mut line).await {
                            Ok(true) => {}
                            _ => return,
                        }
                        if let Ok(mut h) = heard.lock() {
                            *h = tokio::time::Instant::now();
                        }
                        // A keep-alive: never answered.
                        if line.iter().all(u8::is_ascii_whitespace) {
                            continue;
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
            if pump(&ctx, from, true, &mut out, Some(&mut answered))
                .await
                .is_ok()
            {
                // The run is over and its last line sent; the console
                // still asks (status, the report) until it leaves, and the
                // run's host waits for it (see `ControlServer::finish`) —
                // while it is alive: one that has said nothing for QUIET
                // (stopped with SIGSTOP, a suspended ssh, a closed lid)
                // no longer keeps the host, nor the run's lock.
                loop {
                    let last = heard
                        .lock()
                        .map_or_else(|_| tokio::time::Instant::now(), |h| *h);
                    tokio::select! {
                        a = answered.recv() => match a {
                            Some(a) if out.write(&a.line).await.is_ok() => {}
                            _ => break,
                        },
                        () = tokio::time::sleep_until(last + QUIET) => {
                            let now_last = heard.lock().map_or(last, |h| *h);
                            if now_last + QUIET <= tokio::time::Instant::now() {
                                tracing::info!("an attached console said nothing for {QUIET:?}: counted gone");
                                break;
                            }
                        }
                    }
                }
            }
            asked.abort();
        }
    }
    let _ = out.half.shutdown().await;
}

/// How often an attached console says it is alive (a blank line).
pub const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(5);

/// After the run's end, a console silent this long is counted gone.
pub const QUIET: std::time::Duration = std::time::Duration::from_secs(15);

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

/// Whether a request only reads (a read-only console, an agent or a
/// `[notify]` command may send it).
pub(super) fn reads_only(req: &Request) -> bool {
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
        // The last whole line's: a half-written one after it is not read.
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("events.jsonl");
        std::fs::write(
            &log,
            "{\"v\":1,\"seq\":1}\n{\"v\":1,\"seq\":2}\n{\"v\":1,\"se",
        )
        .unwrap();
        assert_eq!(last_seq(&log), Some(2));
        assert_eq!(last_seq(&d.path().join("none")), None);
        assert_eq!(seq_of(b"garbage"), None);
    }
}
