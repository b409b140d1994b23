//! Operator commands: one type for every surface. The console's keys, a
//! headless run's stdin lines, `playdeck ctl` and the control socket all
//! build a [`Request`]; serde gives the socket's JSON, clap the command line
//! and [`FromStr`] the stdin grammar, so adding a command touches this enum
//! and the code that carries it out, nothing else.

use std::str::FromStr;

use clap::{CommandFactory, Parser};
use serde::{Deserialize, Serialize};

use super::basis::Basis;
use super::graph::OpId;
use crate::vocab::Lifetime;

/// Who decides approvals and denials when a person does: every surface
/// records the same actor, so a report reads the same whichever was used.
pub const OPERATOR: &str = "operator";
/// The reason recorded when a denial gives none.
pub const DEFAULT_DENY_REASON: &str = "denied by the operator";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Subcommand)]
#[serde(tag = "cmd", rename_all = "snake_case")]
#[command(rename_all = "snake_case")]
pub enum Request {
    /// Soft pause: running operations finish, nothing new starts.
    Pause,
    /// Let waiting operations start again.
    Resume,
    /// While paused, let one waiting operation start: OP, or the next one.
    Step {
        /// The paused operation to start (default: the first waiting).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        op: Option<String>,
    },
    /// Approve an operation waiting at its approval gate.
    Approve {
        op: String,
        /// What the decision answers, as the surface showed it
        /// (`ctl RUN status` lists it): the run refuses it when that is no
        /// longer what is there (`stale_decision`). Without it the
        /// decision is made on what is there now, and the answer says so.
        #[arg(long = "on", value_name = "BASIS")]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Basis>,
    },
    /// Deny an operation waiting at its approval gate.
    Deny {
        op: String,
        /// What it answers, as shown (`ctl RUN status` lists it); see
        /// `approve --on`.
        #[arg(long = "on", value_name = "BASIS")]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Basis>,
        /// Why (recorded in the run).
        #[serde(default, with = "words", skip_serializing_if = "Vec::is_empty")]
        #[arg(trailing_var_arg = true)]
        reason: Vec<String>,
    },
    /// Keep an operation that has not started from starting.
    Hold { op: String },
    /// Take the hold off an operation.
    Unhold { op: String },
    /// A new attempt of a failed or denied operation; what it caused to be
    /// skipped waits again.
    Retry {
        op: String,
        /// What it answers, as shown (`ctl RUN status` lists it); see
        /// `approve --on`.
        #[arg(long = "on", value_name = "BASIS")]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Basis>,
    },
    /// Allow the call a running agent asked permission for (`deny OP`
    /// refuses it; `approve OP` allows it too).
    Permit {
        op: String,
        /// What it answers, as shown (`ctl RUN status` lists it); see
        /// `approve --on`.
        #[arg(long = "on", value_name = "BASIS")]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Basis>,
    },
    /// Land an operation's work again once its merge conflict is resolved
    /// in its worktree (what is left uncommitted there is committed for
    /// it); `deny OP` leaves it unlanded instead.
    Resolve {
        op: String,
        /// What it answers, as shown (`ctl RUN status` lists it); see
        /// `approve --on`.
        #[arg(long = "on", value_name = "BASIS")]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Basis>,
    },
    /// Pause the run by itself: before OP starts, before any operation of
    /// role:ROLE starts, or when a spawn, an escalation or a failure
    /// happens; --clear takes it off (`--clear all`: every one).
    Break {
        /// OP (op:OP), role:ROLE, spawn, escalation or failure.
        at: String,
        #[arg(long)]
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        clear: bool,
    },
    /// Let the run go on until OP is about to start, and pause it there.
    RunTo { op: String },
    /// Say something to an operation's agent, in the conversation it has:
    /// a running one is stopped when it is not in a tool and continues its
    /// session with the message; a failed one is sent back, a new attempt
    /// in its session with the message.
    Say {
        op: String,
        /// What it answers, as shown (`ctl RUN status` lists it); see
        /// `approve --on`.
        #[arg(long = "on", value_name = "BASIS")]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Basis>,
        /// What to say.
        #[serde(default, with = "words", skip_serializing_if = "Vec::is_empty")]
        #[arg(trailing_var_arg = true, required = true)]
        text: Vec<String>,
    },
    /// Add work to the live run: a new operation of ROLE after OPs, or,
    /// with --name of an operation that has not started, more dependencies
    /// for it.
    Add {
        /// An operation it waits for; repeatable.
        #[arg(long = "after", value_name = "OP")]
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        after: Vec<String>,
        /// The role that does it (one the run has).
        #[arg(long)]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// What to do.
        #[arg(long)]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instruction: Option<String>,
        /// Its name (default spawn-N); an existing operation's name adds
        /// dependencies to it instead.
        #[arg(long)]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Stop the run: running work is cancelled, the rest is skipped.
    Cancel,
    /// The run at a glance.
    Status,
    /// Release idle capacity: instances of the lifetimes asked for and
    /// those named; with neither, the lifetimes due now (pinned and
    /// manual_release instances stay). Busy and starting instances, and a
    /// worktree holding uncommitted work, are retained with reasons.
    Release(ReleaseSelect),
    /// Ensure profiles have this many instances of the lifetime (what
    /// fits is created; the rest is listed in `rejected`).
    Ensure {
        /// PROFILE[=COUNT] (COUNT defaults to 1); repeatable.
        #[arg(long = "profile", required = true, value_name = "PROFILE[=COUNT]")]
        profiles: Vec<ProfileCount>,
        /// Lifetime of the instances counted and created (default: each
        /// profile's).
        #[arg(long)]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lifetime: Option<Lifetime>,
    },
    /// Capacity instances, waiting work and what blocks release.
    Capacity,
    /// Raise (or set) spend caps; work a cap held back goes on.
    Budget {
        /// [ROLE.]usd=[+]AMOUNT or [ROLE.]tokens=[+]COUNT (`+`: added to
        /// the cap); repeatable.
        #[arg(long = "raise", required = true, num_args = 1.., value_name = "[ROLE.]usd|tokens=[+]N")]
        raise: Vec<super::spend::CapChange>,
    },
}

/// What a release takes. Empty (the console's `x`, a bare `release`):
/// the lifetimes due now — `current_round` while the run goes on,
/// `current_loop` too once it has ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
pub struct ReleaseSelect {
    /// Release instances of this lifetime (a pinned instance only by its
    /// --name); repeatable.
    #[arg(long = "lifetime", value_name = "LIFETIME")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifetime: Vec<Lifetime>,
    /// Release this instance, whatever its lifetime; repeatable.
    #[arg(long = "name", value_name = "INSTANCE")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub name: Vec<String>,
    /// Release idle instances only: the default, and the only mode until
    /// a force policy exists (a busy instance is always retained, with its
    /// reason). Accepted so scripts written to the capacity contract's
    /// `release --idle-only` call keep working.
    #[arg(long = "idle-only")]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle_only: bool,
    /// Say what the release would do now, without doing it.
    #[arg(long = "dry-run")]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `coder=2` or `coder` (one): a profile and how many instances it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileCount(pub String, pub u32);

/// A `--profile` value that is not `PROFILE` or `PROFILE=COUNT`: the
/// value, what is wrong with it and how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--profile {spec:?}: {why}; write PROFILE or PROFILE=COUNT, for example coder=2")]
pub struct ProfileCountError {
    pub spec: String,
    pub why: &'static str,
}

impl FromStr for ProfileCount {
    type Err = ProfileCountError;

    fn from_str(spec: &str) -> Result<Self, ProfileCountError> {
        let bad = |why: &'static str| ProfileCountError {
            spec: spec.to_string(),
            why,
        };
        let (name, count) = match spec.split_once('=') {
            Some((n, c)) => (
                n,
                c.parse::<u32>()
                    .map_err(|_| bad("the count is not a whole number"))?,
            ),
            None => (spec, 1),
        };
        if name.is_empty() {
            return Err(bad("the profile name is empty"));
        }
        if count == 0 {
            return Err(bad("the count must be at least 1"));
        }
        Ok(ProfileCount(name.to_string(), count))
    }
}

/// A deny reason: words on a command line, one string in JSON.
mod words {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(w: &[String], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&w.join(" "))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        Ok(s.filter(|s| !s.trim().is_empty()).into_iter().collect())
    }
}

/// The parser for one control line (no program name in front).
#[derive(Debug, Parser)]
#[command(no_binary_name = true, disable_help_flag = true, name = "control line")]
struct Line {
    #[command(subcommand)]
    request: Request,
}

impl Request {
    /// The command words, for messages: `pause | resume | step [OP] | …`.
    pub fn grammar() -> String {
        Line::command()
            .get_subcommands()
            .map(|c| {
                let args: Vec<String> = c
                    .get_arguments()
                    .filter(|a| a.get_id() != "help")
                    .map(|a| {
                        let name = a
                            .get_value_names()
                            .and_then(|v| v.first().map(|s| s.to_string()))
                            .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
                        match (a.get_long(), a.is_required_set()) {
                            (Some(l), true) => format!("--{l} {name}"),
                            (Some(l), false) => format!("[--{l} {name}]"),
                            (None, true) => name,
                            (None, false) => format!("[{name}]"),
                        }
                    })
                    .collect();
                if args.is_empty() {
                    c.get_name().to_string()
                } else {
                    format!("{} {}", c.get_name(), args.join(" "))
                }
            })
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// The command's name as typed (`pause`, `deny`).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Pause => "pause",
            Request::Resume => "resume",
            Request::Step { .. } => "step",
            Request::Approve { .. } => "approve",
            Request::Deny { .. } => "deny",
            Request::Hold { .. } => "hold",
            Request::Unhold { .. } => "unhold",
            Request::Retry { .. } => "retry",
            Request::Say { .. } => "say",
            Request::Permit { .. } => "permit",
            Request::Resolve { .. } => "resolve",
            Request::Break { .. } => "break",
            Request::RunTo { .. } => "run_to",
            Request::Add { .. } => "add",
            Request::Cancel => "cancel",
            Request::Status => "status",
            Request::Release(_) => "release",
            Request::Ensure { .. } => "ensure",
            Request::Capacity => "capacity",
            Request::Budget { .. } => "budget",
        }
    }

    /// The operation it names, if any.
    pub fn target(&self) -> Option<&str> {
        match self {
            Request::Step { op } => op.as_deref(),
            Request::Approve { op, .. }
            | Request::Deny { op, .. }
            | Request::Hold { op }
            | Request::Unhold { op }
            | Request::Retry { op, .. }
            | Request::Say { op, .. }
            | Request::Permit { op, .. }
            | Request::Resolve { op, .. }
            | Request::RunTo { op } => Some(op),
            Request::Add { name, .. } => name.as_deref(),
            _ => None,
        }
    }

    /// The command in a few words, as a log and a status line name it
    /// (`approve gate-a`, `deny ship: not today`).
    pub fn summary(&self) -> String {
        let mut s = self.name().to_string();
        if let Some(op) = self.target() {
            s.push(' ');
            s.push_str(op);
        }
        if let Request::Deny { reason, .. } = self
            && !reason.is_empty()
        {
            s.push_str(": ");
            s.push_str(&reason.join(" "));
        }
        if let Request::Break { at, clear } = self {
            s.push_str(if *clear { " --clear " } else { " " });
            s.push_str(at);
        }
        if let Request::Say { text, .. } = self {
            s.push_str(": ");
            s.push_str(&text.join(" "));
        }
        if let Request::Add { role: Some(r), .. } = self {
            s.push_str(&format!(" (role {r})"));
        }
        if let Request::Budget { raise } = self {
            for c in raise {
                s.push_str(&format!(" {c}"));
            }
        }
        s
    }

    /// What to tell the operator when the kernel carried it out.
    pub fn done_message(&self, answer: &Answer) -> String {
        if let Answer::Decided { on, now } = answer {
            let done = self.done_message(&Answer::Done);
            return format!(
                "{done}, on what was there: {now} (no basis was given; --on {on} names it)"
            );
        }
        match (self, answer) {
            (_, Answer::Stepped { op: Some(op) }) => format!("step: {op} started"),
            (_, Answer::Added { name, .. }) => format!("added {name}"),
            (_, Answer::Stepped { op: None }) => {
                "step: the next operation to become ready will start".into()
            }
            (Request::Pause, _) => "paused: running work finishes, nothing new starts".into(),
            (Request::Resume, _) => "resumed".into(),
            (Request::Approve { op, .. }, _) => format!("approved {op}"),
            (Request::Deny { op, .. }, _) => format!("denied {op}"),
            (Request::Hold { op }, _) => format!("holding {op}"),
            (Request::Unhold { op }, _) => format!("released the hold on {op}"),
            (Request::Retry { op, .. }, _) => format!("retrying {op}"),
            (Request::Say { op, .. }, _) => format!("said to {op}'s agent"),
            (Request::Permit { op, .. }, _) => format!("allowed the call {op} asked about"),
            (Request::Resolve { op, .. }, _) => format!("landing {op} again"),
            (Request::Break { at, clear: false }, _) => {
                format!("breakpoint {at}: the run pauses there")
            }
            (Request::Break { at, clear: true }, _) => format!("breakpoint {at} cleared"),
            (Request::RunTo { op }, _) => {
                format!("running to {op}: the run pauses before it starts")
            }
            (Request::Cancel, _) => "cancelling the run…".into(),
            (_, Answer::Raised { caps }) => caps
                .iter()
                .map(super::spend::RaisedCap::words)
                .collect::<Vec<_>>()
                .join("; "),
            (r, _) => format!("ok: {}", r.name()),
        }
    }

    /// Options typed after a message's words (`say OP TEXT --json`, `deny
    /// OP REASON --on BASIS`) are options, not words for the agent or the
    /// record: taken off the words. `true` when `--json` was one of them
    /// (taken only where `json` says the surface has the option).
    pub fn take_trailing_options(&mut self, json_too: bool) -> Result<bool, CommandError> {
        let (words, on) = match self {
            Request::Say { text, on, .. } => (text, on),
            Request::Deny { reason, on, .. } => (reason, on),
            _ => return Ok(false),
        };
        let mut json = false;
        loop {
            match words.as_slice() {
                [.., last] if json_too && last == "--json" => {
                    json = true;
                    words.pop();
                }
                [.., flag, value] if flag == "--on" && on.is_none() => {
                    let basis = value.parse().map_err(|e: super::basis::BasisError| {
                        CommandError::BadRequest(e.to_string())
                    })?;
                    *on = Some(basis);
                    words.truncate(words.len() - 2);
                }
                _ => return Ok(json),
            }
        }
    }

    /// The same request as JSON carries it (a reason is one string).
    pub fn normalized(self) -> Request {
        match self {
            Request::Deny { op, on, reason } if reason.len() > 1 => Request::Deny {
                op,
                on,
                reason: vec![reason.join(" ")],
            },
            Request::Say { op, on, text } if text.len() > 1 => Request::Say {
                op,
                on,
                text: vec![text.join(" ")],
            },
            r => r,
        }
    }

    /// The deny reason, or the default one.
    pub fn deny_reason(reason: &[String]) -> String {
        let r = reason.join(" ");
        if r.trim().is_empty() {
            DEFAULT_DENY_REASON.to_string()
        } else {
            r
        }
    }
}

impl FromStr for Request {
    type Err = CommandError;

    /// One stdin control line, with shell-like quoting (`deny ship "not
    /// today"`). Errors say what was wrong and list every command.
    fn from_str(line: &str) -> Result<Self, CommandError> {
        let bad =
            |why: String| CommandError::BadRequest(format!("{why}; allowed: {}", Self::grammar()));
        let words =
            shlex::split(line).ok_or_else(|| bad(format!("{line:?} has an unclosed quote")))?;
        let first = words.first().cloned().unwrap_or_default();
        Line::try_parse_from(words)
            .and_then(|l| {
                let mut r = l.request;
                r.take_trailing_options(false).map_err(|e| {
                    Line::command().error(clap::error::ErrorKind::ValueValidation, e.to_string())
                })?;
                Ok(r.normalized())
            })
            .map_err(|e| {
                use clap::error::ErrorKind;
                if matches!(
                    e.kind(),
                    ErrorKind::InvalidSubcommand | ErrorKind::UnknownArgument
                ) && !Line::command()
                    .get_subcommands()
                    .any(|c| c.get_name() == first)
                {
                    return bad(format!("unknown control line {first:?}"));
                }
                let text = e.render().to_string();
                let first_line = text
                    .lines()
                    .next()
                    .unwrap_or("not a control line")
                    .trim_start_matches("error: ")
                    .to_string();
                bad(first_line)
            })
    }
}

/// What the kernel answers a command it carried out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Answer {
    Done,
    /// A decision made without a basis: it was made on what was there
    /// when it arrived, which is said (`on`, and in words `now`) so a
    /// script knows what it decided.
    Decided {
        on: Basis,
        now: String,
    },
    /// A step: the operation that started, or none yet (the next one to
    /// become ready will).
    Stepped {
        op: Option<String>,
    },
    /// An operation joined the run.
    Added {
        op_id: OpId,
        name: String,
    },
    /// Caps raised (or set): each with what it was, what it is, and what
    /// its scope has spent.
    Raised {
        caps: Vec<super::spend::RaisedCap>,
    },
}

/// Why the kernel refused a command.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    #[error("no operation named {0:?} in this run")]
    UnknownOperation(String),
    #[error("{name} has no approval gate")]
    NoApprovalGate { name: String },
    #[error("{name} was already {decision}")]
    AlreadyDecided {
        name: String,
        decision: &'static str,
    },
    #[error("{name} is {state}; only an operation that has not started can be held")]
    CannotHold { name: String, state: &'static str },
    #[error("{name} is not held")]
    NotHeld { name: String },
    #[error("the run is not paused; pause it first (step works only while paused)")]
    NotPaused,
    #[error("{name} is {state}; step starts an operation waiting in the paused lane")]
    NotWaiting { name: String, state: &'static str },
    #[error("the run has finished")]
    RunFinished,
    #[error("{name} is {state}; only a failed or denied operation can be retried")]
    CannotRetry { name: String, state: &'static str },
    #[error(
        "{name} escalated, and {begun} already began on its result; a new attempt would change what they built on (playdeck resume RUN --retry is for failures)"
    )]
    BuiltOn { name: String, begun: String },
    #[error("{name} is asking nothing: permit answers a running agent's permission question")]
    NoQuestion { name: String },
    #[error(
        "{name} has no merge conflict waiting: resolve answers an operation whose work clashed as it landed"
    )]
    NoConflict { name: String },
    #[error("{name} is {state}; {why}")]
    CannotSay {
        name: String,
        state: &'static str,
        why: &'static str,
    },
    /// A decision whose basis is not what is there now: nothing was done.
    #[error("{name}: not decided — {changed}. Now: {now}; decide again on that")]
    StaleDecision {
        name: String,
        changed: String,
        now: String,
    },
    #[error("{0}")]
    BadRequest(String),
    #[error("this run has no [capacity]")]
    NoCapacity,
    #[error("the run is not reactive (reactive = false): nothing can be added to it")]
    NotReactive,
    #[error("dropped ({reason}): {detail}")]
    Dropped {
        reason: &'static str,
        detail: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_the_same_requests_as_json() {
        let cases = [
            ("pause", r#"{"cmd":"pause"}"#),
            ("step", r#"{"cmd":"step"}"#),
            ("step build", r#"{"cmd":"step","op":"build"}"#),
            ("approve ship", r#"{"cmd":"approve","op":"ship"}"#),
            (
                "deny ship not today",
                r#"{"cmd":"deny","op":"ship","reason":"not today"}"#,
            ),
            (
                "deny ship 'not today'",
                r#"{"cmd":"deny","op":"ship","reason":"not today"}"#,
            ),
            ("deny ship", r#"{"cmd":"deny","op":"ship"}"#),
            (
                "say build use the other parser",
                r#"{"cmd":"say","op":"build","text":"use the other parser"}"#,
            ),
            (
                "add --after build --after lint --role tester --instruction 'check it'",
                r#"{"cmd":"add","after":["build","lint"],"role":"tester","instruction":"check it"}"#,
            ),
            (
                "ensure --profile coder=2 --lifetime manual_release",
                r#"{"cmd":"ensure","profiles":[["coder",2]],"lifetime":"manual_release"}"#,
            ),
            ("release", r#"{"cmd":"release"}"#),
            (
                "release --lifetime current_loop --lifetime manual_release --name loop-r-coder-1",
                r#"{"cmd":"release","lifetime":["current_loop","manual_release"],"name":["loop-r-coder-1"]}"#,
            ),
        ];
        for (line, json) in cases {
            let from_line: Request = line.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
            let from_json: Request = serde_json::from_str(json).unwrap();
            assert_eq!(from_line, from_json, "{line}");
            let back = serde_json::to_string(&from_line).unwrap();
            assert_eq!(back, json, "{line}");
        }
    }

    #[test]
    fn bad_lines_name_the_problem_and_every_command() {
        let e = "explode".parse::<Request>().unwrap_err();
        assert!(matches!(e, CommandError::BadRequest(_)), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("explode"), "{msg}");
        assert!(
            msg.contains("approve OP") && msg.contains("deny OP [--on BASIS] [REASON]"),
            "{msg}"
        );
        let e = "approve".parse::<Request>().unwrap_err().to_string();
        assert!(e.contains("OP"), "{e}");
        let e = "ensure --profile coder=0"
            .parse::<Request>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 1"), "{e}");
        let e = "deny 'ship".parse::<Request>().unwrap_err().to_string();
        assert!(e.contains("unclosed quote"), "{e}");
    }
}
