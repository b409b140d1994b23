//! Replay with time travel: the view model after replaying a run's log
//! equals the live one at the end of the run, and seeking anywhere, back
//! and forth, gives what folding from the start to that point gives.

use std::path::Path;

use playdeck::console::app::{App, Hooks, ReplayCmd};
use playdeck::console::keymap::Keymap;
use playdeck::console::model::ViewModel;
use playdeck::console::replay::{Player, Target, Timeline, parse_target};
use playdeck::console::screenshot::Scene;
use playdeck::console::theme;
use playdeck::kernel::Signal;
use playdeck::play::Play;

/// The crash tests' play without its approval gate, so it runs to the end
/// on its own.
fn play(dir: &Path) -> Play {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plays/crash.toml"),
    )
    .unwrap()
    .replace("approval = true", "approval = false");
    Play::from_str_in("crash.toml", &text, dir).unwrap()
}

fn fold_to(
    signals: &[Signal],
    facts: &playdeck::console::model::PlayFacts,
    pos: usize,
) -> ViewModel {
    let mut vm = ViewModel::new(facts);
    for s in &signals[..pos] {
        vm.fold(s);
    }
    vm.settle();
    vm
}

#[tokio::test(start_paused = true)]
async fn replay_equals_the_live_view_and_seeking_equals_folding() {
    let dir = tempfile::tempdir().unwrap();
    let play = play(dir.path());
    let facts = playdeck::console::run::facts(&play);
    let scene = Scene::at(&play, 30.0, 120, 36, None).await.unwrap();
    let live = scene.app.vm.clone();
    assert!(live.run.finished.is_some(), "the run ended");
    let signals = playdeck::store::resume::read_log(&scene.session.run_dir.events_path()).unwrap();
    scene.finish().await;
    assert!(signals.len() > 50);

    // Snapshots every 7 events, so seeks cross several.
    let tl = Timeline::with_interval(signals.clone(), facts.clone(), 7);
    assert_eq!(
        tl.state_at(tl.len()),
        live,
        "replayed to the end = live at the end"
    );
    let n = tl.len();
    for pos in [0, 5, n / 2, 3, n, 17, n - 1, 1, 8, 7, 14, n / 2] {
        assert_eq!(
            tl.state_at(pos),
            fold_to(&signals, &facts, pos),
            "at event {pos}"
        );
    }

    // Through the player, as the keys drive it.
    let themes = theme::load_all(None).unwrap();
    let mut app = App::new(
        &facts,
        themes,
        0,
        Keymap::defaults(),
        false,
        Hooks::default(),
    );
    let mut player = Player::new(tl);
    let expect = |app: &App, pos: usize| {
        assert_eq!(app.vm, fold_to(&signals, &facts, pos), "player at {pos}");
        assert_eq!(app.replay.as_ref().unwrap().pos, pos);
    };
    player.apply(&mut app, ReplayCmd::End);
    expect(&app, n);
    player.apply(&mut app, ReplayCmd::Events(-1));
    expect(&app, n - 1);
    player.apply(&mut app, ReplayCmd::Start);
    expect(&app, 0);
    player.apply(&mut app, ReplayCmd::Events(1));
    expect(&app, 1);
    player.apply(&mut app, ReplayCmd::JumpTo("#20".into()));
    expect(&app, 20);
    player.apply(&mut app, ReplayCmd::Seconds(-10.0));
    expect(&app, player.timeline.pos_at_time(0.0));
    player.apply(&mut app, ReplayCmd::Seconds(10.0));
    let at_10 = player.timeline.pos_at_time(10.0);
    expect(&app, at_10);
    player.apply(&mut app, ReplayCmd::JumpTo("0.4s".into()));
    let at = player.timeline.pos_at_time(0.4);
    expect(&app, at);
    // Playing folds forward to the end at ×64.
    player.apply(&mut app, ReplayCmd::Start);
    for _ in 0..6 {
        player.apply(&mut app, ReplayCmd::Faster);
    }
    assert_eq!(player.speed(), 64.0);
    player.apply(&mut app, ReplayCmd::PlayPause);
    for _ in 0..200 {
        player.tick(&mut app, std::time::Duration::from_millis(50));
    }
    expect(&app, n);
    assert!(!player.playing, "stops at the end");
}

#[test]
fn jump_targets() {
    assert_eq!(parse_target("#120"), Ok(Target::Event(120)));
    assert_eq!(parse_target("e7"), Ok(Target::Event(7)));
    assert_eq!(parse_target("12.5"), Ok(Target::Time(12.5)));
    assert_eq!(parse_target(" 3s "), Ok(Target::Time(3.0)));
    assert_eq!(parse_target("1:05"), Ok(Target::Time(65.0)));
    for bad in ["", "soon", "#x", "-3", "1:x"] {
        assert!(
            parse_target(bad).unwrap_err().contains("write a time"),
            "{bad}"
        );
    }
}

#[test]
fn control_keys_explain_they_are_disabled_in_a_replay() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let facts = playdeck::console::model::PlayFacts::default();
    let themes = theme::load_all(None).unwrap();
    let mut app = App::new(
        &facts,
        themes,
        0,
        Keymap::defaults(),
        false,
        Hooks::default(),
    );
    let player = Player::new(Timeline::new(Vec::new(), facts));
    player.sync(&mut app);
    for key in ['p', 'a', 'x', 'R'] {
        let effects = app.on_key(KeyEvent::new(KeyCode::Char(key), KeyModifiers::NONE));
        assert!(effects.is_empty(), "{key}");
        let status = app.status.as_ref().unwrap().text.clone();
        assert!(status.contains("disabled in a replay"), "{key}: {status}");
    }
    // Replay keys shadow navigation ones.
    let effects = app.on_key(KeyEvent::new(KeyCode::Right, KeyModifiers::NONE));
    assert_eq!(
        effects,
        [playdeck::console::app::Effect::Replay(ReplayCmd::Events(1))]
    );
    let effects = app.on_key(KeyEvent::new(KeyCode::Char(' '), KeyModifiers::NONE));
    assert_eq!(
        effects,
        [playdeck::console::app::Effect::Replay(ReplayCmd::PlayPause)]
    );
}
