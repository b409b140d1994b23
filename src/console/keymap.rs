//! The one key table: it drives key handling, the footer and the help
//! overlay. Bindings can be changed in the config file; a key bound to two
//! actions is an error.

use std::collections::HashMap;
use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Pause,
    Resume,
    Step,
    Release,
    PaletteInspector,
    Approve,
    Deny,
    Hold,
    Retry,
    NodeInspector,
    FocusNext,
    FocusPrev,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Filter,
    LedgerFilter,
    Back,
    CycleTheme,
    Report,
    Help,
    Quit,
    // Replay only (they shadow other keys there).
    PlayPause,
    Faster,
    Slower,
    EventBack,
    EventForward,
    Back10,
    Forward10,
    Start,
    End,
    Jump,
}

/// Where an action applies, for the footer and the help overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Run,
    Selection,
    Navigation,
    View,
    /// Replay of a recorded run (`playdeck replay`).
    Replay,
}

impl Scope {
    pub fn title(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Selection => "selected operation",
            Scope::Navigation => "moving around",
            Scope::View => "view",
            Scope::Replay => "replay (time travel)",
        }
    }
}

pub struct ActionInfo {
    pub action: Action,
    /// The name used in the config file's `[keys]` table.
    pub name: &'static str,
    pub help: &'static str,
    pub scope: Scope,
    pub default: &'static [&'static str],
}

pub const ACTIONS: &[ActionInfo] = &[
    ActionInfo {
        action: Action::Pause,
        name: "pause",
        help: "pause (running work finishes)",
        scope: Scope::Run,
        default: &["p"],
    },
    ActionInfo {
        action: Action::Resume,
        name: "resume",
        help: "resume",
        scope: Scope::Run,
        default: &["r"],
    },
    ActionInfo {
        action: Action::Step,
        name: "step",
        help: "step: let one waiting operation start",
        scope: Scope::Run,
        default: &["s"],
    },
    ActionInfo {
        action: Action::Release,
        name: "release",
        help: "release idle capacity",
        scope: Scope::Run,
        default: &["x"],
    },
    ActionInfo {
        action: Action::PaletteInspector,
        name: "palette",
        help: "palette inspector",
        scope: Scope::View,
        default: &["i"],
    },
    ActionInfo {
        action: Action::Approve,
        name: "approve",
        help: "approve",
        scope: Scope::Selection,
        default: &["a"],
    },
    ActionInfo {
        action: Action::Deny,
        name: "deny",
        help: "deny",
        scope: Scope::Selection,
        default: &["d"],
    },
    ActionInfo {
        action: Action::Hold,
        name: "hold",
        help: "hold / unhold",
        scope: Scope::Selection,
        default: &["o"],
    },
    ActionInfo {
        action: Action::Retry,
        name: "retry",
        help: "retry a failed operation",
        scope: Scope::Selection,
        default: &["R"],
    },
    ActionInfo {
        action: Action::NodeInspector,
        name: "inspect",
        help: "inspect",
        scope: Scope::Selection,
        default: &["enter"],
    },
    ActionInfo {
        action: Action::FocusNext,
        name: "focus_next",
        help: "next pane",
        scope: Scope::Navigation,
        default: &["tab"],
    },
    ActionInfo {
        action: Action::FocusPrev,
        name: "focus_prev",
        help: "previous pane",
        scope: Scope::Navigation,
        default: &["shift-tab"],
    },
    ActionInfo {
        action: Action::Up,
        name: "up",
        help: "up",
        scope: Scope::Navigation,
        default: &["up", "k"],
    },
    ActionInfo {
        action: Action::Down,
        name: "down",
        help: "down",
        scope: Scope::Navigation,
        default: &["down", "j"],
    },
    ActionInfo {
        action: Action::Left,
        name: "left",
        help: "left (previous lane)",
        scope: Scope::Navigation,
        default: &["left", "h"],
    },
    ActionInfo {
        action: Action::Right,
        name: "right",
        help: "right (next lane)",
        scope: Scope::Navigation,
        default: &["right", "l"],
    },
    ActionInfo {
        action: Action::PageUp,
        name: "page_up",
        help: "page up",
        scope: Scope::Navigation,
        default: &["pageup"],
    },
    ActionInfo {
        action: Action::PageDown,
        name: "page_down",
        help: "page down",
        scope: Scope::Navigation,
        default: &["pagedown"],
    },
    ActionInfo {
        action: Action::Top,
        name: "top",
        help: "first row",
        scope: Scope::Navigation,
        default: &["home", "g"],
    },
    ActionInfo {
        action: Action::Bottom,
        name: "bottom",
        help: "last row",
        scope: Scope::Navigation,
        default: &["end", "G"],
    },
    ActionInfo {
        action: Action::Filter,
        name: "filter",
        help: "filter operations by name or role",
        scope: Scope::View,
        default: &["/"],
    },
    ActionInfo {
        action: Action::LedgerFilter,
        name: "ledger_filter",
        help: "ledger: all / accepted / dropped",
        scope: Scope::View,
        default: &["f"],
    },
    ActionInfo {
        action: Action::Back,
        name: "back",
        help: "close, back, clear filter",
        scope: Scope::View,
        default: &["esc"],
    },
    ActionInfo {
        action: Action::CycleTheme,
        name: "theme",
        help: "next theme",
        scope: Scope::View,
        default: &["t"],
    },
    ActionInfo {
        action: Action::Report,
        name: "report",
        help: "write the run report (report.md in the run directory)",
        scope: Scope::View,
        default: &["e"],
    },
    ActionInfo {
        action: Action::Help,
        name: "help",
        help: "help",
        scope: Scope::View,
        default: &["?"],
    },
    ActionInfo {
        action: Action::Quit,
        name: "quit",
        help: "quit",
        scope: Scope::Run,
        default: &["q", "ctrl-c"],
    },
    ActionInfo {
        action: Action::PlayPause,
        name: "replay_play",
        help: "play / pause",
        scope: Scope::Replay,
        default: &["space"],
    },
    ActionInfo {
        action: Action::Faster,
        name: "replay_faster",
        help: "faster (up to ×64)",
        scope: Scope::Replay,
        default: &["+", "="],
    },
    ActionInfo {
        action: Action::Slower,
        name: "replay_slower",
        help: "slower (down to ×0.25)",
        scope: Scope::Replay,
        default: &["-"],
    },
    ActionInfo {
        action: Action::EventBack,
        name: "replay_event_back",
        help: "one event back",
        scope: Scope::Replay,
        default: &["left"],
    },
    ActionInfo {
        action: Action::EventForward,
        name: "replay_event_forward",
        help: "one event forward",
        scope: Scope::Replay,
        default: &["right"],
    },
    ActionInfo {
        action: Action::Back10,
        name: "replay_back",
        help: "ten seconds back",
        scope: Scope::Replay,
        default: &["["],
    },
    ActionInfo {
        action: Action::Forward10,
        name: "replay_forward",
        help: "ten seconds forward",
        scope: Scope::Replay,
        default: &["]"],
    },
    ActionInfo {
        action: Action::Start,
        name: "replay_start",
        help: "to the start",
        scope: Scope::Replay,
        default: &["g", "home"],
    },
    ActionInfo {
        action: Action::End,
        name: "replay_end",
        help: "to the end",
        scope: Scope::Replay,
        default: &["G", "end"],
    },
    ActionInfo {
        action: Action::Jump,
        name: "replay_jump",
        help: "jump to a time (12.5) or an event (#120)",
        scope: Scope::Replay,
        default: &[":"],
    },
];

pub fn info(action: Action) -> &'static ActionInfo {
    ACTIONS
        .iter()
        .find(|a| a.action == action)
        .expect("every action is in the table")
}

/// A key with its modifiers, as written in the config (`ctrl-c`, `G`,
/// `shift-tab`, `enter`, `pageup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyCombo {
    pub code: KeyCode,
    pub ctrl: bool,
}

impl KeyCombo {
    pub fn parse(s: &str) -> Result<KeyCombo, String> {
        let (ctrl, rest) = match s.strip_prefix("ctrl-") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let code = match rest {
            "enter" => KeyCode::Enter,
            "esc" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "shift-tab" | "backtab" => KeyCode::BackTab,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "pageup" => KeyCode::PageUp,
            "pagedown" => KeyCode::PageDown,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "space" => KeyCode::Char(' '),
            r if r.chars().count() == 1 => KeyCode::Char(r.chars().next().expect("one char")),
            _ => {
                return Err(format!(
                    "{s:?} is not a key; write a character (\"p\", \"G\", \"?\"), ctrl-<char>, or one of enter, esc, tab, shift-tab, up, down, left, right, pageup, pagedown, home, end, space"
                ));
            }
        };
        Ok(KeyCombo { code, ctrl })
    }

    pub fn from_event(e: &KeyEvent) -> KeyCombo {
        KeyCombo {
            code: e.code,
            ctrl: e.modifiers.contains(KeyModifiers::CONTROL),
        }
    }
}

impl fmt::Display for KeyCombo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        match self.code {
            KeyCode::Enter => f.write_str("⏎"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::BackTab => f.write_str("shift-tab"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::Left => f.write_str("←"),
            KeyCode::Right => f.write_str("→"),
            KeyCode::PageUp => f.write_str("pgup"),
            KeyCode::PageDown => f.write_str("pgdn"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            _ => f.write_str("?"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Keymap {
    keys: HashMap<Action, Vec<KeyCombo>>,
    lookup: HashMap<KeyCombo, Action>,
    /// Replay keys: looked up first in a replay, where they shadow others.
    replay: HashMap<KeyCombo, Action>,
}

impl Keymap {
    pub fn defaults() -> Keymap {
        Keymap::with(&HashMap::new()).expect("the default table has no duplicates")
    }

    /// The defaults with `overrides` (action name -> keys) applied.
    pub fn with(overrides: &HashMap<String, Vec<String>>) -> Result<Keymap, String> {
        for name in overrides.keys() {
            if !ACTIONS.iter().any(|a| a.name == name) {
                let names: Vec<&str> = ACTIONS.iter().map(|a| a.name).collect();
                return Err(format!(
                    "[keys] names unknown action {name:?}; actions: {}",
                    names.join(", ")
                ));
            }
        }
        let mut keys = HashMap::new();
        let mut lookup: HashMap<KeyCombo, Action> = HashMap::new();
        let mut replay: HashMap<KeyCombo, Action> = HashMap::new();
        for a in ACTIONS {
            let table = if a.scope == Scope::Replay {
                &mut replay
            } else {
                &mut lookup
            };
            let combos: Vec<KeyCombo> = match overrides.get(a.name) {
                Some(list) => list
                    .iter()
                    .map(|k| KeyCombo::parse(k))
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("[keys] {}: {e}", a.name))?,
                None => a
                    .default
                    .iter()
                    .map(|k| KeyCombo::parse(k).expect("valid default"))
                    .collect(),
            };
            for c in &combos {
                if let Some(other) = table.insert(*c, a.action) {
                    return Err(format!(
                        "[keys]: {c} is bound to both {} and {}; each key does one thing",
                        info(other).name,
                        a.name
                    ));
                }
            }
            keys.insert(a.action, combos);
        }
        Ok(Keymap {
            keys,
            lookup,
            replay,
        })
    }

    /// The action of a key in a live run.
    pub fn action(&self, e: &KeyEvent) -> Option<Action> {
        Self::find(&self.lookup, e)
    }

    /// The action of a key in a replay: replay keys first.
    pub fn replay_action(&self, e: &KeyEvent) -> Option<Action> {
        Self::find(&self.replay, e).or_else(|| Self::find(&self.lookup, e))
    }

    fn find(table: &HashMap<KeyCombo, Action>, e: &KeyEvent) -> Option<Action> {
        let combo = KeyCombo::from_event(e);
        table.get(&combo).copied().or_else(|| {
            // Terminals report shifted letters as uppercase, with or
            // without SHIFT; shift-tab arrives as BackTab.
            match e.code {
                KeyCode::Char(c) if !combo.ctrl => table
                    .get(&KeyCombo {
                        code: KeyCode::Char(c),
                        ctrl: false,
                    })
                    .copied(),
                _ => None,
            }
        })
    }

    pub fn keys(&self, a: Action) -> &[KeyCombo] {
        self.keys.get(&a).map(Vec::as_slice).unwrap_or(&[])
    }

    /// "p" or "↑/k", for the footer and help.
    pub fn label(&self, a: Action) -> String {
        self.keys(a)
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn defaults_cover_every_action_once() {
        let k = Keymap::defaults();
        assert_eq!(k.action(&key('p')), Some(Action::Pause));
        assert_eq!(
            k.action(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(k.action(&key('G')), Some(Action::Bottom));
        assert_eq!(k.label(Action::Up), "↑/k");
        for a in ACTIONS {
            assert!(!k.keys(a.action).is_empty(), "{}", a.name);
        }
    }

    #[test]
    fn overrides_apply_and_duplicates_are_rejected() {
        let mut o = HashMap::new();
        o.insert("pause".to_string(), vec!["space".to_string()]);
        let k = Keymap::with(&o).unwrap();
        assert_eq!(k.action(&key(' ')), Some(Action::Pause));
        assert_eq!(k.action(&key('p')), None);
        o.insert("resume".to_string(), vec!["space".to_string()]);
        let e = Keymap::with(&o).unwrap_err();
        assert!(e.contains("space is bound to both pause and resume"), "{e}");
        let mut bad = HashMap::new();
        bad.insert("explode".to_string(), vec!["e".to_string()]);
        assert!(
            Keymap::with(&bad)
                .unwrap_err()
                .contains("unknown action \"explode\"")
        );
        let mut bad = HashMap::new();
        bad.insert("pause".to_string(), vec!["hyper-p".to_string()]);
        assert!(
            Keymap::with(&bad)
                .unwrap_err()
                .contains("\"hyper-p\" is not a key")
        );
    }
}
