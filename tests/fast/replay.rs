//! Replay with time travel: the view model after replaying a run's log
//! equals the live one at the end of the run, and seeking anywhere, back
//! and forth, gives what folding from the start to that point gives.

use std::path::Path;

use playdeck::console::app::{App, Hooks, ReplayCmd};
use playdeck::console::keymap::Keymap;
use playdeck::console::replay::{Player, Target, Timeline, parse_target};
use playdeck::console::screenshot::Scene;
use playdeck::console::theme;
use playdeck::kernel::Signal;
use playdeck::operator::model::ViewModel;
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
    facts: &playdeck::operator::model::PlayFacts,
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
        // As a frame sees it (drawing drops lane tombstones first).
        let mut vm = app.vm.clone();
        vm.settle();
        assert_eq!(vm, fold_to(&signals, &facts, pos), "player at {pos}");
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
            parse_target(bad)
                .unwrap_err()
                .to_string()
                .contains("write a time"),
            "{bad}"
        );
    }
}

#[test]
fn control_keys_explain_they_are_disabled_in_a_replay() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let facts = playdeck::operator::model::PlayFacts::default();
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

/// A recorded run of the crash play (played to its end), its facts and log.
async fn recorded() -> (playdeck::operator::model::PlayFacts, Vec<Signal>) {
    let dir = tempfile::tempdir().unwrap();
    let play = play(dir.path());
    let facts = playdeck::console::run::facts(&play);
    let scene = Scene::at(&play, 30.0, 120, 36, None).await.unwrap();
    let log = scene.log();
    scene.finish().await;
    (facts, log)
}

fn replay_app(facts: &playdeck::operator::model::PlayFacts, keymap: Keymap) -> App {
    let themes = theme::load_all(None).unwrap();
    App::new(facts, themes, 0, keymap, false, Hooks::default())
}

fn screen(app: &mut App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    playdeck::console::ui::arrange(app, ratatui::layout::Rect::new(0, 0, w, h));
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    term.draw(|f| playdeck::console::ui::draw(f, app)).unwrap();
    term.backend().buffer().clone()
}

fn rows(buf: &ratatui::buffer::Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn each_step_shows_its_event_and_marks_what_it_changed() {
    use playdeck::kernel::SignalKind;
    let (facts, log) = recorded().await;
    let mut app = replay_app(&facts, Keymap::defaults());
    let mut player = Player::new(Timeline::new(log.clone(), facts.clone()));
    // The first operation to start.
    let (i, name) = log
        .iter()
        .enumerate()
        .find_map(|(i, s)| match &s.kind {
            SignalKind::Started { node, .. } => Some((i, node.name.to_string())),
            _ => None,
        })
        .unwrap();
    player.apply(&mut app, ReplayCmd::JumpTo(format!("#{}", i)));
    player.apply(&mut app, ReplayCmd::Events(1));
    let bar = app.replay.clone().unwrap();
    let event = bar.event.unwrap();
    assert!(
        event.starts_with(&format!("#{} ", i + 1)) && event.contains(&format!("▶ started {name}")),
        "{event}"
    );
    let ix = app
        .vm
        .by_name(&name)
        .map(|n| app.vm.ix(&n.op.op_id).unwrap());
    assert_eq!(app.changed, ix, "the operation the step changed");
    let buf = screen(&mut app, 120, 36);
    let text = rows(&buf);
    assert!(
        text.iter().any(|r| r.contains(&event)),
        "the status line shows the event: {text:#?}"
    );
    // Its row in the running lane is marked.
    let (y, row) = text
        .iter()
        .enumerate()
        .find(|(y, r)| *y > 2 && r.contains(&name[..name.len().min(6)]))
        .unwrap();
    let x = row
        .char_indices()
        .position(|(b, _)| row[b..].starts_with(&name[..name.len().min(6)]))
        .unwrap();
    assert!(
        buf[(x as u16, y as u16)]
            .modifier
            .contains(ratatui::style::Modifier::UNDERLINED),
        "{row}"
    );
    // The footer's hints come from the key table: rebinding a key changes
    // the hint.
    let footer = &text[text.len() - 3];
    assert!(footer.contains("space play/pause"), "{footer}");
    let mut o = std::collections::HashMap::new();
    o.insert("replay_play".to_string(), vec!["p".to_string()]);
    let mut app = replay_app(&facts, Keymap::with(&o).unwrap());
    player.sync(&mut app);
    let text = rows(&screen(&mut app, 120, 36));
    let footer = &text[text.len() - 3];
    assert!(
        footer.contains("p play/pause") && !footer.contains("space"),
        "{footer}"
    );
}

#[tokio::test(start_paused = true)]
async fn jumps_out_of_range_say_so_and_stale_messages_clear() {
    let (facts, log) = recorded().await;
    let n = log.len();
    let mut app = replay_app(&facts, Keymap::defaults());
    let mut player = Player::new(Timeline::new(log, facts));
    player.apply(&mut app, ReplayCmd::JumpTo("#99999".into()));
    let st = app.status.clone().unwrap();
    assert!(
        st.text.contains("there is no event #99 999") && st.text.contains("showing the last"),
        "{}",
        st.text
    );
    assert_eq!(player.pos, n);
    player.apply(&mut app, ReplayCmd::JumpTo("9:00".into()));
    let st = app.status.clone().unwrap();
    assert!(st.text.contains("9m00s is past the end"), "{}", st.text);
    // The next move answers for itself: the old message is gone.
    player.apply(&mut app, ReplayCmd::Events(-1));
    assert!(app.status.is_none(), "{:?}", app.status);
    player.apply(&mut app, ReplayCmd::JumpTo("soon".into()));
    assert!(app.status.as_ref().unwrap().text.contains("write a time"));
    player.apply(&mut app, ReplayCmd::Start);
    assert!(app.status.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_stopped_log_is_a_snapshot_and_a_growing_one_is_followed() {
    use playdeck::console::app::Follow;
    use playdeck::console::replay::LogTail;
    use std::io::Write;
    let (facts, log) = recorded().await;
    assert!(Player::new(Timeline::new(log.clone(), facts.clone())).follow == Follow::Complete);
    // The first half, as a run that stopped (or is still being written)
    // leaves it.
    let half = log.len() / 2;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    // As the run writes it: compact lines, which read with those before.
    let mut enc = playdeck::kernel::log_line::LineEncoder::new();
    let mut line = |s: &Signal| {
        let mut out = Vec::new();
        enc.write(s, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let mut f = std::fs::File::create(&path).unwrap();
    for s in &log[..half] {
        f.write_all(line(s).as_bytes()).unwrap();
    }
    f.flush().unwrap();
    let mut app = replay_app(&facts, Keymap::defaults());
    let tl = Timeline::new(log[..half].to_vec(), facts.clone());
    let mut player = Player::new(tl);
    assert_eq!(player.follow, Follow::Snapshot, "no end: a snapshot");
    player.apply(&mut app, ReplayCmd::End);
    let text = rows(&screen(&mut app, 120, 36)).join("\n");
    assert!(text.contains("snapshot: the run stopped here"), "{text}");
    // The log grows: a partial line is held back until it is whole.
    let written = playdeck::store::read_events(&path).unwrap();
    assert_eq!(written, log[..half], "the compact lines read back whole");
    let mut tail = LogTail::new(&path, std::fs::metadata(&path).unwrap().len(), &written);
    player.follow = Follow::Following;
    let rest: String = log[half..].iter().map(&mut line).collect();
    let (a, b) = rest.split_at(rest.len() / 2 + 7);
    f.write_all(a.as_bytes()).unwrap();
    f.flush().unwrap();
    let first = tail.poll();
    assert!(!first.is_empty() && first.len() < log.len() - half);
    player.grow(&mut app, first);
    f.write_all(b.as_bytes()).unwrap();
    f.flush().unwrap();
    let second = tail.poll();
    player.grow(&mut app, second);
    assert_eq!(player.pos, log.len(), "a replay at its end follows the run");
    assert_eq!(app.vm, fold_to(&log, &facts, log.len()));
    assert_eq!(player.follow, Follow::Complete, "the run's end was read");
    assert!(tail.poll().is_empty());
}

/// Issue 20: in a replay of a live run, an operation key names the `ctl`
/// command that does it (a live run refuses `playdeck resume`).
#[test]
fn in_a_replay_of_a_live_run_a_control_key_names_the_ctl_command() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let facts = playdeck::operator::model::PlayFacts::default();
    let mut app = replay_app(&facts, Keymap::defaults());
    app.hooks.resume_name = Some("r7".into());
    let mut player = Player::new(Timeline::new(Vec::new(), facts));
    player.follow = playdeck::console::app::Follow::Following;
    player.sync(&mut app);
    let status = |app: &App| app.status.as_ref().unwrap().text.clone();
    app.on_key(KeyEvent::new(KeyCode::Char('a'), KeyModifiers::NONE));
    assert_eq!(
        status(&app),
        "approve is disabled in a replay; this run is live: `playdeck ctl r7 approve` does it from here"
    );
    app.on_key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::NONE));
    assert!(
        status(&app).contains("`playdeck ctl r7 pause`"),
        "{}",
        status(&app)
    );
    assert!(!status(&app).contains("playdeck resume"));
}
