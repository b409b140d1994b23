//! The console attached to a run another process hosts (`playdeck run`
//! starts one, `playdeck attach` joins one): the same App and event loop
//! as an embedded run, fed by the run's stream on its control socket.
//! Leaving detaches; the run goes on.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::app::{App, Hooks};
use super::config::ConsoleConfig;
use super::run::{Ended, Exit, Source, StopSignal, Tty, event_loop, exit_line, facts};
use super::terminal;
use crate::control::link::{Arrived, Link};
use crate::session::RunError;

pub struct AttachOptions {
    pub theme: Option<String>,
    pub read_only: bool,
    /// How the operator names the run (`latest`, an id, an ssh address):
    /// the exit line's commands use it.
    pub name: String,
    /// The run directory when it is on this machine (the report goes there).
    pub local_dir: Option<PathBuf>,
}

/// Opens the console on the run at the other end of `link`.
pub async fn run(
    mut link: Link,
    opts: AttachOptions,
    mut stop: mpsc::UnboundedReceiver<StopSignal>,
) -> Result<Exit, RunError> {
    let cfg = ConsoleConfig::load(opts.theme.as_deref())
        .map_err(|e| RunError::Open(io::Error::other(e)))?;
    let w = &link.welcome;
    let dir = std::path::Path::new(&w.run_dir);
    // Its sections only: the run validated its operations, and what the
    // console needs of them comes with the signals and the welcome.
    let play = crate::play::parse::parse_sections("play.toml", &w.play, dir).map_err(|d| {
        RunError::Open(io::Error::other(format!(
            "the run's copy of its play ({}) cannot be read: {}",
            dir.join("play.toml").display(),
            d.to_string().lines().next().unwrap_or_default()
        )))
    })?;
    let hooks = Hooks {
        decorate: Some(crate::session::wiring::palette_router(&play, None, 1.0)),
        release_preview: None,
        tails: None,
        run_dir: opts.local_dir.clone(),
        resume_name: Some(opts.name.clone()),
        attached: true,
        read_only: opts.read_only || w.read_only,
        runs_dir: None,
    };
    let mut facts = facts(&play);
    facts.placed = w
        .placed
        .iter()
        .map(|(id, how)| (Arc::from(id.as_str()), *how))
        .collect();
    let mut app = App::new(&facts, cfg.themes, cfg.theme, cfg.keymap, cfg.bell, hooks);
    // The run records this console's commands as the welcome says: they
    // are its own, not another terminal's.
    app.me = Arc::from(w.by.as_str());
    app.catch_up_to = w.seq;
    app.catch_up_since = Some(tokio::time::Instant::now());
    let mut term = terminal::init()?;
    // The terminal is given back if its input cannot be read.
    let input = terminal::Input::new().inspect_err(|_| terminal::restore())?;
    let mut events = input.clone();
    let looped = {
        let mut source = Source::Attached { link: &mut link };
        event_loop(
            &mut app,
            &mut source,
            &mut events,
            Tty {
                term: &mut term,
                input,
            },
            &mut stop,
        )
        .await
    };
    terminal::restore();
    let ended = looped?;
    // What is already here (the run's last lines after a cancel).
    while let Ok(Arrived::Signal(s)) = link.events.try_recv() {
        app.fold(&s);
    }
    app.after_fold();
    if let Some(next) = app.switch_to.take() {
        return Ok(Exit {
            code: 0,
            line: String::new(),
            switch_to: Some(next),
        });
    }
    let line = match app.vm.run.finished {
        Some(outcome) => {
            return Ok(Exit {
                code: crate::headless::exit_code(outcome),
                line: exit_line(&app, outcome, ended),
                switch_to: None,
            });
        }
        None => detached_line(&app, &opts, ended),
    };
    Ok(Exit {
        code: 0,
        line,
        switch_to: None,
    })
}

/// The line a detached console leaves: the run goes on, and how to come
/// back to it.
fn detached_line(app: &App, opts: &AttachOptions, ended: Ended) -> String {
    let how = match ended {
        Ended::Stopped(sig) => format!(" ({} to the console)", sig.name()),
        Ended::InputClosed => " (the terminal closed)".into(),
        Ended::Quit => String::new(),
    };
    let read_only = if app.hooks.read_only {
        " --read-only"
    } else {
        ""
    };
    let name = &opts.name;
    let place = opts
        .local_dir
        .as_deref()
        .map(crate::console::run::place)
        .unwrap_or_default();
    format!(
        "playdeck: detached{how}; run {} goes on — attach: playdeck attach {name}{read_only} · list: playdeck runs{place}",
        app.vm.run.run_id
    )
}
