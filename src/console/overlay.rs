//! What can cover the main screen: windows to read (help, the inspectors,
//! details, warnings), questions, and text being typed. They stack: help
//! opened from the inspector closes back to the inspector.

use std::cell::RefCell;

use tui_tree_widget::TreeState;

use super::keymap::Mode;
use super::scroll::ScrollList;
use crate::capacity::ReleaseResult;
use crate::kernel::Request;

pub enum Overlay {
    /// The keys of the mode it was opened from.
    Help {
        of: Mode,
        scroll: ScrollList,
    },
    /// A RefCell: the tree widget records what it drew in its state, and
    /// drawing has only `&App`.
    Palette {
        state: RefCell<TreeState<String>>,
    },
    Inspector {
        node: u32,
        scroll: ScrollList,
        /// Long sections in full instead of collapsed to a count.
        all: bool,
        /// Its agent's last turns, read again when the log grows.
        turns: RefCell<super::follow::LastTurns>,
    },
    /// Following an operation's agent: its output, full screen. Boxed: it
    /// holds the lines read and the open log files.
    Follow(Box<super::follow::FollowView>),
    /// What an operation changed, by file and hunk, with the operator's
    /// notes on lines (`D`).
    Diff(Box<super::diffview::DiffView>),
    /// Typing a note on the diff view's line.
    DiffNote {
        text: String,
    },
    /// One row of the spawn ledger (an index into the ledger).
    LedgerRow {
        row: usize,
        scroll: ScrollList,
    },
    /// One entry of the palette tree, by its tree identifier.
    PaletteEntry {
        id: String,
        scroll: ScrollList,
    },
    Warnings {
        scroll: ScrollList,
    },
    /// The status line's messages, newest first.
    Messages {
        scroll: ScrollList,
    },
    /// The run's breakpoints, one a row (`x` clears the selected one).
    Breakpoints {
        scroll: ScrollList,
    },
    /// The runs under the runs directory; `enter` switches an attached
    /// console to the selected one.
    Runs {
        rows: Vec<crate::control::listing::RunRow>,
        scroll: ScrollList,
    },
    /// Every failure, escalation and waiting gate, oldest first (node
    /// indices, kept current as the run moves; row 0 is the titles).
    Problems {
        rows: Vec<u32>,
        scroll: ScrollList,
    },
    ConfirmQuit,
    /// Approve these gates (marked ones, or the oldest when the cursor is
    /// on none): by name, asked once.
    ConfirmApprove {
        ops: Vec<String>,
        /// Not marked: the oldest gate, the cursor being on none.
        oldest: bool,
        /// Through the names, when they do not all fit.
        scroll: ScrollList,
    },
    ConfirmRelease {
        preview: ReleaseResult,
    },
    /// Release one instance (`X` in the capacity pane): its full name.
    ConfirmReleaseInstance {
        name: std::sync::Arc<str>,
    },
    /// Raise the cap that holds work back: what it is now and after.
    ConfirmRaise {
        change: crate::kernel::spend::CapChange,
        words: String,
    },
    /// Deny, with an optional reason being typed.
    Deny {
        op: String,
        reason: String,
    },
    /// Typing what to say to an operation's agent (`T`): to a running
    /// one, or a failed one sent back.
    Say {
        op: String,
        text: String,
        running: bool,
    },
    Add(AddForm),
    /// Typing the operation filter (it applies as it is typed).
    Filter,
    /// Typing a replay jump target.
    Jump {
        text: String,
    },
}

impl Overlay {
    pub fn mode(&self) -> Mode {
        match self {
            Overlay::Help { .. } => Mode::Help,
            Overlay::Palette { .. } => Mode::Palette,
            Overlay::Inspector { .. } => Mode::Inspector,
            Overlay::Problems { .. } => Mode::Problems,
            Overlay::Follow(_) => Mode::Follow,
            Overlay::Diff(_) => Mode::Diff,
            Overlay::LedgerRow { .. }
            | Overlay::PaletteEntry { .. }
            | Overlay::Warnings { .. }
            | Overlay::Messages { .. }
            | Overlay::Breakpoints { .. }
            | Overlay::Runs { .. } => Mode::Detail,
            Overlay::ConfirmQuit
            | Overlay::ConfirmApprove { .. }
            | Overlay::ConfirmRelease { .. }
            | Overlay::ConfirmReleaseInstance { .. }
            | Overlay::ConfirmRaise { .. } => Mode::Confirm,
            Overlay::Deny { .. }
            | Overlay::Say { .. }
            | Overlay::DiffNote { .. }
            | Overlay::Add(_)
            | Overlay::Filter
            | Overlay::Jump { .. } => Mode::Text,
        }
    }

    /// Its scrolling, for the windows that scroll. Not the follow view's:
    /// moving it decides whether it follows new lines
    /// ([`super::follow::FollowView::apply`]).
    pub fn scroll_mut(&mut self) -> Option<&mut ScrollList> {
        match self {
            Overlay::Help { scroll, .. }
            | Overlay::Inspector { scroll, .. }
            | Overlay::LedgerRow { scroll, .. }
            | Overlay::PaletteEntry { scroll, .. }
            | Overlay::Warnings { scroll }
            | Overlay::Messages { scroll }
            | Overlay::Breakpoints { scroll }
            | Overlay::Problems { scroll, .. }
            | Overlay::ConfirmApprove { scroll, .. }
            | Overlay::Runs { scroll, .. } => Some(scroll),
            _ => None,
        }
    }

    pub fn scroll(&self) -> Option<&ScrollList> {
        match self {
            Overlay::Help { scroll, .. }
            | Overlay::Inspector { scroll, .. }
            | Overlay::LedgerRow { scroll, .. }
            | Overlay::PaletteEntry { scroll, .. }
            | Overlay::Warnings { scroll }
            | Overlay::Messages { scroll }
            | Overlay::Breakpoints { scroll }
            | Overlay::Problems { scroll, .. }
            | Overlay::ConfirmApprove { scroll, .. }
            | Overlay::Runs { scroll, .. } => Some(scroll),
            _ => None,
        }
    }
}

/// The fields of the add-work form, in order.
pub const ADD_FIELDS: [&str; 4] = ["after", "role", "instruction", "name"];

/// Adding work to the live run: the same four things `playdeck ctl RUN add`
/// takes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AddForm {
    /// after, role, instruction, name.
    pub fields: [String; 4],
    pub focus: usize,
    /// Why the last submit was refused (the form stays, with its input).
    pub error: Option<String>,
}

impl AddForm {
    /// A form with `after` filled in (the selected operation).
    pub fn after(op: Option<&str>) -> AddForm {
        let mut f = AddForm::default();
        if let Some(op) = op {
            f.fields[0] = op.to_string();
            // What is asked next is who does the work.
            f.focus = 1;
        }
        f
    }

    pub fn field_mut(&mut self) -> &mut String {
        &mut self.fields[self.focus]
    }

    pub fn next(&mut self, forward: bool) {
        let n = self.fields.len();
        self.focus = if forward {
            (self.focus + 1) % n
        } else {
            (self.focus + n - 1) % n
        };
    }

    /// The request the form describes. `after` takes names apart at commas
    /// and spaces; empty fields are left out.
    pub fn request(&self) -> Request {
        let text = |i: usize| {
            let t = self.fields[i].trim();
            (!t.is_empty()).then(|| t.to_string())
        };
        Request::Add {
            after: self.fields[0]
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            role: text(1),
            instruction: text(2),
            name: text(3),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_builds_the_add_request() {
        let mut f = AddForm::after(Some("build"));
        assert_eq!(f.focus, 1);
        f.field_mut().push_str("tester");
        f.next(true);
        f.field_mut().push_str(" check it twice ");
        f.fields[0].push_str(", lint");
        assert_eq!(
            f.request(),
            Request::Add {
                after: vec!["build".into(), "lint".into()],
                role: Some("tester".into()),
                instruction: Some("check it twice".into()),
                name: None,
            }
        );
        f.next(true);
        f.next(true);
        assert_eq!(f.focus, 0, "tab wraps around");
        f.next(false);
        assert_eq!(f.focus, 3);
    }
}
