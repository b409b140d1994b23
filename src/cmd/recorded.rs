//! Commands on a recorded run: `playdeck replay` and `playdeck report`.

use std::path::{Path, PathBuf};

use super::{CmdError, Outcome, block_on, need_terminal, stop_requests};
use crate::cli::ReportFormat;
use playdeck::kernel::Signal;
use playdeck::operator::model::PlayFacts;
use playdeck::play::Play;

/// A recorded run's directory and signals.
fn recorded(cmd: &str, which: &str) -> Result<(PathBuf, Vec<Signal>), CmdError> {
    let dir = playdeck::control::resolve_run(which)
        .map_err(|e| CmdError::Input(format!("{cmd}: {}", e.message)))?;
    let signals = playdeck::store::resume::read_log(&dir.join("events.jsonl"))
        .map_err(|e| CmdError::Input(format!("{cmd}: {e}")))?;
    Ok((dir, signals))
}

/// What a replay plays, checked: the speed, the run's directory and
/// signals (one event at least), and the facts signals do not repeat
/// (expansion-only roles, capacity profiles) from the play's copy in the
/// run directory.
fn to_replay(which: &str, speed: f64) -> Result<(PathBuf, Vec<Signal>, PlayFacts), CmdError> {
    if !(0.25..=64.0).contains(&speed) {
        return Err(CmdError::Input(format!(
            "--speed {speed} is out of range; allowed: 0.25 to 64"
        )));
    }
    let (dir, signals) = recorded("replay", which)?;
    if signals.is_empty() {
        return Err(CmdError::Input(format!(
            "replay: {} has no events to replay",
            dir.display()
        )));
    }
    let copy = dir.join("play.toml");
    let facts = std::fs::read_to_string(&copy)
        .ok()
        .and_then(|text| Play::from_str_in(&copy.display().to_string(), &text, &dir).ok())
        .map(|p| playdeck::console::run::facts(&p))
        .unwrap_or_default();
    Ok((dir, signals, facts))
}

/// `playdeck replay RUN --cast FILE`: the console over the run's life as
/// an asciicast v2 recording.
pub fn cast(which: &str, speed: f64, theme: Option<String>, out: &Path, size: &str) -> Outcome {
    let size = playdeck::console::screenshot::parse_size(size)
        .map_err(|e| CmdError::Input(format!("--size {e}")))?;
    let (dir, signals, facts) = to_replay(which, speed)?;
    let config = playdeck::console::config::ConsoleConfig::load(theme.as_deref())
        .map_err(|e| CmdError::Input(e.to_string()))?;
    let title = format!(
        "playdeck replay {}",
        dir.file_name()
            .map_or_else(|| which.into(), |n| n.to_string_lossy())
    );
    let c = playdeck::console::cast::write(out, &title, signals, facts, config, speed, size)
        .map_err(|e| match e {
            playdeck::console::cast::CastError::TooLong { .. } => CmdError::Input(e.to_string()),
            other => CmdError::Failed(other.to_string()),
        })?;
    println!(
        "wrote {}: {} frames, {:.1} s at {}x{}, speed ×{} (play it: asciinema play {})",
        out.display(),
        c.frames,
        c.seconds,
        size.0,
        size.1,
        c.speed,
        out.display()
    );
    Ok(0)
}

/// `playdeck replay RUN`: the console on a recorded run, read-only.
pub fn replay(which: &str, speed: f64, theme: Option<String>) -> Outcome {
    let (dir, signals, facts) = to_replay(which, speed)?;
    need_terminal(
        "replay",
        "`playdeck report RUN` summarises a run without one",
    )?;
    let config = playdeck::console::config::ConsoleConfig::load(theme.as_deref())
        .map_err(|e| CmdError::Input(e.to_string()))?;
    block_on(true, async {
        playdeck::console::replay_console::run(&dir, signals, facts, config, speed, stop_requests())
            .await
    })?
    .map_err(|e| CmdError::Failed(e.to_string()))?;
    Ok(0)
}

/// `playdeck report RUN`.
pub fn report(which: &str, format: ReportFormat, out: Option<&Path>) -> Outcome {
    let (dir, signals) = recorded("report", which)?;
    let r = playdeck::store::report::Report::from_signals(&signals).with_turns(&dir.join("logs"));
    let text = match format {
        // Agent text is in it (errors, reasons, names): nothing in it may
        // drive a terminal. JSON escapes control characters itself and
        // keeps the raw text.
        ReportFormat::Md => r
            .to_markdown()
            .lines()
            .map(|l| format!("{}\n", playdeck::printable::printable(l)))
            .collect(),
        ReportFormat::Json => format!("{:#}\n", r.to_json()),
    };
    match out {
        Some(p) => playdeck::files::write_atomic(p, text.as_bytes())
            .map_err(|e| CmdError::Input(format!("report: cannot write {}: {e}", p.display())))?,
        None => say!("{text}"),
    }
    Ok(0)
}
