//! `playdeck run` through a run host, `playdeck attach`, `playdeck runs`,
//! `playdeck bridge` and `playdeck ctl RUN events`: a run is a process
//! consoles come and go from, as tmux's server is.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{CmdError, Outcome, block_on, check_console_config, need_terminal, stop_requests};
use crate::cli::{ApproveArg, RunArgs};
use playdeck::console::attach::AttachOptions;
use playdeck::control::link::Link;
use playdeck::control::{self, Failure};

/// `playdeck run [PLAY]` with a console (the demo too): starts the run host (this binary,
/// `--host`, in a session of its own, so a closed terminal does not reach
/// it), waits for its socket, and attaches.
pub fn hosted(args: &RunArgs) -> Outcome {
    need_terminal("the console", "use --headless for scripts and pipes")?;
    check_console_config(args.theme.as_deref())?;
    let _log = super::start_logging();
    // No play file: the built-in demo, which its host plays too.
    let play = args.play.as_ref();
    let dir = match (&args.resume, &args.run_dir) {
        (Some(r), _) => r.clone(),
        (None, Some(d)) => d.clone(),
        (None, None) => Path::new(playdeck::store::RUNS_DIR).join(playdeck::store::new_run_id()),
    };
    let exe = std::env::current_exe()
        .map_err(|e| CmdError::Failed(format!("cannot find this program to host the run: {e}")))?;
    let mut cmd = Command::new(exe);
    match &args.resume {
        Some(r) => {
            cmd.arg("resume").arg(r);
            if let Some(play) = play {
                cmd.arg("--play").arg(play);
            }
            for op in &args.retry {
                cmd.arg("--retry").arg(op);
            }
            for op in &args.resolve {
                cmd.arg("--resolve").arg(op);
            }
        }
        None => {
            cmd.arg("run");
            if let Some(play) = play {
                cmd.arg(play);
            }
            cmd.arg("--run-dir").arg(&dir);
        }
    }
    cmd.arg("--host");
    if let Some(s) = args.speed {
        cmd.arg("--speed").arg(s.to_string());
    }
    if args.paused {
        cmd.arg("--paused");
    }
    for c in &args.budget {
        cmd.arg("--budget").arg(c.to_string());
    }
    for b in &args.breakpoints {
        cmd.arg("--break").arg(b.to_string());
    }
    if let Some(url) = &args.nats {
        cmd.arg("--nats").arg(url);
    }
    match args.approve {
        Some(ApproveArg::All) => {
            cmd.args(["--approve", "all"]);
        }
        Some(ApproveArg::None) => {
            cmd.args(["--approve", "none"]);
        }
        None => {}
    }
    match playdeck::host::start(cmd, &dir)
        .map_err(|e| CmdError::Failed(format!("cannot start the run host: {e}")))?
    {
        playdeck::host::Started::Listening => {}
        playdeck::host::Started::Ended { code, said } => {
            let _ = write!(std::io::stderr(), "{said}");
            return Ok(code);
        }
    }
    attach_local(
        &dir,
        &playdeck::console::run::name_of(&dir),
        false,
        args.theme.clone(),
    )
}

/// `playdeck attach RUN`.
pub fn attach(run: &str, read_only: bool, theme: Option<String>) -> Outcome {
    let terminal = || {
        need_terminal(
            "attach",
            "use `playdeck ctl RUN events --follow` for scripts",
        )
    };
    if let Some(addr) = run.strip_prefix("ssh://") {
        terminal()?;
        check_console_config(theme.as_deref())?;
        let _log = super::start_logging();
        return attach_remote(addr, run, read_only, theme);
    }
    // Whose run it is, before whether there is a terminal to show it on.
    let dir =
        control::resolve_run(run).map_err(|f| CmdError::Input(format!("attach: {}", f.message)))?;
    terminal()?;
    check_console_config(theme.as_deref())?;
    let _log = super::start_logging();
    // The exit lines name the run as the run id (from anywhere, through
    // the user's index) or its path — never `latest`.
    let name = playdeck::console::run::name_of(&dir);
    attach_local(&dir, &name, read_only, theme)
}

fn attach_local(dir: &Path, name: &str, read_only: bool, theme: Option<String>) -> Outcome {
    let _nice = playdeck::host::nice::step_back();
    let (mut dir, mut name) = (dir.to_path_buf(), name.to_string());
    let mut switched = false;
    // The runs screen may send the console on to another run: a live one
    // is attached to, a finished one replayed.
    loop {
        if switched && !live(&dir) {
            return super::recorded::replay(&dir.display().to_string(), 1.0, theme);
        }
        let opts = AttachOptions {
            theme: theme.clone(),
            read_only,
            name: name.clone(),
            local_dir: Some(dir.clone()),
        };
        let d = dir.clone();
        // One thread: the link's reader and the fold take turns instead
        // of waking each other across cores (an attached console used
        // 1.8 s of CPU on a 100 000-operation noop run with two, 1.4 s
        // with one — CPU its run would rather have).
        let exit = block_on(false, async move {
            let link = Link::local(&d, 0, read_only)
                .await
                .map_err(|f| not_live(f, &d))?;
            playdeck::console::attach::run(link, opts, stop_requests())
                .await
                .map_err(super::run_error)
        })??;
        match exit.switch_to {
            Some(next) => {
                name = playdeck::console::run::name_of(&next);
                dir = next;
                switched = true;
            }
            None => {
                let _ = writeln!(std::io::stderr(), "{}", exit.line);
                return Ok(exit.code);
            }
        }
    }
}

/// Whether a run directory's run has not finished (no result yet; one that
/// crashed is told, when attaching fails, that it can be replayed).
fn live(dir: &Path) -> bool {
    !dir.join("result.json").exists()
}

fn not_live(f: Failure, dir: &Path) -> CmdError {
    if f.code == playdeck::control::ErrorCode::NotLive {
        CmdError::Refused(Failure::new(
            f.code,
            format!(
                "{}; a finished or stopped run can be replayed: playdeck replay {}",
                f.message,
                dir.display()
            ),
        ))
    } else {
        CmdError::Refused(f)
    }
}

fn attach_remote(addr: &str, name: &str, read_only: bool, theme: Option<String>) -> Outcome {
    let r = playdeck::host::ssh::parse_remote(addr).map_err(CmdError::Input)?;
    let Some(run) = r.run.clone() else {
        return Err(CmdError::Input(format!(
            "{name}: name the run after #: ssh://host/path#latest"
        )));
    };
    let opts = AttachOptions {
        theme,
        read_only,
        name: name.to_string(),
        local_dir: None,
    };
    let exit = block_on(false, async move {
        let mut child = playdeck::host::ssh::command(&r, &["bridge", &run])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| CmdError::Failed(format!("cannot start ssh: {e}")))?;
        let (w, rd) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
        );
        let link = Link::over(rd, w, 0, read_only, Some(child))
            .await
            .map_err(|f| {
                CmdError::Refused(Failure::new(f.code, format!("{name}: {}", f.message)))
            })?;
        playdeck::console::attach::run(link, opts, stop_requests())
            .await
            .map_err(super::run_error)
    })??;
    let _ = writeln!(std::io::stderr(), "{}", exit.line);
    Ok(exit.code)
}

/// `playdeck bridge RUN`: this machine's run socket on stdin/stdout.
pub fn bridge(run: &str) -> Outcome {
    let dir =
        control::resolve_run(run).map_err(|f| CmdError::Input(format!("bridge: {}", f.message)))?;
    let socket = control::socket_path(&dir);
    let s = socket.clone();
    block_on(true, async move {
        control::bridge(&s, tokio::io::stdin(), tokio::io::stdout()).await
    })?
    .map_err(|e| CmdError::Failed(format!("bridge to {}: {e}", socket.display())))?;
    Ok(0)
}

/// `playdeck runs [--dir D] [--json] [--watch]`.
pub fn runs(dir: Option<String>, json: bool, watch: bool) -> Outcome {
    let dir = dir.unwrap_or_else(|| playdeck::store::RUNS_DIR.to_string());
    if let Some(addr) = dir.strip_prefix("ssh://") {
        return runs_remote(addr, json, watch);
    }
    let dir = PathBuf::from(dir);
    loop {
        let rows = match playdeck::control::listing::list(&dir) {
            Ok(rows) => rows,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !watch => {
                if json {
                    return Ok(0);
                }
                sayln!("no runs in {}", dir.display());
                return Ok(0);
            }
            Err(e) => return Err(CmdError::Input(format!("runs: {}: {e}", dir.display()))),
        };
        if watch {
            use std::io::IsTerminal as _;
            if std::io::stdout().is_terminal() {
                // Clear the screen and home the cursor between lists.
                say!("\x1b[H\x1b[2J");
            } else if !json {
                // Into a pipe: no escapes, each list after a line of its own.
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                sayln!("--- {}", playdeck::kernel::retry::clock(now));
            }
        }
        if json {
            for r in &rows {
                sayln!("{}", serde_json::to_string(r).expect("a row serialises"));
            }
        } else {
            say!("{}", playdeck::control::listing::text(&rows));
        }
        if !watch {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn runs_remote(addr: &str, json: bool, watch: bool) -> Outcome {
    let r = playdeck::host::ssh::parse_remote(addr).map_err(CmdError::Input)?;
    let mut args = vec!["runs"];
    if json {
        args.push("--json");
    }
    if watch {
        args.push("--watch");
    }
    let status = block_on(false, async move {
        playdeck::host::ssh::command(&r, &args)
            .stdin(Stdio::null())
            .status()
            .await
    })?
    .map_err(|e| CmdError::Failed(format!("cannot start ssh: {e}")))?;
    Ok(status.code().unwrap_or(1))
}

/// `playdeck ctl RUN events [--follow] [--from N]`: the log's lines.
pub fn events(run: &str, follow: bool, from: u64) -> Outcome {
    use tokio::io::AsyncWriteExt;
    let dir =
        control::resolve_run(run).map_err(|f| CmdError::Input(format!("ctl: {}", f.message)))?;
    let socket = control::socket_path(&dir);
    let live = std::os::unix::net::UnixStream::connect(&socket).is_ok();
    // A script's follower steps back for the run, and only itself (its
    // session, the script's and maybe the run's too, keeps its place), as
    // far as it can: nothing interactive waits on it.
    if let Err(e) = rustix::process::nice(playdeck::host::nice::FOLLOWER_NICE) {
        tracing::debug!("nice: {e}");
    }
    if !live {
        // A stopped run's log is the same lines: read from the file.
        if follow {
            return Err(CmdError::Refused(Failure::new(
                playdeck::control::ErrorCode::NotLive,
                format!(
                    "the run in {} is not live: nothing to follow (without --follow its log is printed)",
                    dir.display()
                ),
            )));
        }
        let text = std::fs::File::open(dir.join("events.jsonl"))
            .map_err(|e| CmdError::Input(format!("{}: {e}", dir.join("events.jsonl").display())))?;
        let mut whole = Whole::new(from);
        for line in std::io::BufRead::lines(std::io::BufReader::new(text)).map_while(Result::ok) {
            if let Some(l) = whole.line(line.as_bytes()) {
                sayln!("{l}");
            }
        }
        return Ok(0);
    }
    let shown = dir.display().to_string();
    block_on(false, async move {
        let s = tokio::net::UnixStream::connect(&socket).await?;
        let (r, mut w) = s.into_split();
        // From the first line: a compact line reads with those before it.
        let hello = serde_json::json!({"cmd": "events", "from": 0, "follow": follow});
        w.write_all(format!("{hello}\n").as_bytes()).await?;
        let mut out = tokio::io::stdout();
        let mut seen = EndSeen::default();
        match copy_watching(r, &mut out, &mut seen, Whole::new(from)).await {
            Ok(()) => out.flush().await?,
            // A reader that went away (`| head`) ends it quietly.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(e),
        }
        // A follow ends with the run's last line; a stream that stops
        // before it lost its run (a killed host): a script must be able
        // to tell that from the end.
        if follow && !seen.finished {
            return Err(std::io::Error::other(format!(
                "the stream ended before the run did (the last event seen: {}); its process is gone — `playdeck resume {}` takes the run up",
                seen.last_seq.map_or("none".into(), |s| format!("seq {s}")),
                shown
            )));
        }
        Ok(())
    })?
    .map_err(|e| CmdError::Failed(format!("events of {}: {e}", dir.display())))?;
    Ok(0)
}

/// What a followed stream said of its end.
#[derive(Default)]
struct EndSeen {
    /// A `run_finished` line went by.
    finished: bool,
    last_seq: Option<u64>,
    /// The line not yet ended by a newline.
    partial: Vec<u8>,
}

impl EndSeen {
    fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let line: &[u8] = if self.partial.is_empty() {
                &rest[..nl]
            } else {
                let take = nl.min(HEAD.saturating_sub(self.partial.len()));
                self.partial.extend_from_slice(&rest[..take]);
                &self.partial
            };
            if let Some(seq) = control::seq_of(line) {
                self.last_seq = Some(seq);
            }
            // Only the head of a line is looked at: a big result never is.
            let head = &line[..line.len().min(HEAD)];
            if head.windows(FINISHED.len()).any(|w| w == FINISHED) {
                self.finished = true;
            }
            self.partial.clear();
            rest = &rest[nl + 1..];
        }
        // Only a line's head matters; the rest of a long one is not kept.
        let take = rest.len().min(HEAD.saturating_sub(self.partial.len()));
        self.partial.extend_from_slice(&rest[..take]);
    }
}

/// How much of a log line [`EndSeen`] reads: its envelope (`v`, `seq`,
/// `elapsed`, `type`) comes first.
const HEAD: usize = 160;
const FINISHED: &[u8] = b"\"type\":\"run_finished\"";

/// Copies the stream's lines to `out` as whole lines, from `whole`'s first
/// wanted one, watching for the run's end.
async fn copy_watching(
    r: impl tokio::io::AsyncRead + Unpin,
    out: &mut (impl tokio::io::AsyncWrite + Unpin),
    seen: &mut EndSeen,
    mut whole: Whole,
) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut r = tokio::io::BufReader::with_capacity(64 * 1024, r);
    let mut line = Vec::new();
    let mut batch = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).await? == 0 {
            out.write_all(&batch).await?;
            return Ok(());
        }
        seen.feed(&line);
        if let Some(l) = whole.line(line.trim_ascii_end()) {
            batch.extend_from_slice(l.as_bytes());
            batch.push(b'\n');
        }
        // What has come is written before waiting for more.
        if r.buffer().is_empty() || batch.len() >= 64 * 1024 {
            out.write_all(&batch).await?;
            out.flush().await?;
            batch.clear();
        }
    }
}

/// The log's lines as a script reads them: whole (v1), each naming its
/// operation, from a sequence number on.
struct Whole {
    from: u64,
    lines: playdeck::kernel::log_line::LineDecoder,
}

impl Whole {
    fn new(from: u64) -> Whole {
        Whole {
            from,
            lines: playdeck::kernel::log_line::LineDecoder::new(),
        }
    }

    /// The line to print for `line`, if it is wanted. A line this playdeck
    /// cannot read goes out as it is.
    fn line(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            return None;
        }
        match self.lines.decode(line) {
            Ok(s) if s.seq < self.from => None,
            Ok(s) => serde_json::to_string(&s).ok(),
            Err(_) => (control::seq_of(line).is_none_or(|s| s >= self.from))
                .then(|| String::from_utf8_lossy(line).into_owned()),
        }
    }
}

#[cfg(test)]
mod end_seen_tests {
    use super::EndSeen;

    #[test]
    fn the_end_of_a_run_is_seen_across_chunks() {
        let log = b"{\"v\":1,\"seq\":7,\"elapsed\":0.1,\"type\":\"started\"}\n{\"v\":1,\"seq\":8,\"elapsed\":0.2,\"type\":\"run_finished\",\"outcome\":\"succeeded\"}\n";
        for cut in 0..log.len() {
            let mut seen = EndSeen::default();
            seen.feed(&log[..cut]);
            seen.feed(&log[cut..]);
            assert!(seen.finished, "cut at {cut}");
            assert_eq!(seen.last_seq, Some(8));
        }
        let mut seen = EndSeen::default();
        seen.feed(&log[..60]);
        assert!(!seen.finished);
        assert_eq!(seen.last_seq, Some(7));
    }
}
