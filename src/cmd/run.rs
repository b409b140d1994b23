//! `playdeck run` (the console, or headless) and `playdeck resume`.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{CmdError, Outcome, block_on, load, run_error, stop_requests};
use crate::cli::{ApproveArg, FormatArg, ResumeArgs, RunArgs};
use playdeck::headless::{self, Format, HeadlessOptions};
use playdeck::kernel::ApprovalPolicy;
use playdeck::play::Play;
use playdeck::session::SessionOptions;

pub fn run(args: RunArgs) -> Outcome {
    if let Some(url) = &args.nats {
        // The address is not echoed: it may carry a secret.
        playdeck::play::cluster_section::check_nats_url(url)
            .map_err(|(message, _)| CmdError::Input(format!("--nats {message}")))?;
    }
    if args.host {
        playdeck::host::leave_terminal_session();
    }
    if args.headless || args.host {
        log_to_stderr();
    }
    let play = load(args.play.as_deref())?;
    if args.headless || args.host {
        headless_run(play, &args)
    } else {
        // Every run with a console, the built-in demo too, is hosted: `q`
        // then enter detaches from any of them (one habit).
        super::attach::hosted(&args)
    }
}

fn approvals(a: Option<ApproveArg>) -> ApprovalPolicy {
    match a {
        Some(ApproveArg::All) => ApprovalPolicy::ApproveAll,
        Some(ApproveArg::None) => ApprovalPolicy::DenyAll {
            reason: Arc::from("--approve none"),
        },
        None => ApprovalPolicy::Ask,
    }
}

fn session_options(args: &RunArgs) -> SessionOptions {
    SessionOptions {
        speed: args.speed,
        paused: args.paused,
        approvals: approvals(args.approve),
        run_dir: args.run_dir.clone(),
        resume: args.resume.clone(),
        retry: args.retry.clone(),
        resolve: args.resolve.clone(),
        budget: args.budget.clone(),
        breakpoints: args.breakpoints.clone(),
        nats: args.nats.clone(),
        ..Default::default()
    }
}

fn headless_run(play: Play, args: &RunArgs) -> Outcome {
    let opts = HeadlessOptions {
        session: session_options(args),
        asks_operator: args.approve.is_none() && !args.host,
        format: match args.format {
            FormatArg::Json => Format::Json,
            FormatArg::Human => Format::Human,
        },
        host: args.host,
    };
    // stdin is read on its own thread: a blocking read must never keep the
    // runtime from shutting down when the run ends. A host reads none (its
    // operators are on the socket); its channel stays open to the end.
    let (tx, rx) = mpsc::unbounded_channel();
    let _host_input = if args.host {
        Some(tx)
    } else {
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            while let Some(line) = headless::read_control_line(&mut stdin) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        None
    };
    let done = block_on(true, async {
        headless::run(
            play,
            &opts,
            rx,
            stop_requests(),
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
        )
        .await
    })?
    .map_err(run_error)?;
    Ok(done.exit_code)
}

/// `playdeck resume RUN`: the play is `--play`, else where the run's play
/// was when it started, else the copy in the run directory.
pub fn resume(
    which: &str,
    play: Option<PathBuf>,
    new_run: bool,
    (retry, resolve): (Vec<String>, Vec<String>),
    a: ResumeArgs,
) -> Outcome {
    let dir = playdeck::control::resolve_run(which)
        .map_err(|e| CmdError::Input(format!("resume: {}", e.message)))?;
    let play = play.unwrap_or_else(|| playdeck::store::resume::play_path(&dir));
    run(RunArgs {
        play: Some(play),
        headless: a.headless,
        speed: a.speed,
        paused: a.paused,
        approve: a.approve,
        budget: a.budget,
        breakpoints: a.breakpoints,
        nats: a.nats,
        run_dir: None,
        format: a.format,
        theme: a.theme,
        resume: (!new_run).then_some(dir),
        retry,
        resolve,
        host: a.host,
    })
}

/// `resume --retry-failed [--filter TEXT]`: the run's failed operations
/// (those whose name or role contains TEXT), said on stderr before they
/// start again.
pub fn failed_to_retry(which: &str, filter: Option<&str>) -> Result<Vec<String>, CmdError> {
    let dir = playdeck::control::resolve_run(which)
        .map_err(|e| CmdError::Input(format!("resume: {}", e.message)))?;
    let names = playdeck::store::resume::failed_ops(&dir, filter.unwrap_or(""))
        .map_err(|e| CmdError::Input(format!("resume --retry-failed: {e}")))?;
    if names.is_empty() {
        let matching = filter
            .map(|f| format!(" matching {f:?}"))
            .unwrap_or_default();
        return Err(CmdError::Input(format!(
            "resume --retry-failed: run {} has no failed operation{matching}; nothing was started",
            dir.file_name()
                .map_or(which.into(), |n| n.to_string_lossy())
        )));
    }
    eprintln!("retrying {} failed: {}", names.len(), names.join(", "));
    Ok(names)
}

/// Headless, the log goes to stderr, and only when `PLAYDECK_LOG` asks
/// for it (`PLAYDECK_LOG=debug` also times the phases of a run): stderr
/// is the script's, and carries the answers and warnings already.
fn log_to_stderr() {
    use tracing_subscriber::EnvFilter;
    if let Ok(filter) = EnvFilter::try_from_env("PLAYDECK_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    }
}
