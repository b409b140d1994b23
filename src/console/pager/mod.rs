//! `O` and `D`: the terminal lent to `$PAGER`, on an attempt's whole output
//! or on what changed in an operation's worktree.
//!
//! What the pager shows is written to a private temporary file first (one
//! file, so every pager — `less`, `more`, a `$PAGER` of the operator's —
//! shows it the same way, and the console can say what went wrong before
//! it gives the terminal up). The output file holds the stdout log, then
//! the stderr log with each line marked `err│` as the console marks it: the
//! two logs do not record how their lines interleaved, and the file says
//! so rather than invent an order.
//!
//! While the pager runs, the console is suspended (no raw mode, no
//! alternate screen, no mouse capture, no reading of the terminal) and the
//! loop waits for it; the run goes on in its own tasks. The pager shares
//! the console's process group, as `git`'s does, so a `ctrl-c` typed into it
//! reaches the console as SIGINT too: that one is not a request to stop.
//! SIGTERM and SIGHUP end the pager and then the console, as always.

mod diff;
pub use diff::*;

use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;
use tokio::sync::mpsc;

use super::app::{App, Level, Page};
use crate::capacity::state::CapacityFile;
use crate::session::StopSignal;
use crate::vocab::WorkspaceMode;

/// Why the pager did not open, and how loud to say it.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub text: String,
    pub level: Level,
}

impl Refusal {
    fn error(text: String) -> Refusal {
        Refusal {
            text,
            level: Level::Error,
        }
    }
}

/// The pager's content, ready, and what the status line says once the
/// pager is closed.
pub struct Prepared {
    pub file: NamedTempFile,
    pub shown: String,
    pub level: Level,
}

/// Where the console can lend the terminal: a real one can, a test's
/// cannot (the event loop's frames go to one of these).
pub trait Lend {
    /// Gives the terminal up: false when there is none to give.
    fn suspend(&mut self) -> io::Result<bool>;
    /// Takes it back after [`Lend::suspend`] said true.
    fn resume(&mut self) -> io::Result<()>;
}

/// The pager to run: `$PAGER` (through `sh`, as git runs it: it may carry
/// options), else `less -R` (colour passes through), else `more`.
#[derive(Debug, Clone, PartialEq)]
pub enum Pager {
    Env(String),
    Default,
}

impl Pager {
    pub fn from_env() -> Pager {
        match std::env::var("PAGER") {
            Ok(p) if !p.trim().is_empty() => Pager::Env(p),
            _ => Pager::Default,
        }
    }

    /// How a person names it in a message.
    fn name(&self) -> String {
        match self {
            Pager::Env(p) => format!("$PAGER ({p})"),
            Pager::Default => "less -R".into(),
        }
    }
}

/// How a [`show`] went, for the event loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Refused before the terminal was lent (the status line says why).
    NotRun,
    /// The pager ran and the terminal is back.
    Closed,
    /// A SIGTERM or SIGHUP came while it ran: it was ended, the terminal
    /// is back, and the loop stops as it would have.
    Stopped(StopSignal),
}

/// How long preparing a page may take before the console gives up on it.
const PREPARE_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

/// Prepares `page`, lends the terminal to the pager, waits for it (its
/// process reaped) and takes the terminal back; the status line says what
/// was shown or why nothing was.
pub async fn show(
    app: &mut App,
    screen: &mut impl Lend,
    page: Page,
    stop: &mut mpsc::UnboundedReceiver<StopSignal>,
) -> io::Result<Shown> {
    if let Page::Shell { op, run_dir } = &page {
        return shell(app, screen, op, run_dir, stop).await;
    }
    if let Page::Diff { node, op, .. } = &page {
        return open_diff(app, &page, *node, op, stop).await;
    }
    let pager = Pager::from_env();
    // The console waits for this (no keys, no frames): bounded, and a
    // stop signal meanwhile is taken at once (git is killed on drop).
    let prepared = tokio::select! {
        r = tokio::time::timeout(PREPARE_WITHIN, prepare(&page, pager == Pager::Default)) => r,
        Some(sig) = stop.recv() => return Ok(Shown::Stopped(sig)),
    };
    let prepared = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(r)) => {
            app.set_status(r.text, r.level);
            return Ok(Shown::NotRun);
        }
        Err(_) => {
            app.warn(format!(
                "nothing shown: preparing it took over {} s (git on a very large worktree?)",
                PREPARE_WITHIN.as_secs()
            ));
            return Ok(Shown::NotRun);
        }
    };
    if !screen.suspend()? {
        app.warn("no terminal to hand to a pager here");
        return Ok(Shown::NotRun);
    }
    let (ran, stopped) = run(&pager, prepared.file.path(), stop).await;
    // Taken back whatever the pager did: the console must not stay
    // suspended.
    screen.resume()?;
    match ran {
        Ok(()) => app.set_status(prepared.shown, prepared.level),
        Err(why) => app.set_status(why, Level::Error),
    }
    Ok(stopped.map_or(Shown::Closed, Shown::Stopped))
}

/// `D`: the diff, prepared as for a pager (bounded, a stop signal taken at
/// once), read into the console's diff view — the terminal stays the
/// console's.
async fn open_diff(
    app: &mut App,
    page: &Page,
    node: u32,
    op: &str,
    stop: &mut mpsc::UnboundedReceiver<StopSignal>,
) -> io::Result<Shown> {
    let prepared = tokio::select! {
        p = tokio::time::timeout(PREPARE_WITHIN, prepare(page, false)) => p,
        Some(sig) = stop.recv() => return Ok(Shown::Stopped(sig)),
    };
    match prepared {
        Ok(Ok(p)) => {
            let text = std::fs::read_to_string(p.file.path())?;
            let title = p.shown.trim_start_matches("paged ").to_string();
            let mut view = crate::console::diffview::DiffView::new(node, op, title, &text);
            if let Page::Diff { review, .. } = page {
                view.basis = review.clone();
            }
            app.overlays
                .push(crate::console::overlay::Overlay::Diff(Box::new(view)));
            app.set_status(
                format!(
                    "{}: ] and [ move by hunk, }} and {{ by file",
                    p.shown.replacen("paged", "showing", 1)
                ),
                p.level,
            );
        }
        Ok(Err(r)) => app.set_status(r.text, r.level),
        Err(_) => app.warn(format!(
            "nothing shown: preparing the diff took over {} s (git on a very large worktree?)",
            PREPARE_WITHIN.as_secs()
        )),
    }
    Ok(Shown::NotRun)
}

/// `S`: the terminal lent to the operator's shell (`$SHELL`, else `sh`)
/// in the operation's own worktree — to resolve a merge conflict, or look
/// around — until they leave it.
async fn shell(
    app: &mut App,
    screen: &mut impl Lend,
    op: &str,
    run_dir: &Path,
    stop: &mut mpsc::UnboundedReceiver<StopSignal>,
) -> io::Result<Shown> {
    let dir = match workdir(run_dir, op, 0, None) {
        Ok(Workdir::Landing { path, .. } | Workdir::Worktree(path)) => path,
        Ok(Workdir::Shared(d)) => {
            app.warn(format!(
                "{op} has no worktree of its own: it works in the play's directory {}",
                d.display()
            ));
            return Ok(Shown::NotRun);
        }
        Err(r) => {
            app.set_status(r.text, r.level);
            return Ok(Shown::NotRun);
        }
    };
    let program = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "sh".into());
    if !screen.suspend()? {
        app.warn("no terminal to hand to a shell here");
        return Ok(Shown::NotRun);
    }
    println!(
        "playdeck: a shell in {op}'s worktree {} — leave it (exit) to return to the console",
        dir.display()
    );
    let spawned = tokio::process::Command::new(&program)
        .current_dir(&dir)
        .env("PLAYDECK_OP", op)
        .spawn();
    let (ran, stopped) = match spawned {
        Ok(child) => wait_for(child, &program, false, stop).await,
        Err(e) => (Err(format!("cannot start {program}: {e}")), None),
    };
    screen.resume()?;
    match ran {
        // A shell's last command's status is not the operator's error.
        Ok(()) | Err(_) if stopped.is_some() => {}
        Err(why) if why.starts_with("cannot start") => app.set_status(why, Level::Error),
        _ => app.set_status(
            format!("back from the shell in {op}'s worktree: {}", dir.display()),
            Level::Info,
        ),
    }
    Ok(stopped.map_or(Shown::Closed, Shown::Stopped))
}

/// Writes what `page` shows to a temporary file; `color` asks git for
/// colour (the default pager, `less -R`, shows it).
pub async fn prepare(page: &Page, color: bool) -> Result<Prepared, Refusal> {
    match page {
        Page::Output { op, attempt, logs } => output(op, *attempt, logs),
        Page::Diff {
            op,
            attempt,
            instance,
            run_dir,
            review,
            ..
        } => {
            let dir = workdir(run_dir, op, *attempt, instance.as_deref())?;
            let range = review.as_ref().and_then(|b| b.what.as_deref());
            diff(op, &dir, color, range).await
        }
        Page::Shell { .. } => Err(Refusal::error("a shell is not paged".into())),
    }
}

/// A line for the pager: colour (SGR: `ESC [ digits;… m`) kept, as
/// `less -R` shows it; every other escape sequence and control character
/// gone, as in the follow view: an agent's bytes must not drive the
/// operator's terminal (a `$PAGER` like `more` or `cat` passes them on).
fn colour_only(line: &str) -> String {
    let line = line.trim_end_matches('\r');
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("\x1b[") {
        let tail = &rest[at + 2..];
        let params = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(tail.len());
        if tail[params..].starts_with('m') {
            out.push_str(&crate::printable::printable(&rest[..at]));
            out.push_str(&rest[at..at + 2 + params + 1]);
            rest = &tail[params + 1..];
        } else {
            // Not colour: dropped up to its final byte (`@` to `~`).
            out.push_str(&crate::printable::printable(&rest[..at]));
            rest = match tail.find(|c: char| ('\u{40}'..='\u{7e}').contains(&c)) {
                Some(end) => &tail[end + 1..],
                None => "",
            };
        }
    }
    out.push_str(&crate::printable::printable(rest));
    out
}

fn temp(what: &str) -> Result<NamedTempFile, Refusal> {
    // Owner-only (tempfile's default): it holds what the agent printed.
    tempfile::Builder::new()
        .prefix(&format!("playdeck-{what}-"))
        .tempfile()
        .map_err(|e| Refusal::error(format!("cannot write a file for the pager: {e}")))
}

/// The stdout log, then the stderr log with each line marked.
fn output(op: &str, attempt: u32, logs: &Path) -> Result<Prepared, Refusal> {
    let out = logs.join(format!("{op}.{attempt}.stdout.log"));
    let err = logs.join(format!("{op}.{attempt}.stderr.log"));
    let so = match std::fs::File::open(&out) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Refusal {
                text: format!(
                    "{op}'s attempt {attempt} has no output to page: {} does not exist (the built-in sim agent writes no logs)",
                    out.display()
                ),
                level: Level::Warning,
            });
        }
        Err(e) => {
            return Err(Refusal::error(format!(
                "cannot read {}: {e}",
                out.display()
            )));
        }
    };
    let mut file = temp("output")?;
    let failed = |e: io::Error| Refusal::error(format!("cannot write a file for the pager: {e}"));
    // Buffered: a log is up to 32 MiB of short lines.
    let mut w = io::BufWriter::new(file.as_file_mut());
    let f = &mut w;
    writeln!(
        f,
        "==> {op} · attempt {attempt} · stdout: {} <==\n(the logs do not record how stdout and stderr interleaved: stdout comes first, then stderr, each of its lines marked err│)\n",
        out.display()
    )
    .map_err(failed)?;
    // Line by line, so a last line without its newline still ends before
    // the next heading. The bytes are the agent's own (colour included:
    // `less -R` shows it).
    let copy = |from: std::fs::File,
                path: &Path,
                mark: &[u8],
                f: &mut io::BufWriter<&mut std::fs::File>| {
        for line in BufReader::new(from).split(b'\n') {
            let line =
                line.map_err(|e| Refusal::error(format!("cannot read {}: {e}", path.display())))?;
            let line = colour_only(&String::from_utf8_lossy(&line));
            f.write_all(mark)
                .and_then(|_| f.write_all(line.as_bytes()))
                .and_then(|_| f.write_all(b"\n"))
                .map_err(failed)?;
        }
        Ok::<(), Refusal>(())
    };
    copy(so, &out, b"", f)?;
    match std::fs::File::open(&err) {
        Ok(se) => {
            writeln!(
                f,
                "\n==> {op} · attempt {attempt} · stderr: {} <==",
                err.display()
            )
            .map_err(failed)?;
            copy(se, &err, "err│ ".as_bytes(), f)?;
        }
        Err(_) => writeln!(f, "\n==> no stderr log ({}) <==", err.display()).map_err(failed)?,
    }
    f.flush().map_err(failed)?;
    drop(w);
    Ok(Prepared {
        file,
        shown: format!("paged {op}'s attempt {attempt} output: stdout, then stderr"),
        level: Level::Info,
    })
}
/// What makes `$PAGER` a shell command rather than a program and its
/// options (git's list).
const SHELL_CHARS: &[char] = &[
    '|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', '*', '?', '[', '#', '~', '=', '%',
];

/// `$PAGER` as sh runs it: a simple command gets `exec` after its leading
/// assignments (`LESS=R exec less`), so the shell becomes the pager; a
/// pipeline, a list, or assignments with quotes stay as written.
fn exec_form(p: &str) -> String {
    if p.contains(['|', ';', '&', '\n']) {
        return p.to_string();
    }
    let named = |w: &str| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
                && !name.starts_with(|c: char| c.is_ascii_digit())
        })
    };
    let plain = |w: &str| !w.contains(['\'', '"', '`', '$', '\\']);
    // Where the command word starts: after the leading assignments.
    let mut at = 0;
    loop {
        let rest = &p[at..];
        let start = at + (rest.len() - rest.trim_start().len());
        let word_end = p[start..]
            .find(char::is_whitespace)
            .map_or(p.len(), |i| start + i);
        let word = &p[start..word_end];
        if word.is_empty() {
            // Assignments only: nothing to exec.
            return p.to_string();
        }
        if !named(word) {
            return format!("{}exec {}", &p[..start], &p[start..]);
        }
        // An assignment that quotes or expands: where it ends is the
        // shell's to say, so the command stays as written.
        if !plain(word) {
            return p.to_string();
        }
        at = word_end;
    }
}

/// Runs the pager on `file` in the foreground and waits for it; what went
/// wrong, the command named, and a stop signal that ended it.
async fn run(
    pager: &Pager,
    file: &Path,
    stop: &mut mpsc::UnboundedReceiver<StopSignal>,
) -> (Result<(), String>, Option<StopSignal>) {
    let spawned = match pager {
        // Plain words (`less -R`, a script's path): run directly, so the
        // process waited for (and ended on SIGTERM) is the pager itself.
        Pager::Env(p) if !p.contains(SHELL_CHARS) => {
            let mut words = p.split_whitespace();
            let mut c = tokio::process::Command::new(words.next().unwrap_or_default());
            c.args(words).arg(file);
            c.spawn().map(|c| (c, pager.name()))
        }
        Pager::Env(p) => {
            // Shell words: through sh, as git runs it, the file as an
            // argument after them.
            // A single command is exec'd, so the process waited for
            // (and ended on SIGTERM) is the pager, not the shell; a
            // pipeline or a list keeps its shell.
            let cmd = exec_form(p);
            let mut c = tokio::process::Command::new("sh");
            c.arg("-c").arg(format!("{cmd} \"$@\"")).arg(p).arg(file);
            c.spawn().map(|c| (c, pager.name()))
        }
        Pager::Default => {
            let mut c = tokio::process::Command::new("less");
            c.arg("-R").arg(file);
            match c.spawn() {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let mut c = tokio::process::Command::new("more");
                    c.arg(file);
                    c.spawn()
                        .map(|c| (c, "more (less is not installed)".to_string()))
                }
                other => other.map(|c| (c, pager.name())),
            }
        }
    };
    let (child, name) = match spawned {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let what = match pager {
                Pager::Env(p) if !p.contains(SHELL_CHARS) => {
                    format!("{} was not found", pager.name())
                }
                Pager::Env(_) => "no pager: sh is not installed".to_string(),
                Pager::Default => {
                    "no pager: neither less nor more is installed; set PAGER".to_string()
                }
            };
            return (Err(what), None);
        }
        Err(e) => return (Err(format!("cannot start {}: {e}", pager.name())), None),
    };
    let env_pager = matches!(pager, Pager::Env(_));
    wait_for(child, &name, env_pager, stop).await
}

/// Waits for a program the terminal was lent to; a SIGTERM or SIGHUP
/// meanwhile ends it (and is returned), ctrl-c is its own.
async fn wait_for(
    mut child: tokio::process::Child,
    name: &str,
    through_sh: bool,
    stop: &mut mpsc::UnboundedReceiver<StopSignal>,
) -> (Result<(), String>, Option<StopSignal>) {
    let mut stopped = None;
    let status = loop {
        tokio::select! {
            st = child.wait() => break st,
            Some(sig) = stop.recv(), if stopped.is_none() => {
                // ctrl-c in the pager: the terminal sent it to the whole
                // process group, the console included.
                if sig == StopSignal::Interrupt {
                    continue;
                }
                stopped = Some(sig);
                // Ended, then waited for below: never left a zombie.
                let _ = child.start_kill();
            }
        }
    };
    let ran = match status {
        Err(e) => Err(format!("{name}: cannot wait for it: {e}")),
        Ok(st) if st.success() || stopped.is_some() => Ok(()),
        Ok(st) => match st.code() {
            Some(127) if through_sh => Err(format!("{name} was not found (sh said exit 127)")),
            Some(c) => Err(format!("{name} exited with status {c}")),
            None => {
                use std::os::unix::process::ExitStatusExt;
                Err(format!(
                    "{name} was ended by signal {}",
                    st.signal().unwrap_or_default()
                ))
            }
        },
    };
    (ran, stopped)
}

#[cfg(test)]
mod tests;
