//! One module per command. Each returns the exit code of a command that
//! ran (0 success, 1 something failed or was refused) or a [`CmdError`],
//! reported once by `main`.

/// `print!` for what a command prints: a reader that has gone
/// (`playdeck report RUN | head -1`) ends the command quietly, as `ls |
/// head` does, instead of a panic.
macro_rules! say {
    ($($t:tt)*) => { $crate::cmd::out(format_args!($($t)*)) };
}

/// `eprintln!` that never panics: a closed standard error loses the
/// message, not the command's exit code.
macro_rules! warnln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// `println!`, the same way.
macro_rules! sayln {
    () => { $crate::cmd::out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::cmd::out(format_args!("{}\n", format_args!($($t)*))) };
}

mod ask;
mod attach;
mod ctl;
mod follow;
mod inspect;
mod land;
mod recorded;
mod run;
#[cfg(feature = "screenshot")]
mod screenshot;
mod web;
mod worker;

use std::io::IsTerminal;

use tokio::sync::mpsc;

use crate::cli::{Command, RunArgs};
use playdeck::control::Failure;
use playdeck::play::{LoadError, Play};
use playdeck::session::{RunError, StopSignal};

/// Writes to standard output. A closed pipe ends the process with 0:
/// nothing went wrong on this side and the reader has what it wanted;
/// any other write error ends it with 1 and says why.
pub fn out(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(
            std::io::stderr(),
            "playdeck: cannot write to standard output: {e}"
        );
        std::process::exit(1);
    }
}

/// Why a command could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    /// The input was wrong (exit 2): a play, a flag, a run that does not
    /// exist.
    #[error("{0}")]
    Input(String),
    /// A play file did not load; its diagnostics are the message.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// The control surface refused (its code decides the exit).
    #[error("{0}")]
    Refused(#[from] Failure),
    /// Something outside playdeck failed (exit 1): the terminal, the disk.
    #[error("{0}")]
    Failed(String),
}

impl CmdError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CmdError::Input(_) | CmdError::Load(_) => 2,
            CmdError::Refused(f) => f.exit_code(),
            CmdError::Failed(_) => 1,
        }
    }

    /// Prints the error for people, on stderr.
    pub fn report(&self) {
        match self {
            CmdError::Load(LoadError::Invalid(d)) => {
                use std::io::Write as _;
                let _ = write!(
                    std::io::stderr(),
                    "{}",
                    d.render(std::io::stderr().is_terminal())
                );
            }
            e => warnln!("playdeck: {e}"),
        }
    }
}

pub type Outcome = Result<i32, CmdError>;

pub fn dispatch(command: Option<Command>) -> Outcome {
    match command {
        None => run::run(RunArgs::default()),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Resume {
            run: which,
            play,
            new_run,
            mut retry,
            resolve,
            retry_failed,
            filter,
            args,
        }) => {
            if retry_failed {
                retry.extend(run::failed_to_retry(&which, filter.as_deref())?);
            }
            run::resume(&which, play, new_run, (retry, resolve), args)
        }
        Some(Command::Validate { play, explain }) => inspect::validate(&play, explain),
        Some(Command::Catalog { json }) => inspect::catalog(json),
        Some(Command::Palette { play, json }) => inspect::palette(play.as_deref(), json),
        Some(Command::Prompt { play, op }) => inspect::prompt(play.as_deref(), &op),
        Some(Command::Argv {
            play,
            op,
            flag_profile,
            json,
        }) => inspect::argv(play.as_deref(), &op, flag_profile.as_deref(), json),
        Some(Command::Demo { print }) => inspect::demo(print),
        Some(Command::Report { run, format, out }) => {
            recorded::report(&run, format, out.as_deref())
        }
        Some(Command::Land { run, into, merge }) => land::land(&run, &into, merge),
        Some(Command::Replay {
            run,
            speed,
            theme,
            cast: Some(out),
            size,
        }) => recorded::cast(&run, speed, theme, &out, &size),
        Some(Command::Replay {
            run, speed, theme, ..
        }) => recorded::replay(&run, speed, theme),
        Some(Command::Ctl { run, action, json }) => match action {
            crate::cli::CtlAction::Do(mut req) => {
                let json = json
                    | req
                        .take_trailing_options(true)
                        .map_err(|e| CmdError::Input(format!("ctl: {e}")))?;
                ctl::ctl(&run, req, json)
            }
            crate::cli::CtlAction::Events { follow, from } => attach::events(&run, follow, from),
            crate::cli::CtlAction::Follow { op, raw } => follow::follow(&run, &op, raw),
        },
        Some(Command::Attach {
            run,
            read_only,
            theme,
        }) => attach::attach(&run, read_only, theme),
        Some(Command::Runs { dir, json, watch }) => attach::runs(dir, json, watch),
        Some(Command::Bridge { run }) => attach::bridge(&run),
        Some(Command::AskMcp { socket }) => ask::ask_mcp(socket),
        Some(Command::Worker(args)) => worker::worker(args),
        Some(Command::Web(args)) => web::web(args),
        Some(Command::Capacity { action }) => ctl::capacity(action),
        #[cfg(feature = "screenshot")]
        Some(Command::Screenshot(args)) => screenshot::screenshot(args),
    }
}

/// The play at `path`, or the built-in demo; load warnings are printed
/// once.
pub fn load(path: Option<&std::path::Path>) -> Result<Play, CmdError> {
    let t = std::time::Instant::now();
    let play = match path {
        Some(p) => Play::load(p)?,
        None => Play::demo(),
    };
    tracing::debug!(
        ms = t.elapsed().as_millis(),
        ops = play.operations.len(),
        "play read"
    );
    // Each warning names its file (and position, where it has one).
    for w in &play.warnings {
        warnln!("playdeck: warning: {w}");
    }
    Ok(play)
}

/// A runtime for one command: multi-threaded for runs, one thread for the
/// short inspection commands.
pub fn runtime(multi: bool) -> Result<tokio::runtime::Runtime, CmdError> {
    let mut b = if multi {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    b.enable_all()
        .build()
        .map_err(|e| CmdError::Failed(format!("cannot start the runtime: {e}")))
}

/// Runs `fut` to completion on a fresh runtime, then lets go of whatever
/// is left (a stdin reader must not keep the process alive).
pub fn block_on<T>(multi: bool, fut: impl std::future::Future<Output = T>) -> Result<T, CmdError> {
    let rt = runtime(multi)?;
    let out = rt.block_on(fut);
    rt.shutdown_background();
    Ok(out)
}

/// Both ends must be a terminal for a full-screen view.
pub fn need_terminal(what: &str, instead: &str) -> Result<(), CmdError> {
    if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
        Ok(())
    } else {
        Err(CmdError::Input(format!(
            "{what} needs a terminal; {instead}"
        )))
    }
}

/// The console's config, checked before anything is started or written (a
/// log file, a run host and its run directory): a config with errors
/// leaves the disk as it was and says every error at once. The console
/// reads it again when it opens; it is a few small files.
pub fn check_console_config(theme: Option<&str>) -> Result<(), CmdError> {
    playdeck::console::config::ConsoleConfig::load(theme)
        .map(drop)
        .map_err(|e| CmdError::Input(e.to_string()))
}

/// One message per SIGINT, SIGTERM or SIGHUP, naming it. Must be called
/// inside the runtime.
pub fn stop_requests() -> mpsc::UnboundedReceiver<StopSignal> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = mpsc::unbounded_channel();
    for (kind, stop) in [
        (SignalKind::interrupt(), StopSignal::Interrupt),
        (SignalKind::terminate(), StopSignal::Terminate),
        (SignalKind::hangup(), StopSignal::Hangup),
    ] {
        let tx = tx.clone();
        match signal(kind) {
            Ok(mut s) => {
                tokio::spawn(async move {
                    while s.recv().await.is_some() {
                        if tx.send(stop).is_err() {
                            break;
                        }
                    }
                });
            }
            Err(e) => warnln!("playdeck: cannot listen for signal {kind:?}: {e}"),
        }
    }
    rx
}

fn run_error(e: RunError) -> CmdError {
    match e {
        RunError::Open(e) => CmdError::Input(e.to_string()),
        RunError::Io(e) => CmdError::Failed(e.to_string()),
    }
}

/// Logs to a daily file under `.playdeck/logs/` through a non-blocking
/// writer; the guard must live until the end of the process.
fn start_logging() -> Option<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::EnvFilter;
    let appender = tracing_appender::rolling::daily(".playdeck/logs", "playdeck.log");
    playdeck::store::ignored_by_git(std::path::Path::new(".playdeck/logs"));
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_env("PLAYDECK_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init()
        .ok()?;
    Some(guard)
}
