//! Command-line interface (clap derive).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "playdeck",
    version,
    about = "A terminal operator console for runs of AI coding agents"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a play (the built-in demo when PLAY is omitted).
    Run(RunArgs),
    /// Validate a play file: exit 0 with a summary, or 2 with every problem.
    Validate {
        /// The play file.
        play: PathBuf,
        /// Also say how each operation was placed in the graph.
        #[arg(long)]
        explain: bool,
    },
    /// The closed catalog of roles and modes, with their pack defaults.
    Catalog {
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A play's palette: the planning context and the provisioned plan.
    Palette {
        /// The play file; the built-in demo when omitted.
        play: Option<PathBuf>,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The full instruction an operation would receive (with its clause).
    Prompt {
        /// The play file; the built-in demo when omitted.
        play: Option<PathBuf>,
        /// The operation's id.
        #[arg(long)]
        op: String,
    },
    /// Print the exact command line an operation's agent CLI would get
    /// (as at the start of a run), without running anything.
    Argv {
        /// The play file; the built-in demo when omitted.
        play: Option<PathBuf>,
        /// The operation's id.
        #[arg(long)]
        op: String,
        /// Select this flag profile instead of the play's choice.
        #[arg(long)]
        flag_profile: Option<String>,
        /// A JSON array instead of a shell-quoted line.
        #[arg(long)]
        json: bool,
    },
    /// Continue a stopped or crashed run from its checkpoint and event log.
    Resume {
        /// A run directory, a run id under .playdeck/runs, or `latest`.
        run: String,
        /// The play to continue with (default: where the run's play was, or
        /// the copy in the run directory).
        #[arg(long)]
        play: Option<PathBuf>,
        /// Start the play over as a new run instead.
        #[arg(long)]
        new_run: bool,
        /// Start a new attempt of this failed or denied operation (and what
        /// it caused to be skipped), even in a run that finished. Repeatable.
        #[arg(long, value_name = "OP")]
        retry: Vec<String>,
        /// Land this operation's work, whose merge conflict nobody was there
        /// to resolve when it clashed (it failed `merge_conflict`): resolve
        /// it by hand in its kept worktree first; its agent is not run
        /// again. Repeatable.
        #[arg(long, value_name = "OP")]
        resolve: Vec<String>,
        /// Start a new attempt of every failed operation (as --retry each).
        #[arg(long)]
        retry_failed: bool,
        /// With --retry-failed: only those whose name or role contains TEXT.
        #[arg(long, value_name = "TEXT", requires = "retry_failed")]
        filter: Option<String>,
        #[command(flatten)]
        args: ResumeArgs,
    },
    /// Open the console on a recorded run, read-only, with time travel.
    Replay {
        /// A run directory, a run id under .playdeck/runs, or `latest`.
        run: String,
        /// Playback speed (0.25 to 64).
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Console theme.
        #[arg(long)]
        theme: Option<String>,
        /// Write an asciicast v2 recording of the console over the run's
        /// life here, instead of opening it (no terminal needed).
        #[arg(long, value_name = "FILE")]
        cast: Option<PathBuf>,
        /// With --cast: the recording's size, WIDTHxHEIGHT.
        #[arg(long, value_name = "WxH", default_value = "120x36", requires = "cast")]
        size: String,
    },
    /// What a run did: outcome, timings and the critical path, approvals,
    /// dropped spawns, palette, capacity, warnings.
    Report {
        /// A run directory, a run id under .playdeck/runs, or `latest`.
        run: String,
        #[arg(long, value_enum, default_value_t = ReportFormat::Md)]
        format: ReportFormat,
        /// Write it here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Bring a run's branch (`playdeck/<run-id>`, where a play with
    /// `[workspace] isolation = "worktree"` landed its operations' work)
    /// into one of your branches: a fast-forward, or with --merge a merge
    /// commit. Refused, with the reason, when that cannot be done cleanly.
    Land {
        /// A run directory, a run id under .playdeck/runs, or `latest`.
        run: String,
        /// The branch to bring the run's work into.
        #[arg(long, value_name = "BRANCH")]
        into: String,
        /// Make a merge commit when BRANCH has moved on since the run began.
        #[arg(long)]
        merge: bool,
    },
    /// The console on a live run (started by `playdeck run`, or another
    /// console's): several may watch one run; leaving detaches.
    Attach {
        /// A run directory, a run id under .playdeck/runs, `latest`, or
        /// ssh://[user@]host[:port]/path/to/project#RUN.
        run: String,
        /// Watch only: every action is refused.
        #[arg(long)]
        read_only: bool,
        /// Console theme.
        #[arg(long)]
        theme: Option<String>,
    },
    /// Every run under the directory, newest first.
    #[command(visible_alias = "ls")]
    Runs {
        /// Where runs are (default .playdeck/runs), or
        /// ssh://[user@]host[:port]/path/to/project.
        #[arg(long)]
        dir: Option<String>,
        /// JSON lines, one run each.
        #[arg(long)]
        json: bool,
        /// Print the list again every second, until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// Carries an attached console's stream between this machine's run
    /// socket and stdin/stdout (what `attach ssh://…` runs remotely).
    #[command(hide = true)]
    Bridge {
        /// A run directory, a run id, or `latest`.
        run: String,
    },
    /// The MCP server claude asks for permission under a ToolSet's `ask`
    /// (started by claude, for one attempt).
    #[command(hide = true, name = "ask-mcp")]
    AskMcp {
        /// The attempt's socket for permission questions.
        socket: PathBuf,
    },
    /// Perform the agent invocations of `[cluster]` runs: take jobs of the
    /// plays given from the NATS server and run their agents here.
    Worker(WorkerArgs),
    /// The served page: watch runs and answer what needs you from a phone
    /// or a browser (`web` serves it; `web pair` pairs a device).
    Web(WebArgs),
    /// Drive a live run through its control socket.
    Ctl {
        /// A run directory, a run id, or `latest`.
        run: String,
        #[command(subcommand)]
        action: CtlAction,
        /// JSON answers (and errors).
        #[arg(long, global = true)]
        json: bool,
    },
    /// Capacity of a run: ensure, status, release.
    Capacity {
        #[command(subcommand)]
        action: CapacityAction,
    },
    /// Render the console at a moment of a run to SVG, deterministically.
    #[cfg(feature = "screenshot")]
    Screenshot(ScreenshotArgs),
    /// The built-in demo play.
    Demo {
        /// Print the demo play's TOML.
        #[arg(long)]
        print: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct WebArgs {
    #[command(subcommand)]
    pub action: Option<WebAction>,
    /// Where to listen. Loopback by default; another address is reachable
    /// from the network, so serve it with --tls-cert/--tls-key (or keep
    /// loopback behind `ssh -L` or `tailscale serve`).
    #[arg(long, default_value = "127.0.0.1:7420", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,
    /// Serve HTTPS with this certificate chain (PEM, leaf first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A name the page is reached by besides its address (a `tailscale
    /// serve` name, an `ssh -L` port): requests naming another Host are
    /// refused. Repeatable.
    #[arg(long = "host", value_name = "NAME[:PORT]")]
    pub hosts: Vec<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum WebAction {
    /// Pair a device: prints a one-time address (and its QR code), good
    /// for two minutes.
    Pair {
        /// What the device may do: watch (nothing), decide (gates,
        /// questions, reviews, retries, say), steer (also pause, resume,
        /// step, cancel, budget, add).
        #[arg(long, value_enum, default_value_t = playdeck::web::devices::Scope::Decide)]
        scope: playdeck::web::devices::Scope,
        /// The device's name in every decision it makes (default: what it
        /// says when it pairs).
        #[arg(long)]
        name: Option<String>,
    },
    /// The paired devices.
    Devices {
        #[arg(long)]
        json: bool,
    },
    /// Unpair a device (by id or name); its open pages stop at once.
    Revoke { device: String },
}

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The NATS server (credentials come from the file PLAYDECK_NATS_CREDS
    /// names, never from here).
    #[arg(long, value_name = "URL")]
    pub nats: String,
    /// Attempts performed at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub slots: u16,
    /// A tag this worker has (`gpu`); role profiles may need one.
    /// Repeatable, at most 4.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// The checkout this worker runs agents in: its plays are read from
    /// here and their agents start here.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// A play this worker serves (relative to --dir); only its agents, as
    /// this copy defines them, ever run. Repeatable.
    #[arg(long = "play", value_name = "PLAY", required = true)]
    pub plays: Vec<PathBuf>,
    /// Seconds a job may go without a heartbeat before the server gives it
    /// to another worker (used when the work queue is first made).
    #[arg(long, default_value_t = 30)]
    pub ack_wait: u64,
}

#[cfg(feature = "screenshot")]
#[derive(Debug, clap::Args)]
pub struct ScreenshotArgs {
    /// The play file; the built-in demo when omitted.
    pub play: Option<PathBuf>,
    /// The moment, in seconds of (virtual) run time.
    #[arg(long)]
    pub at: f64,
    /// WIDTHxHEIGHT in cells.
    #[arg(long, default_value = "160x48", value_parser = parse_size)]
    pub size: (u16, u16),
    /// A built-in theme.
    #[arg(long)]
    pub theme: Option<String>,
    /// Keys pressed at that moment, space-separated ("p i", "x").
    #[arg(long, default_value = "")]
    pub keys: String,
    /// Where to write the SVG.
    #[arg(long)]
    pub out: PathBuf,
    /// The runs the runs screen (`L`) lists, instead of .playdeck/runs.
    #[arg(long)]
    pub runs_dir: Option<PathBuf>,
}

/// What `ctl` asks: a command for the run, or its events.
#[derive(Debug, Subcommand)]
pub enum CtlAction {
    #[command(flatten)]
    Do(playdeck::kernel::Request),
    /// The run's events, as NDJSON lines of its event log: from --from,
    /// and with --follow each new one until the run ends.
    Events {
        /// Wait for new events until the run ends.
        #[arg(long)]
        follow: bool,
        /// The first sequence number wanted (default: the first).
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// An operation's conversation, as the follow view shows it: what its
    /// agent wrote, each tool call and its result, attempt after attempt,
    /// until the operation ends.
    Follow {
        /// The operation's name.
        op: String,
        /// The lines as the agent's CLI printed them.
        #[arg(long)]
        raw: bool,
    },
}

#[derive(Debug, clap::Args, Default)]
pub struct RunArgs {
    /// The play file; the built-in demo when omitted.
    pub play: Option<PathBuf>,
    /// No terminal UI: signals as JSON lines on stdout, control lines on stdin.
    #[arg(long)]
    pub headless: bool,
    /// Sim time factor (2 plays twice as fast); overrides [play] speed.
    #[arg(long, value_parser = parse_speed)]
    pub speed: Option<f64>,
    /// Start paused, before the first operation.
    #[arg(long)]
    pub paused: bool,
    /// Pause the run by itself: before OP starts, before any operation of
    /// role:ROLE, or at a spawn, an escalation or a failure; repeatable.
    #[arg(long = "break", value_name = "OP|role:ROLE|spawn|escalation|failure")]
    pub breakpoints: Vec<playdeck::kernel::breakpoint::Breakpoint>,
    /// Decide every approval gate up front.
    #[arg(long, value_enum)]
    pub approve: Option<ApproveArg>,
    /// The run directory (default .playdeck/runs/<run-id>).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Headless output: json (NDJSON) or human.
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    pub format: FormatArg,
    /// Console theme (default, light, high-contrast, mono, or a user theme).
    #[arg(long)]
    pub theme: Option<String>,
    /// Host the run for consoles (what the console starts): no terminal,
    /// stdin and stdout unused, messages in <run-dir>/host.log.
    #[arg(long, hide = true)]
    pub host: bool,
    /// Spend caps over the play's [budget]: usd=N, tokens=N, ROLE.usd=N;
    /// comma-separated or repeated.
    #[arg(long, value_delimiter = ',', value_name = "[ROLE.]usd|tokens=N")]
    pub budget: Vec<playdeck::kernel::spend::CapChange>,
    /// Perform the agents on `playdeck worker`s through this NATS server
    /// (as [cluster] nats does; credentials come from PLAYDECK_NATS_CREDS).
    #[arg(long, value_name = "nats://HOST:4222")]
    pub nats: Option<String>,
    /// Set by `resume`: the stopped run to take up.
    #[arg(skip)]
    pub resume: Option<PathBuf>,
    /// Set by `resume --retry`.
    #[arg(skip)]
    pub retry: Vec<String>,
    /// Set by `resume --resolve`.
    #[arg(skip)]
    pub resolve: Vec<String>,
}

/// What `resume` shares with `run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ResumeArgs {
    /// No terminal UI: signals as JSON lines on stdout, control lines on stdin.
    #[arg(long)]
    pub headless: bool,
    /// Sim time factor; overrides [play] speed.
    #[arg(long, value_parser = parse_speed)]
    pub speed: Option<f64>,
    /// Resume paused.
    #[arg(long)]
    pub paused: bool,
    /// Pause the run by itself: before OP starts, before any operation of
    /// role:ROLE, or at a spawn, an escalation or a failure; repeatable.
    #[arg(long = "break", value_name = "OP|role:ROLE|spawn|escalation|failure")]
    pub breakpoints: Vec<playdeck::kernel::breakpoint::Breakpoint>,
    /// Spend caps over the ones the run had (raises included): usd=N,
    /// tokens=N, ROLE.usd=N.
    #[arg(long, value_delimiter = ',', value_name = "[ROLE.]usd|tokens=N")]
    pub budget: Vec<playdeck::kernel::spend::CapChange>,
    /// The NATS server its workers take jobs from (default: the one the
    /// run used, or the play's [cluster]).
    #[arg(long, value_name = "nats://HOST:4222")]
    pub nats: Option<String>,
    /// Decide every approval gate up front.
    #[arg(long, value_enum)]
    pub approve: Option<ApproveArg>,
    /// Headless output: json (NDJSON) or human.
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    pub format: FormatArg,
    /// Console theme.
    #[arg(long)]
    pub theme: Option<String>,
    /// Host the run for consoles (see `run --host`).
    #[arg(long, hide = true)]
    pub host: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum ReportFormat {
    #[default]
    Md,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ApproveArg {
    All,
    None,
}

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum FormatArg {
    #[default]
    Json,
    Human,
}

/// A `--speed` that is not a number in [`playdeck::vocab::SPEED_RANGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a speed; allowed: a number from 0.01 to 1000")]
pub struct NotASpeed(String);

fn parse_speed(s: &str) -> Result<f64, NotASpeed> {
    match s.parse::<f64>() {
        Ok(x) if (playdeck::vocab::SPEED_RANGE.0..=playdeck::vocab::SPEED_RANGE.1).contains(&x) => {
            Ok(x)
        }
        _ => Err(NotASpeed(s.to_string())),
    }
}

#[derive(Debug, Subcommand)]
pub enum CapacityAction {
    /// Ensure profiles have this many instances of a lifetime (live runs;
    /// a finished run is refused with `not_live`).
    Ensure {
        /// A run directory, a run id, or `latest` (`--loop-id` is the
        /// capacity contract's name for it).
        #[arg(long, visible_alias = "loop-id")]
        run: String,
        /// PROFILE[=COUNT] (COUNT defaults to 1); repeatable.
        #[arg(long = "profile", required = true, value_name = "PROFILE[=COUNT]")]
        profiles: Vec<playdeck::kernel::command::ProfileCount>,
        /// Lifetime of the instances counted and created (default: each
        /// profile's).
        #[arg(long)]
        lifetime: Option<playdeck::capacity::Lifetime>,
        #[arg(long)]
        json: bool,
    },
    /// Instances, waiting work and what blocks release.
    Status {
        #[arg(long, visible_alias = "loop-id")]
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// Release idle instances: of the lifetimes asked for and those named,
    /// or the lifetimes due now (a finished run's file is updated
    /// directly). Exit 1 when something selected was retained.
    Release {
        #[arg(long, visible_alias = "loop-id")]
        run: String,
        #[command(flatten)]
        select: playdeck::kernel::command::ReleaseSelect,
        #[arg(long)]
        json: bool,
    },
}

#[cfg(feature = "screenshot")]
fn parse_size(s: &str) -> Result<(u16, u16), playdeck::console::screenshot::NotASize> {
    playdeck::console::screenshot::parse_size(s)
}
