mod cli;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tokio::sync::mpsc;

use cli::{ApproveArg, CapacityAction, Cli, Command, CtlAction, FormatArg, RunArgs};
use playdeck::control::Request;
use playdeck::headless::{self, ApproveAll, Format, HeadlessOptions};
use playdeck::play::{LoadError, Play, demo};
use playdeck::remote;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        None => run(RunArgs::default()),
        Some(Command::Run(args)) => run(args),
        Some(Command::Validate { play }) => match Play::load(&play) {
            Ok(p) => {
                print_warnings(&p);
                println!("{}", p.summary());
                0
            }
            Err(e) => report_load_error(&e),
        },
        Some(Command::Catalog { json }) => {
            if json {
                println!("{:#}", playdeck::inspect::catalog_json());
            } else {
                print!("{}", playdeck::inspect::catalog_text());
            }
            0
        }
        Some(Command::Palette { play, json }) => with_play(play.as_deref(), |p| {
            let out = block_on(async {
                if json {
                    playdeck::inspect::palette_json(p)
                        .await
                        .map(|v| format!("{v:#}\n"))
                } else {
                    playdeck::inspect::palette_text(p).await
                }
            });
            finish_text(out)
        }),
        Some(Command::Prompt { play, op }) => with_play(play.as_deref(), |p| {
            let out = block_on(playdeck::inspect::prompt(p, &op)).map(|s| format!("{s}\n"));
            finish_text(out)
        }),
        Some(Command::Argv {
            play,
            op,
            flag_profile,
            json,
        }) => with_play(play.as_deref(), |p| {
            match block_on(playdeck::inspect::argv(p, &op, flag_profile.as_deref())) {
                Ok(view) => {
                    for w in &view.command.warnings {
                        eprintln!("playdeck: warning: {w}");
                    }
                    if let Some(text) = &view.command.stdin {
                        eprintln!(
                            "playdeck: the prompt ({} bytes) goes on stdin, in place of \"-\"",
                            text.len()
                        );
                    }
                    if json {
                        println!("{}", serde_json::Value::from(view.command.argv.clone()));
                    } else {
                        let line: Vec<String> = view
                            .command
                            .argv
                            .iter()
                            .map(|a| playdeck::inspect::shell_quote(a))
                            .collect();
                        println!("{}", line.join(" "));
                    }
                    0
                }
                Err(e) => {
                    eprintln!("playdeck: {e}");
                    2
                }
            }
        }),
        Some(Command::Resume {
            run: which,
            play,
            new_run,
            retry,
            args,
        }) => resume(&which, play, new_run, retry, args),
        Some(Command::Report { run, format, out }) => report(&run, format, out.as_deref()),
        Some(Command::Replay { run, speed, theme }) => replay(&run, speed, theme),
        Some(Command::Ctl { run, action, json }) => {
            let req = match action {
                CtlAction::Pause => Request::Pause,
                CtlAction::Resume => Request::Resume,
                CtlAction::Step => Request::Step,
                CtlAction::Cancel => Request::Cancel,
                CtlAction::Status => Request::Status,
                CtlAction::Approve { op } => Request::Approve { op },
                CtlAction::Deny { op, reason } => Request::Deny {
                    op,
                    reason: (!reason.is_empty()).then(|| reason.join(" ")),
                },
                CtlAction::Hold { op } => Request::Hold { op },
                CtlAction::Unhold { op } => Request::Unhold { op },
                CtlAction::Retry { op } => Request::Retry { op },
                CtlAction::Release { idle_only: _ } => Request::Release,
            };
            emit(remote::ctl(&run, req, json))
        }
        Some(Command::Capacity { action }) => emit(match action {
            CapacityAction::Ensure {
                run,
                profiles,
                lifetime,
                json,
            } => remote::capacity_ensure(&run, &profiles, lifetime, json),
            CapacityAction::Status { run, json } => remote::capacity_status(&run, json),
            CapacityAction::Release { run, json, .. } => remote::capacity_release(&run, json),
        }),
        Some(Command::Screenshot {
            play,
            at,
            size,
            theme,
            keys,
            out,
        }) => with_play(play.as_deref(), |p| {
            let keys = match playdeck::console::screenshot::parse_keys(&keys) {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("playdeck: --keys: {e}");
                    return 2;
                }
            };
            if !(at.is_finite() && at >= 0.0) {
                eprintln!("playdeck: --at {at} is not a moment; allowed: seconds from 0");
                return 2;
            }
            let opts = playdeck::console::screenshot::ShotOptions {
                at,
                width: size.0,
                height: size.1,
                theme,
                keys,
                out: out.clone(),
            };
            match playdeck::console::screenshot::screenshot(p, &opts) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("playdeck: screenshot: {e}");
                    2
                }
            }
        }),
        Some(Command::Demo { print }) => {
            if print {
                print!("{}", demo::DEMO_PLAY);
            } else {
                println!("the demo play: `playdeck demo --print` shows it, `playdeck run` runs it");
            }
            0
        }
    };
    ExitCode::from(code as u8)
}

fn load(path: Option<&std::path::Path>) -> Result<Play, i32> {
    let play = match path {
        Some(p) => Play::load(p).map_err(|e| report_load_error(&e))?,
        None => Play::demo(),
    };
    print_warnings(&play);
    Ok(play)
}

fn with_play(path: Option<&std::path::Path>, f: impl FnOnce(&Play) -> i32) -> i32 {
    match load(path) {
        Ok(p) => f(&p),
        Err(code) => code,
    }
}

fn emit(out: remote::Output) -> i32 {
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    out.code
}

/// Runs a short future on a small runtime (inspection commands).
fn block_on<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
        .block_on(fut)
}

fn finish_text(out: Result<String, String>) -> i32 {
    match out {
        Ok(s) => {
            print!("{s}");
            0
        }
        Err(e) => {
            eprintln!("playdeck: {e}");
            2
        }
    }
}

/// Load-time warnings (the legacy palette fallback), printed once.
fn print_warnings(play: &Play) {
    for w in &play.warnings {
        eprintln!("playdeck: warning: {}: {w}", play.file);
    }
}

fn report_load_error(e: &LoadError) -> i32 {
    match e {
        LoadError::Invalid(d) => eprint!("{}", d.render(std::io::stderr().is_terminal())),
        LoadError::Io { .. } => eprintln!("playdeck: {e}"),
    }
    2
}

fn run(args: RunArgs) -> i32 {
    let play = match load(args.play.as_deref()) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if !args.headless {
        return console(&play, &args);
    }
    let opts = HeadlessOptions {
        speed: args.speed,
        paused: args.paused,
        approve: args.approve.map(|a| match a {
            ApproveArg::All => ApproveAll::All,
            ApproveArg::None => ApproveAll::None,
        }),
        run_dir: args.run_dir.clone(),
        format: match args.format {
            FormatArg::Json => Format::Json,
            FormatArg::Human => Format::Human,
        },
        resume: args.resume.clone(),
        retry: args.retry.clone(),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("playdeck: cannot start the runtime: {e}");
            return 1;
        }
    };
    // stdin is read on its own thread: a blocking read must never keep the
    // runtime from shutting down when the run ends.
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let result = rt.block_on(async {
        headless::run(
            &play,
            &opts,
            rx,
            stop_requests(),
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
        )
        .await
    });
    rt.shutdown_background();
    match result {
        Ok(done) => done.exit_code,
        Err(e) => {
            eprintln!("playdeck: {e}");
            2
        }
    }
}

/// `playdeck resume RUN`: the play is `--play`, else where the run's play
/// was when it started, else the copy in the run directory.
fn resume(
    which: &str,
    play: Option<std::path::PathBuf>,
    new_run: bool,
    retry: Vec<String>,
    a: cli::ResumeArgs,
) -> i32 {
    let dir = match playdeck::control::resolve_run(which) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("playdeck: resume: {}", e.message);
            return 2;
        }
    };
    let play = play.unwrap_or_else(|| {
        let cp = std::fs::read(dir.join(playdeck::store::checkpoint::CHECKPOINT_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        cp.and_then(|v| v["play_path"].as_str().map(std::path::PathBuf::from))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| dir.join("play.toml"))
    });
    let args = RunArgs {
        play: Some(play),
        headless: a.headless,
        speed: a.speed,
        paused: a.paused,
        approve: a.approve,
        run_dir: None,
        format: a.format,
        theme: a.theme,
        resume: (!new_run).then_some(dir),
        retry,
    };
    run(args)
}

/// `playdeck replay RUN`: the play's copy in the run directory gives the
/// facts signals do not repeat (expansion-only roles, capacity profiles).
fn replay(which: &str, speed: f64, theme: Option<String>) -> i32 {
    if !(0.25..=64.0).contains(&speed) {
        eprintln!("playdeck: --speed {speed} is out of range; allowed: 0.25 to 64");
        return 2;
    }
    let (dir, signals) = match recorded("replay", which) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if signals.is_empty() {
        eprintln!(
            "playdeck: replay: {} has no events to replay",
            dir.display()
        );
        return 2;
    }
    let copy = dir.join("play.toml");
    let facts = std::fs::read_to_string(&copy)
        .ok()
        .and_then(|text| Play::from_str_in(&copy.display().to_string(), &text, &dir).ok())
        .map(|p| playdeck::console::run::facts(&p))
        .unwrap_or_default();
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        eprintln!(
            "playdeck: replay needs a terminal; `playdeck report RUN` summarises a run without one"
        );
        return 2;
    }
    let config = match playdeck::console::config::ConsoleConfig::load(theme.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("playdeck: {e}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("playdeck: cannot start the runtime: {e}");
            return 1;
        }
    };
    let r = rt.block_on(async {
        playdeck::console::replay::run(&dir, signals, facts, config, speed, stop_requests()).await
    });
    rt.shutdown_background();
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("playdeck: {e}");
            2
        }
    }
}

/// A recorded run's directory and signals; errors are reported for `cmd`.
fn recorded(
    cmd: &str,
    which: &str,
) -> Result<(std::path::PathBuf, Vec<playdeck::kernel::Signal>), i32> {
    let dir = playdeck::control::resolve_run(which).map_err(|e| {
        eprintln!("playdeck: {cmd}: {}", e.message);
        2
    })?;
    let signals = playdeck::store::resume::read_log(&dir.join("events.jsonl")).map_err(|e| {
        eprintln!("playdeck: {cmd}: {e}");
        2
    })?;
    Ok((dir, signals))
}

/// `playdeck report RUN`.
fn report(which: &str, format: cli::ReportFormat, out: Option<&std::path::Path>) -> i32 {
    let (_, signals) = match recorded("report", which) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let r = playdeck::store::report::Report::from_signals(&signals);
    let text = match format {
        cli::ReportFormat::Md => r.to_markdown(),
        cli::ReportFormat::Json => format!("{:#}\n", r.to_json()),
    };
    match out {
        Some(p) => match playdeck::store::write_atomic(p, text.as_bytes()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("playdeck: report: cannot write {}: {e}", p.display());
                2
            }
        },
        None => {
            print!("{text}");
            0
        }
    }
}

/// The console on `play`: logs go to `.playdeck/logs/`, never the screen.
fn console(play: &Play, args: &RunArgs) -> i32 {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        eprintln!("playdeck: the console needs a terminal; use --headless for scripts and pipes");
        return 2;
    }
    let _log = start_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("playdeck: cannot start the runtime: {e}");
            return 1;
        }
    };
    let opts = playdeck::console::run::ConsoleOptions {
        session: playdeck::session::SessionOptions {
            speed: args.speed,
            paused: args.paused,
            approvals: match args.approve {
                Some(ApproveArg::All) => playdeck::kernel::ApprovalPolicy::ApproveAll,
                Some(ApproveArg::None) => playdeck::kernel::ApprovalPolicy::DenyAll {
                    reason: std::sync::Arc::from("--approve none"),
                },
                None => playdeck::kernel::ApprovalPolicy::Ask,
            },
            run_dir: args.run_dir.clone(),
            resume: args.resume.clone(),
            retry: args.retry.clone(),
            ..Default::default()
        },
        theme: args.theme.clone(),
    };
    let result =
        rt.block_on(async { playdeck::console::run::run(play, opts, stop_requests()).await });
    rt.shutdown_background();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("playdeck: {e}");
            2
        }
    }
}

/// Logs to a daily file under `.playdeck/logs/` through a non-blocking
/// writer; the guard must live until the end of the process.
fn start_logging() -> Option<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::EnvFilter;
    let appender = tracing_appender::rolling::daily(".playdeck/logs", "playdeck.log");
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

/// One message per SIGINT, SIGTERM or SIGHUP. Must be called inside the
/// runtime.
fn stop_requests() -> mpsc::UnboundedReceiver<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = mpsc::unbounded_channel();
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ] {
        let tx = tx.clone();
        match signal(kind) {
            Ok(mut s) => {
                tokio::spawn(async move {
                    while s.recv().await.is_some() {
                        if tx.send(()).is_err() {
                            break;
                        }
                    }
                });
            }
            Err(e) => eprintln!("playdeck: cannot listen for signal {kind:?}: {e}"),
        }
    }
    rx
}
