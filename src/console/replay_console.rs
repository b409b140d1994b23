//! The console on a recorded run (`playdeck replay`): the replay's
//! player fed to the one event loop, following the log when the run is
//! still live. Apart from both, so the player knows nothing of the loop
//! and the loop nothing of how a replay starts.

use std::io;
use std::path::Path;

use tokio::sync::mpsc;

use super::app::{App, Follow};
use super::replay::{LogTail, Player, Timeline, is_live};
use crate::kernel::Signal;
use crate::operator::model::PlayFacts;

/// Opens the console on a recorded run; a live one is followed.
pub async fn run(
    run_dir: &Path,
    signals: Vec<Signal>,
    facts: PlayFacts,
    config: super::config::ConsoleConfig,
    speed: f64,
    mut stop: mpsc::UnboundedReceiver<super::run::StopSignal>,
) -> io::Result<()> {
    let events_path = run_dir.join("events.jsonl");
    // Where the log stood when it was read: following goes on from there.
    let offset = std::fs::metadata(&events_path).map_or(0, |m| m.len());
    let live = is_live(run_dir);
    let tail = live.then(|| LogTail::new(&events_path, offset, &signals));
    let timeline = Timeline::new(signals, facts);
    let mut app = app_for(
        &timeline,
        config,
        super::app::Hooks {
            run_dir: Some(run_dir.to_path_buf()),
            ..Default::default()
        },
    );
    let mut player = Player::new(timeline);
    let tail = if player.follow == Follow::Snapshot && live {
        player.follow = Follow::Following;
        tail
    } else {
        None
    };
    player.set_speed(speed);
    player.playing = true;
    player.sync(&mut app);
    let mut term = super::terminal::init()?;
    // The terminal is given back if its input cannot be read.
    let input = super::terminal::Input::new().inspect_err(|_| super::terminal::restore())?;
    let mut events = input.clone();
    let mut source = super::run::Source::Replay {
        player: &mut player,
        tail,
    };
    let r = super::run::event_loop(
        &mut app,
        &mut source,
        &mut events,
        super::run::Tty {
            term: &mut term,
            input,
        },
        &mut stop,
    )
    .await;
    super::terminal::restore();
    r.map(|_| ())
}

/// The console's app for a replay of `timeline`: no bell (a recording
/// rings for nobody).
pub fn app_for(
    timeline: &Timeline,
    config: super::config::ConsoleConfig,
    hooks: super::app::Hooks,
) -> App {
    App::new(
        timeline.facts(),
        config.themes,
        config.theme,
        config.keymap,
        false,
        hooks,
    )
}
