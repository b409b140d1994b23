use super::*;

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn code(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

#[test]
fn defaults_cover_every_action_in_some_mode() {
    let k = Keymap::defaults();
    assert_eq!(k.action(Mode::Live, &key('p')), Some(Action::Pause));
    assert_eq!(
        k.action(
            Mode::Live,
            &KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
        ),
        Some(Action::Quit)
    );
    assert_eq!(k.action(Mode::Live, &key('G')), Some(Action::Bottom));
    assert_eq!(k.label_in(Mode::Live, Action::Up), "↑/k");
    for a in ACTIONS {
        assert!(
            Mode::ALL
                .iter()
                .any(|m| !k.keys_in(*m, a.action).is_empty()),
            "{} is reachable in no mode",
            a.name
        );
    }
}

#[test]
fn a_mode_reads_its_own_scope_first_and_says_so() {
    let k = Keymap::defaults();
    // ← steps an event in a replay; h still moves a lane there.
    assert_eq!(
        k.action(Mode::Replay, &code(KeyCode::Left)),
        Some(Action::EventBack)
    );
    assert_eq!(k.action(Mode::Replay, &key('h')), Some(Action::Left));
    assert_eq!(k.label_in(Mode::Replay, Action::Left), "h");
    assert_eq!(k.label_in(Mode::Live, Action::Left), "←/h");
    // g is the start of the recording, not the top of a list.
    assert_eq!(k.action(Mode::Replay, &key('g')), Some(Action::Start));
    assert!(k.keys_in(Mode::Replay, Action::Top).is_empty());
    assert!(!k.actions_in(Mode::Replay).contains(&Action::Top));
    // Run control is not part of a replay at all.
    assert_eq!(k.action(Mode::Replay, &key('p')), None);
    assert!(!k.actions_in(Mode::Replay).contains(&Action::Pause));
    // In an overlay q closes; ctrl-c still quits.
    assert_eq!(k.action(Mode::Inspector, &key('q')), Some(Action::Close));
    assert_eq!(k.label_in(Mode::Inspector, Action::Quit), "ctrl-c");
    assert_eq!(k.action(Mode::Inspector, &key('R')), Some(Action::Retry));
    // Typing: characters are text, enter submits, ctrl-c quits.
    assert_eq!(k.action(Mode::Text, &key('q')), None);
    assert_eq!(k.action(Mode::Text, &key('?')), None);
    assert_eq!(
        k.action(Mode::Text, &code(KeyCode::Enter)),
        Some(Action::Submit)
    );
    assert_eq!(k.label_in(Mode::Text, Action::Quit), "ctrl-c");
    // Too small: quit and help, nothing else.
    assert_eq!(k.action(Mode::TooSmall, &key('d')), None);
    assert_eq!(k.action(Mode::TooSmall, &key('q')), Some(Action::Quit));
}

#[test]
fn the_agent_keys_work_wherever_an_operation_is_in_view() {
    let k = Keymap::defaults();
    for mode in [Mode::Live, Mode::Replay, Mode::Inspector, Mode::Follow] {
        assert_eq!(
            k.action(mode, &key('F')),
            Some(Action::FollowAgent),
            "{mode:?}"
        );
        assert_eq!(
            k.action(mode, &key('O')),
            Some(Action::PageOutput),
            "{mode:?}"
        );
        assert_eq!(
            k.action(mode, &key('D')),
            Some(Action::WorktreeDiff),
            "{mode:?}"
        );
    }
    // Lower case stays what it was: deny, hold.
    assert_eq!(k.action(Mode::Live, &key('d')), Some(Action::Deny));
    assert_eq!(k.action(Mode::Live, &key('o')), Some(Action::Hold));
    // The follow view scrolls with the list keys and closes like a window.
    assert_eq!(k.action(Mode::Follow, &key('G')), Some(Action::Bottom));
    assert_eq!(
        k.action(Mode::Follow, &code(KeyCode::PageUp)),
        Some(Action::PageUp)
    );
    assert_eq!(k.action(Mode::Follow, &key('q')), Some(Action::Close));
}

#[test]
fn overrides_apply_and_duplicates_are_rejected() {
    let mut o = HashMap::new();
    o.insert("pause".to_string(), vec!["space".to_string()]);
    let k = Keymap::with(&o).unwrap();
    assert_eq!(k.action(Mode::Live, &key(' ')), Some(Action::Pause));
    assert_eq!(k.action(Mode::Live, &key('p')), None);
    // The replay's space is its own.
    assert_eq!(k.action(Mode::Replay, &key(' ')), Some(Action::PlayPause));
    o.insert("resume".to_string(), vec!["space".to_string()]);
    let e = Keymap::with(&o).unwrap_err().to_string();
    assert!(e.contains("space is bound to both pause and resume"), "{e}");
    // Across shared scopes too: pause on t would hide the theme key.
    let mut o = HashMap::new();
    o.insert("pause".to_string(), vec!["t".to_string()]);
    let e = Keymap::with(&o).unwrap_err().to_string();
    assert!(e.contains("t is bound to both pause and theme"), "{e}");
    // docs/console.md's example stays valid: q quits, and closes overlays.
    let mut o = HashMap::new();
    o.insert(
        "quit".to_string(),
        vec!["q".to_string(), "ctrl-q".to_string()],
    );
    let k = Keymap::with(&o).unwrap();
    assert_eq!(k.label_in(Mode::Help, Action::Quit), "ctrl-q");
    let mut bad = HashMap::new();
    bad.insert("explode".to_string(), vec!["e".to_string()]);
    assert!(
        Keymap::with(&bad)
            .unwrap_err()
            .to_string()
            .contains("unknown action \"explode\"")
    );
    let mut bad = HashMap::new();
    bad.insert("pause".to_string(), vec!["hyper-p".to_string()]);
    assert!(
        Keymap::with(&bad)
            .unwrap_err()
            .to_string()
            .contains("\"hyper-p\" is not a key")
    );
}

#[test]
fn every_problem_in_keys_is_reported_at_once() {
    let o: HashMap<String, Vec<String>> = [
        ("explode", vec!["e"]),
        ("zap", vec!["z"]),
        // One bad key beside a good one: the good one is still bound
        // (and found taken by resume below).
        ("pause", vec!["hyper-p", "space"]),
        ("resume", vec!["space"]),
        // The view scope against the global one: read by the live
        // console and by a replay, said once.
        ("theme", vec!["?"]),
    ]
    .into_iter()
    .map(|(a, k)| (a.to_string(), k.into_iter().map(str::to_string).collect()))
    .collect();
    let KeyErrors(errors) = Keymap::with(&o).unwrap_err();
    let said: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(said.len(), 5, "{said:#?}");
    assert!(said[0].contains("unknown action \"explode\""), "{said:#?}");
    assert!(said[1].contains("unknown action \"zap\""), "{said:#?}");
    assert!(
        said[2].starts_with("[keys] pause: \"hyper-p\" is not a key"),
        "{said:#?}"
    );
    assert!(
        said[3].contains("space is bound to both pause and resume"),
        "{said:#?}"
    );
    assert!(
        said[4].contains("? is bound to both theme and help"),
        "{said:#?}"
    );
    // One a line, as the config error lists them.
    let text = KeyErrors(errors).to_string();
    assert_eq!(text.lines().count(), 5, "{text}");
}
