//! The one key table. Every key the console answers is an [`Action`] here,
//! with a short label (the footer), a help line (the help overlay) and the
//! scope it belongs to. What is on screen is a [`Mode`]; a mode reads a
//! stack of scopes, its own first: the replay's `←` steps an event where
//! the live console's `←` moves a lane, an overlay's `q` closes it where
//! the main screen's `q` quits. Key handling, the footer and the help
//! overlay all ask this table which keys work in a mode, so none of them
//! can disagree with the others.
//!
//! Bindings can be changed in the config file. A key bound to two actions
//! that can both be reached in one mode is an error, except that a mode's
//! own scope (replay, an overlay) may take a key the shared scopes use.

use std::collections::HashMap;
use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    // Run control (a live run).
    Pause,
    Resume,
    Step,
    Release,
    /// Release the instance selected in the capacity pane.
    ReleaseInstance,
    RaiseBudget,
    AddWork,
    // The selected (or inspected) operation.
    Approve,
    Deny,
    Hold,
    Retry,
    Talk,
    Mark,
    /// Acknowledge a failure or escalation: `n` and the problems list pass
    /// it by.
    Acknowledge,
    /// Mark every gate the lanes show (the filter applies).
    MarkAll,
    // The selected (or inspected) operation's agent: its output, its
    // worktree. Viewing only, so a replay and a read-only console have them.
    FollowAgent,
    PageOutput,
    RawLines,
    NextHunk,
    PrevHunk,
    NextFile,
    PrevFile,
    NoteLine,
    WorktreeDiff,
    Shell,
    Breakpoint,
    RunToHere,
    Breakpoints,
    ClearBreak,
    // What the main screen shows.
    Open,
    PaletteInspector,
    Warnings,
    Runs,
    Filter,
    LedgerFilter,
    Back,
    CycleTheme,
    Report,
    NextProblem,
    PrevProblem,
    OldestGate,
    Problems,
    Messages,
    Zoom,
    // Moving between panes and lanes.
    FocusNext,
    FocusPrev,
    Left,
    Right,
    // Moving in any list or text.
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    // Everywhere.
    Help,
    Quit,
    // A replay.
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
    // Any overlay.
    Close,
    // The palette tree.
    Collapse,
    Expand,
    Toggle,
    // The node inspector.
    ShowAll,
    // A detail (a ledger row).
    GoTo,
    // A question.
    Yes,
    No,
    CancelRun,
    // Typing (a filter, a jump, a reason, a form).
    Submit,
    /// Rejecting a review or a conflict: send it back to its agent with
    /// what was typed, instead.
    SendBack,
    Cancel,
    NextField,
    PrevField,
}

/// A group of actions: a help section, and a layer a mode reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Run,
    Operation,
    Agent,
    View,
    Move,
    Lists,
    Global,
    Replay,
    Overlay,
    Tree,
    Inspector,
    /// The follow view's own keys.
    Follow,
    /// The diff view's own keys.
    Diff,
    Detail,
    Confirm,
    Text,
}

impl Scope {
    pub fn title(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Operation => "selected operation",
            Scope::Agent => "its agent: output and worktree",
            Scope::View => "view",
            Scope::Move => "panes and lanes",
            Scope::Lists => "lists and text",
            Scope::Global => "always",
            Scope::Replay => "replay (time travel)",
            Scope::Overlay => "this window",
            Scope::Tree => "palette tree",
            Scope::Inspector => "node inspector",
            Scope::Follow => "follow view",
            Scope::Diff => "diff view",
            Scope::Detail => "detail",
            Scope::Confirm => "question",
            Scope::Text => "typing",
        }
    }

    /// Shared scopes are read by several modes and may not take each
    /// other's keys; a mode's own scope may shadow them.
    fn shared(self) -> bool {
        matches!(
            self,
            Scope::Run
                | Scope::Operation
                | Scope::Agent
                | Scope::View
                | Scope::Move
                | Scope::Lists
                | Scope::Global
        )
    }
}

/// What the screen shows, which decides what keys mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Live,
    Replay,
    Help,
    Palette,
    Inspector,
    /// Following an agent: its output, full screen.
    Follow,
    /// What an operation changed, by file and hunk.
    Diff,
    /// A detail window: a ledger row, a palette entry, the warnings.
    Detail,
    /// The problems list: its rows are operations the operation keys act on.
    Problems,
    Confirm,
    /// Typing: a filter, a jump target, a deny reason, the add form.
    Text,
    /// The terminal is too small to show the console: only quit works.
    TooSmall,
}

impl Mode {
    pub const ALL: [Mode; 12] = [
        Mode::Live,
        Mode::Replay,
        Mode::Help,
        Mode::Palette,
        Mode::Inspector,
        Mode::Follow,
        Mode::Diff,
        Mode::Detail,
        Mode::Problems,
        Mode::Confirm,
        Mode::Text,
        Mode::TooSmall,
    ];

    /// The scopes a mode reads, its own first.
    pub fn layers(self) -> &'static [Scope] {
        use Scope::*;
        match self {
            Mode::Live => &[Run, Operation, Agent, View, Move, Lists, Global],
            Mode::Replay => &[Replay, Agent, View, Move, Lists, Global],
            Mode::Help => &[Overlay, Lists, Global],
            Mode::Palette => &[Tree, Overlay, Lists, Global],
            Mode::Inspector => &[Inspector, Operation, Agent, Overlay, Lists, Global],
            Mode::Follow => &[Follow, Agent, Operation, Overlay, Lists, Global],
            Mode::Diff => &[Diff, Agent, Operation, Overlay, Lists, Global],
            Mode::Detail => &[Detail, Overlay, Lists, Global],
            Mode::Problems => &[Detail, Operation, Agent, Overlay, Lists, Global],
            Mode::Confirm => &[Confirm, Lists, Global],
            Mode::Text => &[Text, Global],
            Mode::TooSmall => &[Global],
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Mode::Live => "the console",
            Mode::Replay => "a replay",
            Mode::Help => "help",
            Mode::Palette => "the palette inspector",
            Mode::Inspector => "the node inspector",
            Mode::Follow => "following an agent",
            Mode::Diff => "the diff view",
            Mode::Detail => "a detail window",
            Mode::Problems => "the problems list",
            Mode::Confirm => "a question",
            Mode::Text => "typing",
            Mode::TooSmall => "a terminal too small",
        }
    }
}

pub struct ActionInfo {
    pub action: Action,
    /// The name used in the config file's `[keys]` table.
    pub name: &'static str,
    /// A word or two for the footer.
    pub label: &'static str,
    /// A line for the help overlay.
    pub help: &'static str,
    pub scope: Scope,
    pub default: &'static [&'static str],
    /// Worth a place in the footer when it can be used.
    pub footer: bool,
}

macro_rules! actions {
    ($($action:ident $name:literal $label:literal $scope:ident [$($key:literal),*] $footer:literal $help:literal;)*) => {
        pub const ACTIONS: &[ActionInfo] = &[$(ActionInfo {
            action: Action::$action,
            name: $name,
            label: $label,
            help: $help,
            scope: Scope::$scope,
            default: &[$($key),*],
            footer: $footer,
        }),*];
    };
}

// The order is the footer's and the help's order within a scope.
actions! {
    Pause "pause" "pause" Run ["p"] true "pause (running work finishes, nothing new starts)";
    Resume "resume" "resume" Run ["r"] true "resume";
    Step "step" "step" Run ["s"] true "step: start the selected paused operation, else the next one";
    AddWork "add" "add work" Run ["A"] true "add work to the run, after the selected operation";
    Release "release" "release" Run ["x"] true "release idle capacity (asks first, says what stays and why)";
    ReleaseInstance "release_instance" "release it" Run ["X"] true "capacity pane: release the selected idle instance (asks)";
    RaiseBudget "raise_budget" "raise cap" Run ["$"] false "raise the spend cap that holds work back by half (asks first)";
    Approve "approve" "approve" Operation ["a"] true "approve the selected gate, else the oldest; marked gates all (asks)";
    Deny "deny" "deny" Operation ["d"] true "deny the selected gate, else the oldest (asks; reason optional)";
    Hold "hold" "hold" Operation ["o"] true "hold / unhold an operation that has not started";
    Retry "retry" "retry" Operation ["R"] true "retry a failed or denied operation";
    Acknowledge "acknowledge" "acknowledge" Operation ["K"] true "acknowledge a failure or escalation: n and P pass it by (again: undo)";
    Talk "say" "talk" Operation ["T"] false "say something to a running agent, or send a failed one back with it";
    Breakpoint "break" "break" Operation ["b"] false "a breakpoint on it: the run pauses before it starts (again: cleared)";
    RunToHere "run_to" "run to here" Operation ["U"] false "let the run go on until it is about to start, and pause there";
    Mark "mark" "mark" Operation ["m"] false "mark / unmark a gate: a then approves every marked one, asking once";
    MarkAll "mark_all" "mark all" Operation ["*"] false "mark every gate shown (the filter applies); again: unmark all";
    FollowAgent "follow" "follow" Agent ["F"] false "follow its agent: the latest attempt's output, full screen";
    PageOutput "page_output" "output in pager" Agent ["O"] false "that attempt's whole output (stdout, stderr) in $PAGER";
    WorktreeDiff "diff" "worktree diff" Agent ["D"] false "its diff by file and hunk: what it would land, or what is uncommitted";
    Shell "shell" "shell" Agent ["S"] false "a shell in its own worktree: resolve a merge conflict there, then a";
    Open "inspect" "inspect" View ["enter"] true "open: the node inspector, a ledger row, the palette";
    PaletteInspector "palette" "palette" View ["i"] true "palette inspector";
    Warnings "warnings" "warnings" View ["w"] true "every warning of the run";
    Runs "runs" "runs" View ["L"] false "the runs of this directory (enter attaches to one)";
    Filter "filter" "filter" View ["/"] true "filter operations by name or role";
    LedgerFilter "ledger_filter" "outcome" View ["f"] true "ledger: all / accepted / dropped";
    Back "back" "back" View ["esc"] true "clear the filter, back to the lanes";
    NextProblem "next_problem" "next problem" View ["n"] false "the next failure, escalation or waiting gate, and why";
    PrevProblem "previous_problem" "problem back" View ["N"] false "the previous one";
    OldestGate "oldest_gate" "oldest gate" View ["W"] false "the gate waiting longest for approval";
    Breakpoints "breakpoints" "breakpoints" View ["B"] false "the run's breakpoints (x clears the selected one)";
    Problems "problems" "problems" View ["P"] false "every failure, escalation and waiting gate, with why (enter goes to one)";
    Messages "messages" "messages" View ["M"] false "every message the status line showed, newest first";
    Zoom "zoom" "zoom" View ["z"] false "the selected lane at full width (again: every lane)";
    CycleTheme "theme" "theme" View ["t"] false "next theme";
    Report "report" "report" View ["e"] true "write the run report (report.md in the run directory)";
    FocusNext "focus_next" "pane" Move ["tab"] true "next pane";
    FocusPrev "focus_prev" "pane back" Move ["shift-tab"] false "previous pane";
    Left "left" "lane" Move ["left", "h"] false "previous lane";
    Right "right" "lane" Move ["right", "l"] false "next lane";
    Up "up" "up" Lists ["up", "k"] false "up";
    Down "down" "down" Lists ["down", "j"] false "down";
    PageUp "page_up" "page up" Lists ["pageup"] false "page up";
    PageDown "page_down" "page down" Lists ["pagedown"] false "page down";
    Top "top" "top" Lists ["home", "g"] false "to the top";
    Bottom "bottom" "bottom" Lists ["end", "G"] false "to the bottom";
    Help "help" "help" Global ["?"] true "help: the keys of what is on screen";
    Quit "quit" "quit" Global ["q", "ctrl-c"] true "quit (a run still going asks: detach, or cancel it)";
    PlayPause "replay_play" "play/pause" Replay ["space"] true "play / pause";
    EventBack "replay_event_back" "event back" Replay ["left"] true "one event back";
    EventForward "replay_event_forward" "event" Replay ["right"] true "one event forward";
    Jump "replay_jump" "jump" Replay [":"] true "jump to a time (12.5, 1:05) or an event (#120)";
    Faster "replay_faster" "faster" Replay ["+", "="] true "faster (up to ×64)";
    Slower "replay_slower" "slower" Replay ["-"] true "slower (down to ×0.25)";
    Back10 "replay_back" "-10 s" Replay ["["] false "ten seconds back";
    Forward10 "replay_forward" "+10 s" Replay ["]"] true "ten seconds forward";
    Start "replay_start" "start" Replay ["g", "home"] false "to the start";
    End "replay_end" "end" Replay ["G", "end"] false "to the end";
    Close "close" "close" Overlay ["esc", "q"] true "close this window";
    Collapse "collapse" "collapse" Tree ["left", "h"] true "close a branch";
    Expand "expand" "expand" Tree ["right", "l"] true "open a branch";
    Toggle "toggle" "open" Tree ["enter", "space"] true "open or close a branch; on an entry, its detail";
    ShowAll "show_all" "show all" Inspector ["space"] true "show long sections in full (or collapse them again)";
    RawLines "raw" "raw lines" Follow ["r"] true "the CLI's own lines as it printed them (again: the conversation)";
    NextHunk "next_hunk" "hunk" Diff ["]"] true "the next hunk";
    PrevHunk "previous_hunk" "hunk back" Diff ["["] false "the previous hunk";
    NextFile "next_file" "file" Diff ["}"] true "the next file";
    PrevFile "previous_file" "file back" Diff ["{"] false "the previous file";
    NoteLine "note" "note" Diff ["c"] true "a note on this line: T sends the work back with every note";
    GoTo "go_to" "go to" Detail ["enter"] true "go to the operation it names";
    ClearBreak "clear_break" "clear" Detail ["x"] true "breakpoints: clear the selected one";
    Yes "yes" "yes" Confirm ["y", "enter"] true "yes";
    No "no" "no" Confirm ["n", "esc"] true "no";
    CancelRun "cancel_run" "cancel the run" Confirm ["c"] false "when leaving an attached console: cancel the run instead of detaching";
    Submit "submit" "submit" Text ["enter"] true "done: apply what was typed";
    SendBack "send_back" "send back" Text ["ctrl-t"] true "rejecting a review or conflict: send it back to its agent with what was typed, in its conversation";
    Cancel "cancel" "cancel" Text ["esc"] true "cancel";
    NextField "next_field" "next field" Text ["tab"] true "next field";
    PrevField "prev_field" "previous field" Text ["shift-tab"] false "previous field";
}

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
    pub fn parse(s: &str) -> Result<KeyCombo, KeyError> {
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
            "backspace" => KeyCode::Backspace,
            "space" => KeyCode::Char(' '),
            r if r.chars().count() == 1 => KeyCode::Char(r.chars().next().expect("one char")),
            _ => return Err(KeyError::NotAKey(s.to_string())),
        };
        Ok(KeyCombo { code, ctrl })
    }

    pub fn from_event(e: &KeyEvent) -> KeyCombo {
        KeyCombo {
            code: e.code,
            ctrl: e.modifiers.contains(KeyModifiers::CONTROL),
        }
    }

    /// A character typed as text (no ctrl).
    pub fn is_text(&self) -> bool {
        matches!(self.code, KeyCode::Char(_)) && !self.ctrl
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
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            _ => f.write_str("?"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Keymap {
    keys: HashMap<Action, Vec<KeyCombo>>,
    /// One table per scope.
    scopes: HashMap<Scope, HashMap<KeyCombo, Action>>,
}

impl Keymap {
    pub fn defaults() -> Keymap {
        Keymap::with(&HashMap::new()).expect("the default table has no duplicates")
    }

    /// The defaults with `overrides` (action name -> keys) applied; every
    /// problem with them at once (see [`KeyErrors`]), so an operator fixes
    /// a config file in one pass instead of one error per start.
    pub fn with(overrides: &HashMap<String, Vec<String>>) -> Result<Keymap, KeyErrors> {
        let mut errors = Vec::new();
        // Sorted: the messages come in the same order on every start.
        let mut unknown: Vec<&String> = overrides
            .keys()
            .filter(|name| !ACTIONS.iter().any(|a| a.name == name.as_str()))
            .collect();
        unknown.sort();
        errors.extend(
            unknown
                .into_iter()
                .map(|name| KeyError::UnknownAction { name: name.clone() }),
        );
        let mut keys = HashMap::new();
        let mut scopes: HashMap<Scope, HashMap<KeyCombo, Action>> = HashMap::new();
        for a in ACTIONS {
            let combos: Vec<KeyCombo> = match overrides.get(a.name) {
                // The keys that parse are bound even when others do not,
                // so the duplicates among them are found in the same pass.
                Some(list) => list
                    .iter()
                    .filter_map(|k| match KeyCombo::parse(k) {
                        Ok(c) => Some(c),
                        Err(e) => {
                            errors.push(KeyError::Override {
                                action: a.name,
                                error: Box::new(e),
                            });
                            None
                        }
                    })
                    .collect(),
                None => a
                    .default
                    .iter()
                    .map(|k| KeyCombo::parse(k).expect("valid default"))
                    .collect(),
            };
            let table = scopes.entry(a.scope).or_default();
            for c in &combos {
                if let Some(other) = table.insert(*c, a.action) {
                    errors.push(KeyError::Twice {
                        key: c.to_string(),
                        first: info(other).name,
                        second: a.name,
                    });
                }
            }
            keys.insert(a.action, combos);
        }
        let map = Keymap { keys, scopes };
        map.check_layers(&mut errors);
        if errors.is_empty() {
            Ok(map)
        } else {
            Err(KeyErrors(errors))
        }
    }

    /// Within one mode, two shared scopes may not take the same key (it
    /// would silently do only one thing); a mode's own scope may. Each
    /// clash is said once, though several modes read the same two scopes.
    fn check_layers(&self, errors: &mut Vec<KeyError>) {
        let mut seen: Vec<(Scope, Scope)> = Vec::new();
        for mode in Mode::ALL {
            let layers = mode.layers();
            for (i, upper) in layers.iter().enumerate() {
                for lower in &layers[i + 1..] {
                    if !(upper.shared() && lower.shared()) || seen.contains(&(*upper, *lower)) {
                        continue;
                    }
                    seen.push((*upper, *lower));
                    let (Some(u), Some(l)) = (self.scopes.get(upper), self.scopes.get(lower))
                    else {
                        continue;
                    };
                    // Sorted, so the messages do not depend on hashing.
                    let mut clashes: Vec<(String, Action, Action)> = u
                        .iter()
                        .filter_map(|(k, a)| l.get(k).map(|b| (k.to_string(), *a, *b)))
                        .collect();
                    clashes.sort_by(|x, y| x.0.cmp(&y.0));
                    errors.extend(clashes.into_iter().map(|(key, a, b)| KeyError::Twice {
                        key,
                        first: info(a).name,
                        second: info(b).name,
                    }));
                }
            }
        }
    }

    /// The action a key means in `mode`. While typing, plain characters
    /// are text unless the typing scope itself binds them.
    pub fn action(&self, mode: Mode, e: &KeyEvent) -> Option<Action> {
        let combo = KeyCombo::from_event(e);
        for scope in mode.layers() {
            if mode == Mode::Text && *scope != Scope::Text && combo.is_text() {
                continue;
            }
            if let Some(a) = self.find(*scope, e) {
                return Some(a);
            }
        }
        None
    }

    fn find(&self, scope: Scope, e: &KeyEvent) -> Option<Action> {
        let table = self.scopes.get(&scope)?;
        let combo = KeyCombo::from_event(e);
        table.get(&combo).copied().or_else(|| match e.code {
            // Terminals report shifted letters as uppercase, with or
            // without SHIFT, so the plain character is the key.
            KeyCode::Char(c) if !combo.ctrl => table
                .get(&KeyCombo {
                    code: KeyCode::Char(c),
                    ctrl: false,
                })
                .copied(),
            _ => None,
        })
    }

    /// Every key bound to `a`.
    pub fn keys(&self, a: Action) -> &[KeyCombo] {
        self.keys.get(&a).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The keys that do `a` in `mode`: bound to it and not taken by a
    /// scope the mode reads first. Empty when `a` is not reachable there.
    pub fn keys_in(&self, mode: Mode, a: Action) -> Vec<KeyCombo> {
        let layers = mode.layers();
        let Some(at) = layers.iter().position(|s| *s == info(a).scope) else {
            return Vec::new();
        };
        self.keys(a)
            .iter()
            // While typing, characters are text whatever else they mean.
            .filter(|k| mode != Mode::Text || layers[at] == Scope::Text || !k.is_text())
            .filter(|k| {
                !layers[..at].iter().any(|s| {
                    (mode != Mode::Text || *s == Scope::Text || !k.is_text())
                        && self.scopes.get(s).is_some_and(|t| t.contains_key(k))
                })
            })
            .copied()
            .collect()
    }

    /// The actions of `mode` that some key reaches, scope by scope in the
    /// table's order.
    pub fn actions_in(&self, mode: Mode) -> Vec<Action> {
        mode.layers()
            .iter()
            .flat_map(|s| ACTIONS.iter().filter(move |a| a.scope == *s))
            .map(|a| a.action)
            .filter(|a| !self.keys_in(mode, *a).is_empty())
            .collect()
    }

    /// "p" or "↑/k": the keys that do `a` in `mode`.
    pub fn label_in(&self, mode: Mode, a: Action) -> String {
        self.keys_in(mode, a)
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// All keys bound to `a`, for messages that name the key.
    pub fn label(&self, a: Action) -> String {
        self.keys(a)
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// A key or a `[keys]` override that cannot be used: the key or action
/// named, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "{0:?} is not a key; write a character (\"p\", \"G\", \"?\"), ctrl-<char>, or one of enter, esc, tab, shift-tab, up, down, left, right, pageup, pagedown, home, end, backspace, space"
    )]
    NotAKey(String),
    #[error("[keys] names unknown action {name:?}; actions: {}", action_names())]
    UnknownAction { name: String },
    #[error("[keys] {action}: {error}")]
    Override {
        action: &'static str,
        error: Box<KeyError>,
    },
    #[error("[keys]: {key} is bound to both {first} and {second}; each key does one thing")]
    Twice {
        key: String,
        first: &'static str,
        second: &'static str,
    },
}

/// Every problem `[keys]` has, in the order found: unknown actions, then
/// each action's bad keys and duplicates, then clashes across scopes.
/// Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyErrors(pub Vec<KeyError>);

impl fmt::Display for KeyErrors {
    /// One problem a line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for KeyErrors {}

fn action_names() -> String {
    let names: Vec<&str> = ACTIONS.iter().map(|a| a.name).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests;
